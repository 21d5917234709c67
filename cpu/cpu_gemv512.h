/*
 * cpu_gemv512.h - the AVX-512 dot kernels of the decoder's GEMV (f16 and
 * f32 weights; cpu_gemv512.c), internal to cpu_gemv.c. Block types keep
 * their AVX2 kernels on AVX-512 hosts.
 */
#ifndef WD_CPU_GEMV512_H
#define WD_CPU_GEMV512_H

#include "cpu_qgemv.h"

/* The AVX-512 dot for f16 or f32 weights (call only where
 * wd_cpu_avx512_available, cpu_features.h); NULL for other types and off
 * x86. */
cpu_dot_fn wd_cpu_gemv512_dot(wd_dtype_t type);

/* Its four-output form (cpu_dot4_fn), or NULL likewise. */
cpu_dot4_fn wd_cpu_gemv512_dot4(wd_dtype_t type);

#endif
