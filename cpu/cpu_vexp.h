/*
 * cpu_vexp.h - e^x on 8 lanes with AVX2+FMA, for the kernels that include
 * it (cpu_vmath.c's softmax and GELU, cpu_attn.c's decoder attention): a
 * range reduction x = k ln2 + r (|r| <= ln2 / 2, ln2 in two parts) and
 * the degree-6 Taylor polynomial of e^r, scaled by 2^k through the
 * exponent bits; about 1 ulp.
 *
 * Include only on x86 (CPU_X86); call only where the host has AVX2 and
 * FMA.
 */
#ifndef WD_CPU_VEXP_H
#define WD_CPU_VEXP_H

#include <immintrin.h>

/* e^x for x in about [-87, 88] (clamped there). */
__attribute__((target("avx2,fma"))) static inline __m256 vm_exp(__m256 x) {
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

#endif
