/*
 * cpu_gemv512_kern.h - the AVX-512 GEMV dot kernels' bodies (f16 and f32
 * weights), included by cpu_gemv512.c, where they are compiled for
 * avx512f, and by tests/cpu/test_gemv512.c, where the same source is
 * compiled against SIMDe's portable AVX-512 so that a host without
 * AVX-512 checks them bit for bit against the AVX2 kernels.
 *
 * Lane order: one 16-wide accumulator per activation row, lane j summing
 * elements j, j + 16, j + 32, ... with FMA; its low and high halves are the
 * AVX2 kernel's two 8-wide accumulators, folded by the same cpu_hsum8. The
 * per-lane FMAs are the same single-rounding operations in the same order,
 * so a row's sums are bit-identical to the AVX2 kernel's: results do not
 * depend on which host (AVX2 or AVX-512) ran the step.
 *
 * The includer defines CPU512_TARGET (the function attribute) and provides
 * the intrinsics (<immintrin.h>, or SIMDe with native aliases), and may
 * define CPU512_LOAD_F16(p) (16 f16 at p as one __m512; by default one
 * vcvtph2ps).
 */
#ifndef WD_CPU_GEMV512_KERN_H
#define WD_CPU_GEMV512_KERN_H

#include <stdint.h>

#include "cpu_qgemv.h"
#include "f16.h"

#ifndef CPU512_LOAD_F16
#define CPU512_LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#endif
#define CPU512_LOAD_F32(p) _mm512_loadu_ps((const float *)(const void *)(p))

/* R4 rows (a constant per instance, so the accumulators stay in registers);
 * TAILF converts a weight of the scalar tail (k not a multiple of 16). */
#define CPU512_DOT_BODY(WT, LOAD, TAILF)                                               \
  const unsigned char *w = wrow; /* any alignment: cpu_mat.h */                        \
  __m512 a[4];                                                                        \
  _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) a[r] = _mm512_setzero_ps();     \
  int i = 0;                                                                          \
  for (; i + 16 <= k; i += 16) {                                                      \
    const __m512 wv = LOAD(w + sizeof(WT) * (size_t)i);                               \
    _Pragma("GCC unroll 4") for (int r = 0; r < R4; r++)                              \
      a[r] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x[r] + i), a[r]);                    \
  }                                                                                   \
  for (int r = 0; r < R4; r++) {                                                      \
    const __m256 lo = _mm512_castps512_ps256(a[r]);                                   \
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[r]), 1)); \
    float s = cpu_hsum8(lo, hi);                                                      \
    for (int j = i; j < k; j++)                                                       \
      s += TAILF(w + sizeof(WT) * (size_t)j) * x[r][j];                               \
    res[r] = s;                                                                       \
  }

#define CPU512_TAIL_F16(p) wd_f16_to_f32(cpu_ld_u16(p))
#define CPU512_TAIL_F32(p) cpu_ld_f32(p)
#define CPU512_DEF(NAME, WT, LOAD, TAILF, R)                                                 \
  CPU512_TARGET static void NAME##_##R(const void *wrow, int k, const float *const *x,        \
                                       float *res) {                                         \
    enum { R4 = R };                                                                         \
    CPU512_DOT_BODY(WT, LOAD, TAILF)                                                         \
  }
CPU512_DEF(cpu512_dot_f16, uint16_t, CPU512_LOAD_F16, CPU512_TAIL_F16, 1)
CPU512_DEF(cpu512_dot_f16, uint16_t, CPU512_LOAD_F16, CPU512_TAIL_F16, 2)
CPU512_DEF(cpu512_dot_f16, uint16_t, CPU512_LOAD_F16, CPU512_TAIL_F16, 3)
CPU512_DEF(cpu512_dot_f16, uint16_t, CPU512_LOAD_F16, CPU512_TAIL_F16, 4)
CPU512_DEF(cpu512_dot_f32, float, CPU512_LOAD_F32, CPU512_TAIL_F32, 1)
CPU512_DEF(cpu512_dot_f32, float, CPU512_LOAD_F32, CPU512_TAIL_F32, 2)
CPU512_DEF(cpu512_dot_f32, float, CPU512_LOAD_F32, CPU512_TAIL_F32, 3)
CPU512_DEF(cpu512_dot_f32, float, CPU512_LOAD_F32, CPU512_TAIL_F32, 4)

/* cpu_dot_fn's signature (cpu_qgemv.h): R 1 .. 4 rows. */
static void cpu512_dot_f16(const void *w, int k, const float *const *x, int R, float *res) {
  switch (R) {
  case 1: cpu512_dot_f16_1(w, k, x, res); break;
  case 2: cpu512_dot_f16_2(w, k, x, res); break;
  case 3: cpu512_dot_f16_3(w, k, x, res); break;
  default: cpu512_dot_f16_4(w, k, x, res); break;
  }
}

static void cpu512_dot_f32(const void *w, int k, const float *const *x, int R, float *res) {
  switch (R) {
  case 1: cpu512_dot_f32_1(w, k, x, res); break;
  case 2: cpu512_dot_f32_2(w, k, x, res); break;
  case 3: cpu512_dot_f32_3(w, k, x, res); break;
  default: cpu512_dot_f32_4(w, k, x, res); break;
  }
}

/* Four weight rows (outputs) at a time, rows wrow, wrow + stride, ... :
 * with one accumulator per output, an output's k / 16 FMAs form one chain
 * of dependent 4-cycle operations (one row at a time, at batch 1, the
 * decoder's GEMV waited on that chain); four outputs give 4 x R4
 * independent accumulators, and each activation vector is loaded once for
 * the four. Every output's lanes take the same FMAs in the same order as
 * the one-row kernel's and fold the same way: the same sums, bit for bit.
 * res[o * 4 + r]: output o, activation row r. */
#define CPU512_DOT4_BODY(WT, LOAD, TAILF)                                              \
  const unsigned char *w = wrow;                                                      \
  __m512 a[4][4];                                                                     \
  _Pragma("GCC unroll 4") for (int o = 0; o < 4; o++)                                 \
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) a[o][r] = _mm512_setzero_ps(); \
  int i = 0;                                                                          \
  for (; i + 16 <= k; i += 16) {                                                      \
    __m512 xv[4];                                                                     \
    _Pragma("GCC unroll 4") for (int r = 0; r < R4; r++) xv[r] = _mm512_loadu_ps(x[r] + i); \
    _Pragma("GCC unroll 4") for (int o = 0; o < 4; o++) {                             \
      const __m512 wv = LOAD(w + (size_t)o * stride + sizeof(WT) * (size_t)i);        \
      _Pragma("GCC unroll 4") for (int r = 0; r < R4; r++)                            \
        a[o][r] = _mm512_fmadd_ps(wv, xv[r], a[o][r]);                                \
    }                                                                                 \
  }                                                                                   \
  for (int o = 0; o < 4; o++)                                                         \
    for (int r = 0; r < R4; r++) {                                                    \
      const __m256 lo = _mm512_castps512_ps256(a[o][r]);                              \
      const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[o][r]), 1)); \
      float s = cpu_hsum8(lo, hi);                                                    \
      for (int j = i; j < k; j++)                                                     \
        s += TAILF(w + (size_t)o * stride + sizeof(WT) * (size_t)j) * x[r][j];        \
      res[o * 4 + r] = s;                                                             \
    }

#define CPU512_DEF4(NAME, WT, LOAD, TAILF, R)                                                \
  CPU512_TARGET static void NAME##_##R(const void *wrow, size_t stride, int k,               \
                                       const float *const *x, float *res) {                  \
    enum { R4 = R };                                                                         \
    CPU512_DOT4_BODY(WT, LOAD, TAILF)                                                        \
  }
CPU512_DEF4(cpu512_dot4_f16, uint16_t, CPU512_LOAD_F16, CPU512_TAIL_F16, 1)
CPU512_DEF4(cpu512_dot4_f16, uint16_t, CPU512_LOAD_F16, CPU512_TAIL_F16, 2)
CPU512_DEF4(cpu512_dot4_f16, uint16_t, CPU512_LOAD_F16, CPU512_TAIL_F16, 3)
CPU512_DEF4(cpu512_dot4_f16, uint16_t, CPU512_LOAD_F16, CPU512_TAIL_F16, 4)
CPU512_DEF4(cpu512_dot4_f32, float, CPU512_LOAD_F32, CPU512_TAIL_F32, 1)
CPU512_DEF4(cpu512_dot4_f32, float, CPU512_LOAD_F32, CPU512_TAIL_F32, 2)
CPU512_DEF4(cpu512_dot4_f32, float, CPU512_LOAD_F32, CPU512_TAIL_F32, 3)
CPU512_DEF4(cpu512_dot4_f32, float, CPU512_LOAD_F32, CPU512_TAIL_F32, 4)

/* cpu_dot4_fn's signature (cpu_qgemv.h). */
static void cpu512_dot4_f16(const void *w, size_t stride, int k, const float *const *x, int R,
                            float *res) {
  switch (R) {
  case 1: cpu512_dot4_f16_1(w, stride, k, x, res); break;
  case 2: cpu512_dot4_f16_2(w, stride, k, x, res); break;
  case 3: cpu512_dot4_f16_3(w, stride, k, x, res); break;
  default: cpu512_dot4_f16_4(w, stride, k, x, res); break;
  }
}

static void cpu512_dot4_f32(const void *w, size_t stride, int k, const float *const *x, int R,
                            float *res) {
  switch (R) {
  case 1: cpu512_dot4_f32_1(w, stride, k, x, res); break;
  case 2: cpu512_dot4_f32_2(w, stride, k, x, res); break;
  case 3: cpu512_dot4_f32_3(w, stride, k, x, res); break;
  default: cpu512_dot4_f32_4(w, stride, k, x, res); break;
  }
}

#endif
