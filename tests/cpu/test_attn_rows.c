/*
 * test_attn_rows.c - wd_cpu_attend_rows_f16 (cpu/cpu_attn.c): R queries of
 * one head over the same f16 keys and values give, bit for bit, what each
 * query gives alone through wd_cpu_attend_one_f16 (the batch-independence
 * the decoder's cross-attention promises when it groups the rows of one
 * audio slot), kept scores included; for every R up to WD_CPU_ATTN_ROWS
 * and key counts around the 64-key chunks (1, 3, 63, 64, 65, 130, 1500).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_attn.h"
#include "f16.h"
#include "wd_test.h"

enum { DH = 64, LD = 3 * DH, NMAX = 1500 };

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

WD_TEST(rows_match_one_query_alone_bit_for_bit) {
  uint16_t *K = malloc((size_t)NMAX * LD * sizeof *K), *V = malloc((size_t)NMAX * LD * sizeof *V);
  float *s = malloc((size_t)WD_CPU_ATTN_ROWS * NMAX * sizeof *s);
  float q[WD_CPU_ATTN_ROWS][DH], o[WD_CPU_ATTN_ROWS][DH], one[DH];
  static float keep[WD_CPU_ATTN_ROWS][NMAX], keep1[NMAX];
  WD_CHECK(K && V && s);
  if (!K || !V || !s)
    goto out;
  for (size_t i = 0; i < (size_t)NMAX * LD; i++) {
    K[i] = wd_f32_to_f16(4.0f * wd_test_uniform(&g_rng) - 2.0f);
    V[i] = wd_f32_to_f16(2.0f * wd_test_uniform(&g_rng) - 1.0f);
  }
  static const int ns[] = { 1, 3, 63, 64, 65, 130, NMAX };
  int compared = 0;
  for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
    for (int R = 1; R <= WD_CPU_ATTN_ROWS; R++) {
      const float *qp[WD_CPU_ATTN_ROWS];
      float *op[WD_CPU_ATTN_ROWS], *kp[WD_CPU_ATTN_ROWS];
      for (int r = 0; r < R; r++) {
        for (int c = 0; c < DH; c++)
          q[r][c] = 2.0f * wd_test_uniform(&g_rng) - 1.0f;
        qp[r] = q[r];
        op[r] = o[r];
        kp[r] = r % 2 ? keep[r] : NULL; /* some rows keep their scores */
      }
      /* the head's columns start one head in, as the cache's do */
      wd_cpu_attend_rows_f16(R, qp, K + DH, V + DH, ns[ni], LD, DH, 0.125f, s, op, kp);
      for (int r = 0; r < R; r++) {
        wd_cpu_attend_one_f16(q[r], K + DH, V + DH, ns[ni], LD, DH, 0.125f, s, one, keep1);
        WD_CHECK(memcmp(one, o[r], sizeof one) == 0);
        if (kp[r])
          WD_CHECK(memcmp(keep1, keep[r], (size_t)ns[ni] * sizeof *keep1) == 0);
        WD_CHECK(isfinite(one[0]));
        compared++;
      }
    }
  WD_CHECK_EQ_INT(compared, 7 * (WD_CPU_ATTN_ROWS * (WD_CPU_ATTN_ROWS + 1) / 2));
out:
  free(K);
  free(V);
  free(s);
}

int main(void) { return wd_test_main(); }
