/*
 * wd_synth_random.h - synthetic ggml Whisper models of any shape with
 * random weights (tests only).
 *
 * wd_synth_model.h writes ramps in the engine's smallest shape with 80 mel
 * bands; this writes any hyper-parameters the loader accepts (n_mels 80 or
 * 128, with the matching Slaney filterbank, as large-v3's file carries)
 * and fills every tensor with deterministic pseudo-random values scaled
 * like a trained model's, so that activations stay in range through many
 * layers and the engines' logits can be compared: linear and conv weights
 * uniform in +-1/sqrt(fan_in), LayerNorm gains 1 +- 0.1, biases +- 0.05,
 * positional embeddings +- 0.5. Data is written in blocks, so a large-v3
 * sized token embedding (51866 x 1280) takes a fraction of a second.
 */
#ifndef WD_SYNTH_RANDOM_H
#define WD_SYNTH_RANDOM_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f16.h"
#include "mel_filters.h"
#include "model.h"
#include "model_internal.h"

/* xorshift64*: a value in [-1, 1). */
static inline float wd_synth_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  const uint64_t r = *s * 0x2545F4914F6CDD1Dull;
  return (float)((double)(r >> 40) / (double)(1ull << 23) - 1.0);
}

static inline int wd_synth_ends(const char *s, const char *tail) {
  const size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

/* One tensor record with random data; 0 or -1. */
static inline int wd_synth_put_random(FILE *f, const wd__tensor_spec_t *sp, wd_dtype_t type,
                                      uint64_t seed) {
  if (type != WD_DTYPE_F32 && type != WD_DTYPE_F16)
    return -1;
  int32_t hdr[3] = { sp->n_dims, (int32_t)strlen(sp->name), (int32_t)type };
  fwrite(hdr, 4, 3, f);
  int64_t n = 1, fan_in = 1;
  for (int i = 0; i < sp->n_dims; i++) {
    const int32_t ne = (int32_t)sp->ne[i];
    fwrite(&ne, 4, 1, f);
    n *= sp->ne[i];
    if (i + 1 < sp->n_dims)
      fan_in *= sp->ne[i];
  }
  fwrite(sp->name, 1, strlen(sp->name), f);
  float scale = 0.05f, base = 0.0f;
  if (sp->kind != WD__TK_VECTOR) {
    scale = 1.0f / sqrtf((float)fan_in);
  } else if (strstr(sp->name, "positional_embedding")) {
    scale = 0.5f;
  } else if (wd_synth_ends(sp->name, "ln.weight") || wd_synth_ends(sp->name, "ln_post.weight")) {
    scale = 0.1f, base = 1.0f;
  }
  enum { BLOCK = 1 << 16 };
  static float blk[BLOCK];
  static uint16_t hblk[BLOCK];
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t done = 0; done < n; done += BLOCK) {
    const size_t m = (size_t)(n - done < BLOCK ? n - done : BLOCK);
    for (size_t i = 0; i < m; i++)
      blk[i] = base + scale * wd_synth_rand(&s);
    if (type == WD_DTYPE_F32) {
      fwrite(blk, 4, m, f);
    } else {
      for (size_t i = 0; i < m; i++)
        hblk[i] = wd_f32_to_f16(blk[i]);
      fwrite(hblk, 2, m, f);
    }
  }
  return 0;
}

/* Writes a whole file for hp (ftype 0 or 1; n_mels 80 or 128); 0 or -1. */
static inline int wd_synth_write_random(const char *path, const wd_hparams_t *hp, uint64_t seed) {
  wd__tensor_spec_t *specs = NULL;
  size_t n = 0;
  if ((hp->n_mels != 80 && hp->n_mels != 128) || wd__model_expect(hp, &specs, &n) < 0)
    return -1;
  FILE *f = fopen(path, "wb");
  float *mel = malloc(sizeof(float) * (size_t)hp->n_mels * 201);
  int rc = f && mel ? 0 : -1;
  if (rc == 0) {
    const int32_t magic = 0x67676d6c; /* "ggml" */
    fwrite(&magic, 4, 1, f);
    fwrite(&hp->n_vocab, 4, 11, f); /* the 11 int32 hyper-parameters, in file order */
    rc = wd_mel_filters_slaney(hp->n_mels, 400, 16000, mel) < 0 ? -1 : 0;
    const int32_t dims[2] = { hp->n_mels, 201 };
    fwrite(dims, 4, 2, f);
    fwrite(mel, sizeof(float), (size_t)hp->n_mels * 201, f);
    const int32_t n_tok = 50257;
    fwrite(&n_tok, 4, 1, f);
    for (int i = 0; i < n_tok; i++) {
      char tok[16];
      const int len = i < 256 ? (tok[0] = (char)i, 1) : snprintf(tok, sizeof tok, "t%d", i);
      const int32_t l32 = len;
      fwrite(&l32, 4, 1, f);
      fwrite(tok, 1, (size_t)len, f);
    }
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    wd_dtype_t type;
    rc = wd__model_expect_type(hp, specs[i].kind, &type) < 0 ? -1 : 0;
    if (rc == 0)
      rc = wd_synth_put_random(f, &specs[i], type, seed + i);
  }
  free(specs);
  free(mel);
  if (f && fclose(f) != 0)
    rc = -1;
  return rc;
}

#endif
