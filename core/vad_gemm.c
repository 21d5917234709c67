/*
 * vad_gemm.c - see vad_gemm.h.
 *
 * Blocking: 4 rows of A by 16 columns of B, the 64 sums in registers for the
 * whole K loop (8 AVX2 accumulators; per k: 2 loads of B, 4 broadcasts of A,
 * 8 FMAs), B's 16-column panels outermost; the rows past the last whole
 * block of 4, under AVX2, one at a time with 8 sums of 8 columns (row_avx2).
 * Every output is the same chain of FMAs over k in either kernel, so a row's
 * result does not depend on M or on where the row falls. The portable
 * kernel is the same loop nest in plain C.
 */
#include "vad_gemm.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define WD_VAD_X86 1
#endif

/* One 4 x 16 block (rows < 4 valid) of C. */
static void block_portable(const float *a, size_t lda, const float *b, size_t ldb,
                           const float *bias, float *c, size_t ldc, size_t rows, size_t K) {
  float acc[4][16];
  for (size_t i = 0; i < 4; i++)
    for (size_t j = 0; j < 16; j++)
      acc[i][j] = bias ? bias[j] : 0.0f;
  for (size_t k = 0; k < K; k++) {
    const float *bk = b + k * ldb;
    for (size_t i = 0; i < rows; i++) {
      const float av = a[i * lda + k];
      for (size_t j = 0; j < 16; j++)
        acc[i][j] += av * bk[j];
    }
  }
  for (size_t i = 0; i < rows; i++)
    memcpy(c + i * ldc, acc[i], sizeof acc[i]);
}

#ifdef WD_VAD_X86
__attribute__((target("avx2,fma"))) static void block_avx2(const float *a, size_t lda,
                                                            const float *b, size_t ldb,
                                                            const float *bias, float *c,
                                                            size_t ldc, size_t rows, size_t K) {
  const __m256 z = _mm256_setzero_ps();
  const __m256 b0 = bias ? _mm256_loadu_ps(bias) : z, b1 = bias ? _mm256_loadu_ps(bias + 8) : z;
  __m256 c00 = b0, c01 = b1, c10 = b0, c11 = b1, c20 = b0, c21 = b1, c30 = b0, c31 = b1;
  /* Rows past the block's end read row 0 again (their sums are dropped). */
  const float *a0 = a, *a1 = rows > 1 ? a + lda : a, *a2 = rows > 2 ? a + 2 * lda : a,
              *a3 = rows > 3 ? a + 3 * lda : a;
  for (size_t k = 0; k < K; k++) {
    const __m256 w0 = _mm256_loadu_ps(b + k * ldb), w1 = _mm256_loadu_ps(b + k * ldb + 8);
    __m256 x = _mm256_broadcast_ss(a0 + k);
    c00 = _mm256_fmadd_ps(x, w0, c00), c01 = _mm256_fmadd_ps(x, w1, c01);
    x = _mm256_broadcast_ss(a1 + k);
    c10 = _mm256_fmadd_ps(x, w0, c10), c11 = _mm256_fmadd_ps(x, w1, c11);
    x = _mm256_broadcast_ss(a2 + k);
    c20 = _mm256_fmadd_ps(x, w0, c20), c21 = _mm256_fmadd_ps(x, w1, c21);
    x = _mm256_broadcast_ss(a3 + k);
    c30 = _mm256_fmadd_ps(x, w0, c30), c31 = _mm256_fmadd_ps(x, w1, c31);
  }
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
  if (rows > 1)
    _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
  if (rows > 2)
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  if (rows > 3)
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
}

/* One row of C, 64 columns at a time (16 at the end): the 4 x 16 block has
 * only two independent sums per row, so a lone row (a recurrence's state
 * times its weights) waited on the FMA latency; eight sums keep the FMA
 * units busy. Each sum is the same chain of FMAs over k as in block_avx2,
 * so the results are the same bits. */
__attribute__((target("avx2,fma"))) static void row_avx2(const float *a, const float *b,
                                                          size_t ldb, const float *bias,
                                                          float *c, size_t N, size_t K) {
  size_t n = 0;
  for (; n + 64 <= N; n += 64) {
    __m256 s[8];
    for (int j = 0; j < 8; j++)
      s[j] = bias ? _mm256_loadu_ps(bias + n + 8 * j) : _mm256_setzero_ps();
    for (size_t k = 0; k < K; k++) {
      const __m256 x = _mm256_broadcast_ss(a + k);
      const float *bk = b + k * ldb + n;
      for (int j = 0; j < 8; j++)
        s[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(bk + 8 * j), s[j]);
    }
    for (int j = 0; j < 8; j++)
      _mm256_storeu_ps(c + n + 8 * j, s[j]);
  }
  for (; n < N; n += 16)
    block_avx2(a, 0, b + n, ldb, bias ? bias + n : NULL, c + n, 0, 1, K);
}
#endif

typedef void (*block_fn)(const float *, size_t, const float *, size_t, const float *, float *,
                         size_t, size_t, size_t);

static atomic_int g_force_portable;

static block_fn pick(void) {
#ifdef WD_VAD_X86
  if (!atomic_load(&g_force_portable) && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return block_avx2;
#endif
  return block_portable;
}

void wd_vad_gemm_force_portable(int on) { atomic_store(&g_force_portable, on ? 1 : 0); }

const char *wd_vad_gemm_kernel(void) {
  return pick() == block_portable ? "portable" : "avx2+fma";
}

void wd_vad_gemm(const float *a, size_t lda, const float *b, size_t ldb, const float *bias,
                 float *c, size_t ldc, size_t M, size_t N, size_t K) {
  const block_fn f = pick();
  const size_t m4 = M & ~(size_t)3; /* rows in whole 4-row blocks */
  /* Columns a panel at a time: B's K x 16 panel stays in L1 while A's rows
   * stream past it (row by row B's rows are a page apart and were fetched
   * from L2 again for every block of A's rows). */
  for (size_t n = 0; n < N; n += 16)
    for (size_t m = 0; m < m4; m += 4)
      f(a + m * lda, lda, b + n, ldb, bias ? bias + n : NULL, c + m * ldc + n, ldc, 4, K);
  if (m4 == M)
    return;
#ifdef WD_VAD_X86
  if (f == block_avx2) {
    for (size_t r = m4; r < M; r++)
      row_avx2(a + r * lda, b, ldb, bias, c + r * ldc, N, K);
    return;
  }
#endif
  for (size_t n = 0; n < N; n += 16)
    f(a + m4 * lda, lda, b + n, ldb, bias ? bias + n : NULL, c + m4 * ldc + n, ldc, M - m4, K);
}
