/*
 * gemv512_simde.h - the AVX-512 dot kernels under SIMDe (gemv512_simde.c),
 * for test_gemv512.c.
 */
#ifndef WD_TEST_GEMV512_SIMDE_H
#define WD_TEST_GEMV512_SIMDE_H

#include "cpu_features.h" /* CPU_X86 */
#include "cpu_gemv.h"
#include "cpu_qgemv.h"

/* Sets the kernels' f16 and f32 dots as SIMDe runs them and returns 1; 0
 * (and NULLs) where that file was built without SIMDe or AVX2 flags. Call
 * only on a host with AVX2, FMA and F16C. */
int gemv512_simde_dots(cpu_dot_fn *f16, cpu_dot_fn *f32);

/* The same for the four-output kernels (cpu_dot4_fn). */
int gemv512_simde_dots4(cpu_dot4_fn *f16, cpu_dot4_fn *f32);

#endif
