/*
 * live_audio.c - G.711 and a streaming resampler (see live_audio.h).
 */
#include "live_audio.h"

#include <stdlib.h>

#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>

#include "audio.h"
#include "error.h"

/* ITU-T G.711: μ-law codes are complemented, then sign, 3-bit exponent,
 * 4-bit mantissa over a bias of 132 (0x84); A-law codes are XORed with
 * 0x55, then sign (1 = positive), exponent and mantissa, with half a step
 * added. */
int16_t wd_g711_ulaw(uint8_t code) {
  const int u = (uint8_t)~code, e = (u >> 4) & 7, m = u & 15;
  const int mag = (((m << 3) + 0x84) << e) - 0x84;
  return (int16_t)(u & 0x80 ? -mag : mag);
}

int16_t wd_g711_alaw(uint8_t code) {
  const int a = code ^ 0x55, e = (a >> 4) & 7, m = a & 15;
  const int mag = e == 0 ? (m << 4) + 8 : ((m << 4) + 0x108) << (e - 1);
  return (int16_t)(a & 0x80 ? mag : -mag);
}

struct wd_live_audio {
  SwrContext *swr;
  int rate;
};

int wd_live_audio_new(int rate, wd_live_audio_t **ret) {
  *ret = NULL;
  if (rate < 8000 || rate > 192000)
    return WD_EINVAL;
  wd_live_audio_t *a = calloc(1, sizeof *a);
  if (!a)
    return WD_ENOMEM;
  a->rate = rate;
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO; /* not const: FFmpeg 5.1's prototype */
  int e = swr_alloc_set_opts2(&a->swr, &mono, AV_SAMPLE_FMT_S16, WD_AUDIO_SAMPLE_RATE, &mono,
                              AV_SAMPLE_FMT_S16, rate, 0, NULL);
  if (e >= 0)
    e = swr_init(a->swr);
  if (e < 0) {
    wd_live_audio_free(a);
    return WD_ENOMEM;
  }
  *ret = a;
  return 0;
}

void wd_live_audio_free(wd_live_audio_t *a) {
  if (!a)
    return;
  swr_free(&a->swr);
  free(a);
}

size_t wd_live_audio_room(const wd_live_audio_t *a, size_t n) {
  const int r = swr_get_out_samples(a->swr, (int)n);
  return r > 0 ? (size_t)r : 0;
}

int wd_live_audio_push(wd_live_audio_t *a, const int16_t *in, size_t n, int16_t *out) {
  const uint8_t *src[1] = { (const uint8_t *)in };
  uint8_t *dst[1] = { (uint8_t *)out };
  const int room = (int)wd_live_audio_room(a, n);
  const int got = swr_convert(a->swr, dst, room, src, (int)n);
  return got < 0 ? WD_EINTERNAL : got;
}
