/*
 * logsumexp.c - log(sum(exp(x))) over a row of logits in double (see
 * filters.h), the per-step cost every decoded row pays once over the whole
 * vocabulary (51,865 logits): glibc's scalar exp() there was 5 % of a
 * tiny.en transcription's CPU time.
 *
 * The sum is exp(x - max) in double precision, as before: x86-64 hosts with
 * AVX2 and FMA take four doubles a time in a polynomial exp; others, and
 * the tail, call exp(). Each term's relative error stays within a few ulp
 * of double (the polynomial's truncation is below 1e-18), the sum is at
 * least 1 (the maximum's own term), and terms under exp(-708) are dropped
 * (they are below 1e-307, far under the sum's last bit). Lanes add up in
 * another order than a sequential loop: the result moves in the last bits
 * only, far under the float32 arithmetic of openai's log_softmax.
 */
#include "filters.h"

#include <math.h>
#include <stdatomic.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define WD_LSE_X86 1
#endif

static double lse_portable(const float *x, int n, float mx) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += exp((double)x[i] - mx);
  return s;
}

#ifdef WD_LSE_X86
#define LSE_TARGET __attribute__((target("avx2,fma")))

/* exp(x) for x <= 0, four lanes: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in
 * two parts, so r is exact to double), exp(r) by its Taylor series to r^13
 * in Horner form, times 2^n built in the exponent bits; 0 below -708
 * (where 2^n would leave the normal range), -inf included. */
LSE_TARGET static inline __m256d exp4_nonpos(__m256d x) {
  const __m256d lo = _mm256_set1_pd(-708.0);
  const __m256d keep = _mm256_cmp_pd(x, lo, _CMP_GE_OQ);
  x = _mm256_max_pd(x, lo);
  const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634074)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
  /* 1 / k! for k = 13 .. 0 */
  static const double c[14] = { 1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                                1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                                1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                                1.0 / 24.0,         1.0 / 6.0,         0.5,
                                1.0,                1.0 };
  __m256d p = _mm256_set1_pd(c[0]);
  for (int k = 1; k < 14; k++)
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c[k]));
  /* 2^n, n in [-1022, 0]: the biased exponent n + 1023 in bits 52 .. 62 */
  const __m128i ni = _mm256_cvtpd_epi32(n);
  const __m256i e = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_cvtepi32_epi64(ni), _mm256_set1_epi64x(1023)), 52);
  return _mm256_and_pd(_mm256_mul_pd(p, _mm256_castsi256_pd(e)), keep);
}

LSE_TARGET static float max_avx2(const float *x, int n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    m = _mm256_max_ps(_mm256_loadu_ps(x + i), m); /* a NaN in x keeps m */
  float t[8], mx = -INFINITY;
  _mm256_storeu_ps(t, m);
  for (int j = 0; j < 8; j++)
    mx = t[j] > mx ? t[j] : mx;
  for (; i < n; i++)
    mx = x[i] > mx ? x[i] : mx;
  return mx;
}

LSE_TARGET static double lse_avx2(const float *x, int n, float mx) {
  const __m256d m = _mm256_set1_pd((double)mx);
  __m256d s0 = _mm256_setzero_pd(), s1 = s0;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d a = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), m);
    const __m256d b = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), m);
    s0 = _mm256_add_pd(s0, exp4_nonpos(a));
    s1 = _mm256_add_pd(s1, exp4_nonpos(b));
  }
  double t[4];
  _mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
  return ((t[0] + t[1]) + (t[2] + t[3])) + lse_portable(x + i, n - i, mx);
}
#endif

static atomic_int g_lse_path = -1; /* 1 AVX2, 0 portable; set once */
static atomic_int g_lse_force_portable;

static int lse_path(void) {
  int p = atomic_load_explicit(&g_lse_path, memory_order_relaxed);
  if (p < 0) {
    p = 0;
#ifdef WD_LSE_X86
    __builtin_cpu_init();
    p = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    atomic_store_explicit(&g_lse_path, p, memory_order_relaxed);
  }
  return p && !atomic_load_explicit(&g_lse_force_portable, memory_order_relaxed);
}

void wd_logsumexp_force_portable(int on) { atomic_store(&g_lse_force_portable, on ? 1 : 0); }

double wd_logsumexp(const float *x, int n) {
  const int simd = lse_path();
  float mx = -INFINITY;
#ifdef WD_LSE_X86
  if (simd) {
    mx = max_avx2(x, n);
    return mx == -INFINITY ? -INFINITY : mx + log(lse_avx2(x, n, mx));
  }
#else
  (void)simd;
#endif
  for (int i = 0; i < n; i++)
    if (x[i] > mx)
      mx = x[i];
  return mx == -INFINITY ? -INFINITY : mx + log(lse_portable(x, n, mx));
}
