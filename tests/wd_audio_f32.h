/*
 * wd_audio_f32.h - core/audio.h's decoders with float output, s16 / 32768
 * (the signal openai/whisper feeds its model), for the tests that check
 * the decoded signal as numbers.
 */
#ifndef WD_TEST_AUDIO_F32_H
#define WD_TEST_AUDIO_F32_H

#include <stdint.h>
#include <stdlib.h>

#include "audio.h"
#include "error.h"

/* *x (malloc'd) becomes the float version of the 16-bit samples in *s16
 * (freed); on allocation failure WD_ENOMEM and both NULL. */
static inline int wd_test_audio_to_f32(int rc, int16_t *s16, size_t n, float **x) {
  *x = NULL;
  if (rc < 0)
    return rc;
  *x = malloc((n ? n : 1) * sizeof **x);
  if (*x)
    for (size_t i = 0; i < n; i++)
      (*x)[i] = (float)s16[i] / 32768.0f;
  free(s16);
  return *x ? rc : WD_ENOMEM;
}

static inline int wd_test_audio_decode(const void *data, size_t len, const wd_audio_opts_t *opts,
                                       float **x, size_t *n, char *err, size_t err_len) {
  int16_t *s16 = NULL;
  if (!x)
    return wd_audio_decode(data, len, opts, NULL, n, err, err_len);
  const int rc = wd_audio_decode(data, len, opts, &s16, n, err, err_len);
  return wd_test_audio_to_f32(rc, s16, n ? *n : 0, x);
}

static inline int wd_test_audio_decode_file(const char *path, const wd_audio_opts_t *opts,
                                            float **x, size_t *n, char *err, size_t err_len) {
  int16_t *s16 = NULL;
  if (!x)
    return wd_audio_decode_file(path, opts, NULL, n, err, err_len);
  const int rc = wd_audio_decode_file(path, opts, &s16, n, err, err_len);
  return wd_test_audio_to_f32(rc, s16, n ? *n : 0, x);
}

#endif
