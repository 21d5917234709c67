/*
 * test_rgemm.c - the bf16 and int8 products of --compute-type
 * (cpu/cpu_rgemm.c) against the plain-C reference, on odd shapes.
 *
 * For each compute type, a pseudo-random (n_out, n_in) f32 matrix (n_out
 * not a multiple of the 16-output block, n_in not of the 64-element
 * padding, and Whisper's 384) is converted as the engine converts it, and
 * rows of activations at a stride wider than n_in are multiplied on every
 * path this CPU has (portable, AVX2, AVX512-VNNI, AVX512-BF16). Checked:
 *   - against a double-precision product of the converted values (the
 *     weights as wd_cpu_rgemm_weight_row gives them, the activations
 *     converted by the same rule): within the f32 rounding of the sum;
 *   - against the f32 product of the unconverted values: within what the
 *     precision allows (1 % of sum |w||x| for int8, 2 % for bf16);
 *   - int8: every path gives the portable path's bits; bf16: within the
 *     rounding of a sum in another order;
 *   - every row's outputs are the same bits computed alone (1 row) as in
 *     the batch, for every op (SET, GELU, ADD with the bias) and the raw
 *     mode the encoder uses;
 *   - an output range starting at a block (the cross K/V halves);
 *   - the path picked from masked CPU features, and the refusal.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "cpu_rgemm.h"
#include "wd_test.h"

static uint64_t g_rng = 0x13198a2e03707344ull;

static float rnd(void) { return wd_test_uniform(&g_rng); }

typedef struct {
  cpu_mat_t w;
  float *wf; /* (n_out, n_in) the f32 weights */
} mat_t;

static int make_mat(mat_t *m, wd_cpu_compute_t ct, int n_out, int n_in) {
  memset(m, 0, sizeof *m);
  m->wf = malloc((size_t)n_out * (size_t)n_in * sizeof(float));
  float *own = malloc((size_t)n_out * (size_t)n_in * sizeof(float));
  if (!m->wf || !own) {
    free(own);
    return -1;
  }
  for (size_t i = 0; i < (size_t)n_out * (size_t)n_in; i++)
    m->wf[i] = own[i] = 0.3f * rnd() + (i % 97 == 0 ? 2.0f * rnd() : 0.0f);
  m->w = (cpu_mat_t){ .n_out = n_out, .n_in = n_in, .type = WD_DTYPE_F32, .data = own, .own = own };
  return wd_cpu_mat_reduce(&m->w, ct, NULL, NULL);
}

static void free_mat(mat_t *m) {
  wd_cpu_mat_free(&m->w);
  free(m->wf);
}

/* Runs g (rows 0 .. n_rows of x) on path p. */
static void run(cpu_rgemm_t *g, cpu_rpath_t p) {
  g->path = p;
  wd_cpu_rgemm_prep(g, 0, g->n_rows);
  wd_cpu_rgemm_range(g, 0, g->n);
}

static int paths_of(wd_cpu_compute_t ct, cpu_rpath_t *out) {
  const unsigned f = wd_cpu_features();
  int n = 0;
  out[n++] = CPU_RPATH_PORTABLE;
  if (ct == WD_CPU_COMPUTE_INT8 && (f & CPU_F_AVX2))
    out[n++] = CPU_RPATH_AVX2;
  const cpu_rpath_t widest = wd_cpu_rgemm_pick(ct, f);
  if (widest == CPU_RPATH_VNNI512 || widest == CPU_RPATH_BF16_512)
    out[n++] = wd_cpu_rgemm_pick(ct, f);
  return n;
}

static double gelu(double v) { return 0.5 * v * (1.0 + erf(v / sqrt(2.0))); }

static void check_shape(wd_cpu_compute_t ct, int n_out, int n_in, int rows) {
  mat_t m;
  WD_CHECK_EQ_INT(make_mat(&m, ct, n_out, n_in), 0);
  const int ldx = n_in + 5, ldy = n_out + 3;
  const size_t rb = wd_cpu_rgemm_row_bytes(ct, n_in);
  float *x = malloc((size_t)rows * (size_t)ldx * sizeof *x);
  float *b = malloc((size_t)n_out * sizeof *b);
  float *y0 = malloc((size_t)rows * (size_t)ldy * sizeof *y0);
  float *y1 = malloc((size_t)rows * (size_t)ldy * sizeof *y1);
  float *res = malloc((size_t)rows * (size_t)ldy * sizeof *res); /* residual for ADD */
  float *wrow = malloc((size_t)n_in * sizeof *wrow);
  void *xq = malloc((size_t)rows * rb);
  float *xs = malloc((size_t)rows * sizeof *xs);
  if (!(x && b && y0 && y1 && res && wrow && xq && xs)) {
    WD_CHECK(0);
    goto out;
  }
  for (int r = 0; r < rows; r++)
    for (int k = 0; k < ldx; k++)
      x[(size_t)r * ldx + k] = k < n_in ? rnd() * (r % 3 ? 1.0f : 40.0f) : NAN; /* stride: never read */
  for (int o = 0; o < n_out; o++)
    b[o] = 0.1f * rnd();
  for (size_t i = 0; i < (size_t)rows * ldy; i++)
    res[i] = rnd();
  cpu_rpath_t paths[4];
  const int np = paths_of(ct, paths);
  float *first = malloc((size_t)rows * (size_t)ldy * sizeof *first);
  if (!first) {
    WD_CHECK(0);
    goto out;
  }
  int conv_ok = 1, f32_ok = 1, cross_ok = 1, alone_ok = 1;
  for (int op = 0; op < 4; op++) { /* SET, GELU, ADD, raw (encoder: no bias, SET) */
    const cpu_gemv_op_t gop = op == 3 ? CPU_GEMV_SET : (cpu_gemv_op_t)op;
    for (int pi = 0; pi < np; pi++) {
      cpu_rgemm_t g = { .w = &m.w, .o0 = 0, .n = n_out, .b = op == 3 ? NULL : b, .n_rows = rows,
                        .x = x, .ldx = ldx, .y = y0, .ldy = ldy, .op = gop, .xq = xq, .xs = xs,
                        .raw = op == 3 };
      memcpy(y0, res, (size_t)rows * ldy * sizeof *y0);
      run(&g, paths[pi]);
      /* References: double sums of the converted values, and of the f32. */
      for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * ldx;
        const unsigned char *q = (const unsigned char *)xq + (size_t)r * rb;
        for (int o = 0; o < n_out; o++) {
          wd_cpu_rgemm_weight_row(&m.w, o, wrow);
          double sc = 0, sf = 0, mag = 0;
          for (int k = 0; k < n_in; k++) {
            double xc;
            if (ct == WD_CPU_COMPUTE_INT8) /* u8 q + 128, or s8 q on AVX2 */
              xc = (paths[pi] == CPU_RPATH_AVX2 ? (double)(int8_t)q[k] : (double)q[k] - 128.0) *
                   xs[r];
            else {
              const uint32_t u = (uint32_t)(q[2 * k] | q[2 * k + 1] << 8) << 16;
              float v;
              memcpy(&v, &u, sizeof v);
              xc = v;
            }
            sc += xc * wrow[k];
            sf += (double)xr[k] * m.wf[(size_t)o * n_in + k];
            mag += fabs((double)xr[k] * m.wf[(size_t)o * n_in + k]);
          }
          const double base = op == 3 ? 0.0 : b[o];
          const double rr = res[(size_t)r * ldy + o];
          double want_c = sc + base, want_f = sf + base;
          if (gop == CPU_GEMV_GELU)
            want_c = gelu(want_c), want_f = gelu(want_f);
          if (gop == CPU_GEMV_ADD)
            want_c += rr, want_f += rr;
          const double got = y0[(size_t)r * ldy + o];
          const double tol_c = (double)(n_in / 4 + 8) * FLT_EPSILON * (mag * 1.05 + fabs(rr) + 1.0);
          const double tol_f = (ct == WD_CPU_COMPUTE_INT8 ? 0.01 : 0.02) * (mag + 1e-3);
          if (!(fabs(got - want_c) <= tol_c)) {
            if (conv_ok)
              fprintf(stderr, "  %s path %s op %d r %d o %d: %.9g vs converted %.9g (tol %.3g)\n",
                      wd_cpu_compute_name(ct), wd_cpu_rpath_name(paths[pi]), op, r, o, got, want_c,
                      tol_c);
            conv_ok = 0;
          }
          if (!(fabs(got - want_f) <= tol_f))
            f32_ok = 0;
        }
      }
      /* Paths against the first (portable). */
      if (pi == 0) {
        memcpy(first, y0, (size_t)rows * ldy * sizeof *first);
      } else {
        for (int r = 0; r < rows; r++)
          for (int o = 0; o < n_out; o++) {
            const float a = first[(size_t)r * ldy + o], c = y0[(size_t)r * ldy + o];
            if (ct == WD_CPU_COMPUTE_INT8 ? memcmp(&a, &c, sizeof a) != 0
                                          : !(fabsf(a - c) <= 1e-4f * (fabsf(a) + 1.0f)))
              cross_ok = 0;
          }
      }
      /* Each row alone gives its batched bits. */
      for (int r = 0; r < rows; r += 1 + rows / 5) {
        cpu_rgemm_t g1 = g;
        g1.x = x + (size_t)r * ldx;
        g1.y = y1;
        g1.n_rows = 1;
        memcpy(y1, res + (size_t)r * ldy, (size_t)ldy * sizeof *y1);
        run(&g1, paths[pi]);
        if (memcmp(y1, y0 + (size_t)r * ldy, (size_t)n_out * sizeof *y1) != 0)
          alone_ok = 0;
      }
    }
  }
  WD_CHECK(conv_ok);
  WD_CHECK(f32_ok);
  WD_CHECK(cross_ok);
  WD_CHECK(alone_ok);
  /* The outputs from a block on: the same bits as those of the whole. */
  if (n_out > 16) {
    for (int pi = 0; pi < np; pi++) {
      cpu_rgemm_t g = { .w = &m.w, .o0 = 0, .n = n_out, .b = NULL, .n_rows = rows, .x = x,
                        .ldx = ldx, .y = y0, .ldy = ldy, .op = CPU_GEMV_SET, .xq = xq, .xs = xs,
                        .raw = 1 };
      run(&g, paths[pi]);
      cpu_rgemm_t h = g;
      h.o0 = 16, h.n = n_out - 16, h.y = y1;
      run(&h, paths[pi]);
      int same = 1;
      for (int r = 0; r < rows; r++)
        same &= memcmp(y1 + (size_t)r * ldy, y0 + (size_t)r * ldy + 16,
                       (size_t)(n_out - 16) * sizeof *y0) == 0;
      WD_CHECK(same);
    }
  }
  free(first);
out:
  free(x), free(b), free(y0), free(y1), free(res), free(wrow), free(xq), free(xs);
  free_mat(&m);
}

WD_TEST(int8_products) {
  const int shapes[][3] = { { 45, 100, 37 }, { 64, 384, 9 }, { 33, 130, 1 }, { 80, 64, 20 } };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    check_shape(WD_CPU_COMPUTE_INT8, shapes[i][0], shapes[i][1], shapes[i][2]);
  const unsigned f = wd_cpu_features();
  fprintf(stderr, "  int8 paths here: portable%s%s\n", (f & CPU_F_AVX2) ? ", AVX2" : "",
          wd_cpu_rgemm_pick(WD_CPU_COMPUTE_INT8, f) == CPU_RPATH_VNNI512 ? ", AVX512-VNNI" : "");
}

WD_TEST(bf16_products) {
  const int shapes[][3] = { { 45, 100, 37 }, { 64, 384, 9 }, { 33, 130, 1 } };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    check_shape(WD_CPU_COMPUTE_BF16, shapes[i][0], shapes[i][1], shapes[i][2]);
}

/* Paths from features alone (masked sets: hosts this one is not). */
WD_TEST(path_from_features) {
  const unsigned f512 = CPU_F_AVX | CPU_F_AVX2 | CPU_F_FMA | CPU_F_F16C | CPU_F_AVX512F |
                        CPU_F_AVX512CD | CPU_F_AVX512BW | CPU_F_AVX512DQ | CPU_F_AVX512VL;
  const unsigned avx2 = CPU_F_AVX | CPU_F_AVX2 | CPU_F_FMA | CPU_F_F16C;
  WD_CHECK_EQ_INT(wd_cpu_rgemm_pick(WD_CPU_COMPUTE_INT8, f512 | CPU_F_AVX512VNNI),
                  CPU_RPATH_VNNI512);
  WD_CHECK_EQ_INT(wd_cpu_rgemm_pick(WD_CPU_COMPUTE_INT8, f512), CPU_RPATH_AVX2);
  WD_CHECK_EQ_INT(wd_cpu_rgemm_pick(WD_CPU_COMPUTE_INT8, avx2), CPU_RPATH_AVX2);
  WD_CHECK_EQ_INT(wd_cpu_rgemm_pick(WD_CPU_COMPUTE_INT8, CPU_F_AVX), CPU_RPATH_NONE);
  WD_CHECK_EQ_INT(wd_cpu_rgemm_pick(WD_CPU_COMPUTE_BF16, f512 | CPU_F_AVX512BF16),
                  CPU_RPATH_BF16_512);
  WD_CHECK_EQ_INT(wd_cpu_rgemm_pick(WD_CPU_COMPUTE_BF16, f512 | CPU_F_AVX512VNNI), CPU_RPATH_NONE);
  WD_CHECK_EQ_INT(wd_cpu_rgemm_pick(WD_CPU_COMPUTE_BF16, avx2), CPU_RPATH_NONE);
  WD_CHECK_EQ_INT(wd_cpu_rgemm_pick(WD_CPU_COMPUTE_F32, f512 | CPU_F_AVX512BF16), CPU_RPATH_NONE);
  WD_CHECK(wd_cpu_rgemm_refusal(WD_CPU_COMPUTE_BF16, avx2) != NULL);
  WD_CHECK(strstr(wd_cpu_rgemm_refusal(WD_CPU_COMPUTE_BF16, avx2), "AVX512-BF16") != NULL);
  WD_CHECK(wd_cpu_rgemm_refusal(WD_CPU_COMPUTE_INT8, 0) != NULL);
  WD_CHECK(wd_cpu_rgemm_refusal(WD_CPU_COMPUTE_INT8, avx2) == NULL);
  WD_CHECK(wd_cpu_rgemm_refusal(WD_CPU_COMPUTE_F32, 0) == NULL);
}
int main(void) { return wd_test_main(); }
