/*
 * cpu_qgemv.c - GEMV dot kernels over 32-element weight blocks (see
 * cpu_qgemv.h for the order they sum in, core/quant.h for the layouts).
 *
 * AVX2: one block at a time becomes four 8-wide f32 vectors in registers
 * (widen the 8-bit or 4-bit codes to i32, add the fifth bit, subtract the
 * zero point, convert, multiply by the f16 scale, add the _1 types' min),
 * which take the FMAs of up to four activation rows. Nothing is written
 * back: a q4_0 row of 384 weights is 216 bytes read, against 768 (f16) or
 * 1536 (f32). Portable: a chunk of the row is dequantized by core/quant.c
 * itself into a stack buffer, then summed in the same 16 lanes as the
 * portable f32 kernel.
 */
#include "cpu_qgemv.h"

#include <stdint.h>
#include <string.h>

#include "quant.h"

/* ---- portable ---- */

enum { CHUNK = 256 }; /* elements dequantized at a time: 1 KiB of stack */

static void dot_portable_q(wd_dtype_t t, const void *wrow, int k, const float *const *x, int R,
                           float *res) {
  const size_t bb = wd_dtype_row_bytes(t, WD_QK);
  float lane[4][16] = { { 0 } }, wbuf[CHUNK];
  for (int i0 = 0; i0 < k; i0 += CHUNK) {
    const int n = k - i0 < CHUNK ? k - i0 : CHUNK;
    /* Cannot fail: the type is a block type and n a multiple of 32. */
    (void)wd_dequantize_row(t, (const uint8_t *)wrow + (size_t)(i0 / WD_QK) * bb, wbuf, n);
    for (int r = 0; r < R; r++) {
      const float *xr = x[r] + i0;
      for (int i = 0; i < n; i += 16)
        for (int j = 0; j < 16; j++)
          lane[r][j] += wbuf[i + j] * xr[i + j];
    }
  }
  for (int r = 0; r < R; r++)
    res[r] = cpu_lanes_fold(lane[r]);
}

#define DEF_PORTABLE(name, T)                                                                \
  static void dot_portable_##name(const void *w, int k, const float *const *x, int R,       \
                                  float *res) {                                             \
    dot_portable_q(T, w, k, x, R, res);                                                     \
  }
DEF_PORTABLE(q8_0, WD_DTYPE_Q8_0)
DEF_PORTABLE(q5_0, WD_DTYPE_Q5_0)
DEF_PORTABLE(q5_1, WD_DTYPE_Q5_1)
DEF_PORTABLE(q4_0, WD_DTYPE_Q4_0)
DEF_PORTABLE(q4_1, WD_DTYPE_Q4_1)

/* ---- AVX2 + FMA + F16C ---- */

#if CPU_X86
#define CPU_INLINE CPU_TARGET static inline __attribute__((always_inline))

/* The f16 at b (a block's d or m), broadcast. */
CPU_INLINE __m256 half_at(const uint8_t *b) {
  uint16_t h;
  memcpy(&h, b, sizeof h);
  return _mm256_set1_ps(_cvtsh_ss(h));
}

/* The 32 nibbles of qs[16] as i32: n[0] elements 0..7 (low nibbles of
 * qs[0..8)), n[1] 8..15, n[2] 16..23 (their high nibbles), n[3] 24..31.
 * Each 8 bytes are widened once (the shuffle port is the bottleneck) and
 * split by mask and shift. */
CPU_INLINE void nibbles(const uint8_t *qs, __m256i n[4]) {
  const __m256i m = _mm256_set1_epi32(0x0f);
  const __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)qs));
  const __m256i v1 =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(qs + 8)));
  n[0] = _mm256_and_si256(v0, m);
  n[1] = _mm256_and_si256(v1, m);
  n[2] = _mm256_srli_epi32(v0, 4);
  n[3] = _mm256_srli_epi32(v1, 4);
}

/* ORs the fifth bit of each element (bit i of the u32 at qh) into n. */
CPU_INLINE void fifth_bits(const uint8_t *qh, __m256i n[4]) {
  uint32_t h;
  memcpy(&h, qh, sizeof h); /* little-endian, as x86 is */
  const __m256i hv = _mm256_set1_epi32((int)h), one = _mm256_set1_epi32(1);
  for (int j = 0; j < 4; j++) {
    const __m256i sh = _mm256_setr_epi32(8 * j, 8 * j + 1, 8 * j + 2, 8 * j + 3, 8 * j + 4,
                                         8 * j + 5, 8 * j + 6, 8 * j + 7);
    const __m256i bit = _mm256_and_si256(_mm256_srlv_epi32(hv, sh), one);
    n[j] = _mm256_or_si256(n[j], _mm256_slli_epi32(bit, 4));
  }
}

/* (q - zero) * d, or q * d + m (has_m): the reference's two roundings,
 * separately (C11 mode compiles without FP contraction). */
CPU_INLINE void scale4(const __m256i n[4], int zero, __m256 d, int has_m, __m256 m,
                       __m256 w[4]) {
  const __m256i z = _mm256_set1_epi32(zero);
  for (int j = 0; j < 4; j++) {
    const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(n[j], z)), d);
    w[j] = has_m ? _mm256_add_ps(v, m) : v;
  }
}

/* One block at b as w[0..4): elements 0..7, 8..15, 16..23, 24..31. */
CPU_INLINE void deq_q8_0(const uint8_t *b, __m256 w[4]) {
  const __m256 d = half_at(b);
  for (int j = 0; j < 4; j++) {
    const __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + 8 * j));
    w[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
  }
}
CPU_INLINE void deq_q4_0(const uint8_t *b, __m256 w[4]) {
  __m256i n[4];
  nibbles(b + 2, n);
  scale4(n, 8, half_at(b), 0, _mm256_setzero_ps(), w);
}
CPU_INLINE void deq_q4_1(const uint8_t *b, __m256 w[4]) {
  __m256i n[4];
  nibbles(b + 4, n);
  scale4(n, 0, half_at(b), 1, half_at(b + 2), w);
}
CPU_INLINE void deq_q5_0(const uint8_t *b, __m256 w[4]) {
  __m256i n[4];
  nibbles(b + 6, n);
  fifth_bits(b + 2, n);
  scale4(n, 16, half_at(b), 0, _mm256_setzero_ps(), w);
}
CPU_INLINE void deq_q5_1(const uint8_t *b, __m256 w[4]) {
  __m256i n[4];
  nibbles(b + 8, n);
  fifth_bits(b + 4, n);
  scale4(n, 0, half_at(b), 1, half_at(b + 2), w);
}

/* R rows (a constant per instance, the row loop unrolled so that the
 * eight accumulators stay in registers, as in cpu_gemv.c) against one row
 * of blocks of BB bytes. a0 takes elements 0..7 and 16..23 of each block,
 * a1 8..15 and 24..31: the f32 kernel's order over 16-element steps. */
#define DEF_Q(name, BB, R)                                                                   \
  CPU_TARGET static void dot_##name##_##R(const void *wrow, int k, const float *const *x,    \
                                          float *res) {                                     \
    const uint8_t *b = wrow;                                                                \
    __m256 a0[4], a1[4];                                                                    \
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) a0[r] = a1[r] = _mm256_setzero_ps(); \
    for (int i = 0; i < k; i += WD_QK, b += (BB)) {                                         \
      __m256 w[4];                                                                          \
      deq_##name(b, w);                                                                     \
      _Pragma("GCC unroll 4") for (int r = 0; r < (R); r++) {                               \
        a0[r] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(x[r] + i), a0[r]);                    \
        a1[r] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(x[r] + i + 8), a1[r]);                \
        a0[r] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x[r] + i + 16), a0[r]);               \
        a1[r] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x[r] + i + 24), a1[r]);               \
      }                                                                                     \
    }                                                                                       \
    for (int r = 0; r < (R); r++)                                                           \
      res[r] = cpu_hsum8(a0[r], a1[r]);                                                     \
  }

#define DEF_TYPE(name, BB)                                                                   \
  CPU_TARGET static void deq_row_##name(const void *wrow, int k, float *out) {              \
    const uint8_t *b = wrow;                                                                \
    for (int i = 0; i < k; i += WD_QK, b += (BB)) {                                         \
      __m256 w[4];                                                                          \
      deq_##name(b, w);                                                                     \
      for (int j = 0; j < 4; j++)                                                           \
        _mm256_storeu_ps(out + i + 8 * j, w[j]);                                            \
    }                                                                                       \
  }                                                                                         \
  DEF_Q(name, BB, 1)                                                                        \
  DEF_Q(name, BB, 2)                                                                        \
  DEF_Q(name, BB, 3)                                                                        \
  DEF_Q(name, BB, 4)                                                                        \
  static void dot_avx2_##name(const void *w, int k, const float *const *x, int R,           \
                              float *res) {                                                 \
    switch (R) {                                                                            \
    case 1: dot_##name##_1(w, k, x, res); break;                                            \
    case 2: dot_##name##_2(w, k, x, res); break;                                            \
    case 3: dot_##name##_3(w, k, x, res); break;                                            \
    default: dot_##name##_4(w, k, x, res); break;                                           \
    }                                                                                       \
  }

/* Block bytes: core/quant.h. */
DEF_TYPE(q8_0, 34)
DEF_TYPE(q5_0, 22)
DEF_TYPE(q5_1, 24)
DEF_TYPE(q4_0, 18)
DEF_TYPE(q4_1, 20)
#endif

cpu_dot_fn wd_cpu_qgemv_dot(wd_dtype_t type, int simd) {
#if CPU_X86
  if (simd) {
    switch (type) {
    case WD_DTYPE_Q8_0: return dot_avx2_q8_0;
    case WD_DTYPE_Q5_0: return dot_avx2_q5_0;
    case WD_DTYPE_Q5_1: return dot_avx2_q5_1;
    case WD_DTYPE_Q4_0: return dot_avx2_q4_0;
    case WD_DTYPE_Q4_1: return dot_avx2_q4_1;
    default: return NULL;
    }
  }
#else
  (void)simd;
#endif
  switch (type) {
  case WD_DTYPE_Q8_0: return dot_portable_q8_0;
  case WD_DTYPE_Q5_0: return dot_portable_q5_0;
  case WD_DTYPE_Q5_1: return dot_portable_q5_1;
  case WD_DTYPE_Q4_0: return dot_portable_q4_0;
  case WD_DTYPE_Q4_1: return dot_portable_q4_1;
  default: return NULL;
  }
}

static void deq_row_portable(const void *wrow, int k, float *out, wd_dtype_t t) {
  /* Cannot fail: a block type, k a multiple of 32. */
  (void)wd_dequantize_row(t, wrow, out, k);
}
#define DEF_DEQ_PORTABLE(name, T)                                                            \
  static void deq_portable_##name(const void *w, int k, float *out) {                      \
    deq_row_portable(w, k, out, T);                                                         \
  }
DEF_DEQ_PORTABLE(q8_0, WD_DTYPE_Q8_0)
DEF_DEQ_PORTABLE(q5_0, WD_DTYPE_Q5_0)
DEF_DEQ_PORTABLE(q5_1, WD_DTYPE_Q5_1)
DEF_DEQ_PORTABLE(q4_0, WD_DTYPE_Q4_0)
DEF_DEQ_PORTABLE(q4_1, WD_DTYPE_Q4_1)

cpu_deq_fn wd_cpu_qgemv_deq(wd_dtype_t type, int simd) {
#if CPU_X86
  if (simd) {
    switch (type) {
    case WD_DTYPE_Q8_0: return deq_row_q8_0;
    case WD_DTYPE_Q5_0: return deq_row_q5_0;
    case WD_DTYPE_Q5_1: return deq_row_q5_1;
    case WD_DTYPE_Q4_0: return deq_row_q4_0;
    case WD_DTYPE_Q4_1: return deq_row_q4_1;
    default: return NULL;
    }
  }
#else
  (void)simd;
#endif
  switch (type) {
  case WD_DTYPE_Q8_0: return deq_portable_q8_0;
  case WD_DTYPE_Q5_0: return deq_portable_q5_0;
  case WD_DTYPE_Q5_1: return deq_portable_q5_1;
  case WD_DTYPE_Q4_0: return deq_portable_q4_0;
  case WD_DTYPE_Q4_1: return deq_portable_q4_1;
  default: return NULL;
  }
}
