/*
 * bench_vad.c - Silero VAD (core/vad.c) speed on one core: jfk.wav decoded
 * and repeated to 10 minutes, the speech probability of every 32 ms chunk;
 * best and median of REPS runs, as audio seconds per second of compute (x
 * real time), with the kernel the host's CPU features picked and with the
 * portable one. The process runs on one thread. A benchmark, not a test.
 *
 * Usage: bench_vad [MODEL, default models/silero-vad-v6.safetensors] [AUDIO]
 */
#include <stdio.h>
#include <stdlib.h>

#include "audio.h"
#include "error.h"
#include "vad.h"
#include "vad_gemm.h"
#include "bench_util.h"

#define REPS 7
#define SECONDS 600

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const char *model = argc > 1 ? argv[1] : WD_SOURCE_DIR "/models/silero-vad-v6.safetensors";
  const char *audio = argc > 2 ? argv[2] : WD_SOURCE_DIR "/tests/data/audio/jfk.wav";
  char err[256] = "";
  wd_vad_model_t *m = NULL;
  int16_t *pcm = NULL;
  size_t n = 0;
  if (wd_vad_model_load(model, &m, err, sizeof err) < 0 ||
      wd_audio_decode_file(audio, NULL, &pcm, &n, err, sizeof err) < 0) {
    fprintf(stderr, "bench_vad: %s\n", err);
    return 1;
  }
  const size_t total = (size_t)SECONDS * WD_VAD_SAMPLE_RATE;
  int16_t *x = malloc(total * sizeof *x);
  float *p = malloc(wd_vad_n_chunks(total) * sizeof *p);
  if (!x || !p)
    return 1;
  for (size_t i = 0; i < total; i++)
    x[i] = pcm[i % n];
  for (int portable = 0; portable < 2; portable++) {
    wd_vad_gemm_force_portable(portable);
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
      const double t0 = bench_now_s();
      if (wd_vad_probs_s16(m, x, total, p) < 0)
        return 1;
      t[r] = bench_now_s() - t0;
    }
    qsort(t, REPS, sizeof t[0], cmp);
    printf("%-9s %d s of audio (%zu chunks): best %.1f ms, median %.1f ms: %.0fx real time "
           "(best), %.0fx (median), one thread\n",
           wd_vad_gemm_kernel(), SECONDS, wd_vad_n_chunks(total), t[0] * 1e3,
           t[REPS / 2] * 1e3, SECONDS / t[0], SECONDS / t[REPS / 2]);
  }
  free(x), free(p), free(pcm);
  wd_vad_model_free(m);
  return 0;
}
