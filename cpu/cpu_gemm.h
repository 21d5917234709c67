/*
 * cpu_gemm.h - the matrix products of many rows (the encoder, the cross
 * K/V projection, a prefill's or align's prompt) on OpenBLAS sgemm, with
 * the weights kept in memory as the model stores them.
 *
 * sgemm reads f32 only. An f16 or block-type matrix (cpu_mat.h) is widened
 * into one f32 scratch matrix of the engine just before its product, split
 * over the engine's threads, then given to sgemm: f16 -> f32 is exact and
 * the dequantization is core/quant.c's, so the product is the one an f32
 * copy made at load gave, bit for bit, without holding the copy (the
 * encoder of large-v3 in f32 is 2.5 GiB; its largest matrix, 26 MiB). The
 * widening costs a pass over the weights per product, a few per cent of
 * the product's time (the figures are in issue #22's note).
 *
 * The decoder's step stays on the GEMV (cpu_gemv.h), whose sums do not
 * depend on the batch; sgemm's blocking does depend on the row count, so
 * it serves only calls whose row count a batch cannot change.
 */
#ifndef WD_CPU_GEMM_H
#define WD_CPU_GEMM_H

#include "cpu_gemv.h"
#include "model.h"

typedef struct wd_cpu_engine wd_cpu_engine_t;

/* Elements of the engine's f32 widening scratch: the largest matrix (or
 * half of the cross K/V stack) a product may widen. */
size_t wd_cpu_gemm_scratch_elems(const wd_hparams_t *hp);

/* y (rows, n) = beta y + x (rows, w->n_in) . W[o0 .. o0 + n)^T. */
void wd_cpu_gemm_xwt(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                     int o0, int n, float beta, float *y, int ldy);

/* y (rows, n) = x . W[o0 .. o0 + n)^T + b (b: n values). On sgemm y starts
 * as b and sgemm adds onto it (beta 1), one pass over y fewer than a
 * product and a bias pass (OpenBLAS's beta 0 clears y first); the sums
 * round in another order than product-then-bias where sgemm splits the
 * inner dimension, in the last bit only. A bf16 or int8 matrix: the
 * product, then the bias. */
void wd_cpu_gemm_xwt_bias(wd_cpu_engine_t *e, int rows, const float *x, int ldx,
                          const cpu_mat_t *w, int o0, int n, const float *b, float *y, int ldy);

/* The linear layer of cpu_gemv_op_t on sgemm: y = x W^T + b (SET),
 * gelu(x W^T + b) (GELU), y += x W^T + b (ADD); b may be NULL. */
void wd_cpu_linear_rows(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                        const float *b, cpu_gemv_op_t op, float *y, int ldy);

/* The same on a matrix converted by --compute-type bf16 or int8
 * (cpu_rgemm.h): y[r][o - o0] (op)= x[r] . W[o] + b[o - o0] for o0 <= o <
 * o0 + n, the activations converted into the engine's scratch first. The
 * GEMV (wd_cpu_gemv_run) and the two calls above come here for such a matrix,
 * whatever the row count. */
void wd_cpu_rgemm_run(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                      int o0, int n, const float *b, cpu_gemv_op_t op, float *y, int ldy);

/* y (rows, n, row stride ld) += b, then gelu when asked, then += add
 * (rows, n) when not NULL; over the engine's threads. */
void wd_cpu_bias_rows(wd_cpu_engine_t *e, float *y, int rows, int ld, int n, const float *b,
                      int gelu, const float *add);

#endif
