/*
 * fuzz_audio.c - every audio entry point, from memory: wd_audio_decode()
 * sniffs the content and goes through libsndfile's virtual I/O (WAV, FLAC,
 * Ogg FLAC, AIFF, CAF, W64) or FFmpeg's custom AVIOContext (MP3, MP4/M4A,
 * WebM, Matroska, MPEG-PS, ADTS, Vorbis, Opus), then downmixes and resamples
 * with libswresample (core/audio.c).
 *
 * Input: the file. The length cap is 10 minutes, so that a header claiming a
 * long stream costs little. A success must give samples in [-1, 1].
 */
#include <stdint.h>
#include <stdlib.h>

#include "audio.h"
#include "error.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const wd_audio_opts_t opts = { .max_seconds = 600 };
  int16_t *samples = NULL;
  size_t n = 0;
  char err[256];
  int rc = wd_audio_decode(data, size, &opts, &samples, &n, err, sizeof err);
  if (rc < 0) {
    FUZZ_CHECK(samples == NULL && n == 0);
    return 0;
  }
  FUZZ_CHECK(samples != NULL && n > 0);
  FUZZ_CHECK(n <= (size_t)opts.max_seconds * WD_AUDIO_SAMPLE_RATE + WD_AUDIO_SAMPLE_RATE);
  /* Every sample is touched: an uninitialised or short array shows up in
   * the sanitizers, and the sum keeps the reads from being optimised out. */
  long long sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += samples[i];
  FUZZ_CHECK(sum >= -32768LL * (long long)n && sum <= 32767LL * (long long)n);
  free(samples);
  return 0;
}
