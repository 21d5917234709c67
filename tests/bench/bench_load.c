/*
 * bench_load.c - how long a model takes to reach the device.
 *
 *   bench_load MODEL [repeats]           best of `repeats` (default 3) runs of:
 *     parse   wd_model_load (mmap + header and shape checks)
 *     upload  wd_vk_weights_upload alone, on a device made beforehand
 *     engine  wd_vk_engine_new (device, upload, pipelines, buffers,
 *             recordings) for max_seqs 1
 *   bench_load --write-large PATH LAYERS writes a synthetic f16 model of
 *     large-v2's shape (d 1280, 20 heads, 80 mels) with LAYERS encoder and
 *     decoder layers (32 is the real size, about 3 GiB): a large model
 *     without downloading one (tests/wd_synth_model.h).
 *
 * WHISPERD_VK_FORCE_STAGING=1 leaves device-local memory unmapped, so on
 * lavapipe the upload takes the staged path of a discrete GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "model.h"
#include "vk_device.h"
#include "vk_engine.h"
#include "vk_weights.h"
#include "wd_synth_model.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int write_large(const char *path, int layers) {
  const wd_hparams_t hp = { .n_vocab = 51865, .n_audio_ctx = 1500, .n_audio_state = 1280,
                            .n_audio_head = 20, .n_audio_layer = layers, .n_text_ctx = 448,
                            .n_text_state = 1280, .n_text_head = 20, .n_text_layer = layers,
                            .n_mels = 80, .ftype = 1 };
  if (layers < 1 || wd_synth_write(path, &hp) < 0) {
    fprintf(stderr, "bench_load: cannot write '%s'\n", path);
    return 1;
  }
  return 0;
}

/* One run; the three times in ms. */
static int run_once(const char *path, double ms[3], double *mib) {
  char err[512] = "";
  double t0 = now_s();
  wd_model_t *m = NULL;
  int rc = wd_model_load(path, &m, err, sizeof err);
  ms[0] = (now_s() - t0) * 1e3;
  wd_vk_device_t *dev = NULL;
  const char *fs = getenv("WHISPERD_VK_FORCE_STAGING"); /* this benchmark's switch */
  const wd_vk_device_opts_t dopts = { .index = -1,
                                      .force_staging = fs && fs[0] && strcmp(fs, "0") != 0 };
  if (rc == 0) rc = wd_vk_device_new(&dopts, &dev);
  wd_vk_weights_t *w = NULL;
  t0 = now_s();
  if (rc == 0) rc = wd_vk_weights_upload(dev, m, &w, err, sizeof err);
  ms[1] = (now_s() - t0) * 1e3;
  if (w)
    *mib = (double)wd_vk_weights_bytes(w) / 1048576.0;
  wd_vk_weights_free(w);
  wd_vk_device_free(dev);
  wd_vk_engine_t *e = NULL;
  const wd_vk_engine_opts_t eo = { .device = -1, .max_seqs = 1, .max_audio = 1 };
  t0 = now_s();
  if (rc == 0) rc = wd_vk_engine_new(m, &eo, &e, err, sizeof err);
  ms[2] = (now_s() - t0) * 1e3;
  wd_vk_engine_free(e);
  wd_model_free(m);
  if (rc < 0)
    fprintf(stderr, "bench_load: %s %s\n", wd_strerror(rc), err);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--write-large") == 0)
    return write_large(argv[2], atoi(argv[3]));
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: bench_load MODEL [repeats] | bench_load --write-large PATH LAYERS\n");
    return 2;
  }
  const int reps = argc > 2 ? atoi(argv[2]) : 3;
  double best[3] = { 1e30, 1e30, 1e30 }, mib = 0.0;
  for (int r = 0; r < (reps > 0 ? reps : 1); r++) {
    double ms[3];
    if (run_once(argv[1], ms, &mib) < 0)
      return 1;
    for (int k = 0; k < 3; k++)
      best[k] = ms[k] < best[k] ? ms[k] : best[k];
  }
  const char *fs = getenv("WHISPERD_VK_FORCE_STAGING");
  printf("%s (%.1f MiB of weights, %s): parse %.0f ms, upload %.0f ms, engine %.0f ms "
         "(best of %d)\n",
         argv[1], mib, fs && fs[0] && strcmp(fs, "0") ? "staged" : "mapped where possible",
         best[0], best[1], best[2], reps > 0 ? reps : 1);
  return 0;
}
