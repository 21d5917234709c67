/*
 * whisper_ref.h - a plain f32 reference of Whisper's forward pass, for tests.
 *
 * Independent of gpu/ and shaders/: it reads the model's host tensors,
 * converts f16 weights to f32 and runs the textbook computation of
 * openai/whisper model.py, with OpenBLAS doing the matrix products. The GPU
 * engine's encoder output and logits are checked against it.
 */
#ifndef WD_WHISPER_REF_H
#define WD_WHISPER_REF_H

#include <stdint.h>

#include "model.h"

/* The BLAS the reference's products run on (cpu_blas.h's report). Linking
 * this pulls in cpu_blas.c's start-up hook, so a test binary runs OpenBLAS
 * on the kernels the CPU's features allow, as whisperd does, and not on
 * the library's table pick (SSE3 kernels on CPUs newer than the library,
 * where the reference took most of the worker test's time). */
const char *wd_ref_blas_path(void);

/* The tensor converted to f32 (malloc'd), or NULL when absent, of another
 * element count, or quantized. */
float *wd_ref_tensor(const wd_model_t *m, const char *name, size_t numel);

/* One attention block's weights as f32: Q/K/V/out projections (d, d) with
 * their biases (the key has none) and the LayerNorm in front of it. */
typedef struct {
  float *wq, *bq, *wk, *wv, *bv, *wo, *bo, *ln_g, *ln_b;
} wd_ref_attn_w_t;

/* Loads `prefix`.{query,key,value,out} and the LayerNorm `ln`; WD_EMODEL if
 * any is missing (release with wd_ref_attn_free either way). */
int wd_ref_attn_load(const wd_model_t *m, const char *prefix, const char *ln, int d,
                     wd_ref_attn_w_t *a);
void wd_ref_attn_free(wd_ref_attn_w_t *a);

/* LayerNorm of rows (rows, d) -> y, statistics in double, eps 1e-5. */
void wd_ref_layernorm(const float *x, int rows, int d, const float *g, const float *b, float *y);

/* mel: (n_mels, 3000) row-major. out: (n_audio_ctx, n_audio_state). */
int wd_ref_encode(const wd_model_t *m, const float *mel, float *out);

/* Full causal decoder pass over tokens[0..n) (no KV cache) against the
 * encoder output enc (n_audio_ctx, n_audio_state). logits: (n, n_vocab). */
int wd_ref_decode(const wd_model_t *m, const float *enc, const int32_t *tokens, int n,
                  float *logits);

/* The same pass, also keeping the cross-attention scores q.k / sqrt(d_head)
 * (before softmax) of n_heads heads (layer heads[k][0], head heads[k][1])
 * in qk (n_heads, n, n_audio_ctx): what openai's timing.py hooks save. The
 * heads must be distinct. */
int wd_ref_decode_qk(const wd_model_t *m, const float *enc, const int32_t *tokens, int n,
                     float *logits, int n_heads, const int (*heads)[2], float *qk);

#endif
