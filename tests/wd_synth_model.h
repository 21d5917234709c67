/*
 * wd_synth_model.h - small synthetic ggml Whisper models for tests.
 *
 * A synthetic file has the real layout: magic, the 11 hyper-parameters, the
 * real Slaney filterbank, a vocabulary of 50257 tokens (the 256 single
 * bytes, then "t<i>" for token i), then every
 * tensor a model with those hyper-parameters has (wd__model_expect), each
 * of the type the file's ftype gives it (wd__model_expect_type) and filled
 * with a deterministic ramp, so a wrong slice shows. The loader accepts it
 * as it accepts an OpenAI model; only the numbers are meaningless.
 *
 * test_model.c builds its corrupted files from the pieces (preamble, one
 * tensor record); test_engine.c and tools/synth_model.c write whole files
 * in the smallest shape the Vulkan engine accepts, with any ftype.
 */
#ifndef WD_SYNTH_MODEL_H
#define WD_SYNTH_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f16.h"
#include "mel_filters.h"
#include "model.h"
#include "model_internal.h"
#include "quant.h"

#define WD_SYNTH_MAGIC 0x67676d6c /* "ggml" */

static inline void wd_synth_put_i32(FILE *f, int32_t v) { fwrite(&v, 4, 1, f); }

/* Pseudo-random value i of tensor `seed`, uniform in [-0.25, 0.25). */
static inline float wd_synth_rand(int64_t i, unsigned seed) {
  uint64_t h = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed + 1) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  return (float)((double)(h >> 40) / (double)(1ull << 24)) * 0.5f - 0.25f;
}

/* One tensor record. f32 and f16 hold a ramp; a quantized type holds
 * pseudo-random values quantized row by row with wd_quantize_row (ggml's
 * rounding), so that its blocks are ones a real file could have: scales
 * that are finite f16s, a model whose logits mean something to compare. */
static inline void wd_synth_put_tensor(FILE *f, const char *name, int n_dims, const int64_t *ne,
                                       wd_dtype_t type, unsigned seed) {
  wd_synth_put_i32(f, n_dims);
  wd_synth_put_i32(f, (int32_t)strlen(name));
  wd_synth_put_i32(f, (int32_t)type);
  int64_t n = 1;
  for (int i = 0; i < n_dims; i++) {
    wd_synth_put_i32(f, (int32_t)ne[i]);
    n *= ne[i];
  }
  fwrite(name, 1, strlen(name), f);
  if (type != WD_DTYPE_F32 && type != WD_DTYPE_F16) {
    const size_t row_bytes = wd_dtype_row_bytes(type, ne[0]);
    float *x = malloc((size_t)ne[0] * sizeof *x);
    unsigned char *q = malloc(row_bytes ? row_bytes : 1);
    for (int64_t r = 0; x && q && r < n / ne[0]; r++) {
      for (int64_t j = 0; j < ne[0]; j++)
        x[j] = wd_synth_rand(r * ne[0] + j, seed);
      if (wd_quantize_row(type, x, q, ne[0]) < 0)
        memset(q, 0, row_bytes);
      fwrite(q, 1, row_bytes, f);
    }
    free(x);
    free(q);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    const float x = (float)((i * 7 + seed) % 101) / 128.0f - 0.25f;
    if (type == WD_DTYPE_F32) {
      fwrite(&x, 4, 1, f);
    } else {
      const uint16_t h = wd_f32_to_f16(x);
      fwrite(&h, 2, 1, f);
    }
  }
}

/* Magic, hyper-parameters, the 80- (or 128-) band filterbank and the vocabulary. With
 * huge_token >= 0, token huge_token claims 1 GiB and the vocabulary stops
 * there (a corrupt file). */
static inline void wd_synth_put_preamble(FILE *f, const wd_hparams_t *hp, uint32_t magic,
                                         int huge_token) {
  wd_synth_put_i32(f, (int32_t)magic);
  const int32_t *v = &hp->n_vocab;
  for (int i = 0; i < 11; i++)
    wd_synth_put_i32(f, v[i]);
  static float mel[128 * 201];
  const int nm = hp->n_mels == 128 ? 128 : 80;
  wd_mel_filters_slaney(nm, 400, 16000, mel);
  wd_synth_put_i32(f, nm);
  wd_synth_put_i32(f, 201);
  fwrite(mel, sizeof(float), (size_t)nm * 201, f);
  wd_synth_put_i32(f, 50257);
  for (int i = 0; i < 50257; i++) {
    char tok[16];
    /* The 256 single bytes first, as byte-level BPE (the tokenizer) needs. */
    const int len = i < 256 ? (tok[0] = (char)i, 1) : snprintf(tok, sizeof tok, "t%d", i);
    if (i == huge_token) {
      wd_synth_put_i32(f, 1 << 30);
      break;
    }
    wd_synth_put_i32(f, len);
    fwrite(tok, 1, (size_t)len, f);
  }
}

/* Writes a whole valid file for hp (n_mels 80 or 128); 0 or -1. */
static inline int wd_synth_write(const char *path, const wd_hparams_t *hp) {
  wd__tensor_spec_t *specs = NULL;
  size_t n = 0;
  if ((hp->n_mels != 80 && hp->n_mels != 128) || wd__model_expect(hp, &specs, &n) < 0)
    return -1;
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(specs);
    return -1;
  }
  wd_synth_put_preamble(f, hp, WD_SYNTH_MAGIC, -1);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    wd_dtype_t type;
    rc = wd__model_expect_type(hp, specs[i].kind, &type) < 0 ? -1 : 0;
    if (rc == 0)
      wd_synth_put_tensor(f, specs[i].name, specs[i].n_dims, specs[i].ne, type, (unsigned)i);
  }
  free(specs);
  if (fclose(f) != 0)
    rc = -1;
  return rc;
}

/* The smallest shape the Vulkan engine accepts (1500 audio positions,
 * heads of 64, one layer each), with the given ggml ftype as stored: 1
 * (f16), 0 (all f32) or the quantized 2002, 2003, 2007, 2008, 2009 (q4_0,
 * q4_1, q8_0, q5_0, q5_1 at quantization version 2, the only one the loader
 * reads); the engine runs them all. */
static inline wd_hparams_t wd_synth_engine_hparams(int32_t ftype) {
  return (wd_hparams_t){ .n_vocab = 51864, .n_audio_ctx = 1500, .n_audio_state = 64,
                         .n_audio_head = 1, .n_audio_layer = 1, .n_text_ctx = 8,
                         .n_text_state = 64, .n_text_head = 1, .n_text_layer = 1,
                         .n_mels = 80, .ftype = ftype };
}

/* The published Whisper shapes by name (openai/whisper's ModelDimensions),
 * for benchmarks at the sizes users deploy with weights no one needs to
 * download: tiny, base, small, medium, large-v3, large-v3-turbo. 0 or -1
 * for an unknown name. */
static inline int wd_synth_named_hparams(const char *name, int32_t ftype, wd_hparams_t *hp) {
  static const struct {
    const char *name;
    int d, heads, enc_layers, dec_layers, mels, vocab;
  } shapes[] = {
    { "tiny", 384, 6, 4, 4, 80, 51865 },          { "base", 512, 8, 6, 6, 80, 51865 },
    { "small", 768, 12, 12, 12, 80, 51865 },      { "medium", 1024, 16, 24, 24, 80, 51865 },
    { "large-v3", 1280, 20, 32, 32, 128, 51866 }, { "large-v3-turbo", 1280, 20, 32, 4, 128, 51866 },
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    if (strcmp(name, shapes[i].name) == 0) {
      *hp = (wd_hparams_t){ .n_vocab = shapes[i].vocab, .n_audio_ctx = 1500,
                            .n_audio_state = shapes[i].d, .n_audio_head = shapes[i].heads,
                            .n_audio_layer = shapes[i].enc_layers, .n_text_ctx = 448,
                            .n_text_state = shapes[i].d, .n_text_head = shapes[i].heads,
                            .n_text_layer = shapes[i].dec_layers, .n_mels = shapes[i].mels,
                            .ftype = ftype };
      return 0;
    }
  return -1;
}

#endif
