/*
 * bench_audio.c - wd_audio_decode() wall-clock time on real files.
 *
 * Each file is read into memory once and decoded REPS times from there (the
 * daemon's case: an upload already in memory). Reported: the best and the
 * median time, output allocation included, and the real-time factor (audio
 * seconds per second of decoding). The default set covers each back-end and
 * the resampler: jfk.mp3 (FFmpeg, MP3 16 kHz), aac_16k.m4a (FFmpeg, AAC),
 * jfk.wav (libsndfile, no resampling), pcm16_44k_stereo.wav (libsndfile,
 * downmix + 44.1 -> 16 kHz) and flac_16k.flac. A benchmark, not a test: it
 * never fails on speed.
 *
 * Usage: bench_audio [file ...]   (default: the set above, from tests/data)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio.h"
#include "error.h"
#include "bench_util.h"
#include "wd_file.h"

#define REPS 9

/* Times REPS decodes of one file and prints one line; returns 0 or a WD_E* code. */
static int bench_one(const char *path) {
  size_t len = 0;
  unsigned char *buf = wd_read_file(path, &len);
  if (!buf) {
    fprintf(stderr, "bench_audio: cannot read '%s'\n", path);
    return WD_EIO;
  }
  double t[REPS];
  size_t n = 0;
  int r = 0;
  char err[256];
  for (int i = 0; i < REPS && r == 0; i++) {
    int16_t *x = NULL;
    const double t0 = bench_now_s();
    r = wd_audio_decode(buf, len, NULL, &x, &n, err, sizeof err);
    t[i] = bench_now_s() - t0;
    free(x);
  }
  free(buf);
  if (r < 0) {
    fprintf(stderr, "bench_audio: '%s': %s: %s\n", path, wd_err_name(r), err);
    return r;
  }
  qsort(t, REPS, sizeof t[0], bench_cmp_double);
  const double audio_s = (double)n / WD_AUDIO_SAMPLE_RATE;
  const char *base = strrchr(path, '/');
  printf("%-24s %8zu B  %6.2f s audio  best %7.2f ms  median %7.2f ms  %6.0fx real time\n",
         base ? base + 1 : path, len, audio_s, t[0] * 1e3, t[REPS / 2] * 1e3, audio_s / t[REPS / 2]);
  return 0;
}

int main(int argc, char **argv) {
  static const char *const defaults[] = {
    "audio/jfk.mp3", "audio/formats/aac_16k.m4a", "audio/jfk.wav",
    "audio/formats/pcm16_44k_stereo.wav", "audio/formats/flac_16k.flac",
  };
  int failed = 0;
  if (argc > 1) {
    for (int i = 1; i < argc; i++)
      failed |= bench_one(argv[i]) != 0;
  } else {
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", WD_TEST_DATA_DIR, defaults[i]);
      failed |= bench_one(path) != 0;
    }
  }
  return failed ? 1 : 0;
}
