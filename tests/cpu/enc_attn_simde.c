/*
 * enc_attn_simde.c - the blocked attention's AVX-512 kernels
 * (cpu/cpu_enc_attn_kern.h) compiled against SIMDe's portable AVX-512, for
 * test_enc_attn.c and test_pick.c on hosts without AVX-512. Built alone
 * with -mavx2 -mfma -mf16c (tests/cpu_simd.cmake), as gemv512_simde.c is:
 * SIMDe runs each 512-bit operation as two 256-bit ones. Call only on a
 * host with AVX2, FMA and F16C.
 */
#include "enc_attn_simde.h"

#if CPU_X86 && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && \
    __has_include(<simde/x86/avx512.h>)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <stdint.h>
#include <string.h>

/* Five the kernels use, through 16-lane arrays: four that this SIMDe
 * (Debian 12's 0.7.4~rc2) lacks, and scalef, which it has but as a floor
 * and an exp2f per lane (slow, and missing from older SIMDe). The exact
 * operations (the reductions' order aside, which the test's bounds allow;
 * scalef as the AVX2 exp's exponent add, exact for the normal results the
 * kernels' clamp keeps). */
static inline __m512 ea_maskz_loadu_ps(__mmask16 k, const float *p) {
  float v[16];
  for (int i = 0; i < 16; i++)
    v[i] = (k >> i) & 1 ? p[i] : 0.0f; /* lanes outside the mask are never read */
  return _mm512_loadu_ps(v);
}
static inline void ea_mask_storeu_ps(float *p, __mmask16 k, __m512 x) {
  float v[16];
  _mm512_storeu_ps(v, x);
  for (int i = 0; i < 16; i++)
    if ((k >> i) & 1)
      p[i] = v[i];
}
static inline float ea_reduce_add_ps(__m512 x) {
  float v[16];
  _mm512_storeu_ps(v, x);
  float s = 0.0f;
  for (int i = 0; i < 16; i++)
    s += v[i];
  return s;
}
static inline float ea_reduce_max_ps(__m512 x) {
  float v[16];
  _mm512_storeu_ps(v, x);
  float m = v[0];
  for (int i = 1; i < 16; i++)
    m = v[i] > m ? v[i] : m;
  return m;
}
static inline __m512 ea_scalef_ps(__m512 p, __m512 k) {
  float pv[16], kv[16];
  _mm512_storeu_ps(pv, p);
  _mm512_storeu_ps(kv, k);
  for (int i = 0; i < 16; i++) {
    uint32_t b;
    memcpy(&b, &pv[i], sizeof b);
    b += (uint32_t)(int32_t)kv[i] << 23; /* k is a whole number in [-126, 127] */
    memcpy(&pv[i], &b, sizeof b);
  }
  return _mm512_loadu_ps(pv);
}
#define _mm512_maskz_loadu_ps(k, p) ea_maskz_loadu_ps(k, p)
#undef _mm512_scalef_ps /* SIMDe's alias for its own */
#define _mm512_scalef_ps(p, k) ea_scalef_ps(p, k)
#define _mm512_mask_storeu_ps(p, k, x) ea_mask_storeu_ps(p, k, x)
#define _mm512_reduce_add_ps(x) ea_reduce_add_ps(x)
#define _mm512_reduce_max_ps(x) ea_reduce_max_ps(x)

/* No target attribute: the compiler must not emit a ZMM instruction here. */
#define EA512_TARGET
#include "cpu_enc_attn_kern.h"

wd_cpu_enc_attn_block_fn enc_attn_simde_block(void) { return ea512_block; }
#else
wd_cpu_enc_attn_block_fn enc_attn_simde_block(void) { return NULL; }
#endif
