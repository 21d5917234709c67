/*
 * test_worker.c - the worker on the Vulkan engine (lavapipe here, a GPU
 * where there is one) with real tiny.en weights: short, long (two windows)
 * and silent files run alone, then all at once, must give bit-for-bit the
 * same text, tokens, timestamps and window statistics. This is the path
 * `whisperd serve` and `whisperd transcribe` run.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "error.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "tokenizer.h"
#include "vk_engine.h"
#include "wd_test.h"
#include "wd_worker_util.h"
#include "worker.h"

#define TINY WD_SOURCE_DIR "/models/ggml-tiny.en.bin"

WD_TEST(identity_alone_vs_batched_vulkan_tiny_en) {
  if (!have(TINY))
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  wd_model_t *m = NULL;
  wd_tokenizer_t *tok = NULL;
  wd_mel_t *mel = NULL;
  wd_vk_engine_t *eng = NULL;
  wd_worker_t *w = NULL;
  char err[512] = "";
  int n_mel = 0, n_fft = 0;
  WD_CHECK_EQ_INT(wd_model_load(TINY, &m, err, sizeof err), 0);
  WD_CHECK_EQ_INT(wd_model_tokenizer_new(m, &tok), 0);
  WD_CHECK_EQ_INT(wd_mel_new(80, wd_model_mel_filters(m, &n_mel, &n_fft), &mel), 0);
  /* Keep lavapipe mapped after vkDestroyInstance so LeakSanitizer can name
   * (and tests/lsan.supp suppress) the driver's own exit-time leaks. */
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  const wd_vk_engine_opts_t eo = { .device = -1, .max_seqs = 8, .max_audio = 5 };
  int rc = wd_vk_engine_new(m, &eo, &eng, err, sizeof err);
  if (rc == WD_ENODEVICE)
    wd_test_skip("no Vulkan device");
  WD_CHECK_EQ_INT(rc, 0);
  if (rc == 0) {
    const wd_worker_opts_t wo = { .engine = wd_vk_engine_iface(eng), .tok = tok, .mel = mel,
                                  .queue_max = 8, .max_batch = 5 };
    WD_CHECK_EQ_INT(wd_worker_new(&wo, &w), 0);
    const clip_t clips[] = {
      { "audio/jfk.wav", 1, 0, 0, 0 },             /* 11 s */
      { "audio/jfk.wav", 3, 0, 0, 0 },             /* 33 s: two windows, seek and context carry */
      { "audio/synth/silence_3s.wav", 1, 0, 0, 0 }, /* the no-speech rule */
      { "audio/cards/003.wav", 1, .best_of = 2, .temperature = 0.6f }, /* sampled rows */
      { "audio/jfk.wav", 1, .beam_size = 3 }, /* beams: forks and reorders */
    };
    wd_check_identity(w, clips, 5, "vulkan tiny.en");
  }
  wd_worker_free(w);
  wd_vk_engine_free(eng);
  wd_mel_free(mel);
  wd_tokenizer_free(tok);
  wd_model_free(m);
}

int main(void) { return wd_test_main(); }
