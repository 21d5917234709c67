/*
 * timing.h - word-level timestamps: openai/whisper's timing.py policy (and
 * the hallucination_silence_threshold helpers of transcribe.py) as pure
 * functions on arrays.
 *
 * Nothing here calls an engine. Per 30 s window the decoder does:
 *
 *   1. wd_timing_align_tokens()   [sot_sequence..., <|notimestamps|>, text
 *                                 tokens of the window's segments..., EOT];
 *                                 when it has no text token, stop here (openai
 *                                 runs no model then and adds no words).
 *   2. engine align()             qk (n_heads, n_tokens, n_audio_ctx) of the
 *                                 heads wd_timing_heads() names, and probs.
 *   3. wd_timing_window()         find_alignment + add_word_timestamps: fills
 *                                 each segment's words and moves its start/end.
 *   4. wd_timing_window_seek()    the seek rules that depend on words, and the
 *                                 hallucination_silence_threshold skipping.
 *   5. wd_timing_last_speech()    the last_speech_timestamp carried to the
 *                                 next window.
 *
 * The building blocks (DTW, median filter, word split, punctuation merge)
 * are declared too, for tests and for callers that need one step alone.
 *
 * Threading: no state; every function may run on any thread.
 * Ownership: word arrays and their strings are malloc'd; a segment's words
 * belong to the segment (core/transcript.h; wd_transcript_free releases
 * them), a
 * wd_timing_word_t array to the caller (wd_timing_words_free).
 * ref: openai/whisper v20250625 whisper/timing.py, transcribe.py,
 * tokenizer.py (split_to_word_tokens); shared/reference/whisper-decoding.md 5.
 */
#ifndef WD_TIMING_H
#define WD_TIMING_H

#include <stdint.h>

#include "model.h"
#include "tokenizer.h"
#include "transcript.h"

/* A word of one window's alignment (openai's WordTiming) before it is given
 * to a segment. Its tokens are text_tokens[tok_begin .. tok_begin + n_tok). */
typedef struct {
  char *word;         /* UTF-8; "" once merged into a neighbour; owned */
  int tok_begin, n_tok;
  double start, end;  /* seconds from the window start */
  double probability;
} wd_timing_word_t;

/* openai's defaults for transcribe(prepend_punctuations=, append_punctuations=). */
#define WD_TIMING_PREPEND "\"'\u201c\u00bf([{-"
#define WD_TIMING_APPEND "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001"

typedef struct {
  const char *prepend; /* punctuation merged into the next word */
  const char *append;  /* punctuation merged into the previous word */
  int medfilt_width;   /* odd; 7 */
  float qk_scale;      /* 1.0 */
} wd_timing_opts_t;

/* openai's defaults: the punctuation sets above, width 7, scale 1. */
void wd_timing_opts_default(wd_timing_opts_t *o);

/* ------------------------------------------------------------- the window */

/*
 * Alignment heads to use for model m, as (text layer, head) pairs sorted by
 * layer then head: the model's own list (CTranslate2 config.json or openai's
 * table for a released model, see wd_model_alignment_heads), else openai's
 * default for an unknown model: every head of the last half of the decoder
 * layers (layers n_text_layer / 2 and up). Writes at most max pairs and sets
 * *ret_n to the count; returns 0, WD_ERANGE when max is too small (pairs =
 * NULL with max = 0 asks for the count), or WD_EINVAL.
 */
int wd_timing_heads(const wd_model_t *m, int (*pairs)[2], int max, int *ret_n);

/*
 * The token list find_alignment runs: sot_seq[0..n_sot), <|notimestamps|>,
 * every token below EOT of segs[0..n_segs) in order, EOT. Writes at most
 * max ids, sets *ret_n to the full count (n_sot + n_text + 2); returns 0,
 * WD_ERANGE when max is too small, or WD_EINVAL. n_text = *ret_n - n_sot - 2.
 */
int wd_timing_align_tokens(const wd_tokenizer_t *tok, const int32_t *sot_seq, int n_sot,
                           const wd_segment_t *segs, int n_segs, int32_t *out, int max,
                           int *ret_n);

/*
 * find_alignment after the model run. tokens[0..n_tokens) is the list of
 * wd_timing_align_tokens() (n_sot SOT-sequence tokens first); qk is (n_heads,
 * n_tokens, n_audio_ctx), the pre-softmax cross-attention of the alignment
 * heads; probs is (n_tokens - 1), probs[i] the probability of tokens[i + 1]
 * after tokens[0..i] (engine.h align()). num_frames is the window's mel frame
 * count (segment_size, <= 2 * n_audio_ctx); num_frames / 2 audio positions
 * are aligned. language selects the word split (NULL: split on spaces, as for
 * English-only models). Sets *ret_words (free with wd_timing_words_free) and
 * *ret_n: one entry per word, the EOT word left out, times in seconds from
 * the window start. No text token gives *ret_n = 0. Returns 0, WD_EINVAL,
 * WD_ENOMEM.
 */
int wd_timing_find_alignment(const wd_tokenizer_t *tok, const char *language,
                             const int32_t *tokens, int n_tokens, int n_sot, const float *qk,
                             int n_heads, int n_audio_ctx, int num_frames, const float *probs,
                             const wd_timing_opts_t *opts, wd_timing_word_t **ret_words,
                             int *ret_n);

/*
 * add_word_timestamps after find_alignment, on the segments of one window
 * (segs[0].seek is the window's seek): the median / max duration heuristics,
 * merge_punctuations, words handed to segments by their text-token counts
 * (tokens below eot), times offset by the window start and rounded to 0.01,
 * and the first / last word and segment start / end rules. Each segment's
 * words are replaced (a segment without text tokens gets none). align is
 * modified (truncated, merged) but stays the caller's. last_speech_timestamp
 * is the value carried from earlier windows; openai updates it per segment
 * inside this call only, so the new carry is wd_timing_last_speech() after
 * any hallucination skipping. Returns 0, WD_EINVAL, WD_ENOMEM (segments then
 * hold no new words).
 */
int wd_timing_add_word_timestamps(wd_timing_word_t *align, int n_align,
                                  const wd_timing_opts_t *opts, int32_t eot, wd_segment_t *segs,
                                  int n_segs, double last_speech_timestamp);

/*
 * Both steps above for one window: wd_timing_find_alignment() on tokens
 * (from wd_timing_align_tokens over these segments) and the engine's qk and
 * probs, then wd_timing_add_word_timestamps(). opts may be NULL (defaults).
 */
int wd_timing_window(const wd_tokenizer_t *tok, const char *language, const int32_t *tokens,
                     int n_tokens, int n_sot, const float *qk, int n_heads, int n_audio_ctx,
                     int num_frames, const float *probs, const wd_timing_opts_t *opts,
                     wd_segment_t *segs, int n_segs, double last_speech_timestamp);

/* openai utils.get_end: the end of the last word of segs, else the end of
 * the last segment, else fallback (no segments: openai's None). */
double wd_timing_last_speech(const wd_segment_t *segs, int n_segs, double fallback);

/* What wd_timing_window_seek() needs to know about the window. */
typedef struct {
  int previous_seek;          /* the window's seek (mel frames) */
  int segment_size;           /* mel frames in the window */
  int content_frames;         /* mel frames of the whole file (no padding) */
  int single_timestamp_ending;
  double last_speech_timestamp; /* the carry before this window */
  double hallucination_silence_threshold; /* seconds; negative or NaN: off (None) */
} wd_timing_seek_in_t;

/*
 * transcribe.py after add_word_timestamps: the seek moves to the last word's
 * end (not after a single timestamp ending), and with a
 * hallucination_silence_threshold, silence before a possible hallucination
 * is skipped and anomalous segments surrounded by silence are dropped.
 * *seek holds the seek the segmenting chose and receives the new one;
 * *ret_n_keep receives how many of segs openai keeps (the others are
 * dropped, the caller frees them); *ret_skip is 1 when openai drops the whole
 * window (the `continue` before its segments are added: nothing of it is
 * kept, not even its tokens).
 */
void wd_timing_window_seek(const wd_segment_t *segs, int n_segs, const wd_timing_seek_in_t *in,
                           int *seek, int *ret_n_keep, int *ret_skip);

/* transcribe.py word_anomaly_score: +1 for probability < 0.15, +(0.133 -
 * d) * 15 for a duration d under 0.133 s, +(d - 2) over 2 s. */
double wd_timing_word_anomaly_score(const wd_word_t *w);

/* transcribe.py is_segment_anomaly over a segment's words: the first 8 that
 * are not punctuation, anomalous when their score >= 3 or score + 0.01 >= how
 * many they are. No words (or NULL): 0. */
int wd_timing_segment_is_anomaly(const wd_word_t *words, int n_words);

/* Frees n words and the array; accepts NULL. */
void wd_timing_words_free(wd_timing_word_t *w, int n);

/* --------------------------------------------------------- building blocks */

/*
 * dtw_cpu + backtrace on x (n, m), row-major: cost (n+1, m+1) kept in
 * float32 as openai keeps it, ties resolved as openai resolves them (a
 * strictly smaller diagonal, else a strictly smaller up, else left), the
 * trace's first row forced left and first column up. Writes the path from
 * (0, 0) to (n-1, m-1) into text_idx[] and time_idx[] (room for n + m
 * entries each) and returns its length, or WD_EINVAL / WD_ENOMEM.
 */
int wd_timing_dtw(const float *x, int n, int m, int *text_idx, int *time_idx);

/*
 * The matrix find_alignment runs DTW on (negated), from the engine's qk
 * (n_heads, n_tokens, n_audio_ctx): softmax(qk * qk_scale) over the first
 * num_frames / 2 audio positions, standardised per head and position across
 * all n_tokens tokens (std_mean, unbiased=False), median-filtered along
 * audio positions (width), averaged over heads, and kept for the rows
 * n_sot .. n_tokens - 2 (<|notimestamps|> and the text tokens). Writes
 * matrix (n_tokens - n_sot - 1, num_frames / 2). Returns 0, WD_EINVAL,
 * WD_ENOMEM.
 */
int wd_timing_attention_matrix(const float *qk, int n_heads, int n_tokens, int n_audio_ctx,
                               int n_sot, int num_frames, float qk_scale, int width,
                               float *matrix);

/* timing.py median_filter along the last axis of x (rows, len), in place:
 * reflect padding of width / 2, the median of each window (NaN sorts last);
 * rows no longer than width / 2 are left as they are. width odd. */
int wd_timing_median_filter(float *x, int rows, int len, int width);

/*
 * The word split of openai's Tokenizer.split_to_word_tokens on ids[0..n)
 * (text tokens, usually followed by EOT): at each complete UTF-8 character
 * for zh, ja, th, lo, my and yue, else at spaces, punctuation and special
 * tokens. Words are the decoded text with U+FFFD where bytes are invalid, as
 * Python's decode(errors="replace"); a NUL byte in a token ends its word's
 * string (C strings). Sets *ret_words (tok_begin / n_tok set, times 0) and
 * *ret_n; returns 0, WD_EINVAL or WD_ENOMEM.
 */
int wd_timing_split_words(const wd_tokenizer_t *tok, const char *language, const int32_t *ids,
                          int n, wd_timing_word_t **ret_words, int *ret_n);

/* timing.py merge_punctuations, in place: merged words become "" with
 * n_tok = 0, their tokens moving to the word they joined. */
int wd_timing_merge_punctuations(wd_timing_word_t *w, int n, const char *prepend,
                                 const char *append);

/* Python's round(x, 2): the nearest 0.01 of x's exact binary value, ties to
 * even. */
double wd_timing_round2(double x);

#endif
