/*
 * diar_gemm.c - see diar_gemm.h.
 *
 * Loop nest: the 16-column panels of B in groups whose weights (K x 16 g)
 * fit in ~512 KB (L2 here: AMD EPYC Zen 3); per group, A in blocks of 6
 * rows (6 x K floats); per row block, each panel of the group: one 6 x 16
 * block of C, its 96 sums in 12 registers over all of K (per k: 2 loads of
 * B, 6 broadcasts of A, 12 FMAs), from the bias or 0. No slicing of K: C
 * is written once (slices of K that re-read C were slower on the 500 x
 * 1024 x 512 transition product). Measured one thread, best of 15, on this
 * machine (shared): 55-80 GFLOP/s on CAM++'s shapes where vad_gemm made
 * 18-65 (500 x 1600 x 128: 2.2 ms against 9.7 ms).
 */
#include "diar_gemm.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define WD_DG_X86 1
#endif

#define MR 6
#define NR 16
#define B_GROUP_FLOATS (128u * 1024u) /* 512 KB of B per group of panels (L2) */

size_t wd_diar_gemm_packed_size(size_t K, size_t N) { return K * N; }

void wd_diar_gemm_pack(const float *b, size_t ldb, size_t K, size_t N, float *dst) {
  for (size_t p = 0; p < N / NR; p++)
    for (size_t k = 0; k < K; k++)
      memcpy(dst + (p * K + k) * NR, b + k * ldb + p * NR, NR * sizeof *dst);
}

/* One rows x 16 block (rows <= 6) of C over kc values of k. bp: the panel
 * (kc x 16). bias: 16 values or NULL (0). */
static void block_portable(const float *a, size_t lda, const float *bp, const float *bias,
                           float *c, size_t ldc, size_t rows, size_t kc) {
  float s[MR][NR];
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < NR; j++)
      s[i][j] = bias ? bias[j] : 0.0f;
  for (size_t k = 0; k < kc; k++)
    for (size_t i = 0; i < rows; i++) {
      const float av = a[i * lda + k];
      for (size_t j = 0; j < NR; j++)
        s[i][j] += av * bp[k * NR + j];
    }
  for (size_t i = 0; i < rows; i++)
    memcpy(c + i * ldc, s[i], sizeof s[i]);
}

#ifdef WD_DG_X86
__attribute__((target("avx2,fma"))) static void block_avx2(const float *a, size_t lda,
                                                            const float *bp, const float *bias,
                                                            float *c, size_t ldc, size_t rows,
                                                            size_t kc) {
  const __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  const __m256 b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
  /* Rows past the block's end read row 0 again (their sums are dropped). */
  const float *r[MR];
  for (size_t i = 0; i < MR; i++)
    r[i] = a + (i < rows ? i : 0) * lda;
  __m256 c00 = b0, c01 = b1, c10 = b0, c11 = b1, c20 = b0, c21 = b1, c30 = b0, c31 = b1,
         c40 = b0, c41 = b1, c50 = b0, c51 = b1;
  for (size_t k = 0; k < kc; k++) {
    const __m256 w0 = _mm256_loadu_ps(bp + k * NR), w1 = _mm256_loadu_ps(bp + k * NR + 8);
    __m256 x = _mm256_broadcast_ss(r[0] + k);
    c00 = _mm256_fmadd_ps(x, w0, c00), c01 = _mm256_fmadd_ps(x, w1, c01);
    x = _mm256_broadcast_ss(r[1] + k);
    c10 = _mm256_fmadd_ps(x, w0, c10), c11 = _mm256_fmadd_ps(x, w1, c11);
    x = _mm256_broadcast_ss(r[2] + k);
    c20 = _mm256_fmadd_ps(x, w0, c20), c21 = _mm256_fmadd_ps(x, w1, c21);
    x = _mm256_broadcast_ss(r[3] + k);
    c30 = _mm256_fmadd_ps(x, w0, c30), c31 = _mm256_fmadd_ps(x, w1, c31);
    x = _mm256_broadcast_ss(r[4] + k);
    c40 = _mm256_fmadd_ps(x, w0, c40), c41 = _mm256_fmadd_ps(x, w1, c41);
    x = _mm256_broadcast_ss(r[5] + k);
    c50 = _mm256_fmadd_ps(x, w0, c50), c51 = _mm256_fmadd_ps(x, w1, c51);
  }
  const __m256 o[MR][2] = { { c00, c01 }, { c10, c11 }, { c20, c21 },
                            { c30, c31 }, { c40, c41 }, { c50, c51 } };
  for (size_t i = 0; i < rows; i++) {
    _mm256_storeu_ps(c + i * ldc, o[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, o[i][1]);
  }
}
#endif

typedef void (*block_fn)(const float *, size_t, const float *, const float *, float *, size_t,
                         size_t, size_t);

static atomic_int g_force_portable;

static block_fn pick(void) {
#ifdef WD_DG_X86
  if (!atomic_load(&g_force_portable) && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return block_avx2;
#endif
  return block_portable;
}

const char *wd_diar_gemm_kernel(void) {
#ifdef WD_DG_X86
  if (pick() == block_avx2)
    return "avx2+fma";
#endif
  return "portable";
}

void wd_diar_gemm_force_portable(int on) { atomic_store(&g_force_portable, on ? 1 : 0); }

void wd_diar_gemm(const float *a, size_t lda, const float *bp, const float *bias, float *c,
                  size_t ldc, size_t M, size_t N, size_t K) {
  const block_fn f = pick();
  /* Panels per group: the group's B (K x 16 g) within B_GROUP_FLOATS. */
  size_t g = B_GROUP_FLOATS / (K * NR);
  if (g < 1)
    g = 1;
  for (size_t p0 = 0; p0 < N / NR; p0 += g) {
    const size_t p1 = p0 + g < N / NR ? p0 + g : N / NR;
    for (size_t m = 0; m < M; m += MR) {
      const size_t rows = M - m < MR ? M - m : MR;
      for (size_t p = p0; p < p1; p++)
        f(a + m * lda, lda, bp + p * K * NR, bias ? bias + p * NR : NULL, c + m * ldc + p * NR, ldc,
          rows, K);
    }
  }
}
