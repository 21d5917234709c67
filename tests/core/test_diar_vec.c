/*
 * test_diar_vec.c - core/diar_vec.c: the host's kernels (AVX2 where the
 * CPU has it) and the portable ones against a plain loop, bit for bit, on
 * lengths with every remainder of 8, row strides wider than the rows,
 * in-place calls, and the values where max(v, 0) could go wrong (NaN, -0,
 * negative and positive, infinities).
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "diar_gemm.h"
#include "diar_vec.h"
#include "wd_test.h"

#define ROWS 5
#define N 45  /* 5 x 8 + 5 */
#define LD 53

static float g_x[ROWS * LD], g_scale[N], g_shift[N];

static float relu_ref(float v) { return v > 0.0f ? v : 0.0f; }

static void fill(void) {
  uint64_t st = 0x2545f4914f6cdd1dull;
  for (size_t i = 0; i < ROWS * LD; i++)
    g_x[i] = 4.0f * wd_test_uniform(&st) - 2.0f;
  for (size_t c = 0; c < N; c++) {
    g_scale[c] = 2.0f * wd_test_uniform(&st) - 0.5f;
    g_shift[c] = wd_test_uniform(&st) - 0.5f;
  }
  /* special values in the vector part and in the tail of row 1 */
  const float special[] = { NAN, -0.0f, 0.0f, INFINITY, -INFINITY, -1e-30f };
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
    g_x[LD + i] = special[i];
    g_x[LD + N - 1 - i] = special[i];
  }
  g_shift[0] = 0.0f; /* -0 * scale + 0 and NaN reach the max */
}

/* Bitwise equality (NaN never reaches an output: relu maps it to +0). */
static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void run(const char *kernel) {
  fill();
  static float y[ROWS * LD], want[ROWS * LD];
  int ok_bn = 1, ok_relu = 1, ok_add = 1;
  for (size_t n = 1; n <= N; n++) {
    memset(y, 0x7f, sizeof y);
    memcpy(want, y, sizeof want);
    wd_diar_bn_relu(g_x, LD, ROWS, n, g_scale, g_shift, y, LD);
    for (size_t r = 0; r < ROWS; r++)
      for (size_t c = 0; c < n; c++)
        want[r * LD + c] = relu_ref(g_x[r * LD + c] * g_scale[c] + g_shift[c]);
    ok_bn &= same(y, want, ROWS * LD); /* the gaps past n untouched too */

    memcpy(y, g_x + LD, n * sizeof *y);
    wd_diar_relu(y, n);
    for (size_t i = 0; i < n; i++)
      want[i] = relu_ref(g_x[LD + i]);
    ok_relu &= same(y, want, n);

    memcpy(y, g_x + LD, n * sizeof *y);
    wd_diar_add_relu(y, g_x + 2 * LD, y, n); /* dst == a */
    for (size_t i = 0; i < n; i++)
      want[i] = relu_ref(g_x[LD + i] + g_x[2 * LD + i]);
    ok_add &= same(y, want, n);
  }
  /* in place, as wide as the row stride (y == x) */
  memcpy(y, g_x, sizeof y);
  wd_diar_bn_relu(y, LD, ROWS, N, g_scale, g_shift, y, LD);
  for (size_t r = 0; r < ROWS; r++)
    for (size_t c = 0; c < N; c++)
      want[r * LD + c] = relu_ref(g_x[r * LD + c] * g_scale[c] + g_shift[c]);
  ok_bn &= same(y, want, N) && same(y + LD, want + LD, N);
  fprintf(stderr, "  %s: bn_relu %s, relu %s, add_relu %s\n", kernel, ok_bn ? "ok" : "DIFFERS",
          ok_relu ? "ok" : "DIFFERS", ok_add ? "ok" : "DIFFERS");
  WD_CHECK(ok_bn);
  WD_CHECK(ok_relu);
  WD_CHECK(ok_add);
}

WD_TEST(host_kernel) { run(wd_diar_gemm_kernel()); }

WD_TEST(portable_kernel) {
  wd_diar_gemm_force_portable(1);
  run(wd_diar_gemm_kernel());
  wd_diar_gemm_force_portable(0);
}

int main(void) { return wd_test_main(); }
