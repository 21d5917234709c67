/*
 * cpu_vmath.c - vectorised softmax, GELU and LayerNorm rows (see cpu_vmath.h).
 */
#include "cpu_vmath.h"

#include <math.h>
#include <string.h>

#include "cpu_attn.h" /* wd_cpu_softmax_row */
#include "cpu_features.h"
#include "cpu_gemv.h" /* wd_cpu_gelu */
#include "f16.h"

#if CPU_X86
#include <immintrin.h>
#define VM_TARGET __attribute__((target("avx2,fma")))

/* e^x for x in about [-87, 88] (clamped there). */
VM_TARGET static inline __m256 vm_exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  /* r = x - k ln2, ln2 = 0.693359375 + (-2.12194440e-4): the first part has
   * few bits, so k * it is exact. */
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  /* * 2^k: k (in [-126, 127] after the clamp) added to the exponent. */
  const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(k), 23);
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

/* s[0 .. n) = e^(s - mx) in place; returns their sum, in 8 partial sums
 * then the tail's. */
VM_TARGET static float exp_sum_avx2(float *s, int n, float mx) {
  const __m256 m = _mm256_set1_ps(mx);
  __m256 sv = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = vm_exp(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
    _mm256_storeu_ps(s + j, v);
    sv = _mm256_add_ps(sv, v);
  }
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sv), _mm256_extractf128_ps(sv, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  float sum = _mm_cvtss_f32(s4);
  for (; j < n; j++) {
    s[j] = expf(s[j] - mx);
    sum += s[j];
  }
  return sum;
}

VM_TARGET static void softmax_avx2(float *s, int n) {
  __m256 mv = _mm256_set1_ps(-INFINITY);
  int j = 0;
  for (; j + 8 <= n; j += 8)
    mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + j));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float mx = _mm_cvtss_f32(m4);
  for (int t = j; t < n; t++)
    mx = s[t] > mx ? s[t] : mx;
  const float inv = 1.0f / exp_sum_avx2(s, n, mx);
  const __m256 iv = _mm256_set1_ps(inv);
  for (j = 0; j + 8 <= n; j += 8)
    _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), iv));
  for (; j < n; j++)
    s[j] *= inv;
}

/* gelu(x) = x/2 (1 + erf(x / sqrt 2)); erf(z) for z >= 0 by A&S 7.1.26,
 * odd symmetry for z < 0. */
VM_TARGET static inline __m256 vm_gelu(__m256 x) {
  const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
  const __m256 sign = _mm256_and_ps(z, _mm256_set1_ps(-0.0f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f),
                                 _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, _mm256_set1_ps(1.0f)));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  p = _mm256_mul_ps(p, t);
  const __m256 ex = vm_exp(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
  const __m256 erfa = _mm256_fnmadd_ps(p, ex, _mm256_set1_ps(1.0f));
  const __m256 erfz = _mm256_or_ps(erfa, sign);
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x),
                       _mm256_add_ps(_mm256_set1_ps(1.0f), erfz));
}

VM_TARGET static void bias_gelu_avx2(float *y, const float *b, int n) {
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_loadu_ps(y + j);
    if (b)
      v = _mm256_add_ps(v, _mm256_loadu_ps(b + j));
    _mm256_storeu_ps(y + j, vm_gelu(v));
  }
  for (; j < n; j++)
    y[j] = wd_cpu_gelu(y[j] + (b ? b[j] : 0.0f));
}

/* wd_cpu_layernorm_row with its two double sums in 16 lanes (4 vectors of
 * 4): the same statistics but for the order of the sums, which in double
 * over f32 values moves them by far less than an f32's last bit; the
 * output is the row's f32 arithmetic, operation for operation (sub, mul,
 * mul, add: no FMA, as the C11 build contracts none). The row's version
 * chains each sum through one register: 1,024 dependent double adds a
 * 512-wide row, 13 LayerNorms of 1500 rows a base window (the encoder,
 * bench_engine on a 2-core Xeon of family 6 model 207: 356.7 -> 343.9 ms a
 * window with this). */
VM_TARGET static __m256d vm_pd4(const float *x) {
  return _mm256_cvtps_pd(_mm_loadu_ps(x));
}

VM_TARGET static double vm_hsum_pd(__m256d a, __m256d b, __m256d c, __m256d d) {
  const __m256d s = _mm256_add_pd(_mm256_add_pd(a, b), _mm256_add_pd(c, d));
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

VM_TARGET static void layernorm_avx2(const float *x, int d, const float *g, const float *b,
                                     float *y) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int i = 0;
  for (; i + 16 <= d; i += 16) {
    a0 = _mm256_add_pd(a0, vm_pd4(x + i));
    a1 = _mm256_add_pd(a1, vm_pd4(x + i + 4));
    a2 = _mm256_add_pd(a2, vm_pd4(x + i + 8));
    a3 = _mm256_add_pd(a3, vm_pd4(x + i + 12));
  }
  double mean = vm_hsum_pd(a0, a1, a2, a3);
  for (int t = i; t < d; t++)
    mean += x[t];
  mean /= d;
  const __m256d mv = _mm256_set1_pd(mean);
  a0 = a1 = a2 = a3 = _mm256_setzero_pd();
  for (i = 0; i + 16 <= d; i += 16) {
    const __m256d t0 = _mm256_sub_pd(vm_pd4(x + i), mv), t1 = _mm256_sub_pd(vm_pd4(x + i + 4), mv);
    const __m256d t2 = _mm256_sub_pd(vm_pd4(x + i + 8), mv);
    const __m256d t3 = _mm256_sub_pd(vm_pd4(x + i + 12), mv);
    a0 = _mm256_add_pd(a0, _mm256_mul_pd(t0, t0));
    a1 = _mm256_add_pd(a1, _mm256_mul_pd(t1, t1));
    a2 = _mm256_add_pd(a2, _mm256_mul_pd(t2, t2));
    a3 = _mm256_add_pd(a3, _mm256_mul_pd(t3, t3));
  }
  double var = vm_hsum_pd(a0, a1, a2, a3);
  for (int t = i; t < d; t++)
    var += (x[t] - mean) * (x[t] - mean);
  var /= d;
  const float m = (float)mean, inv = (float)(1.0 / sqrt(var + 1e-5));
  const __m256 m8 = _mm256_set1_ps(m), inv8 = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= d; i += 8) {
    const __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m8), inv8),
                                   _mm256_loadu_ps(g + i));
    _mm256_storeu_ps(y + i, _mm256_add_ps(t, _mm256_loadu_ps(b + i)));
  }
  for (; i < d; i++)
    y[i] = (x[i] - m) * inv * g[i] + b[i];
}

__attribute__((target("avx2,f16c"))) static void f16_avx2(const float *x, uint16_t *y,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(void *)(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++)
    y[i] = wd_f32_to_f16(x[i]);
}

/* f16 -> f32 from bytes at any address (weights read in place from a
 * model file start anywhere). */
__attribute__((target("avx2,f16c"))) static void f16_to_f32_avx2(const unsigned char *x,
                                                                 float *y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i_u *)(const void *)(
                                x + 2 * i))));
  for (; i < n; i++) {
    uint16_t h;
    memcpy(&h, x + 2 * i, sizeof h);
    y[i] = wd_f16_to_f32(h);
  }
}

#endif

float wd_cpu_exp_sum_vec(float *s, int n, float mx) {
#if CPU_X86
  if (wd_cpu_use_avx2())
    return exp_sum_avx2(s, n, mx);
#endif
  float sum = 0.0f;
  for (int j = 0; j < n; j++) {
    s[j] = expf(s[j] - mx);
    sum += s[j];
  }
  return sum;
}

void wd_cpu_softmax_vec(float *s, int n) {
#if CPU_X86
  if (wd_cpu_use_avx2()) {
    softmax_avx2(s, n);
    return;
  }
#endif
  wd_cpu_softmax_row(s, n);
}

void wd_cpu_layernorm_vec(const float *x, int d, const float *g, const float *b, float *y) {
#if CPU_X86
  if (wd_cpu_use_avx2()) {
    layernorm_avx2(x, d, g, b, y);
    return;
  }
#endif
  wd_cpu_layernorm_row(x, d, g, b, y);
}

void wd_cpu_bias_gelu_vec(float *y, const float *b, int n) {
#if CPU_X86
  if (wd_cpu_use_avx2()) {
    bias_gelu_avx2(y, b, n);
    return;
  }
#endif
  for (int j = 0; j < n; j++)
    y[j] = wd_cpu_gelu(y[j] + (b ? b[j] : 0.0f));
}

void wd_cpu_f32_to_f16_vec(const float *x, uint16_t *y, size_t n) {
#if CPU_X86
  if (wd_cpu_use_avx2()) {
    f16_avx2(x, y, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++)
    y[i] = wd_f32_to_f16(x[i]);
}

void wd_cpu_f16_to_f32_vec(const void *x, float *y, size_t n) {
  const unsigned char *b = x;
#if CPU_X86
  if (wd_cpu_use_avx2()) {
    f16_to_f32_avx2(b, y, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, b + 2 * i, sizeof h);
    y[i] = wd_f16_to_f32(h);
  }
}
