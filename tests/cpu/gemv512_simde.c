/*
 * gemv512_simde.c - the AVX-512 dot kernels' source (cpu/cpu_gemv512_kern.h)
 * compiled against SIMDe's portable AVX-512 (libsimde-dev), for
 * test_gemv512.c on hosts without AVX-512. This file alone is built with
 * -mavx2 -mfma -mf16c (tests/cpu_simd.cmake): SIMDe runs each 512-bit
 * operation as two native 256-bit ones. The test's own code stays plain
 * x86-64, so on a host without AVX2 it reaches its skip instead of an
 * illegal instruction; it calls in here only after checking for AVX2.
 */
#include "gemv512_simde.h"

#if CPU_X86 && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && \
    __has_include(<simde/x86/avx512.h>)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

/* The kernels as SIMDe runs them: no avx512f attribute (the compiler must
 * not emit a ZMM instruction on this host). */
#define CPU512_TARGET
static inline __m512 load_f16x16(const unsigned char *p) {
  const __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
  const __m256 hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
#define CPU512_LOAD_F16(p) load_f16x16(p)
#include "cpu_gemv512_kern.h"

int gemv512_simde_dots(cpu_dot_fn *f16, cpu_dot_fn *f32) {
  *f16 = cpu512_dot_f16;
  *f32 = cpu512_dot_f32;
  return 1;
}

int gemv512_simde_dots4(cpu_dot4_fn *f16, cpu_dot4_fn *f32) {
  *f16 = cpu512_dot4_f16;
  *f32 = cpu512_dot4_f32;
  return 1;
}
#else
int gemv512_simde_dots(cpu_dot_fn *f16, cpu_dot_fn *f32) {
  *f16 = *f32 = NULL;
  return 0;
}
int gemv512_simde_dots4(cpu_dot4_fn *f16, cpu_dot4_fn *f32) {
  *f16 = *f32 = NULL;
  return 0;
}
#endif
