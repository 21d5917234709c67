/*
 * test_engine_matrix.c - the Vulkan engine on the matrix units against the
 * same engine on its f32 kernels (--vk-precision f32), with the real
 * tiny.en weights and jfk.wav: the encoder's output, six decoder steps'
 * logits, and the whole greedy transcript, for the matrix GEMMs alone and
 * with the fused encoder attention (--vk-attn fused).
 *
 * The matrix units round every product's inputs to f16 and sum in f32
 * (the f32 path rounds nothing but the weights, stored f16); the bounds
 * below state what that costs here: the encoder's output within 0.5 % RMS
 * of the f32 path's, each step's logits within 0.5 % of the largest logit
 * with the same argmax, and openai's transcript unchanged, words and times.
 * Measured on lavapipe's 8x8x8 kernels (Debian sid, scripts/lvp-sid.sh,
 * 2026-11-28): encoder 5.7e-4, logits 3.8e-4 (fused attention: 5.6e-4 and
 * 4.2e-4), the transcript unchanged: the bounds leave ten times that.
 *
 * Where: a GPU with matrix units (AUTO takes them); a lavapipe that lists
 * VK_KHR_cooperative_matrix, through the kernels built for it (forced:
 * --vk-matrix khr --vk-gemm cm-64x64); elsewhere (Debian 12's lavapipe)
 * nothing to check.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "model.h"
#include "vk_engine.h"
#include "wd_engine_check.h"
#include "wd_test.h"

static wd_model_t *g_model;
static wd_vk_engine_t *g_exact, *g_mat[2]; /* [0] matrix GEMMs, [1] and fused attention */
static float *g_mel;
static int g_frames;

/* The matrix engine, AUTO where the device takes the matrix units, else
 * forced onto lavapipe's KHR kernels; NULL where neither runs them. */
static wd_vk_engine_t *matrix_engine(bool fused) {
  char err[256] = "";
  wd_vk_engine_t *e = NULL;
  wd_vk_engine_opts_t o = { .device = -1, .max_seqs = 2, .max_audio = 1, .attn_fused = fused };
  wd_vk_engine_stats_t st;
  if (wd_vk_engine_new(g_model, &o, &e, err, sizeof err) == 0) {
    wd_vk_engine_stats(e, &st);
    if (strncmp(st.gemm, "cm-", 3) == 0)
      return e;
    wd_vk_engine_free(e);
    e = NULL;
  }
  o.matrix = WD_VK_CM_WANT_KHR;
  o.gemm = WD_VK_GEMM_CM64;
  if (wd_vk_engine_new(g_model, &o, &e, err, sizeof err) < 0)
    return NULL;
  return e;
}

WD_TEST(setup) {
  char err[256] = "";
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &g_model, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE); /* see test_engine.c */
  const wd_vk_engine_opts_t o = { .device = -1, .max_seqs = 2, .max_audio = 1, .exact = true };
  const int rc = wd_vk_engine_new(g_model, &o, &g_exact, err, sizeof err);
  if (rc == WD_ENODEVICE)
    wd_test_skip("no Vulkan device");
  WD_CHECK_EQ_INT(rc, 0);
  g_mat[0] = matrix_engine(false);
  g_mat[1] = g_mat[0] ? matrix_engine(true) : NULL;
  g_mel = ec_jfk_mel(g_model, &g_frames);
  WD_CHECK(g_mel != NULL);
  if (g_mat[0]) {
    wd_vk_engine_stats_t st;
    wd_vk_engine_stats(g_mat[0], &st);
    fprintf(stderr, "  matrix engine on %s: %s, %s, %s\n", st.device_name, st.gemm, st.gemm_attn,
            st.gemm_rows);
  }
}

/* The encoder's output of engine e against the f32 path's: RMS of the
 * difference over RMS of the values. */
static double encoder_rel_rms(wd_vk_engine_t *e, const float *want, size_t n) {
  float *got = malloc(n * sizeof *got);
  double num = 0, den = 0;
  if (got && wd_vk_engine_read_encoded(e, got) == 0)
    for (size_t i = 0; i < n; i++) {
      const double d = (double)got[i] - want[i];
      num += d * d;
      den += (double)want[i] * want[i];
    }
  free(got);
  return den > 0 ? sqrt(num / den) : INFINITY;
}

WD_TEST(encoder_and_logits_within_bounds) {
  if (!g_exact || !g_mel)
    wd_test_skip("setup failed");
  if (!g_mat[0])
    wd_test_nothing_to_check("no matrix units, and no lavapipe with cooperative matrices");
  const wd_hparams_t *hp = wd_model_hparams(g_model);
  const size_t n = (size_t)hp->n_audio_ctx * (size_t)hp->n_audio_state;
  float *w = ec_window(g_mel, hp->n_mels, g_frames, 0), *want = malloc(n * sizeof *want);
  const wd_engine_t *x = wd_vk_engine_iface(g_exact);
  WD_CHECK_EQ_INT(x->encode(x->self, 0, w), 0);
  WD_CHECK_EQ_INT(wd_vk_engine_read_encoded(g_exact, want), 0);
  const int32_t toks[] = { 50257, 50363, 843, 523, 616, 5891 };
  for (int k = 0; k < 2 && g_mat[k]; k++) {
    const wd_engine_t *v = wd_vk_engine_iface(g_mat[k]);
    WD_CHECK_EQ_INT(v->encode(v->self, 0, w), 0);
    const double enc = encoder_rel_rms(g_mat[k], want, n);
    WD_CHECK_EQ_INT(v->seq_reset(v->self, 0, 0), 0);
    WD_CHECK_EQ_INT(x->seq_reset(x->self, 0, 0), 0);
    double worst = 0;
    int same = 1;
    for (int i = 0; i < 6; i++) {
      const int s0 = 0;
      const float *lv = NULL, *lx = NULL;
      WD_CHECK_EQ_INT(v->step(v->self, 1, &s0, &toks[i], &lv), 0);
      WD_CHECK_EQ_INT(x->step(x->self, 1, &s0, &toks[i], &lx), 0);
      if (!lv || !lx)
        break;
      worst = fmax(worst, ec_rel_diff(lv, lx, (size_t)hp->n_vocab));
      same &= ec_argmax(lv, hp->n_vocab) == ec_argmax(lx, hp->n_vocab);
    }
    fprintf(stderr, "  %s: encoder RMS difference %.3g of RMS; logits max |diff| %.3g of max "
            "|logit|, argmax %s\n", k ? "matrix GEMMs + fused attention" : "matrix GEMMs", enc,
            worst, same ? "the same" : "DIFFERS");
    WD_CHECK(enc < 5e-3);
    WD_CHECK(worst < 5e-3);
    WD_CHECK(same);
  }
  free(w);
  free(want);
}

WD_TEST(jfk_transcript_unchanged) {
  if (!g_exact || !g_mel)
    wd_test_skip("setup failed");
  if (!g_mat[0])
    wd_test_nothing_to_check("no matrix units, and no lavapipe with cooperative matrices");
  for (int k = 0; k < 2 && g_mat[k]; k++)
    ec_check_jfk_transcribed(wd_vk_engine_iface(g_mat[k]), g_model);
}

WD_TEST(teardown) {
  wd_vk_engine_free(g_mat[1]);
  wd_vk_engine_free(g_mat[0]);
  wd_vk_engine_free(g_exact);
  wd_model_free(g_model);
  free(g_mel);
}

int main(void) { return wd_test_main(); }
