/*
 * wd_transcribe.h - one file through one decoder on one engine, without a
 * worker: the decoder's loop (core/worker.c runs it for many jobs at once)
 * for a single job on sequence slots 0.. and audio slot 0. The engine and
 * decoding tests and bench_engine drive engines through it.
 */
#ifndef WD_TEST_TRANSCRIBE_H
#define WD_TEST_TRANSCRIBE_H

#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "decoder.h"
#include "engine.h"
#include "error.h"
#include "mel.h"

/* Transcribes samples[0..n) (16 kHz, copied) with mel's front end. On
 * success fills *out, which the caller frees with wd_transcript_free(). */
static inline int wd_test_transcribe(const wd_engine_t *e, const wd_tokenizer_t *tok,
                                     const wd_mel_t *mel, const float *samples, size_t n,
                                     const wd_decode_opts_t *opts, wd_transcript_t *out) {
  memset(out, 0, sizeof *out);
  if (!e || !tok || !mel || (!samples && n) || !opts ||
      wd_tokenizer_special(tok)->n_vocab != e->n_vocab)
    return WD_EINVAL;
  float *copy = malloc((n ? n : 1) * sizeof *copy);
  if (!copy)
    return WD_ENOMEM;
  if (n)
    memcpy(copy, samples, n * sizeof *copy);
  wd_mel_pcm_t *audio = NULL;
  int rc = wd_mel_pcm_new_f32(mel, copy, n, 2, &audio);
  if (rc < 0)
    return rc;
  wd_decoder_t *d = NULL;
  if ((rc = wd_decoder_new(tok, e, audio, opts, &d)) == 0 && wd_decoder_n_rows(d) > e->max_seqs)
    rc = WD_ERANGE;
  for (wd_dec_need_t need; rc == 0 && (need = wd_decoder_need(d)) != WD_DEC_DONE;) {
    if (need == WD_DEC_ENCODE) {
      if ((rc = e->encode(e->self, 0, wd_decoder_window(d))) == 0)
        rc = wd_decoder_encoded(d);
      continue;
    }
    /* rows are slots */
    wd_dec_work_t w;
    wd_decoder_work(d, &w);
    const float *lg = NULL;
    if (w.reset && (rc = e->seq_reset(e->self, 0, 0)) < 0)
      break;
    if (w.n_copy > 0 && (rc = e->seq_copy(e->self, w.n_copy, w.copy_dst, w.copy_src)) < 0)
      break;
    if (w.n_align > 0) {
      if ((rc = e->align(e->self, 0, w.n_align, w.align, w.align_n_text, w.n_heads, w.heads,
                         w.qk, w.probs)) == 0)
        rc = wd_decoder_advance(d, NULL);
      continue;
    }
    if (w.n_prefill > 0) {
      if ((rc = e->prefill(e->self, 0, w.n_prefill, w.prefill, &lg)) == 0)
        rc = wd_decoder_advance(d, &lg);
      continue;
    }
    if (w.n < 1) {
      rc = WD_EINTERNAL;
      break;
    }
    if ((rc = e->step(e->self, w.n, w.rows, w.tokens, &lg)) < 0)
      break;
    const float *rows[WD_DECODER_MAX_ROWS];
    for (int i = 0; i < w.n; i++)
      rows[i] = lg + (size_t)i * (size_t)e->n_vocab;
    rc = wd_decoder_advance(d, rows);
  }
  if (rc == 0)
    rc = wd_decoder_take_result(d, out);
  wd_decoder_free(d);
  return rc;
}

#endif
