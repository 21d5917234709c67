/*
 * wd_engine_types_check.h - one engine against the plain-C reference on a
 * synthetic model of some weight type, shared by the Vulkan and the CPU
 * engine's tests/{gpu,cpu}/test_engine_types.c.
 *
 * Both engines hold the same model file (tests/wd_synth_model.h). A mel
 * window of values in the range log-mel takes after Whisper's scaling is
 * encoded by both; two sequences then step together with different tokens
 * (the engine batched, the reference one row at a time), and a 3-token
 * prefill runs through every decoder matrix, the token embedding among
 * them. Both dequantize as core/quant.c does, so what differs is f32
 * summation order only: the encoder output and every logits row must agree
 * to 1e-3 relative, and every argmax exactly.
 */
#ifndef WD_ENGINE_TYPES_CHECK_H
#define WD_ENGINE_TYPES_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "model.h"
#include "ref_engine.h"
#include "wd_synth_model.h"
#include "wd_test.h"

/* max |a - b| / max |b| over n values. */
static inline double et_rel_max(const float *a, const float *b, size_t n) {
  double max_ref = 0, max_d = 0;
  for (size_t k = 0; k < n; k++) {
    if (fabs(b[k]) > max_ref)
      max_ref = fabs(b[k]);
    const double d = fabs((double)a[k] - b[k]);
    if (!(d <= max_d))
      max_d = d;
  }
  return max_ref > 0 ? max_d / max_ref : max_d;
}

static inline int et_argmax(const float *x, int n) {
  int a = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[a])
      a = i;
  return a;
}

/* v: the engine under test (2 sequence slots, 1 audio slot), whose encoder
 * output read_encoded(eng, out) reads back; r: the reference on the same
 * model; name: the type, for the figures line. */
static inline void et_check_vs_reference(const wd_engine_t *v,
                                         int (*read_encoded)(void *eng, float *out), void *eng,
                                         wd_ref_engine_t *r, const wd_hparams_t *hp,
                                         const char *name) {
  const wd_engine_t *f = wd_ref_engine_iface(r);
  const size_t n_mel = (size_t)hp->n_mels * 3000;
  const size_t n_enc = (size_t)hp->n_audio_ctx * (size_t)hp->n_audio_state;
  float *mel = malloc(n_mel * sizeof *mel), *enc = malloc(n_enc * sizeof *enc);
  WD_CHECK(mel && enc);
  if (!mel || !enc) {
    free(mel), free(enc);
    return;
  }
  for (size_t i = 0; i < n_mel; i++)
    mel[i] = 4.0f * wd_synth_rand((int64_t)i, 4242);
  WD_CHECK_EQ_INT(v->encode(v->self, 0, mel), 0);
  WD_CHECK_EQ_INT(f->encode(f->self, 0, mel), 0);
  WD_CHECK_EQ_INT(read_encoded(eng, enc), 0);
  const double rel_enc = et_rel_max(enc, wd_ref_engine_encoded(r, 0), n_enc);
  WD_CHECK(rel_enc < 1e-3);
  const int seqs[2] = { 0, 1 };
  for (int s = 0; s < 2; s++) {
    WD_CHECK_EQ_INT(v->seq_reset(v->self, s, 0), 0);
    WD_CHECK_EQ_INT(f->seq_reset(f->self, s, 0), 0);
  }
  static const int32_t toks[4][2] = { { 50257, 50257 }, { 50362, 440 }, { 843, 51000 },
                                      { 13, 7 } };
  const int nv = hp->n_vocab;
  double worst = 0;
  float *lv = malloc(2 * (size_t)nv * sizeof *lv);
  WD_CHECK(lv != NULL);
  for (int i = 0; i < 4 && lv; i++) {
    const float *pv = NULL, *pr = NULL;
    WD_CHECK_EQ_INT(v->step(v->self, 2, seqs, toks[i], &pv), 0);
    if (!pv)
      break;
    memcpy(lv, pv, 2 * (size_t)nv * sizeof *lv);
    for (int s = 0; s < 2; s++) { /* the reference steps its sequences one at a time */
      WD_CHECK_EQ_INT(f->step(f->self, 1, &seqs[s], &toks[i][s], &pr), 0);
      if (!pr)
        break;
      const double rel = et_rel_max(lv + (size_t)s * (size_t)nv, pr, (size_t)nv);
      if (!(rel <= worst))
        worst = rel;
      WD_CHECK_EQ_INT(et_argmax(lv + (size_t)s * (size_t)nv, nv), et_argmax(pr, nv));
    }
  }
  free(lv);
  double worst_pf = 0;
  if (v->prefill && f->prefill) {
    static const int32_t pf[3] = { 50257, 50362, 843 };
    const float *pv = NULL, *pr = NULL;
    WD_CHECK_EQ_INT(v->seq_reset(v->self, 0, 0), 0);
    WD_CHECK_EQ_INT(f->seq_reset(f->self, 0, 0), 0);
    WD_CHECK_EQ_INT(v->prefill(v->self, 0, 3, pf, &pv), 0);
    float *keep = pv ? malloc((size_t)nv * sizeof *keep) : NULL;
    if (keep)
      memcpy(keep, pv, (size_t)nv * sizeof *keep);
    WD_CHECK_EQ_INT(f->prefill(f->self, 0, 3, pf, &pr), 0);
    if (keep && pr) {
      worst_pf = et_rel_max(keep, pr, (size_t)nv);
      WD_CHECK_EQ_INT(et_argmax(keep, nv), et_argmax(pr, nv));
    }
    free(keep);
  }
  fprintf(stderr, "  %-5s encoder rel %.3g, logits rel %.3g, prefill rel %.3g\n", name, rel_enc,
          worst, worst_pf);
  WD_CHECK(worst < 1e-3);
  WD_CHECK(worst_pf < 1e-3);
  free(mel);
  free(enc);
}

#endif
