/*
 * decode.h - Whisper's decoding policy: openai/whisper transcribe() over a
 * whole file, driven through a wd_engine_t.
 *
 * wd_decode_transcribe() runs one file alone; the server steps many files
 * together through core/decoder.h and core/worker.h. Decoding is greedy
 * (temperature 0) with timestamps, the logit filters SuppressBlank, SuppressTokens("-1") and ApplyTimestampRules
 * (max_initial_timestamp 1.0), language detection, the no-speech rule, the
 * 30 s seek loop with segmenting at consecutive timestamps and
 * condition_on_previous_text. Beam search, best_of sampling and temperature
 * fallback come with the decoding issue; the result fields they fill
 * (avg_logprob, compression_ratio, temperature) are already computed.
 * ref: openai/whisper decoding.py, transcribe.py (v20250625).
 */
#ifndef WD_DECODE_H
#define WD_DECODE_H

#include <stdint.h>

#include "engine.h"
#include "timing.h"
#include "tokenizer.h"

typedef struct {
  const char *language;        /* ISO code, or NULL / "auto" to detect */
  int translate;               /* task = translate instead of transcribe */
  int without_timestamps;
  float max_initial_timestamp; /* seconds; openai's default 1.0 */
  int suppress_blank;          /* default 1 */
  int condition_on_previous_text; /* default 1 */
  float no_speech_threshold;   /* 0.6 */
  float logprob_threshold;     /* -1.0 */
  const int32_t *prompt;       /* initial prompt tokens (already encoded), or NULL */
  int n_prompt;
} wd_decode_opts_t;

/* openai/whisper's defaults for transcribe(). */
void wd_decode_opts_default(wd_decode_opts_t *o);

typedef struct wd_segment {
  int id;
  int seek;                    /* window start, in mel frames */
  double start, end;           /* seconds */
  char *text;                  /* decoded text tokens, leading space kept */
  int32_t *tokens;             /* the segment's tokens, timestamps included */
  int n_tokens;
  float temperature;
  float avg_logprob;           /* per window, as openai */
  float compression_ratio;     /* per window */
  float no_speech_prob;        /* per window */
  wd_word_t *words;            /* word timestamps (core/timing.h), owned; NULL when off */
  int n_words;
} wd_segment_t;

typedef struct {
  wd_segment_t *segments;
  int n_segments;
  char *text;                  /* all segments' text, concatenated */
  char language[8];            /* ISO code used or detected */
  float language_prob;         /* detection probability, 1 if given */
  double duration;             /* seconds of audio */
} wd_transcript_t;

/*
 * Transcribes a whole file. mel is the output of wd_mel_compute: (n_mels,
 * n_frames) with the 3000 frames of 30 s padding at the end. Uses sequence
 * slot 0 and audio slot 0 of the engine. On success fills *out, which the
 * caller releases with wd_transcript_free().
 */
int wd_decode_transcribe(const wd_engine_t *e, const wd_tokenizer_t *tok, const float *mel,
                         int n_frames, const wd_decode_opts_t *opts, wd_transcript_t *out);

void wd_transcript_free(wd_transcript_t *t); /* accepts NULL and zeroed */

/* len(utf8) / len(zlib.compress(utf8)) as openai/whisper utils.py. */
float wd_compression_ratio(const char *text, size_t len);

#endif
