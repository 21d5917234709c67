/*
 * bench_mel.c - wd_mel_compute() wall-clock time on real speech.
 *
 * jfk.wav (11 s) is repeated to 30 s and to 10 min; each length is run with
 * 1 and 2 threads and 80 and 128 bins. The time is the best and the median of
 * REPS runs, output allocation included; the real-time factor is audio
 * seconds per second of compute. wd_mel_new() (FFTW planning) is timed once.
 * A benchmark, not a test: it never fails on speed.
 *
 * Usage: bench_mel [16 kHz mono wav, default tests/data/audio/jfk.wav]
 */
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "error.h"
#include "mel.h"
#include "mel_filters.h"
#include "bench_util.h"

#define REPS 7

/* Reads a 16 kHz mono file and repeats it to n_out samples. */
static float *load_tiled(const char *path, size_t n_out) {
  SF_INFO info = { 0 };
  SNDFILE *f = sf_open(path, SFM_READ, &info);
  if (!f)
    return NULL;
  float *x = NULL, *y = NULL;
  if (info.channels == 1 && info.samplerate == 16000 && info.frames > 0) {
    x = malloc(sizeof(float) * (size_t)info.frames);
    if (x && sf_readf_float(f, x, info.frames) == info.frames) {
      y = malloc(sizeof(float) * n_out);
      for (size_t i = 0; y && i < n_out; i++)
        y[i] = x[i % (size_t)info.frames];
    }
  }
  sf_close(f);
  free(x);
  return y;
}

static int bench_one(int n_mels, const float *x, size_t n, int n_threads) {
  float *w = malloc(sizeof(float) * (size_t)n_mels * WD_MEL_N_BINS);
  wd_mel_t *m = NULL;
  int rc = w ? wd_mel_filters_slaney(n_mels, WD_MEL_N_FFT, WD_MEL_SAMPLE_RATE, w) : WD_ENOMEM;
  const double t_new = bench_now_s();
  if (rc == 0)
    rc = wd_mel_new(n_mels, w, &m);
  const double new_ms = (bench_now_s() - t_new) * 1e3;
  double t[REPS];
  for (int r = 0; rc == 0 && r < REPS; r++) {
    float *mel = NULL;
    int n_frames = 0;
    const double t0 = bench_now_s();
    rc = wd_mel_compute(m, x, n, n_threads, &mel, &n_frames);
    t[r] = bench_now_s() - t0;
    free(mel);
  }
  if (rc == 0) {
    qsort(t, REPS, sizeof t[0], bench_cmp_double);
    const double secs = (double)n / WD_MEL_SAMPLE_RATE;
    printf("%6.0f s  %3d bins  %d thread%s  best %8.2f ms  median %8.2f ms  %7.0fx real time"
           "  (wd_mel_new %.2f ms)\n",
           secs, n_mels, n_threads, n_threads > 1 ? "s" : " ", t[0] * 1e3, t[REPS / 2] * 1e3,
           secs / t[0], new_ms);
  }
  wd_mel_free(m);
  free(w);
  return rc;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : WD_TEST_DATA_DIR "/audio/jfk.wav";
  static const size_t lens[2] = { 30 * 16000, 600 * 16000 };
  for (int l = 0; l < 2; l++) {
    float *x = load_tiled(path, lens[l]);
    if (!x) {
      fprintf(stderr, "bench_mel: cannot read %s as 16 kHz mono\n", path);
      return 1;
    }
    for (int n_mels = 80; n_mels <= 128; n_mels += 48)
      for (int th = 1; th <= 2; th++) {
        const int rc = bench_one(n_mels, x, lens[l], th);
        if (rc < 0) {
          fprintf(stderr, "bench_mel: %s\n", wd_strerror(rc));
          free(x);
          return 1;
        }
      }
    free(x);
  }
  return 0;
}
