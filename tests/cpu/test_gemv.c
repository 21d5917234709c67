/*
 * test_gemv.c - the CPU engine's batched GEMV kernels (cpu/cpu_gemv.c,
 * cpu/cpu_qgemv.c) on every weight type, both paths (AVX2 where the CPU has
 * it, and the portable C one), against a double-precision reference.
 *
 * For each type and width: a (37, n_in) matrix of pseudo-random weights
 * (row offsets, so the _1 types' min matters; one all-zero block, so a
 * scale of 0 is there) is quantized with core/quant.c and dequantized back;
 * 16 activation rows at a stride wider than n_in. Checked:
 *   - every output against sum_k deq(W)[o][k] x[r][k] + b[o] in double,
 *     within (n_in / 16 + 8) FLT_EPSILON sum_k |w||x| (the f32 rounding
 *     of 16-lane sums; a wrong nibble, sign or scale is off by far more);
 *   - n_rows 1, 3, 8, 16: each row's outputs bit-identical to the row
 *     computed alone (the batch-independence cpu_gemv.h promises);
 *   - the block types bit-identical to the f32 kernel over the dequantized
 *     matrix on the same path (what dequantizing at load gave);
 *   - outputs split over two ranges, and CPU_GEMV_ADD, equal to the plain run;
 *   - the matrix at an odd address (read in place from a ggml file): the
 *     same bits;
 *   - wd_cpu_mat_row equal to wd_dequantize_row, wd_cpu_mat_bytes the real size.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "cpu_gemv.h"
#include "cpu_mat.h"
#include "quant.h"
#include "wd_test.h"

enum { N_OUT = 37, MAX_ROWS = 16 };

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static float rnd(void) { return wd_test_uniform(&g_rng); }

typedef struct {
  cpu_mat_t q;   /* the type under test */
  cpu_mat_t f;   /* its dequantized values, f32 */
  float *x, *b;  /* (MAX_ROWS, ldx), (N_OUT) */
  int ldx;
} fixture_t;

static int fixture_init(fixture_t *t, wd_dtype_t type, int n_in) {
  memset(t, 0, sizeof *t);
  const size_t rb = wd_dtype_row_bytes(type, n_in);
  t->q = (cpu_mat_t){ .n_out = N_OUT, .n_in = n_in, .type = type, .own = malloc(N_OUT * rb) };
  t->q.data = t->q.own;
  t->f = (cpu_mat_t){ .n_out = N_OUT, .n_in = n_in, .type = WD_DTYPE_F32,
                      .own = malloc((size_t)N_OUT * (size_t)n_in * sizeof(float)) };
  t->f.data = t->f.own;
  t->ldx = n_in + 5;
  t->x = malloc((size_t)MAX_ROWS * (size_t)t->ldx * sizeof(float));
  t->b = malloc(N_OUT * sizeof(float));
  float *row = malloc((size_t)n_in * sizeof *row);
  int rc = t->q.data && t->f.data && t->x && t->b && row ? 0 : -1;
  for (int o = 0; rc == 0 && o < N_OUT; o++) {
    const float off = 0.3f * rnd(), scale = 0.05f + fabsf(rnd());
    for (int k = 0; k < n_in; k++)
      row[k] = off + scale * rnd();
    if (o == 5)
      memset(row + (n_in > 32 ? 32 : 0), 0, 32 * sizeof *row); /* d = 0 */
    unsigned char *dst = (unsigned char *)t->q.own + (size_t)o * rb;
    rc = wd_quantize_row(type, row, dst, n_in);
    if (rc == 0)
      rc = wd_dequantize_row(type, dst, (float *)t->f.own + (size_t)o * (size_t)n_in, n_in);
    t->b[o] = 0.1f * rnd();
  }
  for (size_t i = 0; t->x && i < (size_t)MAX_ROWS * (size_t)t->ldx; i++)
    t->x[i] = 2.0f * rnd();
  free(row);
  return rc;
}

static void fixture_free(fixture_t *t) {
  wd_cpu_mat_free(&t->q), wd_cpu_mat_free(&t->f), free(t->x), free(t->b);
}

/* y (n_rows, N_OUT + 3) = op(W x + b) for rows x0 .. x0 + n_rows. */
static void run(const cpu_mat_t *w, const fixture_t *t, int x0, int n_rows, float *y,
                cpu_gemv_op_t op, int simd) {
  const cpu_gemv_t g = { .w = w, .b = t->b, .n_rows = n_rows,
                         .x = t->x + (size_t)x0 * (size_t)t->ldx, .ldx = t->ldx, .y = y,
                         .ldy = N_OUT + 3, .op = op };
  wd_cpu_gemv_range_path(&g, 0, 13, simd);
  wd_cpu_gemv_range_path(&g, 13, N_OUT, simd);
}

static void check_type(wd_dtype_t type, int n_in, int simd) {
  fixture_t t;
  if (fixture_init(&t, type, n_in) < 0) {
    WD_CHECK(0);
    fixture_free(&t);
    return;
  }
  const int ldy = N_OUT + 3;
  const size_t ny = (size_t)MAX_ROWS * (size_t)ldy;
  float *alone = calloc(ny, sizeof *alone), *y = calloc(ny, sizeof *y);
  float *yf = calloc(ny, sizeof *yf);
  WD_CHECK(alone && y && yf);
  if (!alone || !y || !yf)
    goto out;
  /* Each row alone, against the double reference. */
  double worst = 0;
  for (int r = 0; r < MAX_ROWS; r++) {
    run(&t.q, &t, r, 1, alone + (size_t)r * (size_t)ldy, CPU_GEMV_SET, simd);
    const float *xr = t.x + (size_t)r * (size_t)t.ldx;
    for (int o = 0; o < N_OUT; o++) {
      const float *wr = (const float *)t.f.data + (size_t)o * (size_t)n_in;
      double s = t.b[o], mag = fabs(t.b[o]);
      for (int k = 0; k < n_in; k++) {
        s += (double)wr[k] * xr[k];
        mag += fabs((double)wr[k] * xr[k]);
      }
      const double tol = (n_in / 16 + 8) * (double)FLT_EPSILON * mag;
      const double e = fabs(alone[(size_t)r * (size_t)ldy + (size_t)o] - s);
      if (!(e <= tol)) {
        fprintf(stderr, "  %s n_in %d %s: row %d out %d: %.9g vs %.9g (tol %.3g)\n",
                wd_dtype_name(type), n_in, simd ? "simd" : "portable", r, o,
                alone[(size_t)r * (size_t)ldy + (size_t)o], s, tol);
        WD_CHECK(e <= tol);
      }
      if (mag > 0 && e / mag > worst)
        worst = e / mag;
    }
  }
  /* Batched: bit-identical to alone; the f32 kernel over the dequantized
   * matrix gives the same bits. */
  static const int ns[] = { 1, 3, 8, 16 };
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    const int n = ns[i];
    memset(y, 0, ny * sizeof *y);
    run(&t.q, &t, 0, n, y, CPU_GEMV_SET, simd);
    WD_CHECK(memcmp(y, alone, (size_t)n * (size_t)ldy * sizeof *y) == 0);
    memset(yf, 0, ny * sizeof *yf);
    run(&t.f, &t, 0, n, yf, CPU_GEMV_SET, simd);
    WD_CHECK(memcmp(y, yf, (size_t)n * (size_t)ldy * sizeof *y) == 0);
  }
  /* The same matrix at an odd address, as a ggml file's tensors are read
   * in place (cpu_mat.h): the same bits, and no misaligned typed load
   * (UBSan checks that in the ASan build). */
  {
    const size_t bytes = wd_cpu_mat_bytes(&t.q);
    unsigned char *buf = malloc(bytes + 1);
    WD_CHECK(buf != NULL);
    if (buf) {
      memcpy(buf + 1, t.q.data, bytes);
      cpu_mat_t odd = t.q;
      odd.own = NULL;
      odd.data = buf + 1;
      memset(y, 0, ny * sizeof *y);
      run(&odd, &t, 0, MAX_ROWS, y, CPU_GEMV_SET, simd);
      WD_CHECK(memcmp(y, alone, ny * sizeof *y) == 0);
      free(buf);
    }
  }
  /* The residual add: y += W x + b, the same sums. */
  for (size_t i = 0; i < ny; i++)
    y[i] = 0.5f * rnd();
  memcpy(yf, y, ny * sizeof *y);
  run(&t.q, &t, 0, 3, y, CPU_GEMV_ADD, simd);
  int add_ok = 1;
  for (int r = 0; r < 3; r++)
    for (int o = 0; o < N_OUT; o++) {
      const size_t at = (size_t)r * (size_t)ldy + (size_t)o;
      add_ok &= y[at] == yf[at] + alone[at];
    }
  WD_CHECK(add_ok);
  /* wd_cpu_mat_row and wd_cpu_mat_bytes. */
  float *row = malloc((size_t)n_in * sizeof *row);
  WD_CHECK(row != NULL);
  for (int o = 0; row && o < N_OUT; o += 7) {
    wd_cpu_mat_row(&t.q, o, row);
    WD_CHECK(memcmp(row, (const float *)t.f.data + (size_t)o * (size_t)n_in,
                    (size_t)n_in * sizeof *row) == 0);
  }
  free(row);
  WD_CHECK(wd_cpu_mat_bytes(&t.q) == (size_t)N_OUT * wd_dtype_row_bytes(type, n_in));
  fprintf(stderr, "  %-4s n_in %4d %-8s worst |err| / sum|wx| %.2g\n", wd_dtype_name(type), n_in,
          simd ? "simd" : "portable", worst);
out:
  free(alone), free(y), free(yf);
  fixture_free(&t);
}

static void check_all(wd_dtype_t type) {
  wd_cpu_gemv_init();
  static const int widths[] = { 32, 96, 384, 1536 };
  for (int simd = 0; simd < 2; simd++) {
    if (simd && !wd_cpu_has_avx2()) {
      fprintf(stderr, "  no AVX2+FMA+F16C here: the portable path only\n");
      continue;
    }
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
      check_type(type, widths[i], simd);
  }
}

WD_TEST(gemv_f32) { check_all(WD_DTYPE_F32); }
WD_TEST(gemv_f16) { check_all(WD_DTYPE_F16); }
WD_TEST(gemv_q8_0) { check_all(WD_DTYPE_Q8_0); }
WD_TEST(gemv_q5_0) { check_all(WD_DTYPE_Q5_0); }
WD_TEST(gemv_q5_1) { check_all(WD_DTYPE_Q5_1); }
WD_TEST(gemv_q4_0) { check_all(WD_DTYPE_Q4_0); }
WD_TEST(gemv_q4_1) { check_all(WD_DTYPE_Q4_1); }

int main(void) { return wd_test_main(); }
