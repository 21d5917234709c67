/*
 * cpu_enc_attn.c - the encoder's self-attention in one parallel pass (see
 * cpu_enc_attn.h).
 */
#include "cpu_enc_attn.h"

#include "cpu_gemv.h"
#include "cpu_gemv512.h"
#include "cpu_internal.h"
#include "cpu_vmath.h"

#define DH 64 /* the head width the tiles are written for */

#if CPU_X86
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx2,fma")))
#define T256 __attribute__((target("avx2,fma")))

/* s[r][j0 .. j0 + nk) = scale * q[r] . K^T[:, j] for 4 queries and up to 64
 * keys (kt: (DH, n) of this head, keys contiguous). */
T512 static void qk512(const float *const *q, const float *kt, int n, int j0, int nk, float scale,
                       float *const *s) {
  __m512 acc[4][4];
  __mmask16 m[4];
#pragma GCC unroll 4
  for (int t = 0; t < 4; t++) {
    const int left = nk - 16 * t < 0 ? 0 : (nk - 16 * t > 16 ? 16 : nk - 16 * t);
    m[t] = (__mmask16)((1u << left) - 1u);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      acc[r][t] = _mm512_setzero_ps();
  }
  for (int c = 0; c < DH; c++) {
    const float *row = kt + (size_t)c * (size_t)n + j0;
    __m512 kv[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
      kv[t] = _mm512_maskz_loadu_ps(m[t], row + 16 * t);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m512 b = _mm512_set1_ps(q[r][c]);
#pragma GCC unroll 4
      for (int t = 0; t < 4; t++)
        acc[r][t] = _mm512_fmadd_ps(b, kv[t], acc[r][t]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
      _mm512_mask_storeu_ps(s[r] + j0 + 16 * t, m[t], _mm512_mul_ps(acc[r][t], sc));
}

/* o[r][0 .. DH) = sum_j p[r][j] V[j] for 4 queries; V's rows ldv apart. */
T512 static void pv512(const float *const *p, const float *V, int ldv, int n, float *const *o) {
  __m512 acc[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
      acc[r][t] = _mm512_setzero_ps();
  for (int j = 0; j < n; j++) {
    const float *v = V + (size_t)j * (size_t)ldv;
    __m512 vv[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
      vv[t] = _mm512_loadu_ps(v + 16 * t);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m512 b = _mm512_set1_ps(p[r][j]);
#pragma GCC unroll 4
      for (int t = 0; t < 4; t++)
        acc[r][t] = _mm512_fmadd_ps(b, vv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
      _mm512_storeu_ps(o[r] + 16 * t, acc[r][t]);
}

/* AVX2: 4 queries x 16 keys (8 accumulators of the 16 registers). */
T256 static void qk256(const float *const *q, const float *kt, int n, int j0, int nk, float scale,
                       float *const *s) {
  __m256 acc[4][2];
  __m256i m[2];
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 2
  for (int t = 0; t < 2; t++) {
    m[t] = _mm256_cmpgt_epi32(_mm256_set1_epi32(nk - 8 * t), idx);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
      acc[r][t] = _mm256_setzero_ps();
  }
  for (int c = 0; c < DH; c++) {
    const float *row = kt + (size_t)c * (size_t)n + j0;
    const __m256 k0 = _mm256_maskload_ps(row, m[0]), k1 = _mm256_maskload_ps(row + 8, m[1]);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m256 b = _mm256_broadcast_ss(q[r] + c);
      acc[r][0] = _mm256_fmadd_ps(b, k0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(b, k1, acc[r][1]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int t = 0; t < 2; t++)
      _mm256_maskstore_ps(s[r] + j0 + 8 * t, m[t], _mm256_mul_ps(acc[r][t], sc));
}

/* AVX2: 2 queries x 32 of the DH dimensions (8 accumulators). */
T256 static void pv256(const float *const *p, const float *V, int ldv, int n, float *const *o) {
  __m256 acc[2][4];
#pragma GCC unroll 2
  for (int r = 0; r < 2; r++)
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
      acc[r][t] = _mm256_setzero_ps();
  for (int j = 0; j < n; j++) {
    const float *v = V + (size_t)j * (size_t)ldv;
    __m256 vv[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
      vv[t] = _mm256_loadu_ps(v + 8 * t);
#pragma GCC unroll 2
    for (int r = 0; r < 2; r++) {
      const __m256 b = _mm256_broadcast_ss(p[r] + j);
#pragma GCC unroll 4
      for (int t = 0; t < 4; t++)
        acc[r][t] = _mm256_fmadd_ps(b, vv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < 2; r++)
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
      _mm256_storeu_ps(o[r] + 8 * t, acc[r][t]);
}
#endif

int cpu_enc_attn_ok(int dh) {
#if CPU_X86
  return dh == DH && cpu_use_avx2();
#else
  (void)dh;
  return 0;
#endif
}

typedef struct {
  const float *qkv;
  float *kt, *s, *o;
  int n, d, nh, wide;
  float scale;
} ea_t;

/* K^T for keys [64 b, 64 b + 64): kt[c][j] = K[j][c]. Each key's row is
 * read once into L1 for 16 consecutive c. */
static void kt_task(void *arg, int b) {
  const ea_t *a = arg;
  const int j0 = 64 * b, j1 = j0 + 64 < a->n ? j0 + 64 : a->n;
  const size_t ld = 3 * (size_t)a->d;
  for (int c = 0; c < a->d; c++) {
    float *dst = a->kt + (size_t)c * (size_t)a->n;
    const float *src = a->qkv + (size_t)a->d + (size_t)c;
    for (int j = j0; j < j1; j++)
      dst[j] = src[(size_t)j * ld];
  }
}

#if CPU_X86
/* Queries [CPU_EA_QB b, + CPU_EA_QB), every head, 4 rows at a time; a
 * block's last rows repeat its last query where fewer than 4 are left
 * (the same values written twice). */
static void ea_task(void *arg, int b) {
  const ea_t *a = arg;
  const int n = a->n, d = a->d, i0 = CPU_EA_QB * b;
  const int i1 = i0 + CPU_EA_QB < n ? i0 + CPU_EA_QB : n;
  const size_t ld = 3 * (size_t)d;
  for (int h = 0; h < a->nh; h++) {
    const float *kt = a->kt + (size_t)h * DH * (size_t)n;
    const float *V = a->qkv + 2 * (size_t)d + (size_t)h * DH;
    for (int i = i0; i < i1; i += 4) {
      const float *q[4];
      float *s[4], *o[4];
      for (int r = 0; r < 4; r++) {
        const int row = i + r < i1 ? i + r : i1 - 1;
        q[r] = a->qkv + (size_t)row * ld + (size_t)h * DH;
        s[r] = a->s + (size_t)row * (size_t)n;
        o[r] = a->o + (size_t)row * (size_t)d + (size_t)h * DH;
      }
      if (a->wide)
        for (int j0 = 0; j0 < n; j0 += 64)
          qk512(q, kt, n, j0, n - j0 < 64 ? n - j0 : 64, a->scale, s);
      else
        for (int j0 = 0; j0 < n; j0 += 16)
          qk256(q, kt, n, j0, n - j0 < 16 ? n - j0 : 16, a->scale, s);
      for (int r = 0; r < 4 && i + r < i1; r++)
        cpu_softmax_vec(s[r], n);
      if (a->wide) {
        pv512((const float *const *)s, V, (int)ld, n, o);
      } else {
        for (int r = 0; r < 4; r += 2)
          for (int half = 0; half < 2; half++) {
            const float *p2[2] = { s[r], s[r + 1] };
            float *o2[2] = { o[r] + 32 * half, o[r + 1] + 32 * half };
            pv256(p2, V + 32 * half, (int)ld, n, o2);
          }
      }
    }
  }
}
#endif

void cpu_enc_attn(wd_cpu_engine_t *e, const float *qkv, int n, int d, int nh, float scale,
                  float *kt, float *s, float *o) {
  cpu_enc_attn_path(e, qkv, n, d, nh, scale, kt, s, o, cpu_avx512_available());
}

void cpu_enc_attn_path(wd_cpu_engine_t *e, const float *qkv, int n, int d, int nh, float scale,
                       float *kt, float *s, float *o, int wide) {
  ea_t a = { .qkv = qkv, .kt = kt, .s = s, .o = o, .n = n, .d = d, .nh = nh, .scale = scale,
             .wide = wide };
#if CPU_X86
  cpu_parallel(e, (n + 63) / 64, kt_task, &a);
  cpu_parallel(e, (n + CPU_EA_QB - 1) / CPU_EA_QB, ea_task, &a);
#else
  (void)e, (void)kt_task, (void)a;
#endif
}
