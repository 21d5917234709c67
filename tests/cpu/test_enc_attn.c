/*
 * test_enc_attn.c - the encoder's fused self-attention (cpu/cpu_enc_attn.c)
 * against a double-precision softmax(scale Q K^T) V, on both tile paths
 * (AVX2, and AVX-512 where the host has it), with shapes that leave every
 * tail: n = 101 queries and keys (no multiple of 4, 16 or 64; the last
 * block of queries is short), 3 heads of 64; and n = 1500, 6 heads (tiny's
 * encoder), whose 1500 = 46 x 32 + 28 ends on a short block too. One and
 * two threads give the same bits, and so do the two paths (each sum runs
 * in the same order with the same FMAs, 16 or 8 lanes wide: a transcript
 * does not depend on which x86 host ran it). Skips where the fused pass does not run
 * (no AVX2, or not x86): the encoder keeps its sgemm path there.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_enc_attn.h"
#include "cpu_gemv512.h"
#include "cpu_internal.h"
#include "wd_test.h"

static uint64_t g_rng = 0x13198a2e03707344ull;

static wd_cpu_engine_t *engine(int threads) {
  wd_cpu_engine_t *e = calloc(1, sizeof *e);
  if (e && wd_pool_new(threads - 1, &e->pool) < 0) {
    free(e);
    return NULL;
  }
  if (e)
    e->n_threads = threads;
  return e;
}

static void engine_free(wd_cpu_engine_t *e) {
  if (e)
    wd_pool_free(e->pool), free(e);
}

/* Worst |o - ref| / (max |ref| of the head) over every output. */
static double check(int n, int nh, int wide, int threads, float *o_out) {
  const int d = 64 * nh;
  const float scale = 0.125f;
  float *qkv = malloc(sizeof(float) * (size_t)n * 3 * (size_t)d);
  float *kt = malloc(sizeof(float) * (size_t)n * (size_t)d);
  float *s = malloc(sizeof(float) * (size_t)n * (size_t)n);
  float *o = o_out;
  double *p = malloc(sizeof(double) * (size_t)n);
  wd_cpu_engine_t *e = engine(threads);
  double worst = INFINITY;
  if (!qkv || !kt || !s || !p || !e)
    goto out;
  uint64_t rng = g_rng;
  for (size_t i = 0; i < (size_t)n * 3 * (size_t)d; i++)
    qkv[i] = 2.0f * wd_test_uniform(&rng);
  cpu_enc_attn_path(e, qkv, n, d, nh, scale, kt, s, o, wide);
  worst = 0;
  /* Every query of the small shape, every 7th of the large (the double
   * reference is the test's cost). */
  for (int h = 0; h < nh; h++)
    for (int i = 0; i < n; i += n > 200 ? 7 : 1) {
      const float *q = qkv + (size_t)i * 3 * (size_t)d + h * 64;
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < n; j++) {
        const float *k = qkv + (size_t)j * 3 * (size_t)d + d + h * 64;
        double v = 0;
        for (int c = 0; c < 64; c++)
          v += (double)q[c] * (double)k[c];
        p[j] = v * scale;
        mx = p[j] > mx ? p[j] : mx;
      }
      for (int j = 0; j < n; j++)
        sum += (p[j] = exp(p[j] - mx));
      for (int c = 0; c < 64; c++) {
        double v = 0, mag = 0;
        for (int j = 0; j < n; j++) {
          const double x = p[j] / sum * qkv[(size_t)j * 3 * (size_t)d + 2 * (size_t)d + h * 64 + c];
          v += x, mag += fabs(x);
        }
        const double err = fabs(o[(size_t)i * (size_t)d + h * 64 + c] - v) / (mag + 1e-30);
        worst = err > worst || isnan(err) ? err : worst;
      }
    }
out:
  free(qkv), free(kt), free(s), free(p);
  engine_free(e);
  return worst;
}

static float *g_avx2_out[2]; /* the AVX2 path's outputs, for the AVX-512 one */

static void run_path(int wide) {
  static const int shapes[][2] = { { 101, 3 }, { 1500, 6 } };
  for (size_t k = 0; k < 2; k++) {
    const int n = shapes[k][0], nh = shapes[k][1];
    float *o1 = calloc((size_t)n * 64 * (size_t)nh, sizeof(float));
    float *o2 = calloc((size_t)n * 64 * (size_t)nh, sizeof(float));
    WD_CHECK(o1 && o2);
    if (!o1 || !o2) {
      free(o1), free(o2);
      return;
    }
    const double e1 = check(n, nh, wide, 1, o1), e2 = check(n, nh, wide, 2, o2);
    fprintf(stderr, "  %s n %d, %d heads: worst error %.3g of the output's magnitude\n",
            wide ? "avx512" : "avx2", n, nh, e1);
    /* f32 scores (exp amplifies their rounding), f32 sums over n keys. */
    WD_CHECK(e1 < 1e-4);
    WD_CHECK(e2 == e1);
    WD_CHECK(memcmp(o1, o2, sizeof(float) * (size_t)n * 64 * (size_t)nh) == 0);
    if (!wide) {
      free(g_avx2_out[k]);
      g_avx2_out[k] = o1;
    } else {
      WD_CHECK(g_avx2_out[k] &&
               memcmp(o1, g_avx2_out[k], sizeof(float) * (size_t)n * 64 * (size_t)nh) == 0);
      free(o1);
    }
    free(o2);
  }
}

WD_TEST(avx2_tiles) {
  if (!cpu_enc_attn_ok(64))
    wd_test_skip("no AVX2 (the encoder keeps its sgemm attention here)");
  run_path(0);
}

WD_TEST(avx512_tiles) {
  if (!cpu_enc_attn_ok(64))
    wd_test_skip("no AVX2 (the encoder keeps its sgemm attention here)");
  if (!cpu_avx512_available()) {
    /* Not a skip: that would mark the AVX2 results above skipped too. */
    fprintf(stderr, "  no AVX-512 on this host: the AVX2 tiles alone ran\n");
    return;
  }
  run_path(1);
}

WD_TEST(other_head_widths_keep_sgemm) {
  WD_CHECK(!cpu_enc_attn_ok(32));
  WD_CHECK(!cpu_enc_attn_ok(80));
}

int main(void) {
  const int rc = wd_test_main();
  free(g_avx2_out[0]), free(g_avx2_out[1]);
  return rc;
}
