/*
 * test_diar_campp.c - core/diar_campp.c against 3D-Speaker's CAM++ zh_en
 * common in PyTorch: tests/data/diar/make_campp_reference.py wrote the
 * trunk's first frames of jfk 0-3 s and the embeddings of jfk 0-3 s, jfk
 * 0-8 s, sample.wav 5-15 s, and sample.wav 5-15 s pooled with weights.
 * The features are ours (core/diar_fbank.c, tested against torchaudio's in
 * test_diar_fbank.c), so the figures below include the fbank's difference.
 * Needs models/diar-campplus-zh-en.safetensors
 * (scripts/fetch-diarization.sh); skips without it.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio.h"
#include "diar_campp.h"
#include "diar_fbank.h"
#include "error.h"
#include "vad_gemm.h"
#include "wd_test.h"

#define MODEL WD_SOURCE_DIR "/models/diar-campplus-zh-en.safetensors"
#define JFK WD_SOURCE_DIR "/tests/data/audio/jfk.wav"
#define SAMPLE WD_SOURCE_DIR "/tests/data/audio/diar/sample.wav"
#define GOLD_EMB WD_SOURCE_DIR "/tests/data/diar/campp_emb.f32"
#define GOLD_TRUNK WD_SOURCE_DIR "/tests/data/diar/trunk_jfk3s.f32"
#define N_EMB 4
#define TRUNK_ROWS 16

/* Bounds, with the measured figures in the test's output. */
#define TOL_TRUNK 1e-2 /* absolute, trunk values are ReLU outputs up to ~10 */
#define TOL_EMB 1e-2   /* absolute, embedding values up to ~2 */
#define MIN_COS 0.9999

static wd_campp_t *g_m;

static float *read_f32(const char *path, size_t n) {
  FILE *f = fopen(path, "rb");
  float *x = malloc(n * sizeof *x);
  if (!f || !x || fread(x, sizeof *x, n, f) != n) {
    free(x);
    x = NULL;
  }
  if (f)
    fclose(f);
  return x;
}

static float *read_clip(const char *path, double a, double b, size_t *ret_n) {
  int16_t *pcm = NULL;
  size_t n = 0;
  char err[256];
  if (wd_audio_decode_file(path, NULL, &pcm, &n, err, sizeof err) < 0) {
    fprintf(stderr, "  %s: %s\n", path, err);
    return NULL;
  }
  const size_t s = (size_t)(a * 16000), e = (size_t)(b * 16000) < n ? (size_t)(b * 16000) : n;
  float *x = malloc((e - s) * sizeof *x);
  for (size_t i = 0; x && i < e - s; i++)
    x[i] = (float)pcm[s + i] / 32768.0f;
  free(pcm);
  *ret_n = e - s;
  return x;
}

/* The trunk of a clip: *ret_To frames x 512 (caller frees). */
static float *trunk_of(const char *path, double a, double b, size_t *ret_To) {
  size_t n = 0;
  float *x = read_clip(path, a, b, &n), *feats = NULL, *hid = NULL;
  const size_t T = wd_diar_fbank_frames(n), To = wd_campp_frames(T);
  feats = malloc(T * WD_DIAR_FBANK_BINS * sizeof *feats);
  hid = malloc(To * WD_CAMPP_HIDDEN * sizeof *hid);
  if (!x || !feats || !hid || wd_diar_fbank(x, n, feats) || wd_campp_trunk(g_m, feats, T, hid)) {
    free(hid);
    hid = NULL;
  }
  free(x);
  free(feats);
  *ret_To = To;
  return hid;
}

static double max_diff(const float *a, const float *b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; i++)
    m = fmax(m, fabs((double)a[i] - b[i]));
  return m;
}

static double cosine(const float *a, const float *b, size_t n) {
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (size_t i = 0; i < n; i++)
    ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
  return ab / sqrt(aa * bb);
}

WD_TEST(setup) {
  char err[256] = "";
  FILE *f = fopen(MODEL, "rb");
  if (!f)
    wd_test_skip("models/diar-campplus-zh-en.safetensors not present (scripts/fetch-diarization.sh)");
  fclose(f);
  WD_CHECK_EQ_INT(wd_campp_load(MODEL, &g_m, err, sizeof err), 0);
  if (!g_m)
    fprintf(stderr, "  %s\n", err);
  fprintf(stderr, "  kernel: %s\n", wd_vad_gemm_kernel());
}

WD_TEST(frames) {
  WD_CHECK(wd_campp_frames(4) == 2);
  WD_CHECK(wd_campp_frames(298) == 149);
  WD_CHECK(wd_campp_frames(299) == 150);
  WD_CHECK(wd_campp_frames(998) == 499);
}

WD_TEST(golden) {
  if (!g_m)
    return;
  static const struct {
    const char *path;
    double a, b;
  } clips[3] = { { JFK, 0.0, 3.0 }, { JFK, 0.0, 8.0 }, { SAMPLE, 5.0, 15.0 } };
  float *gold = read_f32(GOLD_EMB, N_EMB * WD_CAMPP_EMB);
  float *gold_trunk = read_f32(GOLD_TRUNK, TRUNK_ROWS * WD_CAMPP_HIDDEN);
  WD_CHECK(gold && gold_trunk);
  if (!gold || !gold_trunk)
    goto out;
  float emb[N_EMB][WD_CAMPP_EMB];
  for (size_t i = 0; i < 3; i++) {
    size_t To = 0;
    float *hid = trunk_of(clips[i].path, clips[i].a, clips[i].b, &To);
    WD_CHECK(hid != NULL);
    if (!hid)
      continue;
    if (i == 0) {
      const double d = max_diff(hid, gold_trunk, TRUNK_ROWS * WD_CAMPP_HIDDEN);
      fprintf(stderr, "  trunk jfk 0-3 s, first %d frames: max |diff| %.3g\n", TRUNK_ROWS, d);
      WD_CHECK(d < TOL_TRUNK);
    }
    WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, NULL, emb[i]), 0);
    if (i == 2) {
      float *w = malloc(To * sizeof *w);
      for (size_t t = 0; w && t < To; t++)
        w[t] = (float)((7 * t) % 10) / 10.0f;
      WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, emb[3]), 0);
      free(w);
    }
    free(hid);
  }
  for (size_t i = 0; i < N_EMB; i++) {
    const double d = max_diff(emb[i], gold + i * WD_CAMPP_EMB, WD_CAMPP_EMB);
    const double c = cosine(emb[i], gold + i * WD_CAMPP_EMB, WD_CAMPP_EMB);
    fprintf(stderr, "  embedding %zu: max |diff| %.3g, cosine %.7f\n", i, d, c);
    WD_CHECK(d < TOL_EMB);
    WD_CHECK(c > MIN_COS);
  }
out:
  free(gold);
  free(gold_trunk);
}

int main(void) { return wd_test_main(); }
