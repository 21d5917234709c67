/*
 * synth_model.c - writes a synthetic ggml Whisper model in the smallest
 * shape the Vulkan engine accepts (tests/wd_synth_model.h), for black-box
 * tests of `whisperd` on model files no one publishes, such as an all-f32
 * or a quantized file (its blocks hold quantized random values); or, with
 * SHAPE, a published Whisper shape (tiny .. large-v3-turbo) for benchmarks
 * at the sizes users deploy (tests/bench/peers.py --shapes: the same file
 * for whisperd and whisper.cpp).
 *
 *   wd_synth_model PATH FTYPE [SHAPE]   (FTYPE as stored: 0, 1, 2002 .. 2009)
 */
#include <stdio.h>
#include <stdlib.h>

#include "wd_synth_model.h"

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: wd_synth_model PATH FTYPE [tiny|base|small|medium|large-v3|"
                    "large-v3-turbo]\n");
    return 2;
  }
  const int32_t ftype = (int32_t)strtol(argv[2], NULL, 10);
  wd_hparams_t hp = wd_synth_engine_hparams(ftype);
  if (argc == 4 && wd_synth_named_hparams(argv[3], ftype, &hp) < 0) {
    fprintf(stderr, "wd_synth_model: unknown shape '%s'\n", argv[3]);
    return 2;
  }
  if (wd_synth_write(argv[1], &hp) < 0) {
    fprintf(stderr, "wd_synth_model: cannot write '%s' with ftype %s\n", argv[1], argv[2]);
    return 1;
  }
  return 0;
}
