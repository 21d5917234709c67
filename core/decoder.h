/*
 * decoder.h - one file's decoding as a state machine that a worker steps.
 *
 * wd_decoder_t holds everything openai/whisper's transcribe() keeps for one
 * file: the mel, the seek position, the tokens of the window being decoded,
 * the context carried to the next window, the segments so far. It never
 * calls the engine. Instead it says what it needs next:
 *
 *   WD_DEC_ENCODE  the window wd_decoder_window() must be encoded into the
 *                  job's audio slot; then call wd_decoder_encoded().
 *   WD_DEC_STEP    wd_decoder_rows() gives the token each of its sequences
 *                  feeds next (one sequence today; beams later) and whether
 *                  the sequences must first be emptied and attached to the
 *                  audio slot (start of a window); the caller runs one engine
 *                  step, possibly beside other jobs' rows, and hands the
 *                  logits of these rows to wd_decoder_advance().
 *   WD_DEC_DONE    wd_decoder_take_result() gives the transcript.
 *
 * A window goes: encode, feed the initial tokens ([<|startofprev|> prompt]
 * SOT...) one step each, then sample until EOT; then the no-speech rule,
 * segmenting and the seek update, and the next window. Language detection
 * is an encode plus one SOT step before the first window.
 *
 * Nothing here knows about threads, HTTP or Vulkan; one thread at a time.
 * ref: openai/whisper decoding.py and transcribe.py (v20250625).
 */
#ifndef WD_DECODER_H
#define WD_DECODER_H

#include <stdint.h>

#include "decode.h"
#include "tokenizer.h"

typedef struct wd_decoder wd_decoder_t;

typedef enum { WD_DEC_ENCODE, WD_DEC_STEP, WD_DEC_DONE } wd_dec_need_t;

/* Most sequences one decoder steps at once (greedy: 1). */
#define WD_DECODER_MAX_ROWS 1

/*
 * mel: (n_mels, n_frames) from wd_mel_compute, including the 3000 frames of
 * padding; the decoder takes ownership (frees it). opts is copied (language
 * and prompt too). n_text_ctx is the engine's positions per sequence.
 * Returns WD_EINVAL for bad options (unknown language; translation or a
 * language other than English on an English-only model), WD_ENOMEM.
 * On error mel is freed too.
 */
int wd_decoder_new(const wd_tokenizer_t *tok, int n_mels, int n_text_ctx, float *mel,
                   int n_frames, const wd_decode_opts_t *opts, wd_decoder_t **ret);
void wd_decoder_free(wd_decoder_t *d); /* accepts NULL */

wd_dec_need_t wd_decoder_need(const wd_decoder_t *d);

/* WD_DEC_ENCODE: the (n_mels, 3000) window to encode. */
const float *wd_decoder_window(const wd_decoder_t *d);
/* The window is encoded into this job's audio slot. Returns 0 or WD_ENOMEM. */
int wd_decoder_encoded(wd_decoder_t *d);

/* WD_DEC_STEP: fills tokens[0..n) (n <= WD_DECODER_MAX_ROWS) and returns n;
 * *reset is 1 when the rows' sequences must be emptied and attached to the
 * job's audio slot before this step. */
int wd_decoder_rows(const wd_decoder_t *d, int32_t *tokens, int *reset);

/* The logits of the rows of the last wd_decoder_rows(), each n_vocab floats.
 * Returns 0 or WD_ENOMEM. */
int wd_decoder_advance(wd_decoder_t *d, const float *const *logits);

/* Segments finalised so far (they stay valid until take_result). */
const wd_segment_t *wd_decoder_segments(const wd_decoder_t *d, int *ret_n);
/* Seconds of audio decoded so far, and in all. */
double wd_decoder_done_s(const wd_decoder_t *d);
double wd_decoder_total_s(const wd_decoder_t *d);

/* WD_DEC_DONE: moves the transcript into *out (caller frees with
 * wd_transcript_free). Returns WD_EINVAL before DONE. */
int wd_decoder_take_result(wd_decoder_t *d, wd_transcript_t *out);

#endif
