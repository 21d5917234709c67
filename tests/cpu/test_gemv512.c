/*
 * test_gemv512.c - the AVX-512 dot kernels (cpu/cpu_gemv512_kern.h) give
 * the AVX2 kernels' sums bit for bit, on hosts with and without AVX-512.
 *
 * Most machines this runs on (the CI runners, this project's 2-core hosts)
 * have no AVX-512, so the kernels' source is compiled a second time, in
 * gemv512_simde.c, against SIMDe's portable AVX-512 (libsimde-dev; 256-bit
 * native halves under that file's -mavx2 -mfma -mf16c): the loop, the lane order, the
 * fold and the tail are then what is checked, against the AVX2 kernels of
 * cpu/cpu_gemv.c (wd_cpu_gemv_range_path, path 1). The one line SIMDe lacks,
 * the 16-wide f16 load (vcvtph2ps zmm), is two 8-wide conversions here;
 * the conversion is exact either way. Where the CPU has AVX-512, the
 * native kernels (path 2) are compared with path 1 as well.
 *
 * Shapes: n_in 16, 48, 384, 389 (a scalar tail of 5) and 1536; 1 to 9
 * activation rows (groups of 4 and a remainder); f16 and f32 weights; 11
 * outputs (the four-output kernels take 0 .. 7, the one-output kernel the
 * rest).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "cpu_gemv.h"
#include "cpu_gemv512.h"
#include "cpu_mat.h"
#include "f16.h"
#include "gemv512_simde.h"
#include "wd_test.h"


enum { N_OUT = 11, MAX_ROWS = 9 };

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static float rnd(void) { return wd_test_uniform(&g_rng); }

typedef struct {
  cpu_mat_t w;
  float x[MAX_ROWS][1536];
} case_t;

static void fill(case_t *c, wd_dtype_t type, int n_in) {
  const size_t n = (size_t)N_OUT * (size_t)n_in;
  c->w = (cpu_mat_t){ .n_out = N_OUT, .n_in = n_in, .type = type };
  c->w.own = malloc(n * (type == WD_DTYPE_F16 ? 2 : 4));
  c->w.data = c->w.own;
  for (size_t i = 0; c->w.own && i < n; i++) {
    const float v = rnd() * (1.0f + (float)(i % 7));
    if (type == WD_DTYPE_F16)
      ((uint16_t *)c->w.own)[i] = wd_f32_to_f16(v);
    else
      ((float *)c->w.own)[i] = v;
  }
  for (int r = 0; r < MAX_ROWS; r++)
    for (int k = 0; k < n_in; k++)
      c->x[r][k] = 2.0f * rnd();
}

/* y (n_rows, N_OUT) on path simd through the public entry point. */
static void gemv(const case_t *c, int n_rows, int simd, float *y) {
  const cpu_gemv_t g = { .w = &c->w, .n_rows = n_rows, .x = &c->x[0][0], .ldx = 1536,
                         .y = y, .ldy = N_OUT, .op = CPU_GEMV_SET };
  wd_cpu_gemv_range_path(&g, 0, N_OUT, simd);
}

WD_TEST(avx512_kernels_match_avx2_bit_for_bit) {
  if (!CPU_X86 || !wd_cpu_has_avx2())
    wd_test_skip("no AVX2 on this host: nothing to compare with");
  static case_t c;
  static const int widths[] = { 16, 48, 384, 389, 1536 };
  static const wd_dtype_t types[] = { WD_DTYPE_F16, WD_DTYPE_F32 };
  int compared = 0;
  cpu_dot_fn simde_f16 = NULL, simde_f32 = NULL;
  cpu_dot4_fn simde4_f16 = NULL, simde4_f32 = NULL;
  const int have_simde = gemv512_simde_dots(&simde_f16, &simde_f32) &&
                         gemv512_simde_dots4(&simde4_f16, &simde4_f32);
  for (size_t ti = 0; ti < 2; ti++)
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
      fill(&c, types[ti], widths[wi]);
      WD_CHECK(c.w.own != NULL);
      if (!c.w.own)
        return;
      for (int n = 1; n <= MAX_ROWS; n++) {
        float ref[MAX_ROWS * N_OUT], y[MAX_ROWS * N_OUT];
        gemv(&c, n, 1, ref);
        if (have_simde) {
          /* The kernels' source under SIMDe, 4 rows at a time as the GEMV
           * calls them; + 0.0f as the GEMV adds its (absent) bias. */
          const cpu_dot_fn dot = types[ti] == WD_DTYPE_F16 ? simde_f16 : simde_f32;
          for (int o = 0; o < N_OUT; o++) {
            const void *wrow = (const char *)c.w.data + (size_t)o * wd_cpu_mat_row_bytes(&c.w);
            for (int r0 = 0; r0 < n; r0 += 4) {
              const int R = n - r0 < 4 ? n - r0 : 4;
              const float *x[4];
              float res[4];
              for (int r = 0; r < R; r++)
                x[r] = c.x[r0 + r];
              dot(wrow, c.w.n_in, x, R, res);
              for (int r = 0; r < R; r++)
                y[(r0 + r) * N_OUT + o] = res[r] + 0.0f;
            }
          }
          WD_CHECK(memcmp(y, ref, (size_t)n * N_OUT * sizeof *y) == 0);
          compared++;
          /* The four-output kernels over outputs 0 .. 7 (two blocks). */
          const cpu_dot4_fn dot4 = types[ti] == WD_DTYPE_F16 ? simde4_f16 : simde4_f32;
          const size_t rb = wd_cpu_mat_row_bytes(&c.w);
          for (int o0 = 0; o0 + 4 <= N_OUT; o0 += 4)
            for (int r0 = 0; r0 < n; r0 += 4) {
              const int R = n - r0 < 4 ? n - r0 : 4;
              const float *x[4];
              float res[16];
              for (int r = 0; r < R; r++)
                x[r] = c.x[r0 + r];
              dot4((const char *)c.w.data + (size_t)o0 * rb, rb, c.w.n_in, x, R, res);
              for (int j = 0; j < 4; j++)
                for (int r = 0; r < R; r++)
                  WD_CHECK(res[j * 4 + r] + 0.0f == ref[(r0 + r) * N_OUT + o0 + j]);
            }
          compared++;
        }
        if (wd_cpu_avx512_available()) { /* the native kernels */
          gemv(&c, n, 2, y);
          WD_CHECK(memcmp(y, ref, (size_t)n * N_OUT * sizeof *y) == 0);
          compared++;
        }
      }
      wd_cpu_mat_free(&c.w);
    }
  if (compared == 0)
    wd_test_skip("no AVX-512 here and SIMDe (libsimde-dev) missing: nothing compared");
  fprintf(stderr, "  %d comparisons (%s, native AVX-512 %s)\n", compared,
          have_simde ? "SIMDe" : "no SIMDe", wd_cpu_avx512_available() ? "yes" : "no");
}

int main(void) { return wd_test_main(); }
