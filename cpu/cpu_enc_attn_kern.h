/*
 * cpu_enc_attn_kern.h - the blocked attention's AVX-512 kernels (see
 * cpu_enc_attn.h), as source that two files compile: cpu_enc_attn.c with
 * the avx512f target attribute, and tests/cpu/enc_attn_simde.c against
 * SIMDe's portable AVX-512 (so that the kernels and the measured choice
 * between them and sgemm run in tests on hosts without AVX-512).
 *
 * The includer defines EA512_TARGET (the functions' attribute) and has the
 * AVX-512 intrinsics and cpu_enc_attn.h in scope; DH, PANEL and BLOCK are
 * the header's constants. Everything here is static.
 */
#ifndef WD_CPU_ENC_ATTN_KERN_H
#define WD_CPU_ENC_ATTN_KERN_H

#include <math.h>
#include <string.h>

#include "cpu_enc_attn.h"

#define DH WD_ENC_ATTN_DH
#define PANEL WD_ENC_ATTN_PANEL
#define BLOCK WD_ENC_ATTN_BLOCK

/* The lanes of a panel's two vectors of scores that hold keys (< n). */
static inline unsigned ea_key_lanes(int n, int p) {
  const int k = n - p >= 32 ? 32 : n - p > 0 ? n - p : 0;
  return k >= 32 ? 0xffffffffu : (1u << k) - 1u;
}

/* Scores of rows queries (a multiple of 8) against every key, in tiles of
 * 8 queries x 32 keys (16 accumulators): s (rows,
 * npad) = scale q K^T; rmax (rows, 16) the running maximum of each row's
 * scores lane by lane, over keys only (a padding key scores 0, which may
 * exceed every real score). */
EA512_TARGET static void scores512(const float *qb, int rows, const float *kt, int n, int npad,
                                   float scale, float *s, float *rmax) {
  const __m512 sc = _mm512_set1_ps(scale);
  for (int r = 0; r < rows; r++)
    _mm512_storeu_ps(rmax + 16 * r, _mm512_set1_ps(-INFINITY));
  for (int p = 0; p < npad; p += PANEL) {
    const float *kp = kt + (size_t)p * DH;
    const unsigned keys = ea_key_lanes(n, p);
    const __mmask16 m0 = (__mmask16)(keys & 0xffffu), m1 = (__mmask16)(keys >> 16);
    for (int r0 = 0; r0 < rows; r0 += 8) {
      const float *q = qb + r0 * DH;
      __m512 a[8][2];
      for (int r = 0; r < 8; r++)
        a[r][0] = a[r][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
      for (int c = 0; c < DH; c++) {
        const __m512 k0 = _mm512_loadu_ps(kp + c * PANEL);
        const __m512 k1 = _mm512_loadu_ps(kp + c * PANEL + 16);
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
          const __m512 b = _mm512_set1_ps(q[r * DH + c]);
          a[r][0] = _mm512_fmadd_ps(b, k0, a[r][0]);
          a[r][1] = _mm512_fmadd_ps(b, k1, a[r][1]);
        }
      }
      for (int r = 0; r < 8; r++) {
        float *row = s + (size_t)(r0 + r) * (size_t)npad + p, *mx = rmax + 16 * (r0 + r);
        const __m512 x0 = _mm512_mul_ps(a[r][0], sc), x1 = _mm512_mul_ps(a[r][1], sc);
        _mm512_storeu_ps(row, x0);
        _mm512_storeu_ps(row + 16, x1);
        __m512 m = _mm512_loadu_ps(mx);
        m = _mm512_mask_max_ps(m, m0, m, x0);
        _mm512_storeu_ps(mx, _mm512_mask_max_ps(m, m1, m, x1));
      }
    }
  }
}

/* e^x for x <= 0: the AVX2 exp's polynomial (cpu_vmath.c), 16 lanes wide. */
EA512_TARGET static inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  /* p 2^k in one instruction; the AVX2 exp adds k to p's exponent bits,
   * the same value while the result is a normal float, as the clamp at -87
   * keeps it. */
  return _mm512_scalef_ps(p, k);
}

/* A row of scores (n of them) to e^(s - max), in place, max from the
 * row's 16 running maxima; returns the sum. Two sums, for two exps in
 * flight at once. */
EA512_TARGET static float exp_row512(float *s, int n, const float *rmax) {
  const int n16 = n / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (n - n16)) - 1u);
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_loadu_ps(rmax)));
  __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
  int j = 0;
  for (; j + 32 <= n16; j += 32) {
    const __m512 v0 = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
    const __m512 v1 = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j + 16), m));
    _mm512_storeu_ps(s + j, v0);
    _mm512_storeu_ps(s + j + 16, v1);
    sum0 = _mm512_add_ps(sum0, v0);
    sum1 = _mm512_add_ps(sum1, v1);
  }
  if (j < n16) {
    const __m512 v = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
    _mm512_storeu_ps(s + j, v);
    sum0 = _mm512_add_ps(sum0, v);
  }
  if (tail) {
    const __m512 v = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + n16), m));
    _mm512_mask_storeu_ps(s + n16, tail, v);
    sum1 = _mm512_mask_add_ps(sum1, tail, sum1, v);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
}

/* o = (e^s V) / sum, V (n rows of 64), value tiles of 4 rows x 64 columns
 * (16 accumulators); keys in chunks of VCHUNK so that a chunk's values
 * (32 KiB) stay in L1 while every tile of the block reads them; a tile's
 * sums go through acc between chunks, each column's sum still running over
 * the keys in order. */
#define VCHUNK 128
EA512_TARGET static void values512(const float *s, int npad, int tiles, const float *inv,
                                   const float *V, int n, float *acc, float *o, int rows,
                                   int ldo) {
  for (int j0 = 0; j0 < n; j0 += VCHUNK) {
    const int j1 = j0 + VCHUNK < n ? j0 + VCHUNK : n;
    for (int r0 = 0; r0 < tiles; r0 += 4) {
      const float *p = s + (size_t)r0 * (size_t)npad;
      float *t = acc + r0 * DH;
      __m512 a[4][4];
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
          a[r][c] = j0 ? _mm512_loadu_ps(t + r * DH + 16 * c) : _mm512_setzero_ps();
      for (int j = j0; j < j1; j++) {
        const float *v = V + (size_t)j * DH;
        const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
        const __m512 v2 = _mm512_loadu_ps(v + 32), v3 = _mm512_loadu_ps(v + 48);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
          const __m512 b = _mm512_set1_ps(p[(size_t)r * (size_t)npad + (size_t)j]);
          a[r][0] = _mm512_fmadd_ps(b, v0, a[r][0]);
          a[r][1] = _mm512_fmadd_ps(b, v1, a[r][1]);
          a[r][2] = _mm512_fmadd_ps(b, v2, a[r][2]);
          a[r][3] = _mm512_fmadd_ps(b, v3, a[r][3]);
        }
      }
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
          _mm512_storeu_ps(t + r * DH + 16 * c, a[r][c]);
    }
  }
  for (int r = 0; r < rows; r++) {
    const __m512 iv = _mm512_set1_ps(inv[r]);
    for (int c = 0; c < DH; c += 16)
      _mm512_storeu_ps(o + (size_t)r * (size_t)ldo + c,
                       _mm512_mul_ps(_mm512_loadu_ps(acc + r * DH + c), iv));
  }
}

EA512_TARGET static void ea512_block(const float *q, int rows, int ldq, const float *kv, int n,
                                     float scale, float *scratch, float *o, int ldo) {
  const int npad = wd_cpu_enc_attn_npad(n);
  const float *kt = kv, *V = kv + (size_t)npad * DH;
  float *qb = scratch, *acc = scratch + BLOCK * DH, *inv = acc + BLOCK * DH;
  float *rmax = inv + BLOCK, *s = rmax + 16 * BLOCK;
  for (int r = 0; r < BLOCK; r++) {
    if (r < rows)
      memcpy(qb + r * DH, q + (size_t)r * (size_t)ldq, DH * sizeof(float));
    else
      memset(qb + r * DH, 0, DH * sizeof(float));
  }
  /* Whole tiles: 8 rows scored, 4 weighted (the scored rows cover them);
   * the softmax's division comes last, on the weighted sums. */
  const int tiles = (rows + 3) / 4 * 4;
  scores512(qb, (rows + 7) / 8 * 8, kt, n, npad, scale, s, rmax);
  for (int r = 0; r < tiles; r++)
    inv[r] = 1.0f / exp_row512(s + (size_t)r * (size_t)npad, n, rmax + 16 * r);
  values512(s, npad, tiles, inv, V, n, acc, o, rows, ldo);
}

#endif
