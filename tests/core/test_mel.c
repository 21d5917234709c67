/*
 * test_mel.c - core/mel against references of openai/whisper's
 * log_mel_spectrogram on real speech (tests/data/audio/jfk.wav):
 *   - a float64 reference written here (explicit reflect padding, a direct
 *     O(N * K) DFT, the same filterbank), for 80 and 128 bins;
 *   - tests/data/mel/mel_jfk_ref.f32, made by tests/tools/mel_ref.py in
 *     numpy float64 with openai/whisper's own mel_filters.npz (the filterbank
 *     itself is checked against wd_mel_filters_slaney() in test_model.c).
 * Also frame bookkeeping and tiny inputs, silence, thread invariance,
 * concurrent callers and the error paths. Measured errors are printed.
 */
#include <math.h>
#include <pthread.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "mel.h"
#include "mel_filters.h"
#include "wd_test.h"

/* Max abs error in normalised log-mel units, (log10 + 4) / 4. */
#define TOL_MEL 1e-4
#define N_BINS WD_MEL_N_BINS

/* Reads a mono file with libsndfile; s16 becomes x / 32768, as load_audio. */
static float *read_wav(const char *path, size_t *ret_n) {
  SF_INFO info = { 0 };
  SNDFILE *f = sf_open(path, SFM_READ, &info);
  if (!f)
    return NULL;
  float *x = NULL;
  if (info.channels == 1 && info.samplerate == 16000 && info.frames > 0) {
    x = malloc(sizeof(float) * (size_t)info.frames);
    if (x && sf_readf_float(f, x, info.frames) != info.frames) {
      free(x);
      x = NULL;
    }
  }
  sf_close(f);
  *ret_n = x ? (size_t)info.frames : 0;
  return x;
}

/* Reads exactly n little-endian float32 values (this host is little-endian). */
static float *read_f32(const char *path, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  float *a = malloc(sizeof(float) * n);
  if (a && (fread(a, sizeof(float), n, f) != n || fgetc(f) != EOF)) {
    free(a);
    a = NULL;
  }
  fclose(f);
  return a;
}

static float *slaney(int n_mels) {
  float *w = malloc(sizeof(float) * (size_t)n_mels * N_BINS);
  if (w && wd_mel_filters_slaney(n_mels, WD_MEL_N_FFT, WD_MEL_SAMPLE_RATE, w) != 0) {
    free(w);
    w = NULL;
  }
  return w;
}

/*
 * The float64 reference: |STFT|^2 of openai/whisper's padded signal, one row
 * of 201 bins per frame, last frame dropped. (n_frames, 201).
 * ref: openai/whisper audio.py; torch.stft center=True, pad_mode="reflect".
 */
static double *ref_power(const float *x, size_t n, int *ret_n_frames) {
  const size_t len = n + WD_MEL_N_PAD_SAMPLES; /* F.pad(audio, (0, N_SAMPLES)) */
  const size_t plen = len + WD_MEL_N_FFT;      /* reflect by 200 on each side */
  double *xp = malloc(sizeof(double) * plen);
  const int n_frames = (int)((plen - WD_MEL_N_FFT) / WD_MEL_HOP); /* 1 + ..., minus 1 */
  double *pw = calloc((size_t)n_frames * N_BINS, sizeof(double));
  double cs[WD_MEL_N_FFT], sn[WD_MEL_N_FFT], win[WD_MEL_N_FFT], fr[WD_MEL_N_FFT];
  if (!xp || !pw) {
    free(xp);
    free(pw);
    return NULL;
  }
  for (size_t i = 0; i < plen; i++) {
    long long j = (long long)i - WD_MEL_N_FFT / 2;
    if (j < 0)
      j = -j; /* numpy/torch "reflect": the edge sample is not repeated */
    if (j >= (long long)len)
      j = 2 * ((long long)len - 1) - j;
    xp[i] = (size_t)j < n ? (double)x[j] : 0.0;
  }
  for (int i = 0; i < WD_MEL_N_FFT; i++) {
    cs[i] = cos(2.0 * M_PI * i / WD_MEL_N_FFT);
    sn[i] = sin(2.0 * M_PI * i / WD_MEL_N_FFT);
    win[i] = 0.5 - 0.5 * cs[i]; /* periodic Hann */
  }
  for (int t = 0; t < n_frames; t++) {
    int nonzero = 0;
    for (int i = 0; i < WD_MEL_N_FFT; i++) {
      fr[i] = win[i] * xp[(size_t)t * WD_MEL_HOP + (size_t)i];
      nonzero |= fr[i] != 0.0;
    }
    if (!nonzero)
      continue; /* the DFT of zeros is zero */
    for (int k = 0; k < N_BINS; k++) {
      double re = 0.0, im = 0.0;
      for (int i = 0; i < WD_MEL_N_FFT; i++) {
        const int r = (i * k) % WD_MEL_N_FFT;
        re += fr[i] * cs[r];
        im -= fr[i] * sn[r];
      }
      pw[(size_t)t * N_BINS + (size_t)k] = re * re + im * im;
    }
  }
  free(xp);
  *ret_n_frames = n_frames;
  return pw;
}

/* filters @ power, log10(max(., 1e-10)), max(., max - 8), (. + 4) / 4 in
 * float64. Returns (n_mels, n_frames). */
static double *ref_logmel(const double *pw, int n_frames, const float *filters, int n_mels) {
  double *out = malloc(sizeof(double) * (size_t)n_mels * (size_t)n_frames);
  if (!out)
    return NULL;
  double vmax = -INFINITY;
  for (int b = 0; b < n_mels; b++)
    for (int t = 0; t < n_frames; t++) {
      double acc = 0.0;
      for (int k = 0; k < N_BINS; k++)
        acc += (double)filters[b * N_BINS + k] * pw[(size_t)t * N_BINS + (size_t)k];
      const double v = log10(acc > 1e-10 ? acc : 1e-10);
      out[(size_t)b * (size_t)n_frames + (size_t)t] = v;
      vmax = v > vmax ? v : vmax;
    }
  for (size_t i = 0; i < (size_t)n_mels * (size_t)n_frames; i++) {
    const double v = out[i] > vmax - 8.0 ? out[i] : vmax - 8.0;
    out[i] = (v + 4.0) / 4.0;
  }
  return out;
}

/* Largest |a - b|; NaN in either makes it infinite so that it never passes. */
static double max_abs_diff_fd(const float *a, const double *b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double d = fabs((double)a[i] - b[i]);
    if (!(d <= m))
      m = isnan(d) ? INFINITY : d;
  }
  return m;
}

/* wd_mel on x with the given filters, compared with the float64 reference
 * over every frame; returns the max abs error (INFINITY on failure). */
static double check_against_ref(const float *x, size_t n, const float *filters, int n_mels,
                                int n_threads) {
  wd_mel_t *m = NULL;
  float *mel = NULL;
  int n_frames = 0, ref_frames = 0;
  double err = INFINITY;
  double *pw = ref_power(x, n, &ref_frames);
  double *ref = pw ? ref_logmel(pw, ref_frames, filters, n_mels) : NULL;
  WD_CHECK(ref != NULL);
  WD_CHECK_EQ_INT(wd_mel_new(n_mels, filters, &m), 0);
  if (ref && m) {
    WD_CHECK_EQ_INT(wd_mel_compute(m, x, n, n_threads, &mel, &n_frames), 0);
    WD_CHECK_EQ_INT(n_frames, ref_frames);
    WD_CHECK_EQ_INT(n_frames, (long long)(n / WD_MEL_HOP) + 3000);
    if (mel && n_frames == ref_frames)
      err = max_abs_diff_fd(mel, ref, (size_t)n_mels * (size_t)n_frames);
  }
  free(mel);
  free(pw);
  free(ref);
  wd_mel_free(m);
  return err;
}

WD_TEST(jfk_matches_float64_reference_80_and_128) {
  size_t n = 0;
  float *x = read_wav(wd_test_data("audio/jfk.wav"), &n);
  WD_CHECK(x != NULL);
  WD_CHECK_EQ_INT(n, 176000);
  if (!x)
    return;
  for (int n_mels = 80; n_mels <= 128; n_mels += 48) {
    float *w = slaney(n_mels);
    WD_CHECK(w != NULL);
    if (!w)
      continue;
    const double err = check_against_ref(x, n, w, n_mels, 1);
    printf("jfk.wav, %d bins: max |wd_mel - float64 reference| = %.3g\n", n_mels, err);
    WD_CHECK(err <= TOL_MEL);
    free(w);
  }
  free(x);
}

WD_TEST(jfk_matches_numpy_golden) {
  /* mel_jfk_ref.f32: (80, 300), the first 300 frames of mel_ref.py's output. */
  enum { GOLD_FRAMES = 300 };
  size_t n = 0;
  float *x = read_wav(wd_test_data("audio/jfk.wav"), &n);
  float *w = read_f32(wd_test_data("mel/mel_filters_80.f32"), (size_t)80 * N_BINS);
  float *gold = read_f32(wd_test_data("mel/mel_jfk_ref.f32"), (size_t)80 * GOLD_FRAMES);
  wd_mel_t *m = NULL;
  float *mel = NULL;
  int n_frames = 0;
  WD_CHECK(x && w && gold);
  if (x && w && gold && wd_mel_new(80, w, &m) == 0 &&
      wd_mel_compute(m, x, n, 2, &mel, &n_frames) == 0) {
    WD_CHECK_EQ_INT(n_frames, 4100);
    double err = 0.0, lo = INFINITY, hi = -INFINITY;
    for (int b = 0; b < 80; b++)
      for (int t = 0; t < GOLD_FRAMES; t++) {
        const double g = gold[b * GOLD_FRAMES + t];
        const double d = fabs((double)mel[(size_t)b * (size_t)n_frames + (size_t)t] - g);
        err = d <= err ? err : (isnan(d) ? INFINITY : d);
        lo = g < lo ? g : lo;
        hi = g > hi ? g : hi;
      }
    printf("jfk.wav vs numpy golden (80 x %d, values %.3f..%.3f): max abs error %.3g\n",
           GOLD_FRAMES, lo, hi, err);
    WD_CHECK(err <= TOL_MEL);
    /* The golden's range shows the max - 8 clamp at work: 2.0 wide. */
    WD_CHECK_NEAR(hi - lo, 2.0, 1e-3);
  } else {
    WD_CHECK(0);
  }
  free(mel);
  wd_mel_free(m);
  free(x);
  free(w);
  free(gold);
}

WD_TEST(frame_bookkeeping) {
  WD_CHECK_EQ_INT(wd_mel_n_frames(0), 3000);
  WD_CHECK_EQ_INT(wd_mel_n_frames(159), 3000);
  WD_CHECK_EQ_INT(wd_mel_n_frames(160), 3001);
  WD_CHECK_EQ_INT(wd_mel_n_frames(176000), 4100);
  WD_CHECK_EQ_INT(wd_mel_n_frames(480000), 6000);
  WD_CHECK_EQ_INT(wd_mel_n_frames(WD_MEL_MAX_SAMPLES), 4320000 + 3000);
  WD_CHECK_EQ_INT(wd_mel_n_frames(WD_MEL_MAX_SAMPLES + 1), WD_EINVAL);
}

/* Short inputs, around the reflect-padding and frame edges, cut from real
 * speech: each is exact against the reference, whose padding is explicit.
 * ASan checks that nothing reads outside the caller's samples. */
WD_TEST(short_inputs_match_reference) {
  size_t n_all = 0;
  float *x = read_wav(wd_test_data("audio/jfk.wav"), &n_all);
  float *w = slaney(80);
  WD_CHECK(x && w);
  if (!x || !w)
    goto out;
  const size_t lens[] = { 1, 2, 100, 159, 160, 199, 200, 201, 202, 399, 400, 401, 1000 };
  double worst = 0.0;
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    /* Exactly lens[i] samples on the heap, from the loud middle of the file. */
    float *cut = malloc(sizeof(float) * lens[i]);
    WD_CHECK(cut != NULL);
    if (!cut)
      continue;
    memcpy(cut, x + 40000, sizeof(float) * lens[i]);
    const double err = check_against_ref(cut, lens[i], w, 80, 1);
    if (!(err <= TOL_MEL))
      fprintf(stderr, "length %zu: error %g\n", lens[i], err);
    WD_CHECK(err <= TOL_MEL);
    worst = err > worst ? err : worst;
    free(cut);
  }
  printf("short inputs (1..1000 samples): max abs error %.3g\n", worst);
out:
  free(x);
  free(w);
}

WD_TEST(silence_is_flat) {
  const float want = (float)((log10(1e-10) + 4.0) / 4.0); /* -1.5 */
  float *w = slaney(128);
  wd_mel_t *m = NULL;
  WD_CHECK(w != NULL);
  WD_CHECK_EQ_INT(wd_mel_new(128, w, &m), 0);
  float *zeros = calloc(16000, sizeof(float));
  const size_t lens[] = { 0, 150, 16000 };
  for (size_t i = 0; m && zeros && i < 3; i++) {
    float *mel = NULL;
    int n_frames = 0;
    /* n_samples == 0 accepts NULL samples. */
    const float *in = lens[i] ? zeros : NULL;
    WD_CHECK_EQ_INT(wd_mel_compute(m, in, lens[i], 2, &mel, &n_frames), 0);
    WD_CHECK_EQ_INT(n_frames, (long long)(lens[i] / 160) + 3000);
    int bad = 0;
    for (size_t k = 0; mel && k < (size_t)128 * (size_t)n_frames; k++)
      bad += mel[k] != want;
    WD_CHECK(mel != NULL);
    WD_CHECK_EQ_INT(bad, 0);
    free(mel);
  }
  WD_CHECK_NEAR(want, -1.5, 1e-7);
  free(zeros);
  wd_mel_free(m);
  free(w);
}

/* jfk.wav repeated to 45 s, so that many threads get real work. */
static float *long_speech(size_t *ret_n) {
  size_t n = 0;
  float *x = read_wav(wd_test_data("audio/jfk.wav"), &n);
  const size_t total = 45 * 16000;
  float *y = x ? malloc(sizeof(float) * total) : NULL;
  for (size_t i = 0; y && i < total; i++)
    y[i] = x[i % n];
  free(x);
  *ret_n = y ? total : 0;
  return y;
}

WD_TEST(threads_are_bit_identical) {
  size_t n = 0;
  float *x = long_speech(&n);
  float *w = slaney(80);
  wd_mel_t *m = NULL;
  float *one = NULL;
  int nf1 = 0;
  WD_CHECK(x && w);
  if (!x || !w || wd_mel_new(80, w, &m) != 0 || wd_mel_compute(m, x, n, 1, &one, &nf1) != 0) {
    WD_CHECK(0);
    goto out;
  }
  const int threads[] = { 2, 3, 7, 64, 1000 };
  for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
    float *many = NULL;
    int nf = 0;
    WD_CHECK_EQ_INT(wd_mel_compute(m, x, n, threads[i], &many, &nf), 0);
    WD_CHECK_EQ_INT(nf, nf1);
    WD_CHECK(many && memcmp(one, many, sizeof(float) * 80 * (size_t)nf1) == 0);
    free(many);
  }
out:
  free(one);
  wd_mel_free(m);
  free(x);
  free(w);
}

/* Every window a wd_mel_pcm_t gives (16-bit and float samples, several
 * thread counts for its max pass) is wd_mel_compute's columns, bit for bit,
 * zero past `size`; over speech, a few samples and none at all. */
static void check_windows(const wd_mel_t *m, int n_mels, const int16_t *s16, size_t n) {
  float *x = malloc(sizeof(float) * (n ? n : 1));
  for (size_t i = 0; x && i < n; i++)
    x[i] = (float)s16[i] / 32768.0f;
  float *whole = NULL;
  int nf = 0;
  WD_CHECK(x != NULL);
  if (!x || wd_mel_compute(m, x, n, 1, &whole, &nf) != 0) {
    WD_CHECK(0);
    free(x);
    return;
  }
  float *win = malloc(sizeof(float) * (size_t)n_mels * 3000);
  const int content = nf - 3000;
  const int seeks[] = { 0, 1, 17, 1500, 2999, 3000, content - 3000, content - 7, content, nf - 3000 };
  int n_checked = 0, n_same = 0;
  for (int kind = 0; kind < 2; kind++) {
    wd_mel_pcm_t *p = NULL;
    int rc;
    if (kind == 0) {
      int16_t *copy = malloc(sizeof(int16_t) * (n ? n : 1));
      if (copy && n)
        memcpy(copy, s16, sizeof(int16_t) * n);
      rc = wd_mel_pcm_new(m, copy, n, 1, &p);
    } else {
      float *copy = malloc(sizeof(float) * (n ? n : 1));
      if (copy && n)
        memcpy(copy, x, sizeof(float) * n);
      rc = wd_mel_pcm_new_f32(m, copy, n, 3, &p);
    }
    WD_CHECK_EQ_INT(rc, 0);
    if (rc != 0 || !win)
      continue;
    WD_CHECK_EQ_INT(wd_mel_pcm_n_frames(p), nf);
    WD_CHECK_EQ_INT(wd_mel_pcm_n_mels(p), n_mels);
    for (size_t k = 0; k < sizeof seeks / sizeof seeks[0]; k++) {
      const int seek = seeks[k];
      if (seek < 0 || seek > nf - 1)
        continue;
      const int sizes[] = { 3000, content - seek, 1, 0 };
      for (int z = 0; z < 4; z++) {
        const int size = sizes[z];
        if (size < 0 || size > 3000 || seek + size > nf)
          continue;
        WD_CHECK_EQ_INT(wd_mel_pcm_window(p, seek, size, win), 0);
        int same = 1;
        for (int b = 0; b < n_mels; b++)
          for (int t = 0; t < 3000; t++) {
            const float want = t < size ? whole[(size_t)b * (size_t)nf + (size_t)(seek + t)] : 0.0f;
            same &= memcmp(&win[(size_t)b * 3000 + (size_t)t], &want, sizeof want) == 0;
          }
        n_checked++;
        n_same += same;
      }
    }
    WD_CHECK_EQ_INT(wd_mel_pcm_window(p, -1, 10, win), WD_EINVAL);
    WD_CHECK_EQ_INT(wd_mel_pcm_window(p, 0, 3001, win), WD_EINVAL);
    WD_CHECK_EQ_INT(wd_mel_pcm_window(p, nf - 10, 11, win), WD_EINVAL);
    WD_CHECK_EQ_INT(wd_mel_pcm_window(p, 0, 10, NULL), WD_EINVAL);
    wd_mel_pcm_free(p);
  }
  fprintf(stderr, "  %d bins, %zu samples: %d of %d windows bit-identical\n", n_mels, n, n_same,
          n_checked);
  WD_CHECK(n_checked > 0);
  WD_CHECK_EQ_INT(n_same, n_checked);
  free(win);
  free(whole);
  free(x);
}

WD_TEST(windows_match_the_whole_spectrogram) {
  size_t n = 0;
  float *x = long_speech(&n);
  int16_t *s16 = malloc(sizeof(int16_t) * (n ? n : 1));
  WD_CHECK(x && s16);
  for (size_t i = 0; x && s16 && i < n; i++)
    s16[i] = (int16_t)lrintf(x[i] * 32768.0f > 32767.0f ? 32767.0f : x[i] * 32768.0f);
  const int bins[] = { 80, 128 };
  for (int i = 0; i < 2 && s16; i++) {
    float *w = slaney(bins[i]);
    wd_mel_t *m = NULL;
    WD_CHECK(w && wd_mel_new(bins[i], w, &m) == 0);
    if (m) {
      check_windows(m, bins[i], s16, n);
      check_windows(m, bins[i], s16, 150);
      check_windows(m, bins[i], s16, 0);
    }
    wd_mel_free(m);
    free(w);
  }
  /* A bad argument frees what it was given, and nothing is made. */
  float *w = slaney(80);
  wd_mel_t *m = NULL;
  wd_mel_pcm_t *p = NULL;
  if (w && wd_mel_new(80, w, &m) == 0) {
    WD_CHECK_EQ_INT(wd_mel_pcm_new(m, calloc(10, sizeof(int16_t)), 10, 0, &p), WD_EINVAL);
    WD_CHECK_EQ_INT(wd_mel_pcm_new(NULL, calloc(10, sizeof(int16_t)), 10, 1, &p), WD_EINVAL);
    float *bad = calloc(10, sizeof(float));
    if (bad)
      bad[3] = NAN;
    WD_CHECK_EQ_INT(wd_mel_pcm_new_f32(m, bad, 10, 1, &p), WD_EINVAL);
    WD_CHECK(p == NULL);
  }
  wd_mel_free(m);
  free(w);
  free(s16);
  free(x);
}

typedef struct {
  const wd_mel_t *m;
  const float *x;
  size_t n;
  const float *want;
  int same;
} concurrent_arg_t;

static void *concurrent_main(void *p) {
  concurrent_arg_t *a = p;
  float *mel = NULL;
  int nf = 0;
  a->same = 1;
  for (int r = 0; r < 3; r++) {
    if (wd_mel_compute(a->m, a->x, a->n, 2, &mel, &nf) != 0) {
      a->same = 0;
      return NULL;
    }
    a->same &= memcmp(mel, a->want, sizeof(float) * 80 * (size_t)nf) == 0;
    free(mel);
  }
  return NULL;
}

/* Several callers share one wd_mel_t at once (run this binary under TSan to
 * check for races), and wd_mel_new/free run beside them. */
WD_TEST(concurrent_callers_share_one_mel) {
  size_t n = 0;
  float *x = read_wav(wd_test_data("audio/jfk.wav"), &n);
  float *w = slaney(80);
  wd_mel_t *m = NULL;
  float *want = NULL;
  int nf = 0;
  if (!x || !w || wd_mel_new(80, w, &m) != 0 || wd_mel_compute(m, x, n, 1, &want, &nf) != 0) {
    WD_CHECK(0);
    goto out;
  }
  enum { N = 4 };
  pthread_t tid[N];
  concurrent_arg_t args[N];
  for (int i = 0; i < N; i++) {
    args[i] = (concurrent_arg_t){ .m = m, .x = x, .n = n, .want = want, .same = 0 };
    WD_CHECK_EQ_INT(pthread_create(&tid[i], NULL, concurrent_main, &args[i]), 0);
  }
  for (int i = 0; i < 8; i++) { /* plans made and destroyed meanwhile */
    wd_mel_t *other = NULL;
    WD_CHECK_EQ_INT(wd_mel_new(80, w, &other), 0);
    wd_mel_free(other);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(tid[i], NULL);
    WD_CHECK(args[i].same);
  }
out:
  free(want);
  wd_mel_free(m);
  free(x);
  free(w);
}

WD_TEST(bad_input_is_rejected) {
  float *w = slaney(80);
  wd_mel_t *m = NULL;
  WD_CHECK(w != NULL);
  if (!w)
    return;
  WD_CHECK_EQ_INT(wd_mel_new(64, w, &m), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_new(0, w, &m), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_new(80, NULL, &m), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_new(80, w, NULL), WD_EINVAL);
  WD_CHECK(m == NULL);
  const float keep = w[300];
  w[300] = NAN;
  WD_CHECK_EQ_INT(wd_mel_new(80, w, &m), WD_EINVAL);
  w[300] = INFINITY;
  WD_CHECK_EQ_INT(wd_mel_new(80, w, &m), WD_EINVAL);
  w[300] = keep;
  WD_CHECK(m == NULL);
  wd_mel_free(NULL);

  WD_CHECK_EQ_INT(wd_mel_new(80, w, &m), 0);
  WD_CHECK_EQ_INT(wd_mel_n_mels(m), 80);
  float x[1000];
  for (int i = 0; i < 1000; i++)
    x[i] = 0.1f * sinf(0.05f * (float)i);
  static float sentinel_storage;
  float *sentinel = &sentinel_storage; /* *ret_mel must stay untouched on error */
  float *mel = sentinel;
  int nf = -7;
  WD_CHECK_EQ_INT(wd_mel_compute(NULL, x, 1000, 1, &mel, &nf), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_compute(m, NULL, 1000, 1, &mel, &nf), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, 1000, 1, NULL, &nf), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, 1000, 1, &mel, NULL), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, 1000, 0, &mel, &nf), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, 1000, -3, &mel, &nf), WD_EINVAL);
  /* Absurd lengths are refused before any sample is read. */
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, WD_MEL_MAX_SAMPLES + 1, 1, &mel, &nf), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, SIZE_MAX, 1, &mel, &nf), WD_EINVAL);
  x[500] = NAN;
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, 1000, 1, &mel, &nf), WD_EINVAL);
  x[500] = -INFINITY;
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, 1000, 1, &mel, &nf), WD_EINVAL);
  x[500] = 2.0e6f;
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, 1000, 1, &mel, &nf), WD_EINVAL);
  WD_CHECK(mel == sentinel);
  WD_CHECK_EQ_INT(nf, -7);

  /* Loud but accepted input stays finite. */
  x[500] = WD_MEL_MAX_ABS_SAMPLE;
  WD_CHECK_EQ_INT(wd_mel_compute(m, x, 1000, 1, &mel, &nf), 0);
  int finite = mel != sentinel;
  for (size_t i = 0; finite && i < (size_t)80 * (size_t)nf; i++)
    finite = isfinite(mel[i]);
  WD_CHECK(finite);
  if (mel != sentinel)
    free(mel);
  wd_mel_free(m);
  free(w);
}

int main(void) { return wd_test_main(); }
