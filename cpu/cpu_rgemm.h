/*
 * cpu_rgemm.h - the reduced-precision products of --compute-type bf16 and
 * int8 (issue #22): every linear layer of the encoder and the decoder, the
 * cross K/V projection and the tied logits projection, for one row (a step)
 * or 1500 (an encoder window) alike. The convolutions and the attention's
 * own products (Q.K, P.V) stay f32.
 *
 * Weights are converted once at load (wd_cpu_mat_reduce), rows padded with
 * zeros to kp, a multiple of 64 elements, so the kernels have no tails,
 * and packed in blocks of 16 outputs interleaved by the instruction's
 * group of k (cpu_rgemm.c):
 *   bf16  bf16, rounded to nearest-even from the file's values;
 *         block b: [kp / 2][16 outputs][2]
 *   int8  int8 q with one f32 scale per output row, max|w| / 127
 *         (CTranslate2's int8 scheme), and wsum[o] = sum_k q[o][k];
 *         block b: [kp / 4][16 outputs][4]
 * Activations are converted per product, one row at a time:
 *   bf16  rounded to nearest-even (denormals to zero, as the instruction
 *         does)
 *   int8  one scale per row, max|x| / 127, q = round(x * 127 / max|x|),
 *         stored as u8 q + 128 for VNNI (it multiplies u8 by s8; the
 *         128 * wsum[o] that adds is taken off after the sum), as s8 q
 *         for AVX2
 * and the product is
 *   bf16  y = sum_k x_k w_k in f32 (vdpbf16ps: pairs of exact products)
 *   int8  y = (sum_k q_x q_w) * sx * sw, the sum exact in int32
 * then y + b, gelu or the residual add as the GEMV's op says.
 *
 * Each output's sum runs in one order whatever the row count and wherever
 * the row falls in a tile (int8 sums are exact integers; bf16 ones keep one
 * accumulator per output in a fixed fold), so a sequence's logits stay
 * bit-identical alone or batched, and int8's paths (AVX-512 VNNI, AVX2,
 * portable) give the same bits.
 *
 * Paths are picked from CPU features: bf16 needs AVX512-BF16; int8 runs
 * AVX512-VNNI where present, else AVX2 (16-bit products, no saturation);
 * another CPU refuses the compute type at load with a message.
 */
#ifndef WD_CPU_RGEMM_H
#define WD_CPU_RGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_engine.h"
#include "cpu_gemv.h"

/* The kernel set a compute type runs on. */
typedef enum {
  CPU_RPATH_NONE,     /* the CPU cannot run the compute type */
  CPU_RPATH_PORTABLE, /* plain C: tests' reference; never picked for an engine */
  CPU_RPATH_AVX2,     /* int8: 16-bit products, 32-bit sums */
  CPU_RPATH_VNNI512,  /* int8: vpdpbusd on 512 bits */
  CPU_RPATH_BF16_512, /* bf16: vdpbf16ps on 512 bits */
} cpu_rpath_t;

/* The path for ct on a CPU with features f (cpu_features.h's bits; pure, so
 * tests pass masked feature sets). CPU_RPATH_NONE for f32. */
cpu_rpath_t wd_cpu_rgemm_pick(wd_cpu_compute_t ct, unsigned f);
/* "int8, AVX512-VNNI", "bf16, AVX512-BF16", ...: what a path runs. */
const char *wd_cpu_rpath_name(cpu_rpath_t p);
/* Why this CPU cannot run ct (one line), or NULL when it can. */
const char *wd_cpu_rgemm_refusal(wd_cpu_compute_t ct, unsigned f);

/* Elements of a row padded for the kernels. */
static inline int cpu_rgemm_kp(int k) { return (k + 63) / 64 * 64; }
/* Bytes of one padded activation or weight row of k elements under ct. */
size_t wd_cpu_rgemm_row_bytes(wd_cpu_compute_t ct, int k);

/* Bytes a converted (n_out, k) matrix takes: the packed blocks of 16
 * outputs (n_out rounded up), and int8's scales and sums. */
size_t wd_cpu_rgemm_mat_bytes(wd_cpu_compute_t ct, int n_out, int k);
/* Row o of a converted matrix as f32 (the values the kernels multiply). */
void wd_cpu_rgemm_weight_row(const cpu_mat_t *w, int o, float *out);

/* Runs fn(arg, i) for i in [0, n), on threads or not (wd_cpu_parallel). */
typedef void (*cpu_par_fn)(void *ctx, int n, void (*fn)(void *arg, int i), void *arg);

/* Converts w (as wd_cpu_mat_load left it) to ct's layout in place, its rows
 * split over par (NULL: this thread). WD_ENOMEM; WD_EINVAL for another ct. */
int wd_cpu_mat_reduce(cpu_mat_t *w, wd_cpu_compute_t ct, cpu_par_fn par, void *par_ctx);

/* One product: y[r][o - o0] (op)= x[r] . W[o] + b[o - o0], rows r < n_rows,
 * outputs o0 <= o < o0 + n. xq and xs hold the converted rows (n_rows rows
 * of wd_cpu_rgemm_row_bytes(ct, n_in) bytes; xs the int8 scales). */
typedef struct {
  const cpu_mat_t *w; /* reduced (w->ct != F32) */
  int o0, n;
  const float *b; /* (n) or NULL */
  int n_rows;
  const float *x; /* (n_rows, ldx) f32 */
  int ldx;
  float *y; /* (n_rows, ldy) */
  int ldy;
  cpu_gemv_op_t op;
  void *xq;
  float *xs;
  cpu_rpath_t path;
  int raw; /* 1: y (op)= x . W only (op SET or ADD; b and GELU are the
              caller's, over many rows at once: wd_cpu_bias_rows) */
} cpu_rgemm_t;

/* Converts rows [r0, r1) of g->x into g->xq / g->xs. */
void wd_cpu_rgemm_prep(const cpu_rgemm_t *g, int r0, int r1);
/* Outputs [o0 + a, o0 + b) of g, every row (after prep of every row);
 * o0 and a are multiples of 16 (a block). */
void wd_cpu_rgemm_range(const cpu_rgemm_t *g, int a, int b);

#endif
