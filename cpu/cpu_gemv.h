/*
 * cpu_gemv.h - the decoder's batched GEMV: n rows of activations against
 * one weight matrix, each weight row read once for all rows.
 *
 *   y[r][o] (op)= sum_k W[o][k] * x[r][k] + b[o]   r < n_rows, o0 <= o < o1
 *
 * Each (r, o) sum runs in one fixed order (16 lanes in two 8-wide
 * accumulators, folded the same way) whatever n_rows is and whichever row
 * block r falls in, so a row's outputs are bit-identical alone or batched.
 * W is f32, f16 or a 32-element block type (cpu_mat.h); the block types
 * are dequantized in registers exactly as core/quant.c does and summed in
 * f32 in the same order (cpu_qgemv.h), so they give what the f32 kernel
 * gives over the dequantized matrix. The AVX2+FMA+F16C kernels are picked
 * at run time (cpu_features.h); elsewhere (other x86-64, arm64)
 * portable C loops with the same lane structure run.
 */
#ifndef WD_CPU_GEMV_H
#define WD_CPU_GEMV_H

#include "cpu_mat.h"

typedef enum {
  CPU_GEMV_SET,  /* y = Wx + b */
  CPU_GEMV_GELU, /* y = gelu(Wx + b) */
  CPU_GEMV_ADD,  /* y += Wx + b (the residual) */
} cpu_gemv_op_t;

typedef struct {
  const cpu_mat_t *w;
  const float *b; /* (n_out) or NULL */
  int n_rows;
  const float *x; /* (n_rows, ldx) */
  int ldx;
  float *y; /* (n_rows, ldy) */
  int ldy;
  cpu_gemv_op_t op;
} cpu_gemv_t;

/* Builds the portable kernel's f16 table; call before wd_cpu_gemv_range
 * (thread-safe, idempotent). */
void wd_cpu_gemv_init(void);
/* That table: f16 bits -> f32, 65536 entries (valid after wd_cpu_gemv_init). */
const float *wd_cpu_f16_lut(void);

/* Outputs [o0, o1) of g, every row. */
void wd_cpu_gemv_range(const cpu_gemv_t *g, int o0, int o1);
/* The same on a chosen path: simd 0 the portable kernels, 1 the AVX2 ones
 * where wd_cpu_has_avx2 (the portable ones elsewhere), 2 the
 * AVX-512 ones for f16/f32 weights where the CPU has them (else as 1),
 * whatever WHISPERD_CPU_PORTABLE says; tests compare them in one process. */
void wd_cpu_gemv_range_path(const cpu_gemv_t *g, int o0, int o1, int simd);
/* The path wd_cpu_gemv_range takes (2 AVX-512, 1 AVX2, 0 portable). */
int wd_cpu_gemv_widest(void);
/* That path's name ("avx512f+avx2+fma+f16c", "avx2+fma+f16c", "portable"). */
const char *wd_cpu_gemv_path_name(int path);
/* "avx512f+avx2+fma+f16c", "avx2+fma+f16c" or "portable": the kernels
 * wd_cpu_gemv_range runs (the AVX-512 ones serve f16 and f32 weights). */
const char *wd_cpu_gemv_kernel(void);

float wd_cpu_gelu(float x);

#endif
