/*
 * cpu_gemv512.c - the AVX-512 GEMV dot kernels for f16 and f32 weights
 * (bodies in cpu_gemv512_kern.h), picked at run time by cpu_gemv.c on hosts
 * with AVX-512F (and AVX2, FMA, F16C). Their sums are bit-identical to the
 * AVX2 kernels' (same lanes, same FMAs, same fold): the wider registers
 * take 16 weights per instruction, a batched step reads the weight row
 * once for four activation rows in four 16-wide accumulators, and four
 * outputs run side by side (cpu_dot4_fn) so that no FMA waits on the last.
 * WHISPERD_CPU_NO_AVX512 (set, not "0") keeps the AVX2 kernels (the pick
 * is cpu_gemv.c's, from cpu_features.h).
 */
#include "cpu_gemv512.h"

#include "cpu_features.h"

#if CPU_X86
#include <immintrin.h>

#define CPU512_TARGET __attribute__((target("avx512f,avx2,fma,f16c")))
#include "cpu_gemv512_kern.h"

cpu_dot_fn wd_cpu_gemv512_dot(wd_dtype_t type) {
  if (type == WD_DTYPE_F16)
    return cpu512_dot_f16;
  if (type == WD_DTYPE_F32)
    return cpu512_dot_f32;
  return NULL;
}

cpu_dot4_fn wd_cpu_gemv512_dot4(wd_dtype_t type) {
  if (type == WD_DTYPE_F16)
    return cpu512_dot4_f16;
  if (type == WD_DTYPE_F32)
    return cpu512_dot4_f32;
  return NULL;
}
#else
cpu_dot_fn wd_cpu_gemv512_dot(wd_dtype_t type) {
  (void)type;
  return NULL;
}
cpu_dot4_fn wd_cpu_gemv512_dot4(wd_dtype_t type) {
  (void)type;
  return NULL;
}
#endif
