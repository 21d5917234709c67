/*
 * cpu_qgemv.h - the GEMV's dot kernels for the 32-element block types
 * (q8_0, q5_0, q5_1, q4_0, q4_1), in cpu_qgemv.c; internal to cpu_gemv.c.
 *
 * Each block is dequantized in registers exactly as core/quant.c's
 * reference does (the same f32 products, and sums for the _1 types' offset,
 * unfused), then enters the same 16-lane f32 FMA order as the f32 kernel:
 * lane i sums elements i, i + 16, i + 32, ... in two 8-wide accumulators,
 * folded as cpu_hsum8 / cpu_lanes_fold fold them. A quantized GEMV's
 * output is therefore bit-identical to the f32 GEMV over the dequantized
 * matrix on the same path (AVX2 or portable), which is what an f32 load
 * gave before the blocks were kept.
 */
#ifndef WD_CPU_QGEMV_H
#define WD_CPU_QGEMV_H

#include <stdint.h>
#include <string.h>

#include "cpu_features.h"
#include "model.h" /* wd_dtype_t */

/* res[r] = W_row . x[r] for r < R (R 1 .. 4): the fixed-order dot products
 * of one weight row of k elements (k a multiple of 16; of 32 for blocks). */
typedef void (*cpu_dot_fn)(const void *wrow, int k, const float *const *x, int R, float *res);
/* Four weight rows (wrow, wrow + stride, ...) against R (1 .. 4) activation
 * rows: res[o * 4 + r], each the cpu_dot_fn sum of row o and x[r], bit for bit. */
typedef void (*cpu_dot4_fn)(const void *wrow, size_t stride, int k, const float *const *x, int R,
                            float *res);

/* The block type's dot: simd 1 the AVX2 one (the caller checked the CPU
 * has it), 0 the portable one. NULL for f32, f16 and unknown types. */
cpu_dot_fn wd_cpu_qgemv_dot(wd_dtype_t type, int simd);

/* out[0 .. k) = the row of blocks at wrow as f32, with the values
 * core/quant.c gives (k a multiple of 32). */
typedef void (*cpu_deq_fn)(const void *wrow, int k, float *out);

/* The block type's row dequantizer (simd as above); NULL for other types. */
cpu_deq_fn wd_cpu_qgemv_deq(wd_dtype_t type, int simd);

/* A weight at byte address p, whatever its alignment (matrices read in
 * place from a ggml file start at any address; cpu_mat.h). */
static inline uint16_t cpu_ld_u16(const unsigned char *p) {
  uint16_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline float cpu_ld_f32(const unsigned char *p) {
  float v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* The portable kernels' fold of 16 lane sums: pairwise as the AVX2 kernel
 * folds its two 8-wide accumulators. */
static inline float cpu_lanes_fold(float lane[16]) {
  for (int j = 0; j < 8; j++)
    lane[j] += lane[j + 8];
  for (int j = 0; j < 4; j++)
    lane[j] += lane[j + 4];
  return (lane[0] + lane[2]) + (lane[1] + lane[3]);
}

#if CPU_X86
#include <immintrin.h>

#define CPU_TARGET __attribute__((target("avx2,fma,f16c")))

/* The two accumulators' 16 lanes to one sum, in one fixed order. */
CPU_TARGET static inline float cpu_hsum8(__m256 a, __m256 b) {
  const __m256 s = _mm256_add_ps(a, b);
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}
#endif

#endif
