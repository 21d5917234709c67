/*
 * test_live_audio.c - core/live_audio.c: G.711 codes against the values
 * ITU-T G.711's reference decoders give, and a 24 kHz signal resampled in
 * pieces of every size from 1 to 997 samples giving exactly the samples the
 * same resampler gives it whole.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "live_audio.h"
#include "wd_test.h"

WD_TEST(g711_codes) {
  WD_CHECK_EQ_INT(wd_g711_ulaw(0xFF), 0);
  WD_CHECK_EQ_INT(wd_g711_ulaw(0x7F), 0);
  WD_CHECK_EQ_INT(wd_g711_ulaw(0x00), -32124);
  WD_CHECK_EQ_INT(wd_g711_ulaw(0x80), 32124);
  WD_CHECK_EQ_INT(wd_g711_ulaw(0xF0), 120);
  WD_CHECK_EQ_INT(wd_g711_alaw(0xD5), 8);
  WD_CHECK_EQ_INT(wd_g711_alaw(0x55), -8);
  WD_CHECK_EQ_INT(wd_g711_alaw(0xAA), 32256);
  WD_CHECK_EQ_INT(wd_g711_alaw(0x2A), -32256);
  /* both monotonic over their positive codes' magnitudes */
  for (int c = 0x80; c < 0xFF; c++)
    WD_CHECK(wd_g711_ulaw((uint8_t)c) > wd_g711_ulaw((uint8_t)(c + 1)));
}

WD_TEST(pieces_resample_as_the_whole) {
  enum { N = 24000 * 3 };
  int16_t *in = malloc(N * sizeof *in), *whole = malloc(N * sizeof *whole),
          *parts = malloc(N * sizeof *parts);
  WD_CHECK(in && whole && parts);
  for (int i = 0; i < N; i++)
    in[i] = (int16_t)(9000.0 * sin(i * 0.031) + 4000.0 * sin(i * 0.47));
  wd_live_audio_t *a = NULL, *b = NULL;
  WD_CHECK_EQ_INT(wd_live_audio_new(24000, &a), 0);
  WD_CHECK_EQ_INT(wd_live_audio_new(4000, &b), WD_EINVAL);
  WD_CHECK(b == NULL);
  WD_CHECK_EQ_INT(wd_live_audio_new(24000, &b), 0);
  const int n_whole = wd_live_audio_push(a, in, N, whole);
  int n_parts = 0;
  for (int i = 0, step = 1; i < N; step = step % 997 + 1) {
    const int k = N - i < step ? N - i : step;
    const int got = wd_live_audio_push(b, in + i, (size_t)k, parts + n_parts);
    WD_CHECK(got >= 0);
    n_parts += got;
    i += k;
  }
  /* 3 s at 24 kHz: 48,000 samples at 16 kHz, less the filter's delay */
  WD_CHECK(n_whole > 47900 && n_whole <= 48000);
  WD_CHECK_EQ_INT(n_parts, n_whole);
  WD_CHECK(memcmp(parts, whole, (size_t)n_whole * sizeof *whole) == 0);
  wd_live_audio_free(a);
  wd_live_audio_free(b);
  free(in);
  free(whole);
  free(parts);
}

int main(void) { return wd_test_main(); }
