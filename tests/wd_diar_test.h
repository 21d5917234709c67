/*
 * wd_diar_test.h - what the diarization tests read: the golden tensors that
 * tests/data/diar/make_*_reference.py write (raw little-endian f32), and
 * clips of audio files as the networks take them (float s16 / 32768).
 */
#ifndef WD_DIAR_TEST_H
#define WD_DIAR_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "audio.h"

/* Exactly n floats from path (a longer or shorter file is an error: the
 * test and its generator disagree), or NULL with the reason on stderr. */
static inline float *wd_diar_read_f32(const char *path, size_t n) {
  FILE *f = fopen(path, "rb");
  float *x = malloc(n * sizeof *x);
  if (!f || !x || fread(x, sizeof *x, n, f) != n || fgetc(f) != EOF) {
    fprintf(stderr, "  %s: missing or not %zu floats\n", path, n);
    free(x);
    x = NULL;
  }
  if (f)
    fclose(f);
  return x;
}

/* Samples [a, b) of an audio file (any upload format, 16 kHz mono), as
 * float s16 / 32768; *ret_n how many (fewer where the file ends first). */
static inline float *wd_diar_read_clip(const char *path, size_t a, size_t b, size_t *ret_n) {
  int16_t *pcm = NULL;
  size_t n = 0;
  char err[256];
  *ret_n = 0;
  if (wd_audio_decode_file(path, NULL, &pcm, &n, err, sizeof err) < 0) {
    fprintf(stderr, "  %s: %s\n", path, err);
    return NULL;
  }
  const size_t e = b < n ? b : n, s = a < e ? a : e;
  float *x = malloc((e - s + 1) * sizeof *x);
  for (size_t i = 0; x && i < e - s; i++)
    x[i] = (float)pcm[s + i] / 32768.0f;
  free(pcm);
  *ret_n = x ? e - s : 0;
  return x;
}

#endif
