/*
 * test_engine.c - the Vulkan engine against the plain-C reference on the
 * real tiny.en weights and real speech (jfk.wav): encoder output, per-step
 * logits, and the whole transcription through the decoding policy.
 */
#include <dlfcn.h>
#include <math.h>
#include <sndfile.h>
#include <stdlib.h>

#include "decode.h"
#include "error.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "ref_engine.h"
#include "render.h"
#include "vk_engine.h"
#include "wd_test.h"

static wd_model_t *g_model;
static wd_vk_engine_t *g_eng;
static wd_ref_engine_t *g_ref;
static float *g_mel;   /* (n_mels, n_frames) of jfk.wav */
static int g_frames;

WD_TEST(setup) {
  char err[256] = "";
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &g_model, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  const wd_vk_engine_opts_t o = { .device = -1, .max_seqs = 2, .max_audio = 1 };
  /* Keep lavapipe mapped after vkDestroyInstance so LeakSanitizer can name
   * (and tests/lsan.supp suppress) the driver's own exit-time leaks. */
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  int rc = wd_vk_engine_new(g_model, &o, &g_eng, err, sizeof err);
  if (rc == WD_ENODEVICE)
    wd_test_skip("no Vulkan device");
  if (rc < 0)
    fprintf(stderr, "engine: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  WD_CHECK_EQ_INT(wd_ref_engine_new(g_model, 2, 1, &g_ref), 0);
  /* jfk.wav is 16 kHz mono s16: libsndfile reads it directly. */
  SF_INFO info = { 0 };
  SNDFILE *f = sf_open(wd_test_data("audio/jfk.wav"), SFM_READ, &info);
  WD_CHECK(f != NULL);
  float *pcm = f ? malloc(sizeof(float) * (size_t)info.frames) : NULL;
  if (pcm)
    WD_CHECK_EQ_INT(sf_readf_float(f, pcm, info.frames), info.frames);
  if (f)
    sf_close(f);
  int n_mel = 0, n_fft = 0;
  const float *filters = wd_model_mel_filters(g_model, &n_mel, &n_fft);
  wd_mel_t *mel = NULL;
  WD_CHECK_EQ_INT(wd_mel_new(n_mel, filters, &mel), 0);
  if (pcm && mel)
    WD_CHECK_EQ_INT(wd_mel_compute(mel, pcm, (size_t)info.frames, 2, &g_mel, &g_frames), 0);
  wd_mel_free(mel);
  free(pcm);
}

/* The first 30 s window of the mel, as decode.c's extract_window makes it. */
static float *first_window(void) {
  const int nm = wd_model_hparams(g_model)->n_mels;
  float *w = calloc((size_t)nm * 3000, sizeof *w);
  const int content = g_frames - 3000;
  for (int b = 0; w && b < nm; b++)
    memcpy(w + (size_t)b * 3000, g_mel + (size_t)b * (size_t)g_frames,
           (size_t)content * sizeof *w);
  return w;
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
  const wd_engine_t *v = wd_vk_engine_iface(g_eng), *r = wd_ref_engine_iface(g_ref);
  const int32_t toks[] = { 50257, 50363, 843, 523, 616, 5891 };
  const int nv = wd_model_hparams(g_model)->n_vocab;
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
    double max_ref = 0, max_d = 0;
    int am_v = 0, am_r = 0;
    for (int k = 0; k < nv; k++) {
      if (fabs(lr[k]) > max_ref)
        max_ref = fabs(lr[k]);
      const double dd = fabs((double)lv[k] - lr[k]);
      if (!(dd <= max_d))
        max_d = dd;
      if (lv[k] > lv[am_v])
        am_v = k;
      if (lr[k] > lr[am_r])
        am_r = k;
    }
    const double rel = max_d / max_ref;
    if (!(rel <= worst))
      worst = rel;
    WD_CHECK_EQ_INT(am_v, am_r);
  }
  fprintf(stderr, "  decoder step: max |logit diff| / max |logit| = %.3g\n", worst);
  WD_CHECK(worst < 1e-3);
  /* Misuse is an error, never a crash. */
  const int s1 = 1, s0 = 0;
  const int32_t bad = 999999;
  const float *lg = NULL;
  WD_CHECK_EQ_INT(v->step(v->self, 1, &s1, &toks[0], &lg), WD_EUNSUP);
  WD_CHECK_EQ_INT(v->step(v->self, 1, &s0, &bad, &lg), WD_EINVAL);
  WD_CHECK_EQ_INT(v->encode(v->self, 5, NULL), WD_EINVAL);
}

/* Two sequences in one batched step (batch row b = slot b), each against
 * the reference run on its own: the batching the worker will rely on. */
WD_TEST(batched_step_matches_reference_per_sequence) {
  if (!g_eng || !g_ref)
    wd_test_skip("setup failed");
  const wd_engine_t *v = wd_vk_engine_iface(g_eng), *r = wd_ref_engine_iface(g_ref);
  const int nv = wd_model_hparams(g_model)->n_vocab;
  /* Different lengths too: sequence 1 starts two tokens late. */
  const int32_t a[] = { 50257, 50363, 843, 523, 616 };
  const int32_t b[] = { 50257, 50363, 1265, 644, 345, 460, 466 };
  WD_CHECK_EQ_INT(v->seq_reset(v->self, 0, 0), 0);
  WD_CHECK_EQ_INT(v->seq_reset(v->self, 1, 0), 0);
  const int seqs[2] = { 0, 1 };
  const float *lv = NULL, *lr = NULL;
  /* Sequence 1 alone first would need slot 1 in row 0: instead feed b's
   * first two tokens to both, then restart slot 0 with a. */
  for (int i = 0; i < 2; i++) {
    const int32_t t2[2] = { b[i], b[i] };
    WD_CHECK_EQ_INT(v->step(v->self, 2, seqs, t2, &lv), 0);
  }
  WD_CHECK_EQ_INT(v->seq_reset(v->self, 0, 0), 0);
  double worst = 0;
  for (int i = 0; i < 5; i++) {
    const int32_t t2[2] = { a[i], b[i + 2] };
    WD_CHECK_EQ_INT(v->step(v->self, 2, seqs, t2, &lv), 0);
    if (!lv)
      break;
    float *got = malloc(2 * (size_t)nv * sizeof *got);
    memcpy(got, lv, 2 * (size_t)nv * sizeof *got);
    /* Reference for row 0: a[0..i]; for row 1: b[0..i+2]. */
    for (int row = 0; row < 2; row++) {
      const int32_t *toks = row ? b : a;
      const int n = row ? i + 3 : i + 1;
      const int s0 = 0;
      WD_CHECK_EQ_INT(r->seq_reset(r->self, 0, 0), 0);
      for (int k = 0; k < n; k++)
        WD_CHECK_EQ_INT(r->step(r->self, 1, &s0, &toks[k], &lr), 0);
      double max_ref = 0, max_d = 0;
      for (int k = 0; lr && k < nv; k++) {
        const double dd = fabs((double)got[(size_t)row * (size_t)nv + (size_t)k] - lr[k]);
        if (fabs(lr[k]) > max_ref)
          max_ref = fabs(lr[k]);
        if (!(dd <= max_d))
          max_d = dd;
      }
      if (!(max_d / max_ref <= worst))
        worst = max_d / max_ref;
    }
    free(got);
  }
  fprintf(stderr, "  batched step (B = 2): max |logit diff| / max |logit| = %.3g\n", worst);
  WD_CHECK(worst < 1e-3);
}

WD_TEST(jfk_transcribed) {
  if (!g_eng || !g_mel)
    wd_test_skip("setup failed");
  wd_tokenizer_t *tok = NULL;
  WD_CHECK_EQ_INT(wd_model_tokenizer_new(g_model, &tok), 0);
  wd_decode_opts_t o;
  wd_decode_opts_default(&o);
  wd_transcript_t tr;
  int rc = wd_decode_transcribe(wd_vk_engine_iface(g_eng), tok, g_mel, g_frames, &o, &tr);
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
    wd_vk_engine_stats_t st;
    wd_vk_engine_stats(g_eng, &st);
    fprintf(stderr, "  encoder %.1f ms, cross K/V %.1f ms, step %.2f ms (%u dispatches), %llu steps\n",
            st.encode_ms, st.cross_ms, st.step_ms, st.step_dispatches, st.n_steps);
    wd_transcript_free(&tr);
  }
  wd_tokenizer_free(tok);
}

WD_TEST(teardown) {
  wd_vk_engine_free(g_eng);
  wd_ref_engine_free(g_ref);
  wd_model_free(g_model);
  free(g_mel);
}

int main(void) { return wd_test_main(); }
