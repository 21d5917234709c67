/*
 * request.h - an OpenAI audio request (POST /v1/audio/transcriptions or
 * /v1/audio/translations) read from its multipart form and validated.
 *
 * Field names follow the SDKs' wire form (reference/openai-audio-api.md
 * 1.4): arrays arrive as repeated `key[]` parts (a bare `key` and `key[0]`
 * are accepted too), objects as `key[sub]`, booleans as "true"/"false",
 * numbers as text. Unknown fields are ignored; an empty text field counts as
 * absent (the Python SDK drops empty values, curl -F sends them). When a
 * field is repeated, the last one wins.
 *
 * Pure: no I/O, no shared state; the result points into the multipart body
 * (the file) and owns copies of the text fields.
 */
#ifndef WD_REQUEST_H
#define WD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "api_error.h"
#include "diar_assign.h"
#include "multipart.h"
#include "render.h"
#include "tokenizer.h"

typedef enum {
  WD_REQUEST_TRANSCRIBE = 0, /* /v1/audio/transcriptions */
  WD_REQUEST_TRANSLATE,      /* /v1/audio/translations: to English */
} wd_request_task_t;

/* What validation needs to know about the loaded model. */
typedef struct {
  const char *const *names;  /* accepted `model` values, compared exactly */
  int n_names;
  int multilingual;          /* 0: English-only (no language, no translation) */
  int n_langs;               /* language tokens (99, or 100 with "yue"); 0 = no limit */
  int no_translate;          /* large-v3-turbo: multilingual, not trained to translate */
} wd_request_model_t;

typedef struct {
  wd_request_task_t task;
  const uint8_t *file;       /* the audio, inside the multipart body */
  size_t file_len;
  char *filename;            /* as sent, or NULL */
  char *model;
  int model_idx;             /* the model of wd_request_parse_in's list it names */
  char *language;            /* lower-case ISO 639-1 code, or NULL to detect */
  char *prompt;              /* as sent, or NULL */
  wd_format_t format;        /* WD_FMT_JSON unless response_format says otherwise */
  double temperature;        /* 0..1; 0 when absent */
  int has_temperature;
  int timestamps_segment;    /* timestamp_granularities contains "segment" */
  int timestamps_word;       /* ... "word" (verbose_json only) */
  int stream;                /* transcriptions only: answer with SSE */
  int logprobs;              /* include[] holds "logprobs": the tokens' log-probabilities */
  /* chunking_strategy: "auto" or {"type": "server_vad", "threshold",
   * "prefix_padding_ms", "silence_duration_ms"} (as a JSON string or as the
   * SDKs' chunking_strategy[key] fields). Unset: the server's default. */
  struct {
    int set, is_auto;
    double threshold;          /* server_vad's, OpenAI's defaults when absent */
    int prefix_padding_ms, silence_duration_ms;
  } chunking;
  /* Speaker diarization (issue #41): response_format diarized_json, model
   * gpt-4o-transcribe-diarize (served by the first model, with diarization
   * on; then text, srt and vtt carry speaker labels too), or whisperd's own
   * diarize=true field. Left 0 for json (not streamed), which has no place
   * for speakers: such a request is checked as diarizing but run as a
   * plain transcription. */
  int diarize;
  /* known_speaker_names[] and known_speaker_references[] (data URLs of
   * audio, decoded from base64 here; their length is checked after the
   * audio decode, which is not this module's): n_known pairs. */
  int n_known;
  char *known_names[WD_DIAR_MAX_KNOWN];
  uint8_t *known_refs[WD_DIAR_MAX_KNOWN]; /* the audio file's bytes, owned */
  size_t known_ref_lens[WD_DIAR_MAX_KNOWN];
} wd_request_t;

/* The model name OpenAI diarizes with; accepted whatever the served models
 * are called, and served by the first one with diarization on. */
#define WD_REQUEST_DIARIZE_MODEL "gpt-4o-transcribe-diarize"

/* A known speaker's reference clip: at least and at most these seconds. */
#define WD_REQUEST_KNOWN_MIN_S 1.2
#define WD_REQUEST_KNOWN_MAX_S 10.0

/*
 * Reads and validates a request. On success fills *ret (release it with
 * wd_request_clear) and returns 0. On failure returns the HTTP status (400,
 * 404 for an unknown model, 500 when out of memory) with *err filled and
 * *ret cleared.
 */
int wd_request_parse(const wd_multipart_t *form, wd_request_task_t task,
                     const wd_request_model_t *model, wd_request_t *ret, wd_api_error_t *err);
/* The same against several served models: ret->model_idx is the one
 * whose names hold `model` (the first that does), and the checks that
 * depend on the model (language, translation) are that model's. */
int wd_request_parse_in(const wd_multipart_t *form, wd_request_task_t task,
                        const wd_request_model_t *models, int n_models, wd_request_t *ret,
                        wd_api_error_t *err);

/* Frees what r owns and zeroes it; a zeroed r is fine. */
void wd_request_clear(wd_request_t *r);

/*
 * The prompt as openai/whisper passes initial_prompt to the decoder:
 * tokenizer.encode(" " + prompt.strip()). *ret_ids is malloc'd (NULL with
 * *ret_n = 0 when there is no prompt). Returns 0 or a WD_E* code.
 */
int wd_request_prompt_tokens(const wd_request_t *r, const wd_tokenizer_t *tok, int32_t **ret_ids,
                             int *ret_n);

#endif
