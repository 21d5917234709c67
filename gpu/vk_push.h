/*
 * vk_push.h - C mirrors of the push-constant blocks in shaders/common.glsl.
 *
 * The layouts must match std430 push-constant layout byte for byte; the
 * static asserts below catch a field added on one side only.
 */
#ifndef WD_VK_PUSH_H
#define WD_VK_PUSH_H

#include <stddef.h>
#include <stdint.h>

/* struct wd_pc_gemm in common.glsl. */
typedef struct {
  uint32_t M, N, K;
  uint32_t lda, ldb, ldc;
  uint32_t a_off, b_off, c_off, bias_off;
  uint32_t a_bz, b_bz, c_bz, bias_bz;
  uint32_t flags;
  float alpha;
} wd_pc_gemm_t;

enum {
  WD_GEMM_BIAS = 1u,
  WD_GEMM_GELU = 2u,
  WD_GEMM_ACCUMULATE = 4u,
};

_Static_assert(sizeof(wd_pc_gemm_t) <= 128, "push constants are limited to 128 bytes");
_Static_assert(sizeof(wd_pc_gemm_t) == 64, "wd_pc_gemm_t must match common.glsl");
_Static_assert(offsetof(wd_pc_gemm_t, flags) == 56, "wd_pc_gemm_t.flags offset");
_Static_assert(offsetof(wd_pc_gemm_t, alpha) == 60, "wd_pc_gemm_t.alpha offset");

/* struct wd_seq in common.glsl: one record per batch row b in the
 * step-parameter buffer, rewritten by the host before each replay. Row b
 * uses the self-attention KV cache of sequence slot `slot`, so batch rows and
 * cache slots need not coincide. */
typedef struct {
  uint32_t token, pos, len, audio, src;
  uint32_t slot;
  uint32_t pad1, pad2;
} wd_seq_t;
_Static_assert(sizeof(wd_seq_t) == 32, "wd_seq_t must match common.glsl");
_Static_assert(offsetof(wd_seq_t, src) == 16, "wd_seq_t.src offset");
_Static_assert(offsetof(wd_seq_t, slot) == 20, "wd_seq_t.slot offset");

/* struct wd_pc_norm. */
typedef struct {
  uint32_t n_rows, d;
  uint32_t x_off, ldx;
  uint32_t y_off, ldy;
  float eps;
  uint32_t pad;
} wd_pc_norm_t;
_Static_assert(sizeof(wd_pc_norm_t) == 32, "wd_pc_norm_t must match common.glsl");
_Static_assert(offsetof(wd_pc_norm_t, eps) == 24, "wd_pc_norm_t.eps offset");

/* struct wd_pc_gemv (flags are the WD_GEMM_* values above). */
typedef struct {
  uint32_t N, K, nb;
  uint32_t x_off, ldx;
  uint32_t w_off;
  uint32_t y_off, ldy;
  uint32_t bias_off, flags;
  float alpha;
  uint32_t pad;
} wd_pc_gemv_t;
_Static_assert(sizeof(wd_pc_gemv_t) == 48, "wd_pc_gemv_t must match common.glsl");
_Static_assert(offsetof(wd_pc_gemv_t, alpha) == 40, "wd_pc_gemv_t.alpha offset");

/* struct wd_pc_attn_enc. */
typedef struct {
  uint32_t n, ld;
  uint32_t q_off, k_off, v_off, o_off;
  float scale;
  uint32_t pad;
} wd_pc_attn_enc_t;
_Static_assert(sizeof(wd_pc_attn_enc_t) == 32, "wd_pc_attn_enc_t must match common.glsl");
_Static_assert(offsetof(wd_pc_attn_enc_t, scale) == 24, "wd_pc_attn_enc_t.scale offset");

/* struct wd_pc_attn. */
typedef struct {
  uint32_t n_head, n_ctx, n_keys, flags;
  uint32_t q_off, ldq;
  uint32_t kv_off, ldkv;
  uint32_t o_off, ldo;
  uint32_t save_heads, save_off, save_ld;
  float scale;
  uint32_t n_split; /* the split kernels: key chunks per (row, head) */
  uint32_t pad1;
} wd_pc_attn_t;
enum {
  WD_ATTN_CROSS = 1u,
  WD_ATTN_SAVE_QK = 2u,
  WD_ATTN_SAVE_P = 4u,
  WD_ATTN_HEAD_DIM = 64u,
  WD_ATTN_PART = 68u, /* floats of one split chunk's partial (attn_dec.comp) */
};
_Static_assert(sizeof(wd_pc_attn_t) == 64, "wd_pc_attn_t must match common.glsl");
_Static_assert(offsetof(wd_pc_attn_t, scale) == 52, "wd_pc_attn_t.scale offset");

/* struct wd_pc_kv. */
typedef struct {
  uint32_t d, n_ctx;
  uint32_t in_off, ldi;
  uint32_t cache_off, layer_stride;
  uint32_t v_in_off, pad;
} wd_pc_kv_t;
_Static_assert(sizeof(wd_pc_kv_t) == 32, "wd_pc_kv_t must match common.glsl");
_Static_assert(offsetof(wd_pc_kv_t, layer_stride) == 20, "wd_pc_kv_t.layer_stride offset");

/* struct wd_pc_embed. */
typedef struct {
  uint32_t d, ldx, x_off, n_vocab;
  uint32_t n_pos, pad0, pad1, pad2;
} wd_pc_embed_t;
_Static_assert(sizeof(wd_pc_embed_t) == 32, "wd_pc_embed_t must match common.glsl");
_Static_assert(offsetof(wd_pc_embed_t, n_pos) == 16, "wd_pc_embed_t.n_pos offset");

/* struct wd_pc_im2col. */
typedef struct {
  uint32_t cin, t_in, t_out, stride;
  uint32_t in_off, in_cs, in_ts;
  uint32_t ldo;
} wd_pc_im2col_t;
_Static_assert(sizeof(wd_pc_im2col_t) == 32, "wd_pc_im2col_t must match common.glsl");
_Static_assert(offsetof(wd_pc_im2col_t, ldo) == 28, "wd_pc_im2col_t.ldo offset");

/* struct wd_pc_softmax. */
typedef struct {
  uint32_t M, N, ld, off, z_stride;
  uint32_t flags, causal_off;
  float scale;
} wd_pc_softmax_t;
enum { WD_SOFTMAX_CAUSAL = 1u };
_Static_assert(sizeof(wd_pc_softmax_t) == 32, "wd_pc_softmax_t must match common.glsl");
_Static_assert(offsetof(wd_pc_softmax_t, scale) == 28, "wd_pc_softmax_t.scale offset");

/* struct wd_pc_transpose. */
typedef struct {
  uint32_t R, C;
  uint32_t in_off, ldi, in_bz;
  uint32_t out_off, ldo, out_bz;
} wd_pc_transpose_t;
_Static_assert(sizeof(wd_pc_transpose_t) == 32, "wd_pc_transpose_t must match common.glsl");
_Static_assert(offsetof(wd_pc_transpose_t, out_bz) == 28, "wd_pc_transpose_t.out_bz offset");

/* struct wd_pc_argmax. */
typedef struct {
  uint32_t n_vocab, nb;
  uint32_t off, ld;
  uint32_t flags;
  uint32_t pad0, pad1, pad2;
} wd_pc_argmax_t;
enum { WD_ARGMAX_MASK = 1u };
_Static_assert(sizeof(wd_pc_argmax_t) == 32, "wd_pc_argmax_t must match common.glsl");
_Static_assert(offsetof(wd_pc_argmax_t, flags) == 16, "wd_pc_argmax_t.flags offset");

/* struct wd_argmax_out in shaders/argmax.comp: one result per logits row. */
typedef struct {
  uint32_t idx;  /* argmax of logits + mask (lowest index on ties) */
  float max;     /* logits[idx] + mask[idx] */
  float lse;     /* log sum exp(logits + mask): log-prob of v = value - lse */
  uint32_t pad;
} wd_argmax_out_t;
_Static_assert(sizeof(wd_argmax_out_t) == 16, "wd_argmax_out_t must match argmax.comp");

#endif
