/*
 * test_gemm.c - products of many rows over weights as stored
 * (cpu/cpu_gemm.c): every weight type, odd shapes, against a
 * double-precision product of the dequantized weights.
 *
 * For each type (f32, f16 and the block types) and two widths: a (45, n_in)
 * matrix of pseudo-random weights, quantized with core/quant.c, at an odd
 * address (a tensor read in place from a ggml file starts anywhere), and
 * 37 activation rows at a stride wider than n_in. Checked:
 *   - wd_cpu_gemm_xwt: every output within (n_in / 8 + 8) FLT_EPSILON
 *     sum |w||x| of the double product, and bit-identical to sgemm over the
 *     matrix dequantized up front (the f32 copy the engine held before:
 *     widening per product changes no bit);
 *   - a row range o0 .. o0 + n of the matrix (the cross K/V halves), and
 *     beta 1 (accumulating into the residual);
 *   - wd_cpu_linear_rows: SET, GELU and ADD with the bias, against the same
 *     reference;
 *   - one and two threads give the same bits;
 *   - wd_cpu_gemm_xwt_bias over two threads' slices of a row range (each
 *     slice starts from its own part of the bias).
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm.h"
#include "cpu_internal.h"
#include "quant.h"
#include "wd_test.h"

enum { N_OUT = 45, ROWS = 37 };

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static float rnd(void) { return wd_test_uniform(&g_rng); }

/* The parts of an engine cpu_gemm.c uses: threads, pool, scratch. */
static wd_cpu_engine_t *engine(int threads, int n_in) {
  wd_cpu_engine_t *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->n_threads = threads;
  e->w_f32 = malloc((size_t)N_OUT * (size_t)n_in * sizeof(float));
  if (!e->w_f32 || wd_pool_new(threads - 1, &e->pool) < 0) {
    free(e->w_f32), free(e);
    return NULL;
  }
  return e;
}

static void engine_free(wd_cpu_engine_t *e) {
  if (e) {
    wd_pool_free(e->pool);
    free(e->w_f32), free(e);
  }
}

static double gelu(double v) { return 0.5 * v * (1.0 + erf(v / sqrt(2.0))); }

static void check_type(wd_dtype_t type, int n_in) {
  const size_t rb = wd_dtype_row_bytes(type, n_in);
  const int ldx = n_in + 3, ldy = N_OUT + 5;
  unsigned char *buf = malloc(N_OUT * rb + 1);
  float *wf = malloc((size_t)N_OUT * (size_t)n_in * sizeof(float));
  float *x = malloc((size_t)ROWS * (size_t)ldx * sizeof(float));
  float *b = malloc(N_OUT * sizeof(float)), *row = malloc((size_t)n_in * sizeof(float));
  float *y = calloc((size_t)ROWS * (size_t)ldy, sizeof(float));
  float *y2 = calloc((size_t)ROWS * (size_t)ldy, sizeof(float));
  float *yr = calloc((size_t)ROWS * (size_t)ldy, sizeof(float));
  double *ref = calloc((size_t)ROWS * N_OUT, sizeof(double)), *mag = calloc((size_t)ROWS * N_OUT,
                                                                            sizeof(double));
  wd_cpu_engine_t *e1 = engine(1, n_in), *e2 = engine(2, n_in);
  WD_CHECK(buf && wf && x && b && row && y && y2 && yr && ref && mag && e1 && e2);
  if (!(buf && wf && x && b && row && y && y2 && yr && ref && mag && e1 && e2))
    goto out;
  unsigned char *q = buf + 1; /* odd address */
  int ok = 1;
  for (int o = 0; o < N_OUT; o++) {
    for (int k = 0; k < n_in; k++)
      row[k] = 0.2f * rnd() + 0.5f * rnd();
    if (type == WD_DTYPE_F32)
      memcpy(q + (size_t)o * rb, row, rb);
    else
      ok &= wd_quantize_row(type, row, q + (size_t)o * rb, n_in) == 0;
    ok &= wd_dequantize_row(type, q + (size_t)o * rb, wf + (size_t)o * (size_t)n_in, n_in) == 0;
    b[o] = 0.1f * rnd();
  }
  WD_CHECK(ok);
  for (int i = 0; i < ROWS * ldx; i++)
    x[i] = 2.0f * rnd();
  for (int r = 0; r < ROWS; r++)
    for (int o = 0; o < N_OUT; o++) {
      double s = 0, m = 0;
      for (int k = 0; k < n_in; k++) {
        const double p = (double)x[r * ldx + k] * (double)wf[o * n_in + k];
        s += p, m += fabs(p);
      }
      ref[r * N_OUT + o] = s, mag[r * N_OUT + o] = m;
    }
  const cpu_mat_t w = { .n_out = N_OUT, .n_in = n_in, .type = type, .data = q };
  const double eps = (n_in / 8 + 8) * (double)FLT_EPSILON;
  /* The whole matrix on one thread: one sgemm over the f32 copy, bit for
   * bit. On two threads each takes a slice of the outputs (cpu_gemm.c), and
   * OpenBLAS's kernels may round a slice's edge differently, as its own
   * threading does: both within the bound of the double product. */
  wd_cpu_gemm_xwt(e1, ROWS, x, ldx, &w, 0, N_OUT, 0.0f, y, ldy);
  wd_cpu_gemm_xwt(e2, ROWS, x, ldx, &w, 0, N_OUT, 0.0f, y2, ldy);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ROWS, N_OUT, n_in, 1.0f, x, ldx, wf, n_in,
              0.0f, yr, ldy);
  WD_CHECK(memcmp(y, yr, sizeof(float) * (size_t)ROWS * (size_t)ldy) == 0);
  int bad = 0;
  for (int r = 0; r < ROWS; r++)
    for (int o = 0; o < N_OUT; o++) {
      bad += !(fabs(y[r * ldy + o] - ref[r * N_OUT + o]) <= eps * mag[r * N_OUT + o] + 1e-30);
      bad += !(fabs(y2[r * ldy + o] - ref[r * N_OUT + o]) <= eps * mag[r * N_OUT + o] + 1e-30);
    }
  if (bad)
    fprintf(stderr, "  %s n_in %d: %d outputs off the double product\n", wd_dtype_name(type),
            n_in, bad);
  WD_CHECK_EQ_INT(bad, 0);
  /* Rows 11 .. 11 + 20 of the matrix, added to what y holds (beta 1). */
  memcpy(y2, y, sizeof(float) * (size_t)ROWS * (size_t)ldy);
  wd_cpu_gemm_xwt(e2, ROWS, x, ldx, &w, 11, 20, 1.0f, y2, ldy);
  bad = 0;
  for (int r = 0; r < ROWS; r++)
    for (int j = 0; j < 20; j++) {
      const double want = (double)y[r * ldy + j] + ref[r * N_OUT + 11 + j];
      bad += !(fabs(y2[r * ldy + j] - want) <=
               eps * (mag[r * N_OUT + 11 + j] + fabs(y[r * ldy + j])) + 1e-30);
    }
  WD_CHECK_EQ_INT(bad, 0);
  /* The linear layer's three ops, with the bias. */
  static const cpu_gemv_op_t ops[] = { CPU_GEMV_SET, CPU_GEMV_GELU, CPU_GEMV_ADD };
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    for (int i = 0; i < ROWS * ldy; i++)
      y2[i] = 0.5f;
    wd_cpu_linear_rows(e2, ROWS, x, ldx, &w, b, ops[k], y2, ldy);
    bad = 0;
    for (int r = 0; r < ROWS; r++)
      for (int o = 0; o < N_OUT; o++) {
        double v = ref[r * N_OUT + o] + b[o];
        const double m = mag[r * N_OUT + o] + fabs(b[o]) + 0.5;
        if (ops[k] == CPU_GEMV_GELU)
          v = gelu(v);
        if (ops[k] == CPU_GEMV_ADD)
          v += 0.5;
        /* GELU's erf is within 1.5e-7 absolute (cpu_vmath.h). */
        bad += !(fabs(y2[r * ldy + o] - v) <= eps * m + 1e-6);
      }
    if (bad)
      fprintf(stderr, "  %s n_in %d: op %d: %d outputs off\n", wd_dtype_name(type), n_in,
              (int)ops[k], bad);
    WD_CHECK_EQ_INT(bad, 0);
  }
out:
  free(buf), free(wf), free(x), free(b), free(row), free(y), free(y2), free(yr), free(ref);
  free(mag);
  engine_free(e1), engine_free(e2);
}

WD_TEST(every_type_against_double) {
  static const wd_dtype_t types[] = { WD_DTYPE_F32,  WD_DTYPE_F16,  WD_DTYPE_Q4_0, WD_DTYPE_Q4_1,
                                      WD_DTYPE_Q5_0, WD_DTYPE_Q5_1, WD_DTYPE_Q8_0 };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    check_type(types[i], 96);
    check_type(types[i], 160);
  }
  /* f16 and f32 also at a width that is no multiple of 8 (the F16C
   * loop's tail). */
  check_type(WD_DTYPE_F16, 83);
  check_type(WD_DTYPE_F32, 83);
}

/* y = x W[o0 .. o0 + n)^T + b with n = 140 on two threads: slices of 128
 * and 12 outputs (cpu_gemm.c rounds a slice to 64 columns), o0 = 7, so
 * each slice's bias is b + its first column and its weights start at
 * o0 + that column. f32 weights: sgemm reads them in place (no scratch). */
WD_TEST(bias_product_over_slices_of_a_row_range) {
  enum { OUT = 150, K = 96, O0 = 7, N = 140, LDY = N + 3 };
  float *wm = malloc(sizeof(float) * OUT * K), *x = malloc(sizeof(float) * ROWS * K);
  float *b = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * ROWS * LDY);
  wd_cpu_engine_t *e = engine(2, K);
  WD_CHECK(wm && x && b && y && e);
  if (!wm || !x || !b || !y || !e)
    goto out;
  for (int i = 0; i < OUT * K; i++)
    wm[i] = rnd();
  for (int i = 0; i < ROWS * K; i++)
    x[i] = rnd();
  for (int i = 0; i < N; i++)
    b[i] = 4.0f * rnd();
  for (int i = 0; i < ROWS * LDY; i++)
    y[i] = NAN; /* every output is written, none read */
  const cpu_mat_t w = { .n_out = OUT, .n_in = K, .type = WD_DTYPE_F32, .data = wm };
  wd_cpu_gemm_xwt_bias(e, ROWS, x, K, &w, O0, N, b, y, LDY);
  int bad = 0;
  for (int r = 0; r < ROWS; r++)
    for (int j = 0; j < N; j++) {
      double s = b[j], m = fabs(b[j]);
      for (int k = 0; k < K; k++) {
        s += (double)x[r * K + k] * wm[(O0 + j) * K + k];
        m += fabs((double)x[r * K + k] * wm[(O0 + j) * K + k]);
      }
      bad += !(fabs(y[r * LDY + j] - s) <= (K / 8 + 8) * (double)FLT_EPSILON * m + 1e-30);
    }
  WD_CHECK_EQ_INT(bad, 0);
out:
  free(wm), free(x), free(b), free(y);
  engine_free(e);
}

WD_TEST(scratch_covers_every_product) {
  /* large-v3's encoder fc1 (4 x 1280 x 1280) is the largest; a decoder
   * wider than the encoder (none is published) would set it instead. */
  const wd_hparams_t hp = { .n_audio_state = 1280, .n_text_state = 1280, .n_mels = 128 };
  WD_CHECK_EQ_INT(wd_cpu_gemm_scratch_elems(&hp), 4 * 1280 * 1280);
  const wd_hparams_t odd = { .n_audio_state = 64, .n_text_state = 96, .n_mels = 80 };
  WD_CHECK_EQ_INT(wd_cpu_gemm_scratch_elems(&odd), 4 * 96 * 96);
}

int main(void) { return wd_test_main(); }
