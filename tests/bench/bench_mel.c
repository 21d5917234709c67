/*
 * bench_mel.c - wd_mel_compute() wall-clock time on real speech.
 *
 * jfk.wav (11 s) is repeated to 30 s and to 10 min; each length is run with
 * 1 and 2 threads and 80 and 128 bins. The time is the best and the median of
 * REPS runs, output allocation included; the real-time factor is audio
 * seconds per second of compute. wd_mel_new() (FFTW planning) is timed once.
 * Then a decoder's next window, what its thread waits for when the window
 * before it ends: made there (wd_mel_pcm_window, 3000 frames) against
 * taken from the last window and the frames made ahead on another thread
 * (wd_win_ahead_take once the block is done, as it is on a GPU whose
 * window takes longer than the block; --mel-ahead, issue #40).
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
#include "taskq.h"
#include "win_ahead.h"
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

/* The next window at seek + 2000 of a window at seek, both ways. */
static int bench_next_window(int n_mels, const float *x, size_t n) {
  float *w = malloc(sizeof(float) * (size_t)n_mels * WD_MEL_N_BINS);
  float *win = malloc(sizeof(float) * (size_t)n_mels * WD_MEL_N_PAD_FRAMES);
  float *f = malloc(sizeof(float) * n);
  wd_mel_t *m = NULL;
  wd_mel_pcm_t *p = NULL;
  wd_taskq_t *q = NULL;
  wd_win_ahead_t *a = NULL;
  int rc = w && win && f ? wd_mel_filters_slaney(n_mels, WD_MEL_N_FFT, WD_MEL_SAMPLE_RATE, w)
                         : WD_ENOMEM;
  if (rc == 0)
    rc = wd_mel_new(n_mels, w, &m);
  for (size_t i = 0; f && i < n; i++)
    f[i] = x[i];
  if (rc == 0) {
    rc = wd_mel_pcm_new_f32(m, f, n, 1, &p); /* takes f */
    f = NULL;
  }
  if (rc == 0)
    rc = wd_taskq_new(1, 1, "bench-ahead", &q);
  if (rc == 0)
    rc = wd_win_ahead_new(p, q, &a);
  double td[REPS], ta[REPS];
  const int limit = p ? wd_mel_pcm_n_frames(p) - WD_MEL_N_PAD_FRAMES : 0;
  for (int r = 0; rc == 0 && r < REPS; r++) {
    const int seek = 3000 * r, next = seek + 2000;
    double t0 = bench_now_s();
    rc = wd_mel_pcm_window(p, next, WD_MEL_N_PAD_FRAMES, win);
    td[r] = bench_now_s() - t0;
    if (rc == 0)
      rc = wd_mel_pcm_window(p, seek, WD_MEL_N_PAD_FRAMES, win);
    wd_win_ahead_note(a, seek, WD_MEL_N_PAD_FRAMES, limit);
    struct timespec nap = { 0, 20 * 1000000 }; /* the device's window: the block gets done */
    nanosleep(&nap, NULL);
    t0 = bench_now_s();
    if (rc == 0 && wd_win_ahead_take(a, next, WD_MEL_N_PAD_FRAMES, win) != 1)
      rc = WD_EINTERNAL;
    ta[r] = bench_now_s() - t0;
  }
  if (rc == 0) {
    qsort(td, REPS, sizeof td[0], bench_cmp_double);
    qsort(ta, REPS, sizeof ta[0], bench_cmp_double);
    printf("next window, %3d bins: made on the decoder's thread median %6.3f ms; taken from the "
           "frames made ahead median %6.3f ms\n",
           n_mels, td[REPS / 2] * 1e3, ta[REPS / 2] * 1e3);
  }
  wd_win_ahead_free(a);
  wd_taskq_free(q);
  wd_mel_pcm_free(p);
  wd_mel_free(m);
  free(f);
  free(win);
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
    if (l == 1)
      for (int n_mels = 80; n_mels <= 128; n_mels += 48)
        if (bench_next_window(n_mels, x, lens[l]) < 0) {
          fprintf(stderr, "bench_mel: next window failed\n");
          free(x);
          return 1;
        }
    free(x);
  }
  return 0;
}
