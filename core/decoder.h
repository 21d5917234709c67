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
 *   WD_DEC_STEP    wd_decoder_work() says what the engine does next: reset
 *                  row 0, copy rows' slots (beams), then either a prefill
 *                  of row 0 or one step of some rows with a token each
 *                  (beside other jobs' rows); the logits go back to
 *                  wd_decoder_advance().
 *   WD_DEC_DONE    wd_decoder_take_result() gives the transcript.
 *
 * A window goes: encode; feed the initial tokens ([<|startofprev|> prompt]
 * SOT... [prefix]) to row 0, in one or two engine prefills when the engine
 * has them, else one step each; then the search (search.h) steps its rows
 * until it is done; if the result fails openai's fallback tests, the window
 * is decoded again at the next temperatures, side by side in as many rows as
 * the holder grants (wd_decoder_rows_wanted); then the no-speech rule,
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
#include "mel.h"
#include "taskq.h"
#include "tokenizer.h"

typedef struct wd_decoder wd_decoder_t;

/* Rows one decoder may hold: its search's (beam_size or best_of) at
 * admission, and more while a window's fallback attempts run side by side. */
#define WD_DECODER_MAX_ROWS WD_ENGINE_MAX_SEQS

typedef enum { WD_DEC_ENCODE, WD_DEC_STEP, WD_DEC_DONE } wd_dec_need_t;

/*
 * audio: the file's samples (core/mel.h), whose n_mels must be the
 * engine's; the decoder takes ownership (frees it) and computes each
 * window's log-mel as the window comes up. opts is copied (language,
 * prompt, prefix and clips too). e is read for its shape and capabilities
 * (n_mels, n_text_ctx, max_prefill, whether seq_copy exists) and never
 * called. Returns WD_EINVAL for bad options (unknown language; translation
 * or a language other than English on an English-only model; best_of with
 * beam search at one temperature...), WD_EUNSUP for a beam or best_of on an
 * engine without seq_copy, WD_ENOMEM. On error audio is freed too.
 */
int wd_decoder_new(const wd_tokenizer_t *tok, const wd_engine_t *e, wd_mel_pcm_t *audio,
                   const wd_decode_opts_t *opts, wd_decoder_t **ret);
void wd_decoder_free(wd_decoder_t *d); /* accepts NULL */

/* Sequence slots the decoder needs to run (its rows): 1, beam_size or
 * best_of. */
int wd_decoder_n_rows(const wd_decoder_t *d);

/* Rows it could use now (>= n_rows): when a window failed openai's tests
 * and the next attempts are about to start, enough to run all the
 * temperatures left side by side (fallback.h); while they run, the rows
 * they use; else n_rows. Its holder grants what it can spare and says so
 * with wd_decoder_rows_held() before the next wd_decoder_work(); it may take
 * back rows only while the decoder wants fewer than it holds. Rows 0 ..
 * held - 1 are the decoder's; those past n_rows are never needed. */
int wd_decoder_rows_wanted(const wd_decoder_t *d);
void wd_decoder_rows_held(wd_decoder_t *d, int n);

/* The holder needs its lent rows back (a job is queued): the decoder keeps
 * what it cannot do without, its rows keep[0 .. m) becoming rows 0 .. m
 * (m >= n_rows); the attempts it gave up run later, one after another,
 * with the same result. Returns m, or 0 when it holds nothing it can give
 * back now (try again after the next step). */
int wd_decoder_rows_shed(wd_decoder_t *d, int *keep);

wd_dec_need_t wd_decoder_need(const wd_decoder_t *d);

/* From now on, make each next window's log-mel ahead on q while this one
 * is decoded (win_ahead.h), starting with the window held now. Called once
 * (later calls do nothing), from the thread that drives the decoder; q
 * outlives the decoder. 0, or WD_ENOMEM (the decoder goes on without). */
int wd_decoder_set_ahead(wd_decoder_t *d, wd_taskq_t *q);
/* Windows that came from frames made ahead, and blocks made: tests, logs. */
void wd_decoder_ahead_counts(const wd_decoder_t *d, int *served, int *computed);

/* WD_DEC_ENCODE: the (n_mels, 3000) window to encode. */
const float *wd_decoder_window(const wd_decoder_t *d);
/* The window is encoded into this job's audio slot. Returns 0 or WD_ENOMEM. */
int wd_decoder_encoded(wd_decoder_t *d);

/* WD_DEC_STEP: what the engine does next for this decoder, in order. Rows
 * are the decoder's own (0 .. n_rows); the caller maps them to slots. */
typedef struct {
  int reset;                  /* empty row 0's slot and attach it to the audio slot */
  int n_copy;                 /* seq_copy: row copy_dst[i] <- row copy_src[i] */
  int copy_dst[WD_DECODER_MAX_ROWS], copy_src[WD_DECODER_MAX_ROWS];
  const int32_t *prefill;     /* n_prefill > 0: engine prefill of row 0 with these */
  int n_prefill;
  /* n_align > 0: engine align() of these tokens on the job's audio slot
   * with these heads into qk and probs (word timestamps; no step). */
  const int32_t *align;
  int n_align, align_n_text;
  const int (*heads)[2];
  int n_heads;
  float *qk, *probs;
  int n;                      /* else one step over these rows, beside other jobs' */
  int rows[WD_DECODER_MAX_ROWS];
  int32_t tokens[WD_DECODER_MAX_ROWS];
} wd_dec_work_t;

void wd_decoder_work(const wd_decoder_t *d, wd_dec_work_t *w);

/* The logits of the work just done: the n rows of the step in order, or
 * the one row a prefill returns. Returns 0 or WD_ENOMEM. */
int wd_decoder_advance(wd_decoder_t *d, const float *const *logits);

/* Segments finalised so far (they stay valid until take_result). */
const wd_segment_t *wd_decoder_segments(const wd_decoder_t *d, int *ret_n);
/* Seconds of audio decoded so far, and in all. */
double wd_decoder_done_s(const wd_decoder_t *d);
double wd_decoder_total_s(const wd_decoder_t *d);
/* The language this decoder detected (openai's detect_language on its
 * first window) and its probability, once detection has run; NULL before,
 * and always for a decoder that was given its language (or whose model is
 * English-only). */
const char *wd_decoder_detected(const wd_decoder_t *d, float *ret_prob);

/* WD_DEC_DONE: moves the transcript into *out (caller frees with
 * wd_transcript_free). Returns WD_EINVAL before DONE. */
int wd_decoder_take_result(wd_decoder_t *d, wd_transcript_t *out);

#endif
