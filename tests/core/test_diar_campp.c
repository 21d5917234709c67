/*
 * test_diar_campp.c - core/diar_campp.c against 3D-Speaker's CAM++ zh_en
 * common in PyTorch: tests/data/diar/make_campp_reference.py wrote the
 * trunk's first frames of jfk 0-3 s and the embeddings of jfk 0-3 s, jfk
 * 0-8 s, sample.wav 5-15 s, sample.wav 5-15 s pooled with weights, a clip
 * of an odd number of frames (149) and one of the fewest (4).
 * The features are ours (core/diar_fbank.c, tested against torchaudio's in
 * test_diar_fbank.c), so the figures below include the fbank's difference.
 * Needs models/diar-campplus-zh-en.safetensors
 * (scripts/fetch-diarization.sh); skips without it.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio.h"
#include "diar_campp.h"
#include "diar_fbank.h"
#include "error.h"
#include "diar_gemm.h"
#include "wd_diar_test.h"
#include "wd_test.h"

#define MODEL WD_SOURCE_DIR "/models/diar-campplus-zh-en.safetensors"
#define JFK WD_SOURCE_DIR "/tests/data/audio/jfk.wav"
#define SAMPLE WD_SOURCE_DIR "/tests/data/audio/diar/sample.wav"
#define GOLD_EMB WD_SOURCE_DIR "/tests/data/diar/campp_emb.f32"
#define GOLD_TRUNK WD_SOURCE_DIR "/tests/data/diar/trunk_jfk3s.f32"
#define N_EMB 6
#define TRUNK_ROWS 16

/* Bounds. Measured (x86-64 AVX2 kernel): trunk 3.3e-5 (values up to ~10);
 * embeddings 0.7e-5 to 2.3e-5 (values up to ~2), but 8.6e-5 for the 4-frame
 * clip (values up to ~5; its std pools 2 trunk frames); 1 - cosine < 2e-10.
 * The features are ours, 3e-3 from torch's in quiet bands
 * (test_diar_fbank.c); the rest is float32 summation order. A wrong layer
 * moves the embedding by 1e-1 or more. */
#define TOL_TRUNK 1e-3
#define TOL_EMB 5e-4
#define MIN_COS 0.999999

static wd_campp_t *g_m;

/* The trunk of samples [a, b) of a file: *ret_To frames x 512 (caller
 * frees). */
static float *trunk_of(const char *path, size_t a, size_t b, size_t *ret_To) {
  size_t n = 0;
  float *x = wd_diar_read_clip(path, a, b, &n), *feats = NULL, *hid = NULL;
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
  /* Clips in samples; embedding 3 is clip 2 pooled with weights. */
  static const struct {
    const char *path;
    size_t a, b, emb;
  } clips[5] = { { JFK, 0, 48000, 0 },        { JFK, 0, 128000, 1 },
                 { SAMPLE, 80000, 240000, 2 }, { JFK, 16000, 40125, 4 },
                 { JFK, 32000, 32880, 5 } };
  float *gold = wd_diar_read_f32(GOLD_EMB, N_EMB * WD_CAMPP_EMB);
  float *gold_trunk = wd_diar_read_f32(GOLD_TRUNK, TRUNK_ROWS * WD_CAMPP_HIDDEN);
  WD_CHECK(gold && gold_trunk);
  if (!gold || !gold_trunk)
    goto out;
  float emb[N_EMB][WD_CAMPP_EMB];
  for (size_t i = 0; i < 5; i++) {
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
    WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, NULL, emb[clips[i].emb]), 0);
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
    fprintf(stderr, "  embedding %zu: max |diff| %.3g, 1 - cosine %.2g\n", i, d, 1.0 - c);
    WD_CHECK(d < TOL_EMB);
    WD_CHECK(c > MIN_COS);
  }
out:
  free(gold);
  free(gold_trunk);
}

/* The portable kernels (arm64, x86 without AVX2: diar_gemm's and
 * diar_vec's) on the golden trunk: jfk 0-3 s, 0.1-0.3 s here. */
WD_TEST(portable_trunk) {
  if (!g_m)
    return;
  float *gold_trunk = wd_diar_read_f32(GOLD_TRUNK, TRUNK_ROWS * WD_CAMPP_HIDDEN);
  WD_CHECK(gold_trunk != NULL);
  wd_diar_gemm_force_portable(1);
  size_t To = 0;
  float *hid = gold_trunk ? trunk_of(JFK, 0, 48000, &To) : NULL;
  wd_diar_gemm_force_portable(0);
  WD_CHECK(hid != NULL);
  if (hid && gold_trunk) {
    const double d = max_diff(hid, gold_trunk, TRUNK_ROWS * WD_CAMPP_HIDDEN);
    fprintf(stderr, "  portable trunk jfk 0-3 s, first %d frames: max |diff| %.3g\n", TRUNK_ROWS,
            d);
    WD_CHECK(d < TOL_TRUNK);
  }
  free(hid);
  free(gold_trunk);
}

static double ms_since(const struct timespec *a) {
  struct timespec b;
  clock_gettime(CLOCK_MONOTONIC, &b);
  return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

/* Pooling: weights all 1 are the unweighted pooling; weights 0 and 1 pool
 * exactly the frames weighted 1 (the trunk itself is not separable: its
 * convolutions and the masks' context see every frame, so the trunk of a
 * part of a clip is not the part of the clip's trunk); scaling the weights
 * changes nothing; no weight, a negative or NaN one: WD_EINVAL. */
WD_TEST(pooling) {
  if (!g_m)
    return;
  size_t To = 0;
  float *hid = trunk_of(JFK, 0, 48000, &To);
  float *w = malloc(To * sizeof *w), *sel = malloc(To * WD_CAMPP_HIDDEN * sizeof *sel);
  WD_CHECK(hid && w && sel);
  if (!hid || !w || !sel)
    goto out;
  float e0[WD_CAMPP_EMB], e1[WD_CAMPP_EMB], e2[WD_CAMPP_EMB];
  for (size_t t = 0; t < To; t++)
    w[t] = 1.0f;
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, NULL, e0), 0);
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, e1), 0);
  WD_CHECK(memcmp(e0, e1, sizeof e0) == 0);

  size_t n_sel = 0;
  for (size_t t = 0; t < To; t++) {
    w[t] = (t % 3 == 1 || t > 120) ? 1.0f : 0.0f;
    if (w[t] > 0.0f)
      memcpy(sel + n_sel++ * WD_CAMPP_HIDDEN, hid + t * WD_CAMPP_HIDDEN,
             WD_CAMPP_HIDDEN * sizeof *sel);
  }
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, e1), 0);
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, sel, n_sel, NULL, e2), 0);
  WD_CHECK(memcmp(e1, e2, sizeof e1) == 0);

  for (size_t t = 0; t < To; t++)
    w[t] = 0.25f + (float)(t % 5) * 0.5f;
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, e1), 0);
  for (size_t t = 0; t < To; t++)
    w[t] *= 8.0f;
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, e2), 0);
  WD_CHECK(max_diff(e1, e2, WD_CAMPP_EMB) < 1e-5);
  WD_CHECK(max_diff(e0, e1, WD_CAMPP_EMB) > 1e-3); /* the weights did something */

  /* One frame: the mean is that frame's, the std 0. */
  memset(w, 0, To * sizeof *w);
  w[5] = 0.5f;
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, e1), 0);
  /* ... which is the dense layer of those statistics (wd_campp_dense),
   * and its float version within float rounding (wd_campp_dense_f32). */
  float stats[2 * WD_CAMPP_HIDDEN] = { 0 };
  memcpy(stats, hid + 5 * WD_CAMPP_HIDDEN, WD_CAMPP_HIDDEN * sizeof *stats);
  wd_campp_dense(g_m, stats, e2);
  WD_CHECK(memcmp(e1, e2, sizeof e1) == 0);
  wd_campp_dense_f32(g_m, stats, e2);
  WD_CHECK(max_diff(e1, e2, WD_CAMPP_EMB) < 1e-4);
  w[5] = 0.0f;
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, e1), WD_EINVAL);
  w[5] = -1.0f, w[6] = 2.0f;
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, e1), WD_EINVAL);
  w[5] = NAN;
  WD_CHECK_EQ_INT(wd_campp_embed(g_m, hid, To, w, e1), WD_EINVAL);
  float tiny[3 * WD_DIAR_FBANK_BINS] = { 0 };
  WD_CHECK_EQ_INT(wd_campp_trunk(g_m, tiny, 3, hid), WD_EINVAL);
out:
  free(hid);
  free(w);
  free(sel);
}

/* Two threads share the model (and the fbank's tables): each gets the
 * single-threaded bits. */
typedef struct {
  const float *pcm;
  size_t n;
  float *feats, *hid;
  int rc;
} job_t;

static void *run_trunk(void *arg) {
  job_t *j = arg;
  const size_t T = wd_diar_fbank_frames(j->n);
  j->rc = wd_diar_fbank(j->pcm, j->n, j->feats);
  if (!j->rc)
    j->rc = wd_campp_trunk(g_m, j->feats, T, j->hid);
  return NULL;
}

/* Speed on one thread (never a failure): 10 s of sample.wav. */
WD_TEST(threads_and_speed) {
  if (!g_m)
    return;
  size_t n = 0;
  float *x = wd_diar_read_clip(SAMPLE, 80000, 240000, &n);
  const size_t T = wd_diar_fbank_frames(n), To = wd_campp_frames(T);
  float *feats = malloc(T * WD_DIAR_FBANK_BINS * sizeof *feats);
  float *h0 = malloc(3 * To * WD_CAMPP_HIDDEN * sizeof *h0);
  float *f2 = malloc(2 * T * WD_DIAR_FBANK_BINS * sizeof *f2);
  WD_CHECK(x && feats && h0 && f2);
  if (!x || !feats || !h0 || !f2)
    goto out;
  struct timespec a;
  double t_fb = 1e30, t_tr = 1e30, t_em = 1e30;
  float emb[WD_CAMPP_EMB];
  for (int r = 0; r < 3; r++) {
    clock_gettime(CLOCK_MONOTONIC, &a);
    WD_CHECK_EQ_INT(wd_diar_fbank(x, n, feats), 0);
    t_fb = fmin(t_fb, ms_since(&a));
    clock_gettime(CLOCK_MONOTONIC, &a);
    WD_CHECK_EQ_INT(wd_campp_trunk(g_m, feats, T, h0), 0);
    t_tr = fmin(t_tr, ms_since(&a));
    clock_gettime(CLOCK_MONOTONIC, &a);
    WD_CHECK_EQ_INT(wd_campp_embed(g_m, h0, To, NULL, emb), 0);
    t_em = fmin(t_em, ms_since(&a));
  }
  fprintf(stderr, "  10 s of audio, one thread, best of 3: fbank %.1f ms, trunk %.1f ms, "
          "pooling + dense %.2f ms\n", t_fb, t_tr, t_em);

  job_t j[2] = { { x, n, f2, h0 + To * WD_CAMPP_HIDDEN, -1 },
                 { x, n, f2 + T * WD_DIAR_FBANK_BINS, h0 + 2 * To * WD_CAMPP_HIDDEN, -1 } };
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    WD_CHECK_EQ_INT(pthread_create(&th[i], NULL, run_trunk, &j[i]), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) {
    WD_CHECK_EQ_INT(j[i].rc, 0);
    WD_CHECK(memcmp(h0, j[i].hid, To * WD_CAMPP_HIDDEN * sizeof *h0) == 0);
  }
out:
  free(x);
  free(feats);
  free(h0);
  free(f2);
}

/* Writes a safetensors file: header JSON text, then n_data zero bytes. */
static int write_st(const char *path, const char *json, size_t n_data) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  /* The header is padded with spaces to 8 bytes, as safetensors pads it. */
  const uint64_t len = (strlen(json) + 7) / 8 * 8;
  unsigned char le[8];
  for (int i = 0; i < 8; i++)
    le[i] = (unsigned char)(len >> (8 * i));
  int ok = fwrite(le, 1, 8, f) == 8 && fwrite(json, 1, strlen(json), f) == strlen(json);
  for (size_t i = strlen(json); ok && i < len; i++)
    ok = fputc(' ', f) != EOF;
  for (size_t i = 0; ok && i < n_data; i++)
    ok = fputc(0, f) != EOF;
  return fclose(f) == 0 && ok ? 0 : -1;
}

#define META(model) \
  "\"__metadata__\":{\"format\":\"whisperd-diarization\",\"version\":\"1\",\"model\":\"" model "\"}"

WD_TEST(bad_files) {
  char err[512] = "";
  wd_campp_t *m = (wd_campp_t *)&err; /* must come back NULL */
  WD_CHECK_EQ_INT(wd_campp_load("/nonexistent/campp.safetensors", &m, err, sizeof err), WD_ENOENT);
  WD_CHECK(m == NULL);

  const char *p = "/tmp/wd_test_diar_campp_bad.safetensors";
  /* Another model of the same format. */
  WD_CHECK_EQ_INT(write_st(p, "{" META("segmentation-3.0") "}", 0), 0);
  WD_CHECK_EQ_INT(wd_campp_load(p, &m, err, sizeof err), WD_EMODEL);
  WD_CHECK(strstr(err, "segmentation-3.0") != NULL);
  fprintf(stderr, "  %s\n", err);
  /* Another format. */
  WD_CHECK_EQ_INT(write_st(p, "{\"__metadata__\":{\"format\":\"pt\"}}", 0), 0);
  WD_CHECK_EQ_INT(wd_campp_load(p, &m, err, sizeof err), WD_EMODEL);
  fprintf(stderr, "  %s\n", err);
  /* A tensor of the wrong shape. */
  WD_CHECK_EQ_INT(write_st(p, "{" META("campplus-zh-en-common") ",\"head.conv1.weight\":{"
                              "\"dtype\":\"F32\",\"shape\":[32,1,3,2],\"data_offsets\":[0,768]}}",
                           768), 0);
  WD_CHECK_EQ_INT(wd_campp_load(p, &m, err, sizeof err), WD_EMODEL);
  WD_CHECK(strstr(err, "head.conv1.weight") != NULL && strstr(err, "[32, 1, 3, 3]") != NULL);
  fprintf(stderr, "  %s\n", err);
  /* The first tensor right, the next one missing. */
  WD_CHECK_EQ_INT(write_st(p, "{" META("campplus-zh-en-common") ",\"head.conv1.weight\":{"
                              "\"dtype\":\"F32\",\"shape\":[32,1,3,3],\"data_offsets\":[0,1152]}}",
                           1152), 0);
  WD_CHECK_EQ_INT(wd_campp_load(p, &m, err, sizeof err), WD_EMODEL);
  WD_CHECK(strstr(err, "head.bn1") != NULL);
  fprintf(stderr, "  %s\n", err);
  WD_CHECK(m == NULL);

  /* The real file cut short. */
  FILE *in = fopen(MODEL, "rb"), *out = fopen(p, "wb");
  if (in && out) {
    static unsigned char buf[1 << 16];
    size_t total = 0, k;
    while (total < (4u << 20) && (k = fread(buf, 1, sizeof buf, in)) > 0)
      total += fwrite(buf, 1, k, out);
  }
  if (in)
    fclose(in);
  if (out)
    fclose(out);
  if (in) {
    WD_CHECK_EQ_INT(wd_campp_load(p, &m, err, sizeof err), WD_EMODEL);
    fprintf(stderr, "  %s\n", err);
  }
  remove(p);
  wd_campp_free(NULL);
}

WD_TEST(teardown) { wd_campp_free(g_m); }

int main(void) { return wd_test_main(); }
