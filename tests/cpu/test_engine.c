/*
 * test_engine.c - the CPU engine against the plain-C reference on the real
 * tiny.en weights and real speech (jfk.wav): encoder output, per-step
 * logits, batched steps whose rows use permuted slots, the bit identity of
 * a sequence's logits alone and batched, prefill, seq_copy (the shared
 * checks of tests/wd_engine_check.h), align, and the whole transcription
 * through the decoding policy. No GPU needed.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_engine.h"
#include "decode.h"
#include "error.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "ref_engine.h"
#include "render.h"
#include "wd_engine_check.h"
#include "wd_test.h"

#define MAX_SEQS 9 /* rows 1 .. 9: every row-block remainder of the GEMV (4 + 4 + 1) */

static wd_model_t *g_model;
static wd_cpu_engine_t *g_eng;
static wd_ref_engine_t *g_ref;
static float *g_mel; /* (n_mels, n_frames) of jfk.wav */
static int g_frames;
static float *g_w0, *g_w1; /* two windows: jfk, and jfk a second later */

/* A 30 s window of the mel starting at frame `from`, zero past the content
 * (as decode.c's extract_window makes it). */
static float *window(int from) {
  return ec_window(g_mel, wd_model_hparams(g_model)->n_mels, g_frames, from);
}

WD_TEST(setup) {
  char err[256] = "";
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &g_model, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  const wd_cpu_engine_opts_t o = { .max_seqs = MAX_SEQS, .max_audio = 2 };
  int rc = wd_cpu_engine_new(g_model, &o, &g_eng, err, sizeof err);
  if (rc < 0)
    fprintf(stderr, "engine: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  WD_CHECK_EQ_INT(wd_ref_engine_new(g_model, MAX_SEQS, 2, &g_ref), 0);
  g_mel = ec_jfk_mel(g_model, &g_frames);
  if (g_mel) {
    g_w0 = window(0);
    g_w1 = window(100);
  }
  WD_CHECK(g_w0 && g_w1);
}

WD_TEST(encoder_matches_reference) {
  if (!g_eng || !g_ref || !g_w0)
    wd_test_skip("setup failed");
  const wd_engine_t *v = wd_cpu_engine_iface(g_eng), *r = wd_ref_engine_iface(g_ref);
  const wd_hparams_t *hp = wd_model_hparams(g_model);
  const size_t n = (size_t)hp->n_audio_ctx * (size_t)hp->n_audio_state;
  float *got = malloc(n * sizeof *got);
  WD_CHECK_EQ_INT(v->encode(v->self, 1, g_w1), 0);
  WD_CHECK_EQ_INT(r->encode(r->self, 1, g_w1), 0);
  WD_CHECK_EQ_INT(v->encode(v->self, 0, g_w0), 0);
  WD_CHECK_EQ_INT(r->encode(r->self, 0, g_w0), 0);
  WD_CHECK_EQ_INT(wd_cpu_engine_read_encoded(g_eng, got), 0);
  const float *want = wd_ref_engine_encoded(g_ref, 0);
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    const double dlt = (double)got[i] - want[i];
    num += dlt * dlt;
    den += (double)want[i] * want[i];
  }
  const double rel = sqrt(num / den);
  wd_cpu_engine_stats_t st;
  wd_cpu_engine_stats(g_eng, &st);
  fprintf(stderr, "  encoder: relative RMS difference %.3g (%.0f ms + cross K/V %.0f ms, %d threads)\n",
          rel, st.encode_ms, st.cross_ms, st.n_threads);
  WD_CHECK(rel < 1e-3);
  WD_CHECK_EQ_INT(v->encode(v->self, 2, g_w0), WD_EINVAL);
  WD_CHECK_EQ_INT(v->encode(v->self, -1, g_w0), WD_EINVAL);
  free(got);
}

WD_TEST(step_logits_match_reference) {
  if (!g_eng || !g_ref)
    wd_test_skip("setup failed");
  ec_check_step_logits(wd_cpu_engine_iface(g_eng), wd_ref_engine_iface(g_ref),
                       wd_model_hparams(g_model)->n_vocab, MAX_SEQS, 2);
}

/* Rows on permuted, non-contiguous slots of different lengths, against the
 * reference stepping the same slots; slot 1 steps alone before and after. */
WD_TEST(batched_step_with_permuted_slots_matches_reference) {
  if (!g_eng || !g_ref)
    wd_test_skip("setup failed");
  /* slot 0 on audio slot 1: a second window is encoded by now */
  ec_check_batched_permuted(wd_cpu_engine_iface(g_eng), wd_ref_engine_iface(g_ref),
                            wd_model_hparams(g_model)->n_vocab, MAX_SEQS, 1);
}

/* A sequence's logits are bit-identical alone (n = 1) and beside others
 * (n = 2 .. 9), whatever its row, slot and the companions' lengths. */
WD_TEST(logits_bit_identical_alone_and_batched) {
  if (!g_eng)
    wd_test_skip("setup failed");
  ec_check_alone_and_batched(wd_cpu_engine_iface(g_eng), wd_model_hparams(g_model)->n_vocab);
}

/* prefill of n tokens: the logits of the last, against the reference's n
 * steps; then a step after it continues as after n steps. */
WD_TEST(prefill_matches_reference) {
  if (!g_eng || !g_ref)
    wd_test_skip("setup failed");
  const wd_engine_t *v = wd_cpu_engine_iface(g_eng), *r = wd_ref_engine_iface(g_ref);
  const int nv = wd_model_hparams(g_model)->n_vocab;
  int32_t toks[40];
  toks[0] = 50257, toks[1] = 50362;
  for (int i = 2; i < 40; i++)
    toks[i] = 200 + 37 * i;
  const int ns[] = { 1, 3, 40 };
  for (size_t t = 0; t < 3; t++) {
    const int n = ns[t], s = 2;
    const float *lv = NULL, *lr = NULL;
    WD_CHECK_EQ_INT(v->seq_reset(v->self, s, 0), 0);
    WD_CHECK_EQ_INT(r->seq_reset(r->self, s, 0), 0);
    WD_CHECK_EQ_INT(v->prefill(v->self, s, n, toks, &lv), 0);
    WD_CHECK_EQ_INT(r->prefill(r->self, s, n, toks, &lr), 0);
    const double d1 = lv && lr ? ec_rel_diff(lv, lr, (size_t)nv) : INFINITY;
    const int32_t next = 13;
    WD_CHECK_EQ_INT(v->step(v->self, 1, &s, &next, &lv), 0);
    WD_CHECK_EQ_INT(r->step(r->self, 1, &s, &next, &lr), 0);
    const double d2 = lv && lr ? ec_rel_diff(lv, lr, (size_t)nv) : INFINITY;
    fprintf(stderr, "  prefill %2d: %.3g, step after it %.3g\n", n, d1, d2);
    WD_CHECK(d1 < 1e-3 && d2 < 1e-3);
  }
  const float *lg = NULL;
  WD_CHECK_EQ_INT(v->prefill(v->self, 0, 0, toks, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, 0, 257, toks, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->prefill(v->self, MAX_SEQS, 1, toks, &lg), WD_EINVAL);
}

WD_TEST(seq_copy_semantics) {
  if (!g_eng)
    wd_test_skip("setup failed");
  ec_check_seq_copy(wd_cpu_engine_iface(g_eng), 0, 1);
}

/* align's scores and probabilities against the reference's align; a
 * sequence slot in use is left as it was. */
WD_TEST(align_matches_reference) {
  if (!g_eng || !g_ref)
    wd_test_skip("setup failed");
  const wd_engine_t *v = wd_cpu_engine_iface(g_eng), *r = wd_ref_engine_iface(g_ref);
  const int (*heads)[2] = NULL;
  int H = 0;
  WD_CHECK_EQ_INT(wd_model_alignment_heads(g_model, &heads, &H), 0);
  if (H == 0)
    return;
  enum { N = 12, EOT = 50256 };
  const int32_t toks[N] = { 50257, 50362, 843, 523, 616, 5891, 1265, 644, 345, 460, 466, 50256 };
  const size_t na = (size_t)wd_model_hparams(g_model)->n_audio_ctx;
  float *qv = calloc((size_t)H * N * na, sizeof *qv), *qr = calloc((size_t)H * N * na, sizeof *qr);
  float pv[N], pr[N];
  ec_hist_t h1;
  const int32_t keep[] = { 50257, 50363, 383 };
  ec_build(v, 1, 1, keep, 3, &h1);
  WD_CHECK_EQ_INT(v->align(v->self, 0, N, toks, EOT, H, heads, qv, pv), 0);
  WD_CHECK_EQ_INT(r->align(r->self, 0, N, toks, EOT, H, heads, qr, pr), 0);
  const double dq = ec_rel_diff(qv, qr, (size_t)H * N * na);
  double dp = 0;
  for (int i = 0; i < N - 1; i++)
    dp = fmax(dp, fabs((double)pv[i] - pr[i]));
  fprintf(stderr, "  align: qk %.3g of max |qk|, probs max |diff| %.3g\n", dq, dp);
  WD_CHECK(dq < 1e-3);
  WD_CHECK(dp < 1e-3);
  WD_CHECK(ec_same(v, 1, &h1, 290, 4));
  const int bad_l[1][2] = { { 99, 0 } };
  WD_CHECK_EQ_INT(v->align(v->self, 0, 4, toks, EOT, 1, bad_l, qv, pv), WD_EINVAL);
  WD_CHECK_EQ_INT(v->align(v->self, 0, 257, toks, EOT, 1, heads, qv, pv), WD_EINVAL);
  free(qv), free(qr);
}

WD_TEST(jfk_transcribed) {
  if (!g_eng || !g_mel)
    wd_test_skip("setup failed");
  if (ec_check_jfk_transcribed(wd_cpu_engine_iface(g_eng), g_model)) {
    wd_cpu_engine_stats_t st;
    wd_cpu_engine_stats(g_eng, &st);
    fprintf(stderr, "  encoder %.1f ms, cross K/V %.1f ms, step %.2f ms, %llu steps, %s, %d threads\n",
            st.encode_ms, st.cross_ms, st.step_ms, st.n_steps, st.kernel, st.n_threads);
  }
}

WD_TEST(plan_matches_allocation) {
  wd_cpu_engine_plan_t p;
  wd_cpu_engine_plan(g_model, &(wd_cpu_engine_opts_t){ .max_seqs = MAX_SEQS, .max_audio = 2 }, &p);
  wd_cpu_engine_stats_t st;
  wd_cpu_engine_stats(g_eng, &st);
  const double mib = 1024.0 * 1024.0;
  WD_CHECK(fabs(p.weight_bytes - st.weight_mib * mib) < 1.0);
  WD_CHECK(fabs(p.mapped_bytes - st.mapped_mib * mib) < 1.0);
  /* tiny.en (f16): every matrix stays f16 (70.5 MiB, the file's), nothing
   * is widened at load; single matrices are read in place, only the Q/K/V
   * and cross K/V stacks are copies (9 MiB). */
  WD_CHECK(p.mapped_bytes > 38 * mib && p.weight_bytes - p.mapped_bytes > 5 * mib &&
           p.weight_bytes - p.mapped_bytes < 12 * mib);
  WD_CHECK(p.weight_bytes < 72 * mib);
  WD_CHECK(fabs(p.self_bytes + p.cross_bytes + p.scratch_bytes - st.state_mib * mib) < 1.0);
  WD_CHECK_EQ_INT(p.n_self_bufs, MAX_SEQS + 2);
  WD_CHECK(p.weight_bytes > 50 * mib && p.weight_bytes < 200 * mib); /* tiny.en: 39 M params */
}

WD_TEST(teardown) {
  wd_cpu_engine_free(g_eng);
  wd_ref_engine_free(g_ref);
  wd_model_free(g_model);
  free(g_mel), free(g_w0), free(g_w1);
}

int main(void) { return wd_test_main(); }
