/*
 * vad_gemm.h - the one matrix product the voice-activity network needs:
 * C[m][n] = sum_k A[m][k] * B[k][n] (+ bias[n]), f32, row-major, with B
 * stored k-major (each row of B is one input feature's weights to every
 * output, the transpose of a torch Linear/Conv weight: core/vad.c lays its
 * weights out so at load).
 *
 * Kernels by CPU features, picked at run time (never by CPU model): AVX2 +
 * FMA on x86-64 hosts that have them, portable C elsewhere. Shapes:
 * ldb and N multiples of 16 (vad.c pads its weights' columns with zeros),
 * A's rows may be any number; C's leading dimension ldc >= N.
 */
#ifndef WD_VAD_GEMM_H
#define WD_VAD_GEMM_H

#include <stddef.h>

void wd_vad_gemm(const float *a, size_t lda, const float *b, size_t ldb, const float *bias,
                 float *c, size_t ldc, size_t M, size_t N, size_t K);

/* The kernel wd_vad_gemm runs on this host: "avx2+fma" or "portable". */
const char *wd_vad_gemm_kernel(void);

/* Tests: 1 forces the portable kernel, 0 restores the choice by features. */
void wd_vad_gemm_force_portable(int on);

#endif
