/*
 * diar_gemm.h - the matrix product of the diarization networks' convolutions:
 * C[m][n] = sum_k A[m][k] * B[k][n] (+ bias[n]), f32, row-major A and C,
 * with B (the constant weights) packed once at load into panels of 16
 * columns (panel p: K rows of B[k][16 p .. 16 p + 15], contiguous), so the
 * product reads the weights sequentially.
 *
 * Why not vad_gemm.h: CAM++ is ~10 GFLOP per 10 s of audio in products of
 * 500 to 40000 rows by K up to 1600 and N up to 512, where vad_gemm's 4 x 16
 * block re-reads all of an unpacked B for every 4 rows. Here a 6 x 16 block
 * (12 AVX2 accumulators) runs over K in slices whose B fits in L2.
 *
 * Kernels by CPU features, picked at run time: AVX2 + FMA on x86-64 hosts
 * that have them, portable C elsewhere (the same sums in the same order per
 * output element up to the fused multiply-add's rounding). N a multiple of
 * 16; any M, K >= 1; ldc >= N.
 */
#ifndef WD_DIAR_GEMM_H
#define WD_DIAR_GEMM_H

#include <stddef.h>

/* Floats of the packed form of a K x N matrix. */
size_t wd_diar_gemm_packed_size(size_t K, size_t N);

/* dst (wd_diar_gemm_packed_size floats) = B (K x N, row stride ldb) packed. */
void wd_diar_gemm_pack(const float *b, size_t ldb, size_t K, size_t N, float *dst);

void wd_diar_gemm(const float *a, size_t lda, const float *bp, const float *bias, float *c,
                  size_t ldc, size_t M, size_t N, size_t K);

/* The kernel wd_diar_gemm runs on this host: "avx2+fma" or "portable". */
const char *wd_diar_gemm_kernel(void);

/* Tests: 1 forces the portable kernel, 0 restores the choice by features. */
void wd_diar_gemm_force_portable(int on);

#endif
