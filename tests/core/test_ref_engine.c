/*
 * test_ref_engine.c - the incremental reference decoder (KV cache, cached
 * cross K/V) gives the same logits as the full causal decoder pass over the
 * whole sequence, on the real tiny.en weights. This pins the structure the
 * Vulkan engine copies. Its optional operations too: prefill is n steps,
 * seq_copy meets tests/wd_engine_check.h, and align's scores and
 * probabilities equal the full pass's (wd_ref_decode_qk), so the Vulkan
 * engine's align can be checked against it.
 */
#include <math.h>
#include <stdlib.h>

#include "error.h"
#include "model.h"
#include "ref_engine.h"
#include "whisper_ref.h"
#include "wd_engine_check.h"
#include "wd_test.h"

/* A smooth pseudo-spectrogram in [-0.6, 0.6], (n_mels, 3000), malloc'd. */
static float *pseudo_mel(int n_mels, uint32_t seed) {
  const size_t n_mel = (size_t)n_mels * 3000;
  float *mel = malloc(n_mel * sizeof *mel);
  uint32_t s = seed;
  for (size_t i = 0; mel && i < n_mel; i++) {
    s = s * 1664525u + 1013904223u;
    mel[i] = (float)(0.4 * sin((double)i * 0.001) + 0.2 * ((double)(s >> 8) / 16777216.0 - 0.5));
  }
  return mel;
}

WD_TEST(incremental_matches_full_pass) {
  wd_model_t *m = NULL;
  char err[256] = "";
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &m, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  const wd_hparams_t *hp = wd_model_hparams(m);
  wd_ref_engine_t *r = NULL;
  WD_CHECK_EQ_INT(wd_ref_engine_new(m, 2, 1, &r), 0);
  float *mel = pseudo_mel(hp->n_mels, 12345);
  const wd_engine_t *e = r ? wd_ref_engine_iface(r) : NULL;
  WD_CHECK(e && mel);
  if (!e || !mel)
    goto out;
  WD_CHECK_EQ_INT(e->encode(e->self, 0, mel), 0);
  /* <|startoftranscript|> <|0.00|> " And" " so" " my" */
  const int32_t toks[] = { 50257, 50363, 843, 523, 616 };
  const int n = 5, nv = hp->n_vocab;
  float *full = malloc((size_t)n * (size_t)nv * sizeof *full);
  WD_CHECK_EQ_INT(wd_ref_decode(m, wd_ref_engine_encoded(r, 0), toks, n, full), 0);
  WD_CHECK_EQ_INT(e->seq_reset(e->self, 1, 0), 0);
  double max_err = 0.0;
  for (int i = 0; i < n; i++) {
    const int seq = 1;
    const float *lg = NULL;
    WD_CHECK_EQ_INT(e->step(e->self, 1, &seq, &toks[i], &lg), 0);
    for (int v = 0; lg && v < nv; v++) {
      const double d = fabs((double)lg[v] - full[(size_t)i * (size_t)nv + (size_t)v]);
      if (!(d <= max_err))
        max_err = d; /* NaN sticks */
    }
  }
  fprintf(stderr, "  max |incremental - full| logit difference: %.3g\n", max_err);
  WD_CHECK(max_err < 1e-3);
  /* Out-of-range input is refused, not crashed on. */
  const int bad_seq = 7;
  const int32_t bad_tok = 99999;
  const float *lg = NULL;
  WD_CHECK_EQ_INT(e->step(e->self, 1, &bad_seq, &toks[0], &lg), WD_EINVAL);
  const int seq0 = 0;
  WD_CHECK_EQ_INT(e->step(e->self, 1, &seq0, &bad_tok, &lg), WD_EINVAL);
  free(full);
out:
  free(mel);
  wd_ref_engine_free(r);
  wd_model_free(m);
}

/* ---- the optional operations ------------------------------------------ */

#define OPS_SEQS 5

static wd_model_t *g_model;
static wd_ref_engine_t *g_ref;

WD_TEST(ops_setup) {
  char err[256] = "";
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &g_model, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  WD_CHECK_EQ_INT(wd_ref_engine_new(g_model, OPS_SEQS, 2, &g_ref), 0);
  if (!g_ref)
    return;
  const wd_engine_t *e = wd_ref_engine_iface(g_ref);
  WD_CHECK_EQ_INT(e->max_prefill, 256);
  WD_CHECK_EQ_INT(e->n_audio_ctx, wd_model_hparams(g_model)->n_audio_ctx);
  WD_CHECK(e->prefill && e->seq_copy && e->align);
  for (int a = 0; a < 2; a++) {
    float *mel = pseudo_mel(e->n_mels, a ? 777u : 12345u);
    WD_CHECK(mel != NULL);
    if (mel)
      WD_CHECK_EQ_INT(e->encode(e->self, a, mel), 0);
    free(mel);
  }
}

/* prefill is n steps of one slot: the same logits bit for bit, the same
 * state after; misuse is refused and changes nothing. */
WD_TEST(ref_prefill_is_steps) {
  if (!g_ref)
    wd_test_skip("setup failed");
  const wd_engine_t *e = wd_ref_engine_iface(g_ref);
  const int32_t toks[] = { 50257, 50363, 843, 523, 616, 5891, 1265 };
  const int n = 7, nv = e->n_vocab, s1 = 1;
  float *want = malloc((size_t)nv * sizeof *want);
  const float *lg = NULL;
  WD_CHECK_EQ_INT(e->seq_reset(e->self, 0, 1), 0);
  WD_CHECK_EQ_INT(e->seq_reset(e->self, 1, 1), 0);
  for (int i = 0; i < n; i++)
    WD_CHECK_EQ_INT(e->step(e->self, 1, &s1, &toks[i], &lg), 0);
  if (lg && want)
    memcpy(want, lg, (size_t)nv * sizeof *want);
  lg = NULL;
  WD_CHECK_EQ_INT(e->prefill(e->self, 0, n, toks, &lg), 0);
  WD_CHECK(lg && want && memcmp(lg, want, (size_t)nv * sizeof *want) == 0);
  /* Both continue alike. */
  ec_hist_t h = { .audio = 1, .n = n };
  memcpy(h.tok, toks, sizeof toks);
  WD_CHECK(ec_same(e, 0, &h, 290, 4));
  const int32_t bad = 99999, many[300] = { 0 };
  WD_CHECK_EQ_INT(e->prefill(e->self, 0, 0, toks, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(e->prefill(e->self, 0, 257, many, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(e->prefill(e->self, OPS_SEQS, 1, toks, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(e->prefill(e->self, -1, 1, toks, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(e->prefill(e->self, 0, 1, &bad, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(e->prefill(e->self, 0, 3, (const int32_t[]){ 220, bad, 11 }, &lg), WD_EINVAL);
  /* (Filling a slot past n_text_ctx takes 448 steps here: test_engine_ops.c
   * checks that refusal on the Vulkan engine, where it is fast.) */
  WD_CHECK(ec_same(e, 0, &h, 11, 4)); /* untouched by the refusals */
  free(want);
}

WD_TEST(ref_seq_copy) {
  if (!g_ref)
    wd_test_skip("setup failed");
  ec_check_seq_copy(wd_ref_engine_iface(g_ref), 0, 1);
}

/* align's scores and probabilities are the full causal pass's: the scores
 * kept by wd_ref_decode_qk, the probabilities a softmax of its logits over
 * [0, n_text) at the next token (0 where that token is n_text or above). */
WD_TEST(ref_align_matches_full_pass) {
  if (!g_ref)
    wd_test_skip("setup failed");
  const wd_engine_t *e = wd_ref_engine_iface(g_ref);
  /* <|startoftranscript|> <|notimestamps|> text... <|endoftext|> */
  const int32_t toks[] = { 50257, 50362, 843, 523, 616, 5891, 1265, 644, 345, 50256 };
  enum { N = 10, H = 5 };
  const int heads[H][2] = { { 0, 0 }, { 1, 3 }, { 3, 5 }, { 2, 1 }, { 3, 0 } };
  const int n_text = 50256, na = e->n_audio_ctx, nv = e->n_vocab;
  float *qk = malloc((size_t)H * N * (size_t)na * sizeof *qk);
  float *qk2 = malloc((size_t)H * N * (size_t)na * sizeof *qk2);
  float *full = malloc((size_t)N * (size_t)nv * sizeof *full);
  float probs[N - 1];
  WD_CHECK(qk && qk2 && full);
  if (!(qk && qk2 && full))
    goto out;
  /* Slot 0 holds a sequence; align must not touch it. */
  ec_hist_t h;
  ec_build(e, 0, 0, toks, 4, &h);
  WD_CHECK_EQ_INT(e->align(e->self, 1, N, toks, n_text, H, heads, qk, probs), 0);
  WD_CHECK(ec_same(e, 0, &h, 616, 4));
  WD_CHECK_EQ_INT(wd_ref_decode_qk(g_model, wd_ref_engine_encoded(g_ref, 1), toks, N, full, H,
                                   heads, qk2),
                  0);
  double max_ref = 0, max_d = 0;
  for (size_t i = 0; i < (size_t)H * N * (size_t)na; i++) {
    max_ref = fmax(max_ref, fabs(qk2[i]));
    const double dd = fabs((double)qk[i] - qk2[i]);
    if (!(dd <= max_d))
      max_d = dd;
  }
  fprintf(stderr, "  align qk: max |diff| %.3g of max |qk| %.3g\n", max_d, max_ref);
  WD_CHECK(max_ref > 1.0 && max_d / max_ref < 1e-4);
  double worst = 0;
  for (int i = 0; i < N - 1; i++) {
    const float *row = full + (size_t)i * (size_t)nv;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < n_text; v++)
      mx = fmax(mx, row[v]);
    for (int v = 0; v < n_text; v++)
      sum += exp(row[v] - mx);
    const double want = toks[i + 1] < n_text ? exp(row[toks[i + 1]] - mx) / sum : 0.0;
    if (!(fabs(probs[i] - want) <= worst))
      worst = fabs(probs[i] - want);
    WD_CHECK(probs[i] >= 0.0f && probs[i] <= 1.0f);
  }
  fprintf(stderr, "  align probs: max |diff| %.3g\n", worst);
  WD_CHECK(worst < 1e-5);
  WD_CHECK(probs[0] == 0.0f);     /* <|notimestamps|> is above n_text */
  WD_CHECK(probs[N - 2] == 0.0f); /* <|endoftext|> is n_text itself */
  /* Misuse is refused. */
  const int bad_l[1][2] = { { 4, 0 } }, bad_h[1][2] = { { 0, 6 } }, neg[1][2] = { { -1, 0 } };
  WD_CHECK_EQ_INT(e->align(e->self, 1, N, toks, n_text, 1, bad_l, qk, probs), WD_EINVAL);
  WD_CHECK_EQ_INT(e->align(e->self, 1, N, toks, n_text, 1, bad_h, qk, probs), WD_EINVAL);
  WD_CHECK_EQ_INT(e->align(e->self, 1, N, toks, n_text, 1, neg, qk, probs), WD_EINVAL);
  WD_CHECK_EQ_INT(e->align(e->self, 2, N, toks, n_text, H, heads, qk, probs), WD_EINVAL);
  WD_CHECK_EQ_INT(e->align(e->self, 1, 0, toks, n_text, H, heads, qk, probs), WD_EINVAL);
  WD_CHECK_EQ_INT(e->align(e->self, 1, 257, toks, n_text, H, heads, qk, probs), WD_EINVAL);
  WD_CHECK_EQ_INT(e->align(e->self, 1, N, toks, 0, H, heads, qk, probs), WD_EINVAL);
  WD_CHECK_EQ_INT(e->align(e->self, 1, N, toks, n_text, H, heads, NULL, probs), WD_EINVAL);
out:
  free(qk), free(qk2), free(full);
}

WD_TEST(ops_teardown) {
  wd_ref_engine_free(g_ref);
  wd_model_free(g_model);
}

int main(void) { return wd_test_main(); }
