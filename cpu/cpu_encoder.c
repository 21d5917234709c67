/*
 * cpu_encoder.c - encode(): the audio encoder and the cross-attention K/V
 * of every decoder layer, once per 30 s window.
 *
 * Activations are row-major (frames, channels). Every product is one
 * cblas_sgemm, y (rows, n_out) = x (rows, n_in) . W^T with W (n_out, n_in)
 * kept as the file stores it and widened to f32 per product (cpu_gemm.h);
 * the convolutions become products through im2col. The self-attention runs
 * a block of queries at a time (cpu_enc_attn.h) where the CPU has AVX-512
 * and measurement at load found it the faster (cpu_pick.c), as one sgemm
 * pair a head elsewhere.
 * Every product and element-wise pass (bias, GELU, LayerNorm, softmax) is
 * split over the engine's own threads; sgemm runs single-threaded inside
 * them (cpu_gemm.c says why).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_attn.h"
#include "cpu_enc_attn.h"
#include "cpu_gemm.h"
#include "cpu_internal.h"
#include "cpu_vmath.h"
#include "clock.h"
#include "error.h"

/* y (rows, n_out) = beta * y + x . W^T, W as stored (cpu_gemm.h). */
static void sgemm_xwt(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                      float beta, float *y, int ldy) {
  wd_cpu_gemm_xwt(e, rows, x, ldx, w, 0, w->n_out, beta, y, ldy);
}

/* ---- row-parallel element-wise passes ---- */

typedef struct {
  const float *x;
  float *y;
  int d, rows, rows_per;
  const float *g, *b;
} ln_task_t;

static void ln_task(void *arg, int i) {
  const ln_task_t *t = arg;
  const int r0 = i * t->rows_per, r1 = r0 + t->rows_per < t->rows ? r0 + t->rows_per : t->rows;
  for (int r = r0; r < r1; r++)
    wd_cpu_layernorm_vec(t->x + (size_t)r * (size_t)t->d, t->d, t->g, t->b,
                         t->y + (size_t)r * (size_t)t->d);
}

static void ln_rows(wd_cpu_engine_t *e, const float *x, float *y, int rows, int d, const float *g,
                    const float *b) {
  ln_task_t t = { .x = x, .y = y, .d = d, .rows = rows, .g = g, .b = b };
  wd_cpu_parallel(e, wd_cpu_row_chunks(e, rows, &t.rows_per), ln_task, &t);
}

/* One head's attention for a run of query rows, on this thread (sgemm is
 * single-threaded: cpu_gemm.c): S = scale Q K^T for the rows (their rows
 * of the (n, n) scratch), softmax over each, O = S V. Each row's products
 * are what one sgemm over all rows gives it. */
typedef struct {
  wd_cpu_engine_t *e;
  int h, rows_per;
  float scale;
} head_task_t;

static void head_task(void *arg, int i) {
  const head_task_t *t = arg;
  wd_cpu_engine_t *e = t->e;
  const int n = e->hp.n_audio_ctx, d = e->hp.n_audio_state, dh = d / e->hp.n_audio_head;
  const int ld = 3 * d, r0 = i * t->rows_per;
  const int rows = r0 + t->rows_per < n ? t->rows_per : n - r0;
  if (rows <= 0)
    return;
  float *S = e->e_s + (size_t)r0 * (size_t)n;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, dh, t->scale,
              e->e_qkv + (size_t)r0 * (size_t)ld + t->h * dh, ld, e->e_qkv + d + t->h * dh, ld,
              0.0f, S, n);
  for (int r = 0; r < rows; r++)
    wd_cpu_softmax_vec(S + (size_t)r * (size_t)n, n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dh, n, 1.0f, S, n,
              e->e_qkv + 2 * d + t->h * dh, ld, 0.0f, e->e_o + (size_t)r0 * (size_t)d + t->h * dh,
              d);
}

/* f32 -> f16 in F16_CHUNKS pieces. */
#define F16_CHUNKS 8
typedef struct {
  const float *x;
  uint16_t *y;
  size_t n;
} f16_task_t;

static void f16_task(void *arg, int i) {
  const f16_task_t *t = arg;
  const size_t per = (t->n + F16_CHUNKS - 1) / F16_CHUNKS, a = (size_t)i * per;
  if (a < t->n)
    wd_cpu_f32_to_f16_vec(t->x + a, t->y + a, a + per < t->n ? per : t->n - a);
}

/* ---- the encoder ---- */

/* im2col for a kernel-3, padding-1 convolution: col (n_out, cin * 3), column
 * c * 3 + k holds in[t * stride + k - 1][c], zero outside; the kernel
 * (cout, cin, 3) is read as (cout, cin * 3), matching. */
static void im2col3(const float *in, int n_in, int cin, int stride, float *col, int n_out) {
  const size_t kc = (size_t)cin * 3;
  for (int t = 0; t < n_out; t++) {
    float *row = col + (size_t)t * kc;
    for (int k = 0; k < 3; k++) {
      const int src = t * stride + k - 1;
      if (src < 0 || src >= n_in) {
        for (int c = 0; c < cin; c++)
          row[(size_t)c * 3 + (size_t)k] = 0.0f;
        continue;
      }
      const float *x = in + (size_t)src * (size_t)cin;
      for (int c = 0; c < cin; c++)
        row[(size_t)c * 3 + (size_t)k] = x[c];
    }
  }
}

/* The blocked attention (cpu_enc_attn.h) over the engine's threads: each
 * head's keys and values packed (one task a head), then blocks of 64
 * queries of every head, one task a thread (at most WD_ENC_ATTN_TASKS)
 * taking a contiguous run of blocks (a head's keys and values stay in
 * cache from one block to the next) with scratch of its own: one run a
 * thread keeps a thread on one scratch (measured on 2 cores, base: 16
 * runs of 12 blocks took 8 % longer than 2 of 96). e_s holds the packed
 * heads, then the scratches. */
typedef struct {
  wd_cpu_engine_t *e;
  int n, d, dh, ld, n_blk, items, per;
  float scale;
  float *kv, *scratch;
} ea_task_t;

static void ea_pack(void *arg, int h) {
  const ea_task_t *t = arg;
  wd_cpu_enc_attn_pack(t->e->e_qkv + t->d + h * t->dh, t->e->e_qkv + 2 * t->d + h * t->dh, t->n,
                       t->ld, t->kv + (size_t)h * wd_cpu_enc_attn_kv_elems(t->n));
}

static void ea_blocks(void *arg, int i) {
  const ea_task_t *t = arg;
  float *scratch = t->scratch + (size_t)i * wd_cpu_enc_attn_scratch_elems(t->n);
  for (int it = i * t->per; it < (i + 1) * t->per && it < t->items; it++) {
    const int h = it / t->n_blk, r0 = (it % t->n_blk) * WD_ENC_ATTN_BLOCK;
    const int rows = t->n - r0 < WD_ENC_ATTN_BLOCK ? t->n - r0 : WD_ENC_ATTN_BLOCK;
    const float *qkv = t->e->e_qkv + (size_t)r0 * (size_t)t->ld + (size_t)h * (size_t)t->dh;
    wd_cpu_enc_attn_block(qkv, rows, t->ld, t->kv + (size_t)h * wd_cpu_enc_attn_kv_elems(t->n),
                          t->n, t->scale, scratch,
                          t->e->e_o + (size_t)r0 * (size_t)t->d + (size_t)h * (size_t)t->dh,
                          t->d);
  }
}

/* Heads 0 .. nh-1 (all of them in the encoder; fewer when measured), each
 * the model's head width wide (d / n_audio_head, not d / nh). */
static void blocked_attention(wd_cpu_engine_t *e, float scale, int nh) {
  const int n = e->hp.n_audio_ctx, d = e->hp.n_audio_state;
  ea_task_t t = { .e = e, .n = n, .d = d, .dh = d / e->hp.n_audio_head, .ld = 3 * d,
                  .n_blk = (n + WD_ENC_ATTN_BLOCK - 1) / WD_ENC_ATTN_BLOCK, .scale = scale,
                  .kv = e->e_s };
  t.items = nh * t.n_blk;
  const int tasks = e->n_threads < WD_ENC_ATTN_TASKS ? e->n_threads : WD_ENC_ATTN_TASKS;
  t.per = (t.items + tasks - 1) / tasks;
  t.scratch = e->e_s + (size_t)nh * wd_cpu_enc_attn_kv_elems(n);
  wd_cpu_parallel(e, nh, ea_pack, &t);
  wd_cpu_parallel(e, (t.items + t.per - 1) / t.per, ea_blocks, &t);
}

void wd_cpu_enc_attn_heads(wd_cpu_engine_t *e, int blocked, int nh, float scale) {
  const int n = e->hp.n_audio_ctx;
  if (blocked) {
    blocked_attention(e, scale, nh);
    return;
  }
  for (int h = 0; h < nh; h++) {
    head_task_t t = { .e = e, .h = h, .scale = scale };
    t.rows_per = ((n + e->n_threads - 1) / e->n_threads + 63) / 64 * 64;
    wd_cpu_parallel(e, (n + t.rows_per - 1) / t.rows_per, head_task, &t);
  }
}

static void enc_attention(wd_cpu_engine_t *e, const cpu_enc_layer_t *L) {
  const int n = e->hp.n_audio_ctx, d = e->hp.n_audio_state, nh = e->hp.n_audio_head;
  const int dh = d / nh, ld = 3 * d;
  const float scale = (float)(1.0 / sqrt((double)dh));
  ln_rows(e, e->e_x, e->e_h, n, d, L->attn_g, L->attn_b);
  wd_cpu_gemm_xwt_bias(e, n, e->e_h, d, &L->qkv, 0, ld, L->bqkv, e->e_qkv, ld);
  const double t0 = wd_now_ms();
  wd_cpu_enc_attn_heads(e, e->enc_blocked, nh, scale);
  e->attn_ms += wd_now_ms() - t0;
  /* x += O Wo^T + bo: the product accumulates into the residual stream. */
  sgemm_xwt(e, n, e->e_o, d, &L->o, 1.0f, e->e_x, d);
  wd_cpu_bias_rows(e, e->e_x, n, d, d, L->bo, 0, NULL);
}

static void enc_mlp(wd_cpu_engine_t *e, const cpu_enc_layer_t *L) {
  const int n = e->hp.n_audio_ctx, d = e->hp.n_audio_state;
  ln_rows(e, e->e_x, e->e_h, n, d, L->mlp_g, L->mlp_b);
  wd_cpu_gemm_xwt_bias(e, n, e->e_h, d, &L->fc1, 0, 4 * d, L->b1, e->e_f, 4 * d);
  wd_cpu_bias_rows(e, e->e_f, n, 4 * d, 4 * d, NULL, 1, NULL);
  sgemm_xwt(e, n, e->e_f, 4 * d, &L->fc2, 1.0f, e->e_x, d);
  wd_cpu_bias_rows(e, e->e_x, n, d, d, L->b2, 0, NULL);
}

int wd_cpu_encode(void *self, int a, const float *mel) {
  wd_cpu_engine_t *e = self;
  if (a < 0 || a >= e->max_audio || !mel)
    return WD_EINVAL;
  const wd_hparams_t *hp = &e->hp;
  const int nm = hp->n_mels, n = hp->n_audio_ctx, T = 2 * n, da = hp->n_audio_state;
  const double t0 = wd_now_ms();
  /* The mel is (n_mels, frames); the convolution wants frames as rows. */
  for (int i = 0; i < nm; i++)
    for (int t = 0; t < T; t++)
      e->e_melT[(size_t)t * (size_t)nm + (size_t)i] = mel[(size_t)i * (size_t)T + (size_t)t];
  e->attn_ms = 0.0;
  im2col3(e->e_melT, T, nm, 1, e->e_col, T);
  wd_cpu_gemm_xwt_bias(e, T, e->e_col, nm * 3, &e->conv1, 0, da, e->conv1_b, e->e_x1, da);
  wd_cpu_bias_rows(e, e->e_x1, T, da, da, NULL, 1, NULL);
  im2col3(e->e_x1, T, da, 2, e->e_col, n);
  wd_cpu_gemm_xwt_bias(e, n, e->e_col, da * 3, &e->conv2, 0, da, e->conv2_b, e->e_x, da);
  wd_cpu_bias_rows(e, e->e_x, n, da, da, NULL, 1, e->enc_pos);
  for (int l = 0; l < hp->n_audio_layer; l++) {
    enc_attention(e, &e->enc[l]);
    enc_mlp(e, &e->enc[l]);
  }
  ln_rows(e, e->e_x, e->e_x, n, da, e->enc_ln_g, e->enc_ln_b);
  const double t1 = wd_now_ms();
  /* Cross K/V of every decoder layer: K (n, d) = enc . Wk^T and V (n, d) =
   * enc . Wv^T + bv in f32 (one product each, reading the stacked
   * matrix's halves), then stored as f16 in the audio slot. */
  const int d = hp->n_text_state;
  const size_t slab = (size_t)n * (size_t)d;
  float *K = e->e_qkv, *V = e->e_qkv + slab; /* (n, 3 d_a) of scratch holds both */
  for (int l = 0; l < hp->n_text_layer; l++) {
    const cpu_dec_layer_t *L = &e->dec[l];
    wd_cpu_gemm_xwt(e, n, e->e_x, da, &L->xkv, 0, d, 0.0f, K, d);
    wd_cpu_gemm_xwt_bias(e, n, e->e_x, da, &L->xkv, d, d, L->bxkv + d, V, d);
    const size_t at = ((size_t)a * (size_t)hp->n_text_layer + (size_t)l) * slab;
    f16_task_t t = { .x = K, .y = e->xk + at, .n = slab };
    wd_cpu_parallel(e, F16_CHUNKS, f16_task, &t);
    t = (f16_task_t){ .x = V, .y = e->xv + at, .n = slab };
    wd_cpu_parallel(e, F16_CHUNKS, f16_task, &t);
  }
  e->audio_ok[a] = 1;
  e->encode_ms = t1 - t0;
  e->cross_ms = wd_now_ms() - t1;
  return 0;
}
