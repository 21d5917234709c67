/*
 * cpu_enc_attn.c - the encoder's blocked self-attention (see cpu_enc_attn.h).
 *
 * A block's scratch: the block's queries copied into 64 rows of 64 (rows
 * past the block's zero, so that every kernel tile is whole), the value
 * sums (64 x 64), each row's 1 / sum, each row's running maximum (16
 * lanes), then its scores, 64 rows of npad. Scores of a tile's padding
 * rows are computed (from zero queries: finite) and never stored to o.
 */
#include "cpu_enc_attn.h"

#include <math.h>
#include <string.h>

#include "cpu_features.h"

#define DH WD_ENC_ATTN_DH
#define PANEL WD_ENC_ATTN_PANEL
#define BLOCK WD_ENC_ATTN_BLOCK

int wd_cpu_enc_attn_npad(int n) {
  return (n + PANEL - 1) / PANEL * PANEL;
}

size_t wd_cpu_enc_attn_kv_elems(int n) {
  return ((size_t)wd_cpu_enc_attn_npad(n) + (size_t)n) * DH;
}

size_t wd_cpu_enc_attn_scratch_elems(int n) {
  return 2 * (size_t)BLOCK * DH + BLOCK + 16 * (size_t)BLOCK +
         (size_t)BLOCK * (size_t)wd_cpu_enc_attn_npad(n);
}

void wd_cpu_enc_attn_pack(const float *K, const float *V, int n, int ld, float *kv) {
  const int npad = wd_cpu_enc_attn_npad(n);
  float *kt = kv, *vc = kv + (size_t)npad * DH;
  for (int j = 0; j < n; j++)
    memcpy(vc + (size_t)j * DH, V + (size_t)j * (size_t)ld, DH * sizeof(float));
  for (int p = 0; p < npad; p += PANEL) {
    float *panel = kt + (size_t)p * DH;
    for (int j = 0; j < PANEL; j++) {
      if (p + j >= n) {
        for (int c = 0; c < DH; c++)
          panel[c * PANEL + j] = 0.0f;
        continue;
      }
      const float *k = K + (size_t)(p + j) * (size_t)ld;
      for (int c = 0; c < DH; c++)
        panel[c * PANEL + j] = k[c];
    }
  }
}

wd_cpu_enc_attn_block_fn wd_cpu_enc_attn_test_kernel;

#if CPU_X86
#include <immintrin.h>

#define EA512_TARGET __attribute__((target("avx512f,avx2,fma")))
#include "cpu_enc_attn_kern.h"

int wd_cpu_enc_attn_available(int dh) {
  return dh == DH && wd_cpu_use_avx2() &&
         (wd_cpu_avx512_available() || wd_cpu_enc_attn_test_kernel != NULL);
}

void wd_cpu_enc_attn_block(const float *q, int rows, int ldq, const float *kv, int n, float scale,
                           float *scratch, float *o, int ldo) {
  if (wd_cpu_enc_attn_test_kernel) {
    wd_cpu_enc_attn_test_kernel(q, rows, ldq, kv, n, scale, scratch, o, ldo);
    return;
  }
  ea512_block(q, rows, ldq, kv, n, scale, scratch, o, ldo);
}

#else /* not x86: the sgemm path always */

int wd_cpu_enc_attn_available(int dh) {
  (void)dh;
  return 0;
}

void wd_cpu_enc_attn_block(const float *q, int rows, int ldq, const float *kv, int n, float scale,
                           float *scratch, float *o, int ldo) {
  (void)q, (void)rows, (void)ldq, (void)kv, (void)n, (void)scale, (void)scratch, (void)o, (void)ldo;
}

#endif
