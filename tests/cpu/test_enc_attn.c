/*
 * test_enc_attn.c - the encoder's blocked self-attention (cpu/cpu_enc_attn.c)
 * against a double-precision softmax(q K^T * scale) V on AVX-512 hosts
 * (elsewhere the same kernel source under SIMDe, tests/cpu/enc_attn_simde.c;
 * without AVX2 or SIMDe the encoder keeps its sgemm path and this test skips): block sizes 1 .. 64 (partial
 * score and value tiles), key counts around the 32-key panels and the
 * 128-key value chunks up to the encoder's 1500, a head one head into rows
 * of three heads as the encoder's Q K V buffer lays them out; rows past the
 * block's are never written. Then every score near -100, where a padding
 * key counted in a row's maximum would flatten the softmax; packed keys and
 * scratch are sized for each key count, for ASan to see any overrun.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_enc_attn.h"
#include "cpu_features.h"
#include "enc_attn_simde.h"
#include "wd_test.h"

enum { DH = WD_ENC_ATTN_DH, LD = 9 * DH, NMAX = 1500, LDO = 2 * DH };

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

/* o (DH) = softmax(q . K^T * scale) V in double. */
static void reference(const float *q, const float *K, const float *V, int n, float scale,
                      double *o) {
  double *s = malloc((size_t)n * sizeof *s), mx = -INFINITY, sum = 0.0;
  if (!s)
    return;
  for (int j = 0; j < n; j++) {
    double a = 0.0;
    for (int c = 0; c < DH; c++)
      a += (double)q[c] * (double)K[(size_t)j * LD + (size_t)c];
    s[j] = a * scale;
    mx = s[j] > mx ? s[j] : mx;
  }
  for (int j = 0; j < n; j++)
    sum += (s[j] = exp(s[j] - mx));
  for (int c = 0; c < DH; c++) {
    double a = 0.0;
    for (int j = 0; j < n; j++)
      a += s[j] * (double)V[(size_t)j * LD + (size_t)c];
    o[c] = a / sum;
  }
  free(s);
}

/* Every block size of rows_list against keys 0 .. n of head 1 of qkv;
 * kv and scratch are allocated at their size for n, so that a read or
 * write past them is an ASan error. Returns the blocks run. */
static int run_blocks(float *qkv, const int *ns, int n_ns, float scale, float *o, double *worst) {
  static const int rows_list[] = { 1, 3, 4, 7, 8, 28, 63, 64 };
  const float *Q = qkv + DH, *K = qkv + 4 * DH, *V = qkv + 7 * DH; /* head 1 of 3 */
  int blocks = 0;
  for (int ni = 0; ni < n_ns; ni++) {
    const int n = ns[ni];
    float *kv = malloc(wd_cpu_enc_attn_kv_elems(n) * sizeof *kv);
    float *scratch = malloc(wd_cpu_enc_attn_scratch_elems(n) * sizeof *scratch);
    WD_CHECK(kv && scratch);
    if (!kv || !scratch) {
      free(kv), free(scratch);
      return blocks;
    }
    wd_cpu_enc_attn_pack(K, V, n, LD, kv);
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
      const int rows = rows_list[ri], r0 = (int)(ri * 97) % (NMAX - rows);
      for (size_t i = 0; i < (size_t)(WD_ENC_ATTN_BLOCK + 1) * LDO; i++)
        o[i] = 12345.0f;
      wd_cpu_enc_attn_block(Q + (size_t)r0 * LD, rows, LD, kv, n, scale, scratch, o + DH, LDO);
      for (int r = 0; r < rows; r++) {
        double ref[DH];
        reference(Q + (size_t)(r0 + r) * LD, K, V, n, scale, ref);
        for (int c = 0; c < DH; c++) {
          const double err = fabs((double)o[(size_t)r * LDO + DH + (size_t)c] - ref[c]);
          *worst = err > *worst ? err : *worst;
        }
        for (int c = 0; c < DH; c++) /* the columns beside the head's */
          WD_CHECK(o[(size_t)r * LDO + (size_t)c] == 12345.0f);
      }
      for (int r = rows; r <= WD_ENC_ATTN_BLOCK; r++) /* the rows past the block's */
        WD_CHECK(o[(size_t)r * LDO + DH] == 12345.0f);
      blocks++;
    }
    free(kv), free(scratch);
  }
  return blocks;
}

WD_TEST(blocks_match_double_reference_on_every_kernel) {
  /* Without AVX-512, the same kernel source under SIMDe (enc_attn_simde.c),
   * where the host has AVX2 and the build found SIMDe. */
  if (!wd_cpu_enc_attn_available(DH) && wd_cpu_use_avx2()) {
    wd_cpu_enc_attn_test_kernel = enc_attn_simde_block();
    if (wd_cpu_enc_attn_test_kernel)
      fprintf(stderr, "  no AVX-512 here: the kernels under SIMDe\n");
  }
  if (!wd_cpu_enc_attn_available(DH)) {
    wd_test_skip("no AVX-512 on this host (nor SIMDe): the encoder takes the sgemm path");
  }
  float *qkv = malloc((size_t)NMAX * LD * sizeof *qkv);
  float *o = malloc((size_t)(WD_ENC_ATTN_BLOCK + 1) * LDO * sizeof *o);
  WD_CHECK(qkv && o);
  if (!qkv || !o)
    goto out;
  /* scores of a few units, as the encoder's are: softmax rows neither flat
   * nor one-hot; key counts around the 32-key panels (a half panel's worth
   * past one: 16, 48) and the 128-key value chunks, up to the encoder's */
  for (size_t i = 0; i < (size_t)NMAX * LD; i++)
    qkv[i] = 2.0f * wd_test_uniform(&g_rng) - 1.0f;
  const float scale = 0.35f;
  static const int ns[] = { 1, 5, 16, 31, 32, 33, 48, 65, 129, 257, NMAX };
  const int n_ns = (int)(sizeof ns / sizeof ns[0]);
  double worst = 0.0;
  int blocks = run_blocks(qkv, ns, n_ns, scale, o, &worst);
  WD_CHECK_EQ_INT(blocks, n_ns * 8);
  /* f32 scores of 64 products (about 1e-6 off) go through exp: 1.3e-5 seen
   * on outputs of about 0.5; a wrong key, row or tail is off by 1e-2 or more */
  WD_CHECK(worst < 5e-5);
  fprintf(stderr, "  %d blocks, worst error against double %.2e\n", blocks, worst);
  /* Every real score near -100 (column 0 of Q 20, of K -100 / (20 scale)):
   * a padding key (score 0) counted in a row's maximum would take every
   * e^(s - max) to the exp's floor, e^-87, and the weights to uniform. */
  static const int ns_pad[] = { 5, 33, 65, NMAX };
  for (int j = 0; j < NMAX; j++) {
    qkv[(size_t)j * LD + DH] = 20.0f;
    qkv[(size_t)j * LD + 4 * DH] = -100.0f / (20.0f * scale);
  }
  worst = 0.0;
  blocks = run_blocks(qkv, ns_pad, 4, scale, o, &worst);
  WD_CHECK_EQ_INT(blocks, 4 * 8);
  /* scores of about 100 hold 8e-6 of rounding each: 7e-5 seen; uniform
   * weights would be off by about 0.3 */
  WD_CHECK(worst < 1e-3);
  fprintf(stderr, "  scores near -100: %d blocks, worst error %.2e\n", blocks, worst);
out:
  free(qkv), free(o);
}

int main(void) { return wd_test_main(); }
