/*
 * diar_vec.c - see diar_vec.h.
 */
#include "diar_vec.h"

#include <string.h>

#include "diar_gemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define WD_DV_X86 1
#endif

static inline float relu1(float v) { return v > 0.0f ? v : 0.0f; }

#ifdef WD_DV_X86
/* max_ps(v, 0) returns its second operand (+0) where v is NaN or either
 * zero, and v where v > 0: relu1's answer. The explicit vzeroupper: at -O0
 * (the sanitizer trees) GCC leaves the upper YMM state dirty after a
 * target("avx2") function, which slows the SSE code that follows. */
__attribute__((target("avx2"))) static void bn_relu_avx2(const float *x, size_t ldx,
                                                         size_t rows, size_t n,
                                                         const float *scale,
                                                         const float *shift, float *y,
                                                         size_t ldy) {
  const __m256 zero = _mm256_setzero_ps();
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    size_t c = 0;
    for (; c + 8 <= n; c += 8) {
      const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + c),
                                                   _mm256_loadu_ps(scale + c)),
                                     _mm256_loadu_ps(shift + c));
      _mm256_storeu_ps(yr + c, _mm256_max_ps(v, zero));
    }
    for (; c < n; c++)
      yr[c] = relu1(xr[c] * scale[c] + shift[c]);
  }
  _mm256_zeroupper();
}

__attribute__((target("avx2"))) static void add_relu_avx2(const float *a, const float *b,
                                                          float *dst, size_t n) {
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_max_ps(_mm256_add_ps(_mm256_loadu_ps(a + i),
                                                          _mm256_loadu_ps(b + i)),
                                            zero));
  for (; i < n; i++)
    dst[i] = relu1(a[i] + b[i]);
  _mm256_zeroupper();
}

__attribute__((target("avx2"))) static void relu_avx2(float *x, size_t n) {
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_max_ps(_mm256_loadu_ps(x + i), zero));
  for (; i < n; i++)
    x[i] = relu1(x[i]);
  _mm256_zeroupper();
}

static int use_avx2(void) { return strcmp(wd_diar_gemm_kernel(), "avx2+fma") == 0; }
#endif


void wd_diar_bn_relu(const float *x, size_t ldx, size_t rows, size_t n, const float *scale,
                     const float *shift, float *y, size_t ldy) {
#ifdef WD_DV_X86
  if (use_avx2()) {
    bn_relu_avx2(x, ldx, rows, n, scale, shift, y, ldy);
    return;
  }
#endif
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < n; c++)
      y[r * ldy + c] = relu1(x[r * ldx + c] * scale[c] + shift[c]);
}

void wd_diar_relu(float *x, size_t n) {
#ifdef WD_DV_X86
  if (use_avx2()) {
    relu_avx2(x, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++)
    x[i] = relu1(x[i]);
}

void wd_diar_add_relu(const float *a, const float *b, float *dst, size_t n) {
#ifdef WD_DV_X86
  if (use_avx2()) {
    add_relu_avx2(a, b, dst, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++)
    dst[i] = relu1(a[i] + b[i]);
}
