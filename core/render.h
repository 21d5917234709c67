/*
 * render.h - a transcript as text, SRT, WebVTT or OpenAI JSON.
 *
 * Shared by `whisperd transcribe` and the HTTP API so both print the same
 * bytes. Pure functions; the returned string is malloc'd, caller frees.
 */
#ifndef WD_RENDER_H
#define WD_RENDER_H

#include <jansson.h>

#include "decode.h"
#include "diar_assign.h"
#include "tokenizer.h"

typedef enum {
  WD_FMT_TEXT = 0,      /* the text alone (OpenAI response_format=text) */
  WD_FMT_SEGMENTS,      /* "[00:00:00.000 --> 00:00:07.740]  text" per segment */
  WD_FMT_SRT,
  WD_FMT_VTT,
  WD_FMT_JSON,          /* {"text": ...} */
  WD_FMT_VERBOSE_JSON,  /* task, language, duration, text, segments */
  WD_FMT_DIARIZED_JSON, /* OpenAI's TranscriptionDiarized: task, duration, text,
                         * segments with speakers (wd_render_diarized only) */
} wd_format_t;

/* Parses "text", "txt" (segments), "srt", "vtt", "json", "verbose_json",
 * "diarized_json". */
int wd_format_parse(const char *s, wd_format_t *ret);

/*
 * task: "transcribe" or "translate" (verbose_json only). JSON output carries
 * OpenAI's `usage` {"type":"duration","seconds":N} with N the duration
 * rounded up to whole seconds (the spec's whisper-1 example bills 8.47 s as
 * 9). The top-level text is trimmed of white space at both ends (segment
 * texts keep whisper's leading space). Text that is not valid UTF-8 (a
 * character split between segments) is repaired as wd_render_utf8_dup does.
 */
int wd_render(const wd_transcript_t *t, wd_format_t fmt, const char *task, char **ret_text);

/* What verbose_json carries besides task, language, duration and text. */
enum {
  WD_RENDER_SEGMENTS = 1u,      /* "segments" */
  WD_RENDER_SEGMENT_WORDS = 2u, /* each segment's "words", openai-whisper style (with
                                 * their leading space and probability) */
  WD_RENDER_WORDS = 4u,         /* top-level "words", the OpenAI API's word granularity
                                 * (trimmed, no probability) */
};

/* verbose_json with a choice of parts; wd_render(VERBOSE_JSON) is
 * SEGMENTS | SEGMENT_WORDS (words appear where they were computed). */
int wd_render_verbose_json(const wd_transcript_t *t, const char *task, unsigned flags,
                           char **ret_text);

/* OpenAI's `logprobs` (include[]=logprobs): for every text token of
 * segs[0..n) in order (timestamps and specials left out),
 * {"token": its text (invalid UTF-8 repaired as wd_render_utf8_dup does),
 * "logprob": its log-probability, "bytes": its raw bytes}. NULL when out of
 * memory; an empty array when the segments keep no log-probabilities. */
json_t *wd_render_logprobs(const wd_segment_t *segs, int n, const wd_tokenizer_t *tok);

/* wd_render's json and verbose_json with `logprobs` (wd_render_logprobs)
 * after the text. */
int wd_render_with_logprobs(const wd_transcript_t *t, wd_format_t fmt, const char *task,
                            unsigned verbose_flags, const wd_tokenizer_t *tok, char **ret_text);

/*
 * A diarized transcript (t's text and duration, d's segments, labels[k] the
 * label of d's speaker k):
 *   WD_FMT_DIARIZED_JSON  {"task", "duration", "text", "segments": [{"type":
 *                         "transcript.text.segment", "id": "seg_N", "start",
 *                         "end", "speaker", "text"}], "usage"}, as OpenAI's
 *                         TranscriptionDiarized;
 *   WD_FMT_TEXT           one line per turn ("A: text"; consecutive segments
 *                         of one speaker share a line);
 *   WD_FMT_SEGMENTS       "[start --> end]  A: text" per segment;
 *   WD_FMT_SRT            cues "A: text";
 *   WD_FMT_VTT            cues "<v A>text" (WebVTT voice spans);
 *   WD_FMT_JSON           {"text", "usage"} as wd_render (no place for speakers).
 * Other formats: WD_EINVAL. Text is repaired to UTF-8 as wd_render does.
 */
int wd_render_diarized(const wd_transcript_t *t, const wd_diar_segs_t *d,
                       const char *const *labels, wd_format_t fmt, const char *task,
                       char **ret_text);

/* The whole seconds `usage` reports for a duration: ceil, at least 0. */
long wd_render_usage_seconds(double duration_s);

/* A malloc'd copy of s[0..n) in which every maximal ill-formed UTF-8
 * subsequence is replaced by U+FFFD, as Python's decode(errors="replace")
 * does (openai/whisper decodes tokens that way). NULL only on OOM. */
char *wd_render_utf8_dup(const char *s, size_t n);


#endif
