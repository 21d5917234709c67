/*
 * wd_engine_check.h - checks of core/engine.h semantics that any engine
 * must meet bit for bit against itself, shared by the test binaries of the
 * reference engine (tests/core/test_ref_engine.c), of the Vulkan engine
 * (tests/gpu/test_engine_ops.c, test_engine.c) and of the CPU engine
 * (tests/cpu/test_engine.c).
 *
 * A slot's state is known by its history (audio slot and tokens, all fed by
 * step()); ec_same() proves a slot holds a history by stepping it once and
 * stepping a replay of the history in a scratch slot with the same token:
 * the two logits rows must be equal bit for bit (an engine is
 * deterministic, and a row's logits do not depend on its batch).
 */
#ifndef WD_ENGINE_CHECK_H
#define WD_ENGINE_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sndfile.h>

#include "decode.h"
#include "engine.h"
#include "error.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "render.h"
#include "wd_test.h"
#include "wd_transcribe.h"

#define EC_MAX_TOK 32

typedef struct {
  int audio, n;
  int32_t tok[EC_MAX_TOK];
} ec_hist_t;

/* Resets slot s to audio a and steps tokens[0..n) into it one at a time,
 * recording the history in h. */
static inline void ec_build(const wd_engine_t *e, int s, int a, const int32_t *tokens, int n,
                            ec_hist_t *h) {
  const float *lg = NULL;
  WD_CHECK_EQ_INT(e->seq_reset(e->self, s, a), 0);
  h->audio = a;
  h->n = 0;
  for (int i = 0; i < n && i < EC_MAX_TOK; i++) {
    WD_CHECK_EQ_INT(e->step(e->self, 1, &s, &tokens[i], &lg), 0);
    h->tok[h->n++] = tokens[i];
  }
}

/* Slot s holds history h: one step of t on s equals, bit for bit, one step
 * of t after a replay of h in slot `scratch`. Appends t to h. Returns 1 when
 * equal. */
static inline int ec_same(const wd_engine_t *e, int s, ec_hist_t *h, int32_t t, int scratch) {
  const size_t row = (size_t)e->n_vocab * sizeof(float);
  float *got = malloc(row);
  const float *lg = NULL;
  int ok = got != NULL;
  int rc = e->step(e->self, 1, &s, &t, &lg);
  WD_CHECK_EQ_INT(rc, 0);
  if (ok && rc == 0)
    memcpy(got, lg, row);
  ec_hist_t replay;
  ec_build(e, scratch, h->audio, h->tok, h->n, &replay);
  rc = e->step(e->self, 1, &scratch, &t, &lg);
  WD_CHECK_EQ_INT(rc, 0);
  ok = ok && rc == 0 && memcmp(got, lg, row) == 0;
  free(got);
  if (h->n < EC_MAX_TOK)
    h->tok[h->n++] = t;
  return ok;
}

/* seq_copy: a fork, a swap, a 3-cycle, copies beside dst == src, n = 0 and
 * refused arguments. Needs max_seqs >= 5 (slot 4 is the replay scratch)
 * and audio slots a0 != a1 holding different encoded windows. */
static inline void ec_check_seq_copy(const wd_engine_t *e, int a0, int a1) {
  const int S = 4;
  const int32_t x[] = { 50257, 50363, 843, 523, 616, 5891 };
  const int32_t y[] = { 50257, 50362, 1265, 644 };
  const int32_t z[] = { 50257, 50363, 383, 2068, 7586 };
  ec_hist_t hx, hy, hz, h0, h1, h2;
  const float *lg = NULL;

  /* Fork: slots 1 and 2 become slot 0 and continue as it would. */
  ec_build(e, 0, a0, x, 6, &hx);
  WD_CHECK_EQ_INT(e->seq_copy(e->self, 2, (const int[]){ 1, 2 }, (const int[]){ 0, 0 }), 0);
  h0 = h1 = h2 = hx;
  WD_CHECK(ec_same(e, 1, &h1, 290, S));
  WD_CHECK(ec_same(e, 2, &h2, 1101, S));
  WD_CHECK(ec_same(e, 0, &h0, 314, S));
  /* The three forks in one batch with one token: equal rows. */
  {
    const int seqs[3] = { 0, 1, 2 };
    const int32_t t[3] = { 262, 262, 262 };
    ec_build(e, 0, a0, x, 6, &hx);
    WD_CHECK_EQ_INT(e->seq_copy(e->self, 2, (const int[]){ 1, 2 }, (const int[]){ 0, 0 }), 0);
    WD_CHECK_EQ_INT(e->step(e->self, 3, seqs, t, &lg), 0);
    const size_t row = (size_t)e->n_vocab;
    WD_CHECK(lg && memcmp(lg, lg + row, row * sizeof *lg) == 0);
    WD_CHECK(lg && memcmp(lg, lg + 2 * row, row * sizeof *lg) == 0);
  }

  /* Swap: slot 0 <- 1 and 1 <- 0, audio slots included. */
  ec_build(e, 0, a0, x, 6, &hx);
  ec_build(e, 1, a1, y, 4, &hy);
  WD_CHECK_EQ_INT(e->seq_copy(e->self, 2, (const int[]){ 0, 1 }, (const int[]){ 1, 0 }), 0);
  h0 = hy, h1 = hx;
  WD_CHECK(ec_same(e, 0, &h0, 290, S));
  WD_CHECK(ec_same(e, 1, &h1, 290, S));

  /* 3-cycle: 0 <- 1, 1 <- 2, 2 <- 0, with different lengths and audio. */
  ec_build(e, 0, a0, x, 6, &hx);
  ec_build(e, 1, a1, y, 4, &hy);
  ec_build(e, 2, a0, z, 5, &hz);
  WD_CHECK_EQ_INT(
      e->seq_copy(e->self, 3, (const int[]){ 0, 1, 2 }, (const int[]){ 1, 2, 0 }), 0);
  h0 = hy, h1 = hz, h2 = hx;
  WD_CHECK(ec_same(e, 0, &h0, 11, S));
  WD_CHECK(ec_same(e, 1, &h1, 11, S));
  WD_CHECK(ec_same(e, 2, &h2, 11, S));

  /* dst == src is left alone beside a real copy; an empty sequence copies. */
  ec_build(e, 0, a0, x, 6, &hx);
  ec_build(e, 1, a1, y, 4, &hy);
  WD_CHECK_EQ_INT(e->seq_reset(e->self, 2, a1), 0);
  WD_CHECK_EQ_INT(
      e->seq_copy(e->self, 3, (const int[]){ 1, 3, 0 }, (const int[]){ 1, 0, 2 }), 0);
  h1 = hy, h2 = hx;
  WD_CHECK(ec_same(e, 1, &h1, 523, S));
  WD_CHECK(ec_same(e, 3, &h2, 523, S));
  h0 = (ec_hist_t){ .audio = a1, .n = 0 };
  WD_CHECK(ec_same(e, 0, &h0, 50257, S));

  /* n = 0 changes nothing; refused arguments change nothing either. */
  ec_build(e, 0, a0, x, 6, &hx);
  ec_build(e, 1, a1, y, 4, &hy);
  const int ms = e->max_seqs;
  WD_CHECK_EQ_INT(e->seq_copy(e->self, 0, NULL, NULL), 0);
  WD_CHECK_EQ_INT(e->seq_copy(e->self, 1, (const int[]){ ms }, (const int[]){ 0 }), WD_EINVAL);
  WD_CHECK_EQ_INT(e->seq_copy(e->self, 1, (const int[]){ 1 }, (const int[]){ -1 }), WD_EINVAL);
  WD_CHECK_EQ_INT(e->seq_copy(e->self, 1, (const int[]){ -1 }, (const int[]){ 0 }), WD_EINVAL);
  WD_CHECK_EQ_INT(e->seq_copy(e->self, 1, (const int[]){ 1 }, (const int[]){ ms }), WD_EINVAL);
  WD_CHECK_EQ_INT(e->seq_copy(e->self, 2, (const int[]){ 1, 1 }, (const int[]){ 0, 0 }),
                  WD_EINVAL);
  WD_CHECK_EQ_INT(e->seq_copy(e->self, -1, (const int[]){ 1 }, (const int[]){ 0 }), WD_EINVAL);
  int many_d[17], many_s[17];
  for (int i = 0; i < 17; i++)
    many_d[i] = i % ms, many_s[i] = 0;
  WD_CHECK_EQ_INT(e->seq_copy(e->self, ms + 1, many_d, many_s), WD_EINVAL);
  WD_CHECK(ec_same(e, 0, &hx, 290, S));
  WD_CHECK(ec_same(e, 1, &hy, 290, S));
}

/* max |a - b| / max |b| over n values (one logits row, an encoding). */
static inline double ec_rel_diff(const float *a, const float *b, size_t n) {
  double max_ref = 0, max_d = 0;
  for (size_t k = 0; k < n; k++) {
    const double dd = fabs((double)a[k] - b[k]);
    if (fabs(b[k]) > max_ref)
      max_ref = fabs(b[k]);
    if (!(dd <= max_d))
      max_d = dd;
  }
  return max_d / max_ref;
}

static inline int ec_argmax(const float *x, int n) {
  int a = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[a])
      a = i;
  return a;
}

/* Six steps of slot 0 (attached to audio slot 0, encoded by the caller) on
 * engine v and reference r: each within 1e-3 of the largest logit, the same
 * argmax. Then misuse is an error, never a crash: a bad token, a slot out
 * of range or twice in one step, a bad batch size, a bad slot or audio slot
 * for seq_reset, a bad audio slot for encode. */
static inline void ec_check_step_logits(const wd_engine_t *v, const wd_engine_t *r, int nv,
                                        int max_seqs, int max_audio) {
  const int32_t toks[] = { 50257, 50363, 843, 523, 616, 5891 };
  WD_CHECK_EQ_INT(v->seq_reset(v->self, 0, 0), 0);
  WD_CHECK_EQ_INT(r->seq_reset(r->self, 0, 0), 0);
  double worst = 0;
  for (int i = 0; i < 6; i++) {
    const int s0 = 0;
    const float *lv = NULL, *lr = NULL;
    WD_CHECK_EQ_INT(v->step(v->self, 1, &s0, &toks[i], &lv), 0);
    WD_CHECK_EQ_INT(r->step(r->self, 1, &s0, &toks[i], &lr), 0);
    if (!lv || !lr)
      break;
    worst = fmax(worst, ec_rel_diff(lv, lr, (size_t)nv));
    WD_CHECK_EQ_INT(ec_argmax(lv, nv), ec_argmax(lr, nv));
  }
  fprintf(stderr, "  decoder step: max |logit diff| / max |logit| = %.3g\n", worst);
  WD_CHECK(worst < 1e-3);
  const int s0 = 0, far = max_seqs, neg = -1, dup[2] = { 0, 0 };
  const int32_t bad = 999999, two[2] = { toks[0], toks[0] };
  const float *lg = NULL;
  WD_CHECK_EQ_INT(v->step(v->self, 1, &s0, &bad, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->step(v->self, 1, &far, &toks[0], &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->step(v->self, 1, &neg, &toks[0], &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->step(v->self, 2, dup, two, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(r->step(r->self, 2, dup, two, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->step(v->self, 0, &s0, &toks[0], &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->step(v->self, max_seqs + 1, &s0, &toks[0], &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->seq_reset(v->self, max_seqs, 0), WD_EINVAL);
  WD_CHECK_EQ_INT(v->seq_reset(v->self, 0, max_audio), WD_EINVAL);
  WD_CHECK_EQ_INT(v->encode(v->self, max_audio, NULL), WD_EINVAL);
  WD_CHECK_EQ_INT(v->encode(v->self, -1, NULL), WD_EINVAL);
}

/* One step of n rows on v and r; the worst row's ec_rel_diff. */
static inline double ec_step_both(const wd_engine_t *v, const wd_engine_t *r, int n,
                                  const int *seqs, const int32_t *toks, int nv) {
  const float *lv = NULL, *lr = NULL;
  WD_CHECK_EQ_INT(v->step(v->self, n, seqs, toks, &lv), 0);
  WD_CHECK_EQ_INT(r->step(r->self, n, seqs, toks, &lr), 0);
  if (!lv || !lr)
    return INFINITY;
  double worst = 0;
  for (int i = 0; i < n; i++)
    worst = fmax(worst, ec_rel_diff(lv + (size_t)i * (size_t)nv, lr + (size_t)i * (size_t)nv,
                                    (size_t)nv));
  return worst;
}

/* Three sequences in one batched step whose rows use permuted,
 * non-contiguous slots (row 0 -> slot 3, row 1 -> slot 0, row 2 -> slot 5)
 * and different lengths (slot 5 steps alone first), each row against the
 * reference stepping the same slots. A fourth sequence in slot 1 steps
 * alone before and after the batch: its cache must survive the batch. The
 * rows-to-slots map the worker relies on to let jobs join and leave. Slot 0
 * attends to audio slot a0, the others to audio slot 0 (both encoded). */
static inline void ec_check_batched_permuted(const wd_engine_t *v, const wd_engine_t *r, int nv,
                                             int max_seqs, int a0) {
  const int32_t a[] = { 50257, 50363, 843, 523, 616 };
  const int32_t b[] = { 50257, 50363, 1265, 644, 345, 460, 466 };
  const int32_t c[] = { 50257, 50362, 50363, 314, 1101 };
  const int32_t d[] = { 50257, 50363, 383 };
  const int seqs[3] = { 3, 0, 5 }, s5 = 5, s1 = 1;
  for (int s = 0; s < max_seqs; s++) {
    WD_CHECK_EQ_INT(v->seq_reset(v->self, s, s == 0 ? a0 : 0), 0);
    WD_CHECK_EQ_INT(r->seq_reset(r->self, s, s == 0 ? a0 : 0), 0);
  }
  double worst = 0;
  /* Slot 5 and slot 1 start alone; rows of n = 1 may be any slot. */
  for (int i = 0; i < 2; i++) {
    worst = fmax(worst, ec_step_both(v, r, 1, &s5, &b[i], nv));
    worst = fmax(worst, ec_step_both(v, r, 1, &s1, &d[i], nv));
  }
  for (int i = 0; i < 5; i++) {
    const int32_t t3[3] = { a[i], c[i], b[i + 2] };
    worst = fmax(worst, ec_step_both(v, r, 3, seqs, t3, nv));
  }
  worst = fmax(worst, ec_step_both(v, r, 1, &s1, &d[2], nv));
  fprintf(stderr, "  batched step, slots {3, 0, 5}: max |logit diff| / max |logit| = %.3g\n",
          worst);
  WD_CHECK(worst < 1e-3);
}

/* jfk.wav's samples: (*n) floats, malloc'd (NULL on failure, checked). */
static inline float *ec_jfk_pcm(size_t *n) {
  SF_INFO info = { 0 };
  SNDFILE *f = sf_open(wd_test_data("audio/jfk.wav"), SFM_READ, &info);
  WD_CHECK(f != NULL);
  float *pcm = f ? malloc(sizeof(float) * (size_t)info.frames) : NULL;
  if (pcm)
    WD_CHECK_EQ_INT(sf_readf_float(f, pcm, info.frames), info.frames);
  if (f)
    sf_close(f);
  *n = pcm ? (size_t)info.frames : 0;
  return pcm;
}

/* Model m's mel front end (checked; NULL on failure). */
static inline wd_mel_t *ec_mel_new(const wd_model_t *m) {
  int n_mel = 0, n_fft = 0;
  const float *filters = wd_model_mel_filters(m, &n_mel, &n_fft);
  wd_mel_t *mel = NULL;
  WD_CHECK_EQ_INT(wd_mel_new(n_mel, filters, &mel), 0);
  return mel;
}

/* jfk.wav's log-mel for model m: (n_mels, *frames), malloc'd (NULL on
 * failure, checked). */
static inline float *ec_jfk_mel(const wd_model_t *m, int *frames) {
  size_t n = 0;
  float *pcm = ec_jfk_pcm(&n);
  wd_mel_t *mel = ec_mel_new(m);
  float *out = NULL;
  if (pcm && mel)
    WD_CHECK_EQ_INT(wd_mel_compute(mel, pcm, n, 2, &out, frames), 0);
  wd_mel_free(mel);
  free(pcm);
  return out;
}

/* The 30 s window of mel (n_mels, frames; wd_mel_compute pads 30 s of
 * zeros) that starts `shift` frames in, as decode.c's extract_window makes
 * it: (n_mels, 3000), zero past the content; calloc'd, NULL on failure. */
static inline float *ec_window(const float *mel, int n_mels, int frames, int shift) {
  float *w = mel ? calloc((size_t)n_mels * 3000, sizeof *w) : NULL;
  const int content = frames - 3000 - shift;
  for (int b = 0; w && b < n_mels; b++)
    memcpy(w + (size_t)b * 3000, mel + (size_t)b * (size_t)frames + shift,
           (size_t)content * sizeof *w);
  return w;
}

/* A sequence's logits are bit-identical alone (n = 1) and beside others
 * (n = 2 .. max_seqs), whatever its row, slot and the companions' lengths
 * (tiny.en's token ids; the companions spread over the audio slots, which
 * must be encoded). */
static inline void ec_check_alone_and_batched(const wd_engine_t *v, int nv) {
  const int ms = v->max_seqs < 16 ? v->max_seqs : 16;
  enum { N_TOK = 6 };
  const int32_t a[N_TOK] = { 50257, 50363, 843, 523, 616, 5891 };
  const int32_t other[] = { 50257, 50363, 1265, 644, 345, 460, 466, 314, 1101, 383 };
  const size_t row = (size_t)nv * sizeof(float);
  float *alone = malloc(N_TOK * row);
  const float *lg = NULL;
  const int s0 = 0;
  WD_CHECK_EQ_INT(v->seq_reset(v->self, 0, 0), 0);
  for (int i = 0; alone && i < N_TOK; i++) {
    WD_CHECK_EQ_INT(v->step(v->self, 1, &s0, &a[i], &lg), 0);
    if (lg)
      memcpy(alone + (size_t)i * (size_t)nv, lg, row);
  }
  int n_rows = 0, n_same = 0;
  for (int n = 2; alone && n <= ms; n++) {
    const int ra = n / 2, sa = (n + 4) % ms;
    int seqs[16], comp[16], nc = 0;
    for (int s = ms - 1; s >= 0 && nc < n - 1; s--)
      if (s != sa)
        comp[nc++] = s;
    for (int s = 0; s < ms; s++)
      WD_CHECK_EQ_INT(v->seq_reset(v->self, s, s == sa ? 0 : s % v->max_audio), 0);
    for (int i = 0; i < 2; i++) {
      int32_t tk[16];
      for (int k = 0; k < nc; k++)
        tk[k] = other[(i + k) % 10];
      WD_CHECK_EQ_INT(v->step(v->self, nc, comp, tk, &lg), 0);
    }
    for (int k = 0, j = 0; k < n; k++)
      seqs[k] = k == ra ? sa : comp[j++];
    int same = 0;
    for (int i = 0; i < N_TOK; i++) {
      int32_t tk[16];
      for (int k = 0; k < n; k++)
        tk[k] = k == ra ? a[i] : other[(i + k + 2) % 10];
      lg = NULL;
      WD_CHECK_EQ_INT(v->step(v->self, n, seqs, tk, &lg), 0);
      if (!lg)
        break;
      same += memcmp(lg + (size_t)ra * (size_t)nv, alone + (size_t)i * (size_t)nv, row) == 0;
    }
    n_rows += N_TOK;
    n_same += same;
  }
  fprintf(stderr, "  %d of %d batched rows bit-identical to the row alone\n", n_same, n_rows);
  WD_CHECK_EQ_INT(n_same, n_rows);
  free(alone);
}


/* jfk.wav through the whole decoding policy (greedy, timestamps) on engine
 * e: the text and segment times openai/whisper gives on tiny.en. Returns 1
 * when it decoded (the caller then prints its engine's figures). */
static inline int ec_check_jfk_transcribed(const wd_engine_t *e, const wd_model_t *m) {
  wd_tokenizer_t *tok = NULL;
  WD_CHECK_EQ_INT(wd_model_tokenizer_new(m, &tok), 0);
  size_t n = 0;
  float *pcm = ec_jfk_pcm(&n);
  wd_mel_t *mel = ec_mel_new(m);
  if (!tok || !pcm || !mel) {
    wd_tokenizer_free(tok);
    free(pcm);
    wd_mel_free(mel);
    return 0;
  }
  wd_decode_opts_t o;
  wd_decode_opts_default(&o);
  wd_transcript_t tr;
  const int rc = wd_test_transcribe(e, tok, mel, pcm, n, &o, &tr);
  free(pcm);
  wd_mel_free(mel);
  WD_CHECK_EQ_INT(rc, 0);
  if (rc == 0) {
    char *s = NULL;
    if (wd_render(&tr, WD_FMT_SEGMENTS, NULL, &s) == 0)
      fprintf(stderr, "%s", s);
    free(s);
    WD_CHECK_EQ_STR(tr.text, " And so my fellow Americans ask not what your country can do for "
                             "you ask what you can do for your country");
    WD_CHECK_EQ_INT(tr.n_segments, 2);
    if (tr.n_segments == 2) {
      WD_CHECK_NEAR(tr.segments[0].start, 0.00, 0.02);
      WD_CHECK_NEAR(tr.segments[0].end, 7.74, 0.1);
      WD_CHECK_NEAR(tr.segments[1].end, 10.74, 0.1);
    }
    wd_transcript_free(&tr);
  }
  wd_tokenizer_free(tok);
  return rc == 0;
}

#endif
