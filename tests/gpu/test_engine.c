/*
 * test_engine.c - the Vulkan engine against the plain-C reference on the
 * real tiny.en weights and real speech (jfk.wav): encoder output, per-step
 * logits, batched steps whose rows use permuted sequence slots, the bit
 * identity of a sequence's logits alone and batched, and the whole
 * transcription through the decoding policy.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "decode.h"
#include "error.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "ref_engine.h"
#include "render.h"
#include "vk_engine.h"
#include "wd_synth_model.h"
#include "wd_engine_check.h"
#include "wd_test.h"

#define MAX_SEQS 9 /* n = 9 runs the 16-row GEMV variant (gpu/vk_gemv.c) */

static wd_model_t *g_model;
static wd_vk_engine_t *g_eng;
static wd_ref_engine_t *g_ref;
static float *g_mel;   /* (n_mels, n_frames) of jfk.wav */
static int g_frames;

/* Weight types other than f16 (f32 and the block types) run too:
 * test_engine_types.c checks them against the reference on synthetic
 * models. */

WD_TEST(setup) {
  char err[256] = "";
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &g_model, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  const wd_vk_engine_opts_t o = { .device = -1, .max_seqs = MAX_SEQS, .max_audio = 1,
                                  /* the f32 kernels, held to the f32 reference; the
                                   * matrix units against them: test_engine_matrix.c */
                                  .exact = true };
  /* Keep lavapipe mapped after vkDestroyInstance so LeakSanitizer can name
   * (and tests/lsan.supp suppress) the driver's own exit-time leaks. */
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  int rc = wd_vk_engine_new(g_model, &o, &g_eng, err, sizeof err);
  if (rc == WD_ENODEVICE)
    wd_test_skip("no Vulkan device");
  if (rc < 0)
    fprintf(stderr, "engine: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  WD_CHECK_EQ_INT(wd_ref_engine_new(g_model, MAX_SEQS, 1, &g_ref), 0);
  g_mel = ec_jfk_mel(g_model, &g_frames);
}

/* The first 30 s window of the mel, as decode.c's extract_window makes it. */
static float *first_window(void) {
  return ec_window(g_mel, wd_model_hparams(g_model)->n_mels, g_frames, 0);
}

WD_TEST(encoder_matches_reference) {
  if (!g_eng || !g_ref || !g_mel)
    wd_test_skip("setup failed");
  const wd_engine_t *v = wd_vk_engine_iface(g_eng), *r = wd_ref_engine_iface(g_ref);
  float *w = first_window();
  WD_CHECK_EQ_INT(v->encode(v->self, 0, w), 0);
  WD_CHECK_EQ_INT(r->encode(r->self, 0, w), 0);
  const wd_hparams_t *hp = wd_model_hparams(g_model);
  const size_t n = (size_t)hp->n_audio_ctx * (size_t)hp->n_audio_state;
  float *got = malloc(n * sizeof *got);
  WD_CHECK_EQ_INT(wd_vk_engine_read_encoded(g_eng, got), 0);
  const float *want = wd_ref_engine_encoded(g_ref, 0);
  double num = 0, den = 0, max_abs = 0;
  for (size_t i = 0; i < n; i++) {
    const double dlt = (double)got[i] - want[i];
    num += dlt * dlt;
    den += (double)want[i] * want[i];
    if (!(fabs(dlt) <= max_abs))
      max_abs = fabs(dlt);
  }
  const double rel = sqrt(num / den);
  fprintf(stderr, "  encoder: relative RMS difference %.3g, max abs %.3g\n", rel, max_abs);
  WD_CHECK(rel < 1e-3); /* f16 weights on both sides, f32 math: a few 1e-5 expected */
  free(got);
  free(w);
}

WD_TEST(step_logits_match_reference) {
  if (!g_eng || !g_ref)
    wd_test_skip("setup failed");
  ec_check_step_logits(wd_vk_engine_iface(g_eng), wd_ref_engine_iface(g_ref),
                       wd_model_hparams(g_model)->n_vocab, MAX_SEQS, 1);
}

/* Rows on permuted slots against the reference (wd_engine_check.h). */
WD_TEST(batched_step_with_permuted_slots_matches_reference) {
  if (!g_eng || !g_ref)
    wd_test_skip("setup failed");
  ec_check_batched_permuted(wd_vk_engine_iface(g_eng), wd_ref_engine_iface(g_ref),
                            wd_model_hparams(g_model)->n_vocab, MAX_SEQS, 0);
}

/* One sequence's logits must be bit-identical whether it steps alone (n = 1)
 * or beside others (n = 2 .. 9, every GEMV batch variant: 1, 2, 4, 8, 16
 * rows), whatever its batch row and slot and the companions' lengths: the
 * server promises a job the same tokens and timestamps alone or batched. */
WD_TEST(logits_bit_identical_alone_and_batched) {
  if (!g_eng)
    wd_test_skip("setup failed");
  ec_check_alone_and_batched(wd_vk_engine_iface(g_eng), wd_model_hparams(g_model)->n_vocab);
}

WD_TEST(jfk_transcribed) {
  if (!g_eng || !g_mel)
    wd_test_skip("setup failed");
  if (ec_check_jfk_transcribed(wd_vk_engine_iface(g_eng), g_model)) {
    wd_vk_engine_stats_t st;
    wd_vk_engine_stats(g_eng, &st);
    fprintf(stderr, "  encoder %.1f ms, cross K/V %.1f ms, step %.2f ms (%u dispatches), %llu steps\n",
            st.encode_ms, st.cross_ms, st.step_ms, st.step_dispatches, st.n_steps);
  }
}

WD_TEST(teardown) {
  wd_vk_engine_free(g_eng);
  wd_ref_engine_free(g_ref);
  wd_model_free(g_model);
  free(g_mel);
}

int main(void) { return wd_test_main(); }
