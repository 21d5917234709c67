// sdk_check.go - the official OpenAI Go SDK (github.com/openai/openai-go),
// unmodified, against a running whisperd: every transcription format (json
// and verbose_json through Audio.Transcriptions.New; text, srt and vtt
// through Client.Post into a *string, as the SDK's documentation says for
// them), the SSE stream (NewStreaming), word timestamps, translations and
// the SDK's errors. Prints one JSON document of results, which
// tests/api/test_sdk_go.py checks (the Node check's shape).
//
// usage: sdk_check BASE_URL transcribe|translate AUDIO_FILE
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

type result struct {
	Name    string         `json:"name"`
	Fmt     string         `json:"fmt"`
	OK      bool           `json:"ok"`
	Payload any            `json:"payload,omitempty"`
	Error   map[string]any `json:"error,omitempty"`
}

var formats = []string{"json", "text", "srt", "verbose_json", "vtt"}

func attempt(name, fmtName string, fn func() (any, error)) result {
	p, err := fn()
	if err == nil {
		return result{Name: name, Fmt: fmtName, OK: true, Payload: p}
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return result{Name: name, Fmt: fmtName, Error: map[string]any{
			"cls": "Error", "status": apiErr.StatusCode, "code": apiErr.Code,
			"param": apiErr.Param, "type": apiErr.Type, "message": apiErr.Message}}
	}
	return result{Name: name, Fmt: fmtName, Error: map[string]any{"cls": "other", "message": err.Error()}}
}

// raw: a JSON response as the generic document the checks read.
func raw(s string) (any, error) {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: sdk_check BASE_URL transcribe|translate AUDIO_FILE")
		os.Exit(2)
	}
	base, mode, audio := os.Args[1], os.Args[2], os.Args[3]
	client := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("sk-whisperd-test"),
		option.WithMaxRetries(0))
	ctx := context.Background()
	open := func() *os.File {
		f, err := os.Open(audio)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return f
	}
	var results []result
	switch mode {
	case "transcribe":
		for _, f := range formats {
			results = append(results, attempt("transcriptions", f, func() (any, error) {
				file := open()
				defer file.Close()
				p := openai.AudioTranscriptionNewParams{File: file, Model: openai.AudioModelWhisper1,
					ResponseFormat: openai.AudioResponseFormat(f)}
				if f == "json" || f == "verbose_json" {
					res, err := client.Audio.Transcriptions.New(ctx, p)
					if err != nil {
						return nil, err
					}
					return raw(res.RawJSON())
				}
				var text string
				err := client.Post(ctx, "audio/transcriptions", p, &text)
				return text, err
			}))
		}
		results = append(results, attempt("stream", "json", func() (any, error) {
			file := open()
			defer file.Close()
			s := client.Audio.Transcriptions.NewStreaming(ctx, openai.AudioTranscriptionNewParams{
				File: file, Model: openai.AudioModelWhisper1})
			var events []any
			for s.Next() {
				ev, err := raw(s.Current().RawJSON())
				if err != nil {
					return nil, err
				}
				events = append(events, ev)
			}
			return events, s.Err()
		}))
		results = append(results, attempt("words", "verbose_json", func() (any, error) {
			file := open()
			defer file.Close()
			res, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
				File: file, Model: "tiny.en", Language: openai.String("en"),
				Temperature: openai.Float(0), Prompt: openai.String("A speech."),
				ResponseFormat:         openai.AudioResponseFormatVerboseJSON,
				TimestampGranularities: []string{"word", "segment"},
				Include:                []openai.TranscriptionInclude{"logprobs"}})
			if err != nil {
				return nil, err
			}
			return raw(res.RawJSON())
		}))
		results = append(results, attempt("unknown_model", "json", func() (any, error) {
			file := open()
			defer file.Close()
			return client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
				File: file, Model: "no-such-model"})
		}))
		results = append(results, attempt("translations_refused", "json", func() (any, error) {
			file := open()
			defer file.Close()
			return client.Audio.Translations.New(ctx, openai.AudioTranslationNewParams{
				File: file, Model: openai.AudioModelWhisper1})
		}))
		results = append(results, attempt("models", "json", func() (any, error) {
			page, err := client.Models.List(ctx)
			if err != nil {
				return nil, err
			}
			var ids []string
			for _, m := range page.Data {
				ids = append(ids, m.ID)
			}
			return ids, nil
		}))
	case "translate":
		for _, f := range formats {
			results = append(results, attempt("translations", f, func() (any, error) {
				file := open()
				defer file.Close()
				p := openai.AudioTranslationNewParams{File: file, Model: openai.AudioModelWhisper1,
					ResponseFormat: openai.AudioTranslationNewParamsResponseFormat(f)}
				if f == "json" || f == "verbose_json" {
					res, err := client.Audio.Translations.New(ctx, p)
					if err != nil {
						return nil, err
					}
					return raw(res.RawJSON())
				}
				var text string
				err := client.Post(ctx, "audio/translations", p, &text)
				return text, err
			}))
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %s\n", mode)
		os.Exit(2)
	}
	out, _ := json.Marshal(map[string]any{"go": runtime.Version(), "results": results})
	fmt.Println(string(out))
}
