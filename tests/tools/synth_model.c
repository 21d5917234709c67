/*
 * synth_model.c - writes a synthetic ggml Whisper model in the smallest
 * shape the Vulkan engine accepts (tests/wd_synth_model.h), for black-box
 * tests of `whisperd` on model files no one publishes, such as an all-f32
 * or a quantized file (its blocks hold quantized random values).
 *
 *   wd_synth_model PATH FTYPE     (FTYPE as stored: 0, 1, 2002 .. 2009)
 */
#include <stdio.h>
#include <stdlib.h>

#include "wd_synth_model.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: wd_synth_model PATH FTYPE\n");
    return 2;
  }
  const wd_hparams_t hp = wd_synth_engine_hparams((int32_t)strtol(argv[2], NULL, 10));
  if (wd_synth_write(argv[1], &hp) < 0) {
    fprintf(stderr, "wd_synth_model: cannot write '%s' with ftype %s\n", argv[1], argv[2]);
    return 1;
  }
  return 0;
}
