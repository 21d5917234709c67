/*
 * decode.h - Whisper's decoding policy: openai/whisper transcribe() over a
 * whole file, driven through a wd_engine_t.
 *
 * core/decoder.h holds one file's decoding as a state machine; core/worker.h
 * steps many files together through it. Each 30 s window is
 * decoded as openai/whisper's DecodingTask: greedy, best_of sampling or beam
 * search, the logit filters SuppressBlank, SuppressTokens("-1") and
 * ApplyTimestampRules, ranking by length-normalised log-probability; and
 * re-decoded at the next temperature of the schedule when its compression
 * ratio or average log-probability says so (decode_with_fallback). Around it,
 * transcribe()'s loop: language detection, the no-speech rule, segmenting at
 * consecutive timestamps, the seek update, condition_on_previous_text with
 * its reset above temperature 0.5, carry_initial_prompt, prefix and
 * clip_timestamps.
 * ref: openai/whisper decoding.py, transcribe.py (v20250625).
 */
#ifndef WD_DECODE_H
#define WD_DECODE_H

#include <stdint.h>

#include "engine.h"
#include "transcript.h"
#include "tokenizer.h"

#define WD_DECODE_MAX_TEMPS 16
#define WD_DECODE_MAX_ROWS 8 /* beam_size and best_of at most (whisper.cpp's limit too) */

typedef struct {
  const char *language;        /* ISO code, or NULL / "auto" to detect */
  int translate;               /* task = translate instead of transcribe */
  int without_timestamps;
  float max_initial_timestamp; /* seconds; openai's default 1.0 */
  int suppress_blank;          /* default 1 */
  int condition_on_previous_text; /* default 1 */
  float no_speech_threshold;   /* 0.6 */
  float logprob_threshold;     /* -1.0; NAN: never fall back on it */
  float compression_ratio_threshold; /* 2.4; NAN: never fall back on it */
  /* The temperature schedule (openai transcribe()'s tuple): each window is
   * decoded at temperatures[0]; a result that is too repetitive or too
   * unlikely is decoded again at the next one. Default 0, 0.2, ... 1.0. */
  float temperatures[WD_DECODE_MAX_TEMPS];
  int n_temperatures;
  /* The step of that schedule (openai's temperature_increment_on_fallback,
   * 0.2): a request that names its own temperature T walks T, T + step, ...
   * 1 (wd_decode_set_temperature). */
  float temperature_inc;
  int beam_size;               /* at temperature 0: 0 or 1 greedy, else beam search */
  float patience;              /* beam search: finished candidates = round(beam_size * patience); 0 = 1.0 */
  float length_penalty;        /* ranking: NAN = divide by length (openai's None), else ((5+len)/6)^p */
  int best_of;                 /* at temperature > 0: samples per window, the likeliest kept; 0 = 1 */
  uint64_t seed;               /* sampling: the same seed gives the same samples */
  const int32_t *prompt;       /* initial prompt tokens (already encoded), or NULL */
  int n_prompt;
  int carry_initial_prompt;    /* keep the initial prompt in front of every window's context */
  int word_timestamps;         /* time every word (openai timing.py) */
  /* The model's alignment heads (layer, head), wd_timing_heads(); needed
   * for word_timestamps. */
  const int (*align_heads)[2];
  int n_align_heads;
  /* With word_timestamps: skip silences longer than this around segments
   * that look hallucinated (seconds; NAN: off, openai's None). */
  float hallucination_silence_threshold;
  const int32_t *prefix;       /* tokens every window starts with (openai `prefix`), or NULL */
  int n_prefix;
  /* clip_timestamps: seconds as start,end,start,end...; an odd count ends at
   * the end of the audio. NULL / 0: the whole file. */
  const float *clips;
  int n_clips;
} wd_decode_opts_t;

/* openai/whisper's defaults for transcribe(). */
void wd_decode_opts_default(wd_decode_opts_t *o);

/* The temperature schedule of openai's CLI: t, t + inc, ... up to 1.0
 * (numpy.arange(t, 1.0 + 1e-6, inc)); inc <= 0 gives (t) alone, no
 * fallback. WD_EINVAL unless 0 <= t <= 1 and inc <= 1; WD_ERANGE for a
 * schedule of more than WD_DECODE_MAX_TEMPS temperatures (o unchanged). */
int wd_decode_set_temperature(wd_decode_opts_t *o, float t, float inc);

/* The most prompt or prefix tokens decoding feeds: openai keeps the last
 * n_text_ctx / 2 - 1 of them (448 for every Whisper model). */
#define WD_DECODE_TEXT_TOKENS 223
/* The most bytes of a prompt's or prefix's end wd_decode_text_tail keeps. */
#define WD_DECODE_TEXT_MAX (64 * 1024)

/* Where the part of s (n bytes) that can reach decoding starts: only the
 * last WD_DECODE_TEXT_TOKENS tokens of encode(" " + s.strip()) are used,
 * and BPE splits text into chunks first, each chunk's tokens its own; a
 * chunk " word" starts at every space before a non-space, and the chunks
 * after such a cut are the same whatever came before it. So the tail from
 * the WD_DECODE_TEXT_TOKENS-th such cut from the end gives exactly the
 * tokens decoding uses. Where the last WD_DECODE_TEXT_MAX bytes hold fewer
 * cuts (words averaging over 290 bytes, or a script without spaces), the
 * tail is those bytes, from a UTF-8 character boundary: bounded work, and
 * tokens that may differ from openai's at the start of what is kept.
 * Returns 0 (all of s) for texts of up to 8 KiB. */
size_t wd_decode_text_tail(const char *s, size_t n);

/* Tokens of a prompt or prefix as openai/whisper builds them:
 * encode(" " + text.strip()) (ASCII white space stripped), of its tail
 * (wd_decode_text_tail), the last WD_DECODE_TEXT_TOKENS of them: what
 * decoding uses, at a cost that does not grow with the text. *ret_ids is
 * malloc'd (the caller frees it). Returns 0, WD_EINVAL or WD_ENOMEM. */
int wd_decode_encode_text(const wd_tokenizer_t *tok, const char *text, int32_t **ret_ids,
                          int *ret_n);

/* len(utf8) / len(zlib.compress(utf8)) as openai/whisper utils.py. */
float wd_compression_ratio(const char *text, size_t len);

#endif
