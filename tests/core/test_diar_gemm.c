/*
 * test_diar_gemm.c - core/diar_gemm.c against a plain double-precision
 * product, both kernels (the host's and the portable one), on shapes with
 * every remainder of the 6-row block, several panel groups, strided A and C
 * and with and without a bias.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "diar_gemm.h"
#include "wd_test.h"

static unsigned g_seed = 12345u;
static float rnd(void) {
  g_seed = g_seed * 1103515245u + 12345u;
  return (float)((g_seed >> 9) & 0xffff) / 32768.0f - 1.0f;
}

/* Max |C - reference| relative to the reference's largest |value|. */
static double check(size_t M, size_t N, size_t K, int with_bias) {
  const size_t lda = K + 3, ldc = N + 16;
  float *a = malloc(M * lda * sizeof *a), *b = malloc(K * N * sizeof *b);
  float *bp = malloc(wd_diar_gemm_packed_size(K, N) * sizeof *bp);
  float *bias = malloc(N * sizeof *bias), *c = malloc(M * ldc * sizeof *c);
  double worst = 1.0;
  if (!a || !b || !bp || !bias || !c)
    goto out;
  for (size_t i = 0; i < M * lda; i++)
    a[i] = rnd();
  for (size_t i = 0; i < K * N; i++)
    b[i] = rnd();
  for (size_t i = 0; i < N; i++)
    bias[i] = rnd();
  for (size_t i = 0; i < M * ldc; i++)
    c[i] = 7.0f; /* the gaps between rows must stay 7 */
  wd_diar_gemm_pack(b, N, K, N, bp);
  wd_diar_gemm(a, lda, bp, with_bias ? bias : NULL, c, ldc, M, N, K);
  worst = 0.0;
  double big = 1e-30;
  for (size_t m = 0; m < M; m++) {
    for (size_t n = 0; n < N; n++) {
      double ref = with_bias ? bias[n] : 0.0;
      for (size_t k = 0; k < K; k++)
        ref += (double)a[m * lda + k] * b[k * N + n];
      worst = fmax(worst, fabs(ref - c[m * ldc + n]));
      big = fmax(big, fabs(ref));
    }
    for (size_t n = N; n < ldc; n++)
      if (c[m * ldc + n] != 7.0f)
        worst = 1e30;
  }
  worst /= big;
out:
  free(a);
  free(b);
  free(bp);
  free(bias);
  free(c);
  return worst;
}

static void run_shapes(const char *kernel) {
  static const size_t shapes[][3] = {
    { 1, 16, 1 },   { 5, 16, 9 },    { 6, 32, 288 },  { 7, 48, 33 },    { 13, 128, 384 },
    { 500, 32, 384 }, { 37, 512, 1024 }, { 29, 128, 1600 }, { 64, 256, 512 },
  };
  double worst = 0.0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int bias = 0; bias < 2; bias++)
      worst = fmax(worst, check(shapes[i][0], shapes[i][1], shapes[i][2], bias));
  fprintf(stderr, "  %s: max relative error %.3g\n", kernel, worst);
  WD_CHECK(worst < 1e-5);
}

WD_TEST(host_kernel) { run_shapes("host kernel"); }

WD_TEST(portable_kernel) {
  wd_diar_gemm_force_portable(1);
  run_shapes("portable kernel");
  wd_diar_gemm_force_portable(0);
}

int main(void) { return wd_test_main(); }
