/*
 * test_engine_ops.c - the Vulkan engine's optional operations (core/engine.h)
 * on the real tiny.en weights and real speech (jfk.wav):
 *   prefill  against step() (the Vulkan engine's and the reference's) for
 *            prompt lengths on both paths (up to max_seqs: the step
 *            recordings, bit for bit; above: the GEMM recordings of 16 ..
 *            256 rows, at and just past a bucket edge), steps after a
 *            prefill, other slots untouched, refused misuse;
 *   seq_copy the semantics of tests/wd_engine_check.h, bit for bit;
 *   align    scores and probabilities against the reference engine's align
 *            (itself checked against a full pass in test_ref_engine.c) and
 *            the probabilities against softmaxed step() logits, heads split
 *            over several submits, slots untouched, refused misuse.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "mel.h"
#include "model.h"
#include "ref_engine.h"
#include "vk_engine.h"
#include "wd_engine_check.h"
#include "wd_test.h"

#define MAX_SEQS 5 /* prompts of 1 .. 5 tokens replay the step recordings */
#define N_TOK 230
#define EOT 50256 /* tiny.en: <|endoftext|>, n_text of openai's timing.py */

static wd_model_t *g_model;
static wd_vk_engine_t *g_eng;
static wd_ref_engine_t *g_ref;
static const wd_engine_t *g_v, *g_r;
static int g_nv;
static int32_t g_tok[N_TOK]; /* <|startoftranscript|> <|0.00|> then text tokens */

/* The first 30 s window of jfk.wav's mel (n_mels, 3000), malloc'd; with
 * shift, the window starts that many frames later (a second window). */
static float *jfk_window(int shift) {
  int frames = 0;
  float *spec = ec_jfk_mel(g_model, &frames);
  float *w = ec_window(spec, wd_model_hparams(g_model)->n_mels, frames, shift);
  free(spec);
  return w;
}

/* The engine's KV caches: f32 (what it uses wherever they fit), with the
 * tolerances against the reference at 1e-4; WD_TEST_KV_F16=1 (the ctest
 * gpu_test_engine_ops_f16, tests/gpu_kv.cmake) runs every check on the f16
 * caches it takes when f32 ones do not fit, within 1e-3 (f16 keys and
 * values move the scores by a few 1e-4). */
static wd_vk_kv_type_t g_kv = WD_VK_KV_F32;
static double g_tol = 1e-4;

WD_TEST(setup) {
  char err[256] = "";
  const char *f16 = getenv("WD_TEST_KV_F16");
  if (f16 && strcmp(f16, "1") == 0)
    g_kv = WD_VK_KV_F16, g_tol = 1e-3;
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &g_model, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  /* Audio slots 0 and 1 hold two windows; slot 2 is never encoded. */
  const wd_vk_engine_opts_t o = { .device = -1, .max_seqs = MAX_SEQS, .max_audio = 3,
                                  .kv = g_kv,
                                  /* the f32 kernels (test_engine_matrix.c: the matrix units) */
                                  .exact = true };
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE); /* see test_engine.c */
  int rc = wd_vk_engine_new(g_model, &o, &g_eng, err, sizeof err);
  if (rc == WD_ENODEVICE)
    wd_test_skip("no Vulkan device");
  if (rc < 0)
    fprintf(stderr, "engine: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  WD_CHECK_EQ_INT(wd_ref_engine_new(g_model, MAX_SEQS, 1, &g_ref), 0);
  if (!g_eng || !g_ref)
    return;
  g_v = wd_vk_engine_iface(g_eng);
  g_r = wd_ref_engine_iface(g_ref);
  g_nv = g_v->n_vocab;
  WD_CHECK_EQ_INT(g_v->max_prefill, 256);
  WD_CHECK_EQ_INT(g_v->n_audio_ctx, 1500);
  WD_CHECK(g_v->prefill && g_v->seq_copy && g_v->align);
  float *w0 = jfk_window(0), *w1 = jfk_window(300);
  WD_CHECK(w0 && w1);
  if (w0 && w1) {
    WD_CHECK_EQ_INT(g_v->encode(g_v->self, 0, w0), 0);
    WD_CHECK_EQ_INT(g_v->encode(g_v->self, 1, w1), 0);
    WD_CHECK_EQ_INT(g_r->encode(g_r->self, 0, w0), 0);
  }
  free(w0);
  free(w1);
  g_tok[0] = 50257;
  g_tok[1] = 50363;
  for (int i = 2; i < N_TOK; i++)
    g_tok[i] = 200 + (int32_t)(((unsigned)i * 7919u) % 20000u);
  wd_vk_engine_stats_t st;
  wd_vk_engine_stats(g_eng, &st);
  fprintf(stderr, "  %.1f MiB on the device (max_seqs %d, 3 audio slots)\n", st.device_mib,
          MAX_SEQS);
}

/* max |a - b| / max |b| over one logits row. */
static double rel_diff(const float *a, const float *b) { return ec_rel_diff(a, b, (size_t)g_nv); }

/* Logits of n steps of tokens[0..n) on slot s of e (reset to audio 0): (n, n_vocab). */
static float *steps(const wd_engine_t *e, int s, const int32_t *tokens, int n) {
  const size_t row = (size_t)g_nv;
  float *out = malloc((size_t)n * row * sizeof *out);
  WD_CHECK_EQ_INT(e->seq_reset(e->self, s, 0), 0);
  for (int i = 0; out && i < n; i++) {
    const float *lg = NULL;
    WD_CHECK_EQ_INT(e->step(e->self, 1, &s, &tokens[i], &lg), 0);
    if (!lg) {
      free(out);
      return NULL;
    }
    memcpy(out + (size_t)i * row, lg, row * sizeof *out);
  }
  return out;
}

/* Prefill of k tokens equals the k-th step's logits: bit for bit up to
 * max_seqs tokens (the same recordings), within 1e-4 of the largest logit
 * above (GEMM instead of GEMV); against the reference as the step path is
 * (test_engine.c). Then three steps continue as after k steps. */
WD_TEST(prefill_matches_steps) {
  if (!g_v || !g_r)
    wd_test_skip("setup failed");
  float *vs = steps(g_v, 1, g_tok, N_TOK), *rs = steps(g_r, 1, g_tok, N_TOK);
  WD_CHECK(vs && rs);
  if (!vs || !rs)
    goto out;
  static const int ks[] = { 1, 3, 5, 6, 16, 17, 40, 227 };
  const size_t row = (size_t)g_nv;
  double worst_v = 0, worst_r = 0;
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    const int k = ks[t], s = 0;
    const float *lg = NULL;
    WD_CHECK_EQ_INT(g_v->seq_reset(g_v->self, s, 0), 0);
    WD_CHECK_EQ_INT(g_v->prefill(g_v->self, s, k, g_tok, &lg), 0);
    if (!lg)
      continue;
    const float *want = vs + (size_t)(k - 1) * row;
    const double dv = rel_diff(lg, want), dr = rel_diff(lg, rs + (size_t)(k - 1) * row);
    const int same = memcmp(lg, want, row * sizeof *lg) == 0;
    wd_vk_engine_stats_t st;
    wd_vk_engine_stats(g_eng, &st);
    fprintf(stderr, "  prefill %3d: vs steps %.3g%s, vs reference %.3g (%.1f ms)\n", k, dv,
            same ? " (bit-identical)" : "", dr, st.prefill_ms);
    if (k <= MAX_SEQS)
      WD_CHECK(same);
    worst_v = fmax(worst_v, dv);
    worst_r = fmax(worst_r, dr);
    /* Steps after the prefill. */
    if (k == 5 || k == 17 || k == 227)
      for (int i = k; i < k + 3; i++) {
        WD_CHECK_EQ_INT(g_v->step(g_v->self, 1, &s, &g_tok[i], &lg), 0);
        if (!lg)
          break;
        const double d = rel_diff(lg, vs + (size_t)i * row);
        if (k <= MAX_SEQS)
          WD_CHECK(memcmp(lg, vs + (size_t)i * row, row * sizeof *lg) == 0);
        worst_v = fmax(worst_v, d);
      }
  }
  fprintf(stderr, "  worst: vs steps %.3g, vs reference %.3g\n", worst_v, worst_r);
  WD_CHECK(worst_v < g_tol);
  WD_CHECK(worst_r < g_tol);
out:
  free(vs);
  free(rs);
}

/* A prefill touches its own slot only: slot 2's next step is bit for bit
 * what it is without the prefills into slots 0 and 3 (GEMM and step paths). */
WD_TEST(prefill_leaves_other_slots_alone) {
  if (!g_v)
    wd_test_skip("setup failed");
  const size_t row = (size_t)g_nv * sizeof(float);
  const int s2 = 2;
  const int32_t next = 290;
  float *want = malloc(row);
  const float *lg = NULL;
  for (int pass = 0; pass < 2 && want; pass++) {
    WD_CHECK_EQ_INT(g_v->seq_reset(g_v->self, 2, 0), 0);
    for (int i = 0; i < 4; i++)
      WD_CHECK_EQ_INT(g_v->step(g_v->self, 1, &s2, &g_tok[i], &lg), 0);
    if (pass == 1) {
      WD_CHECK_EQ_INT(g_v->seq_reset(g_v->self, 0, 0), 0);
      WD_CHECK_EQ_INT(g_v->prefill(g_v->self, 0, 40, g_tok + 10, &lg), 0);
      WD_CHECK_EQ_INT(g_v->seq_reset(g_v->self, 3, 1), 0);
      WD_CHECK_EQ_INT(g_v->prefill(g_v->self, 3, 3, g_tok + 60, &lg), 0);
    }
    lg = NULL;
    WD_CHECK_EQ_INT(g_v->step(g_v->self, 1, &s2, &next, &lg), 0);
    if (lg && pass == 0)
      memcpy(want, lg, row);
    if (lg && pass == 1)
      WD_CHECK(memcmp(want, lg, row) == 0);
  }
  free(want);
}

WD_TEST(prefill_refuses_misuse) {
  if (!g_v)
    wd_test_skip("setup failed");
  const wd_engine_t *v = g_v;
  const int32_t bad = 99999, neg = -1;
  const float *lg = NULL;
  ec_hist_t h;
  ec_build(v, 0, 0, g_tok, 4, &h);
  WD_CHECK_EQ_INT(v->prefill(v->self, 0, 0, g_tok, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, 0, 257, g_tok, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, -1, 3, g_tok, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, MAX_SEQS, 3, g_tok, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, 0, 1, &bad, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, 0, 1, &neg, &lg), WD_EINVAL);
  int32_t some_bad[20];
  memcpy(some_bad, g_tok, sizeof some_bad);
  some_bad[19] = bad;
  WD_CHECK_EQ_INT(v->prefill(v->self, 0, 20, some_bad, &lg), WD_EINVAL);
  /* An audio slot that holds no window. */
  WD_CHECK_EQ_INT(v->seq_reset(v->self, 1, 2), 0);
  WD_CHECK_EQ_INT(v->prefill(v->self, 1, 3, g_tok, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, 1, 30, g_tok, &lg), WD_EINVAL);
  /* Past n_text_ctx: 227 + 222 > 448 is refused, 227 + 221 = 448 fills it. */
  WD_CHECK_EQ_INT(v->seq_reset(v->self, 3, 0), 0);
  WD_CHECK_EQ_INT(v->prefill(v->self, 3, 227, g_tok, &lg), 0);
  WD_CHECK_EQ_INT(v->prefill(v->self, 3, 222, g_tok, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, 3, 221, g_tok, &lg), 0);
  WD_CHECK_EQ_INT(v->step(v->self, 1, (const int[]){ 3 }, g_tok, &lg), WD_EINVAL);
  /* Slot 0 saw none of it. */
  WD_CHECK(ec_same(v, 0, &h, 290, 4));
}

WD_TEST(seq_copy_semantics) {
  if (!g_v)
    wd_test_skip("setup failed");
  ec_check_seq_copy(g_v, 0, 1);
  wd_vk_engine_stats_t st;
  wd_vk_engine_stats(g_eng, &st);
  fprintf(stderr, "  last seq_copy: %.2f ms\n", st.copy_ms);
}

/* A copy of a prefilled slot (GEMM path) continues exactly as its source:
 * both in one batch with the same tokens give equal rows. */
WD_TEST(seq_copy_after_prefill) {
  if (!g_v)
    wd_test_skip("setup failed");
  const float *lg = NULL;
  const int seqs[3] = { 2, 0, 4 };
  WD_CHECK_EQ_INT(g_v->seq_reset(g_v->self, 2, 1), 0);
  WD_CHECK_EQ_INT(g_v->prefill(g_v->self, 2, 40, g_tok, &lg), 0);
  WD_CHECK_EQ_INT(g_v->seq_copy(g_v->self, 2, (const int[]){ 4, 0 }, (const int[]){ 2, 2 }), 0);
  for (int i = 0; i < 3; i++) {
    const int32_t t[3] = { g_tok[40 + i], g_tok[40 + i], g_tok[40 + i] };
    lg = NULL;
    WD_CHECK_EQ_INT(g_v->step(g_v->self, 3, seqs, t, &lg), 0);
    const size_t row = (size_t)g_nv;
    WD_CHECK(lg && memcmp(lg, lg + row, row * sizeof *lg) == 0);
    WD_CHECK(lg && memcmp(lg, lg + 2 * row, row * sizeof *lg) == 0);
  }
}

/* Greedy tokens for jfk: <|startoftranscript|> <|notimestamps|> text... EOT. */
static int greedy(int32_t *toks, int max, float **ret_logits) {
  const size_t row = (size_t)g_nv;
  float *lgs = malloc((size_t)max * row * sizeof *lgs);
  const int s = 0;
  int n = 0;
  WD_CHECK_EQ_INT(g_v->seq_reset(g_v->self, s, 0), 0);
  toks[n++] = 50257;
  toks[n++] = 50362;
  for (int i = 0; lgs && i < max - 1; i++) {
    const float *lg = NULL;
    WD_CHECK_EQ_INT(g_v->step(g_v->self, 1, &s, &toks[i], &lg), 0);
    if (!lg)
      break;
    memcpy(lgs + (size_t)i * row, lg, row * sizeof *lgs);
    if (i + 1 < n)
      continue; /* still feeding the prompt */
    int am = 0;
    for (int v = 1; v < EOT + 1; v++) /* text tokens and EOT */
      if (lg[v] > lg[am])
        am = v;
    toks[n++] = am;
    if (am == EOT)
      break;
  }
  *ret_logits = lgs;
  return n;
}

/* Vulkan align against the reference align, for n at and past a bucket
 * edge (16, 17), the whole greedy transcript and a single token; the
 * probabilities also against softmax over [0, EOT) of the step() logits. */
WD_TEST(align_matches_reference) {
  if (!g_v || !g_r)
    wd_test_skip("setup failed");
  enum { H = 6, MAXT = 40 };
  const int heads[H][2] = { { 1, 0 }, { 2, 0 }, { 2, 5 }, { 3, 1 }, { 3, 4 }, { 0, 3 } };
  int32_t toks[MAXT];
  float *slg = NULL;
  const int n_all = greedy(toks, MAXT, &slg);
  fprintf(stderr, "  greedy: %d tokens, last %d\n", n_all, toks[n_all - 1]);
  WD_CHECK(n_all > 17 && toks[n_all - 1] == EOT);
  const size_t na = 1500;
  float *qv = malloc((size_t)H * MAXT * na * sizeof *qv);
  float *qr = malloc((size_t)H * MAXT * na * sizeof *qr);
  float pv[MAXT], pr[MAXT];
  WD_CHECK(qv && qr && slg);
  /* Slot 1 holds a sequence: align must leave it alone. */
  ec_hist_t h;
  ec_build(g_v, 1, 1, g_tok, 5, &h);
  const int ns[] = { 1, 16, 17, n_all };
  double worst_q = 0, worst_p = 0, worst_s = 0;
  for (size_t t = 0; qv && qr && slg && t < sizeof ns / sizeof ns[0]; t++) {
    const int n = ns[t];
    WD_CHECK_EQ_INT(g_v->align(g_v->self, 0, n, toks, EOT, H, heads, qv, pv), 0);
    WD_CHECK_EQ_INT(g_r->align(g_r->self, 0, n, toks, EOT, H, heads, qr, pr), 0);
    double max_ref = 0, max_d = 0;
    for (size_t i = 0; i < (size_t)H * (size_t)n * na; i++) {
      max_ref = fmax(max_ref, fabs(qr[i]));
      const double dd = fabs((double)qv[i] - qr[i]);
      if (!(dd <= max_d))
        max_d = dd;
    }
    double dp = 0, ds = 0;
    for (int i = 0; i < n - 1; i++) {
      if (!(fabs(pv[i] - pr[i]) <= dp))
        dp = fabs(pv[i] - pr[i]);
      const float *row = slg + (size_t)i * (size_t)g_nv;
      double mx = -INFINITY, sum = 0;
      for (int v = 0; v < EOT; v++)
        mx = fmax(mx, row[v]);
      for (int v = 0; v < EOT; v++)
        sum += exp(row[v] - mx);
      const double want = toks[i + 1] < EOT ? exp(row[toks[i + 1]] - mx) / sum : 0.0;
      if (!(fabs(pv[i] - want) <= ds))
        ds = fabs(pv[i] - want);
      WD_CHECK(pv[i] >= 0.0f && pv[i] <= 1.0f);
    }
    wd_vk_engine_stats_t st;
    wd_vk_engine_stats(g_eng, &st);
    fprintf(stderr,
            "  align %2d: qk max |diff| %.3g of %.3g; probs vs reference %.3g, vs steps %.3g "
            "(%.1f ms)\n",
            n, max_d, max_ref, dp, ds, st.align_ms);
    worst_q = fmax(worst_q, max_d / max_ref);
    worst_p = fmax(worst_p, dp);
    worst_s = fmax(worst_s, ds);
    if (n > 2)
      WD_CHECK(pv[0] == 0.0f); /* <|notimestamps|> is above EOT */
  }
  WD_CHECK(pv[n_all - 2] == 0.0f); /* EOT itself */
  WD_CHECK(worst_q < g_tol);
  WD_CHECK(worst_p < g_tol);
  WD_CHECK(worst_s < g_tol);
  WD_CHECK(ec_same(g_v, 1, &h, 290, 4));
  free(qv);
  free(qr);
  free(slg);
}

/* More heads than one submit holds (4 of 227 rows): every head's scores
 * equal, bit for bit, those of an align asking for it alone. */
WD_TEST(align_heads_over_several_submits) {
  if (!g_v)
    wd_test_skip("setup failed");
  enum { H = 24, N = 227 };
  int heads[H][2];
  for (int i = 0; i < H; i++)
    heads[i][0] = i / 6, heads[i][1] = (i * 5) % 6; /* every head, out of order */
  const size_t plane = (size_t)N * 1500;
  float *all = malloc((size_t)H * plane * sizeof *all), *one = malloc(plane * sizeof *one);
  WD_CHECK(all && one);
  if (all && one)
    WD_CHECK_EQ_INT(g_v->align(g_v->self, 1, N, g_tok, EOT, H, (const int(*)[2])heads, all,
                               NULL),
                    0);
  static const int pick[] = { 0, 7, 8, 17, 23 };
  for (size_t t = 0; all && one && t < sizeof pick / sizeof pick[0]; t++) {
    const int k = pick[t];
    WD_CHECK_EQ_INT(
        g_v->align(g_v->self, 1, N, g_tok, EOT, 1, (const int(*)[2])&heads[k], one, NULL), 0);
    WD_CHECK(memcmp(one, all + (size_t)k * plane, plane * sizeof *one) == 0);
  }
  wd_vk_engine_stats_t st;
  wd_vk_engine_stats(g_eng, &st);
  fprintf(stderr, "  align of %d tokens, one head, no probabilities: %.1f ms\n", N,
          st.align_ms);
  free(all);
  free(one);
}

WD_TEST(align_refuses_misuse) {
  if (!g_v)
    wd_test_skip("setup failed");
  const wd_engine_t *v = g_v;
  const int hd[1][2] = { { 1, 0 } }, bad_l[1][2] = { { 4, 0 } }, bad_h[1][2] = { { 0, 6 } };
  const int neg[1][2] = { { 0, -1 } };
  float *qk = malloc(4 * 1500 * sizeof *qk), p[4];
  const int32_t bad_tok[4] = { 50257, 50362, 99999, 50256 };
  WD_CHECK(qk != NULL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, g_tok, EOT, 1, bad_l, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, g_tok, EOT, 1, bad_h, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, g_tok, EOT, 1, neg, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 2, 4, g_tok, EOT, 1, hd, qk, p), WD_EINVAL); /* not encoded */
  WD_CHECK_EQ_INT(v->align(v->self, 3, 4, g_tok, EOT, 1, hd, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, -1, 4, g_tok, EOT, 1, hd, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 0, g_tok, EOT, 1, hd, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 257, g_tok, EOT, 1, hd, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, bad_tok, EOT, 1, hd, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, g_tok, 0, 1, hd, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, g_tok, g_nv + 1, 1, hd, qk, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, g_tok, EOT, 1, hd, NULL, p), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, g_tok, EOT, -1, hd, qk, p), WD_EINVAL);
  /* No heads and no probabilities is a valid (empty) request. */
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, g_tok, EOT, 0, NULL, NULL, NULL), 0);
  free(qk);
}

WD_TEST(teardown) {
  wd_vk_engine_free(g_eng);
  wd_ref_engine_free(g_ref);
  wd_model_free(g_model);
}

int main(void) { return wd_test_main(); }
