/*
 * cpu_attn.c - LayerNorm, softmax and single-query attention (see
 * cpu_attn.h). Plain C written so that the compiler vectorises the inner
 * loops without reassociating a sum: dot products keep 8 partial sums, the
 * value accumulation runs across the head's columns.
 */
#include "cpu_attn.h"
#include "cpu_features.h"
#include "cpu_gemv.h" /* wd_cpu_f16_lut */
#include "cpu_vmath.h"  /* wd_cpu_exp_sum_vec */

#include <math.h>
#include <stddef.h>

void wd_cpu_layernorm_row(const float *x, int d, const float *g, const float *b, float *y) {
  double mean = 0.0, var = 0.0;
  for (int i = 0; i < d; i++)
    mean += x[i];
  mean /= d;
  for (int i = 0; i < d; i++)
    var += (x[i] - mean) * (x[i] - mean);
  var /= d;
  const float m = (float)mean, inv = (float)(1.0 / sqrt(var + 1e-5));
  for (int i = 0; i < d; i++)
    y[i] = (x[i] - m) * inv * g[i] + b[i];
}

void wd_cpu_softmax_row(float *s, int n) {
  float mx = -INFINITY;
  for (int j = 0; j < n; j++)
    mx = s[j] > mx ? s[j] : mx;
  float sum = 0.0f;
  for (int j = 0; j < n; j++) {
    s[j] = expf(s[j] - mx);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j < n; j++)
    s[j] *= inv;
}

static float dot8(const float *a, const float *b, int n) {
  float p[8] = { 0 };
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++)
      p[j] += a[i + j] * b[i + j];
  float s = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
  for (; i < n; i++)
    s += a[i] * b[i];
  return s;
}

/* Portable: 8 partial sums per dot product, value rows accumulated across
 * the head's columns. */
static void attend_portable(const float *q, const float *K, const float *V, int n, int ld,
                            int dh, float scale, float *s, float *o, float *keep) {
  float mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    s[j] = dot8(q, K + (size_t)j * (size_t)ld, dh) * scale;
    mx = s[j] > mx ? s[j] : mx;
  }
  if (keep)
    for (int j = 0; j < n; j++)
      keep[j] = s[j];
  float sum = 0.0f;
  for (int j = 0; j < n; j++) {
    s[j] = expf(s[j] - mx);
    sum += s[j];
  }
  for (int c = 0; c < dh; c++)
    o[c] = 0.0f;
  for (int j = 0; j < n; j++) {
    const float *v = V + (size_t)j * (size_t)ld;
    const float p = s[j];
    for (int c = 0; c < dh; c++)
      o[c] += p * v[c];
  }
  const float inv = 1.0f / sum;
  for (int c = 0; c < dh; c++)
    o[c] *= inv;
}

/* The same over f16 keys and values (the cross-attention cache), each
 * element widened as it is read. */
static float dot8_f16(const float *a, const uint16_t *b, const float *lut, int n) {
  float p[8] = { 0 };
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++)
      p[j] += a[i + j] * lut[b[i + j]];
  float s = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
  for (; i < n; i++)
    s += a[i] * lut[b[i]];
  return s;
}

static void attend_portable_f16(const float *q, const uint16_t *K, const uint16_t *V, int n,
                                int ld, int dh, float scale, float *s, float *o, float *keep) {
  const float *lut = wd_cpu_f16_lut();
  float mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    s[j] = dot8_f16(q, K + (size_t)j * (size_t)ld, lut, dh) * scale;
    mx = s[j] > mx ? s[j] : mx;
  }
  if (keep)
    for (int j = 0; j < n; j++)
      keep[j] = s[j];
  float sum = 0.0f;
  for (int j = 0; j < n; j++) {
    s[j] = expf(s[j] - mx);
    sum += s[j];
  }
  for (int c = 0; c < dh; c++)
    o[c] = 0.0f;
  for (int j = 0; j < n; j++) {
    const uint16_t *v = V + (size_t)j * (size_t)ld;
    const float p = s[j];
    for (int c = 0; c < dh; c++)
      o[c] += p * lut[v[c]];
  }
  const float inv = 1.0f / sum;
  for (int c = 0; c < dh; c++)
    o[c] *= inv;
}

#if CPU_X86
#include <immintrin.h>
#define ATTN_TARGET __attribute__((target("avx2,fma")))

ATTN_TARGET static inline float attn_hsum(__m256 s) {
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

/* AVX2 for 64-wide heads (every Whisper model's). Scores: four keys at a
 * time, each key's own accumulator running over the head's columns in
 * order (a key's score is the same in a block or in the tail). Values: the
 * output row lives in eight registers, one FMA per 8 columns per key. The
 * head width is a constant so that the column loops unroll and q, the
 * accumulators and the output stay in registers. KT is the cache's element
 * type and LOADK(p) gives 8 f32 of it. */
#define ATTN_NV 8
#define ATTN_BODY(KT, LOADK)                                                          \
  __m256 qv[ATTN_NV];                                                                 \
  _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) qv[c] =                  \
      _mm256_loadu_ps(q + 8 * c);                                                     \
  int j = 0;                                                                          \
  for (; j + 4 <= n; j += 4) {                                                        \
    const KT *k0 = K + (size_t)j * (size_t)ld;                                        \
    const KT *k1 = k0 + ld, *k2 = k1 + ld, *k3 = k2 + ld;                             \
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                       \
    _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) {                       \
      a0 = _mm256_fmadd_ps(qv[c], LOADK(k0 + 8 * c), a0);                             \
      a1 = _mm256_fmadd_ps(qv[c], LOADK(k1 + 8 * c), a1);                             \
      a2 = _mm256_fmadd_ps(qv[c], LOADK(k2 + 8 * c), a2);                             \
      a3 = _mm256_fmadd_ps(qv[c], LOADK(k3 + 8 * c), a3);                             \
    }                                                                                 \
    s[j] = attn_hsum(a0) * scale;                                                     \
    s[j + 1] = attn_hsum(a1) * scale;                                                 \
    s[j + 2] = attn_hsum(a2) * scale;                                                 \
    s[j + 3] = attn_hsum(a3) * scale;                                                 \
  }                                                                                   \
  for (; j < n; j++) {                                                                \
    const KT *k0 = K + (size_t)j * (size_t)ld;                                        \
    __m256 a0 = _mm256_setzero_ps();                                                  \
    _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) a0 =                    \
        _mm256_fmadd_ps(qv[c], LOADK(k0 + 8 * c), a0);                                \
    s[j] = attn_hsum(a0) * scale;                                                     \
  }                                                                                   \
  float mx = -INFINITY;                                                               \
  for (j = 0; j < n; j++)                                                             \
    mx = s[j] > mx ? s[j] : mx;                                                       \
  if (keep)                                                                           \
    for (j = 0; j < n; j++)                                                           \
      keep[j] = s[j];                                                                 \
  float sum = 0.0f;                                                                   \
  for (j = 0; j < n; j++) {                                                           \
    s[j] = expf(s[j] - mx);                                                           \
    sum += s[j];                                                                      \
  }                                                                                   \
  __m256 acc[ATTN_NV];                                                                \
  _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) acc[c] =                 \
      _mm256_setzero_ps();                                                            \
  for (j = 0; j < n; j++) {                                                           \
    const KT *v = V + (size_t)j * (size_t)ld;                                         \
    const __m256 p = _mm256_set1_ps(s[j]);                                            \
    _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) acc[c] =               \
        _mm256_fmadd_ps(p, LOADK(v + 8 * c), acc[c]);                                 \
  }                                                                                   \
  const __m256 inv = _mm256_set1_ps(1.0f / sum);                                      \
  _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++)                           \
      _mm256_storeu_ps(o + 8 * c, _mm256_mul_ps(acc[c], inv));

#define ATTN_LOAD_F32(p) _mm256_loadu_ps(p)
#define ATTN_LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))

ATTN_TARGET static void attend_avx2(const float *q, const float *K, const float *V, int n,
                                    int ld, float scale, float *s, float *o, float *keep) {
  ATTN_BODY(float, ATTN_LOAD_F32)
}

/* Keys, and then values, a chunk at a time: a chunk's rows of one head
 * (64 keys x 64 f16 = 8 KiB) stay in L1 while every query reads them. */
#define ATTN_CHUNK 64

/* A head's 64 f16 of a key (or value) row are 2 cache lines of every
 * d-wide row (1 KiB apart in base), a stride the hardware prefetchers
 * follow poorly: the row ATTN_AHEAD keys on is fetched explicitly (base,
 * bench_cpu_step, 2-core Xeon family 6 model 207, medians of 4
 * interleaved runs: a step at batch 1 4.13 -> 4.00 ms and 4.53 -> 3.99 in
 * two sets, at batch 8 12.27 -> 11.84 and 12.96 -> 12.30; 8, 16 and 64
 * ahead gained less). */
#define ATTN_AHEAD 32
ATTN_TARGET static inline void attn_fetch_row(const uint16_t *row) {
  _mm_prefetch((const char *)row, _MM_HINT_T0);
  _mm_prefetch((const char *)(row + 32), _MM_HINT_T0);
}

/* R queries over the same f16 keys and values. Each query's arithmetic is
 * ATTN_BODY's, operation for operation, but for the exp (wd_cpu_exp_sum_vec's
 * 8 lanes, not expf): a key's score is its own FMA chain over the columns,
 * whatever keys are scored beside it; the softmax runs over the query's
 * whole row; its value sums keep their order over the keys (held in acc
 * between chunks, so nothing is re-rounded). A query's result is the same
 * alone (R = 1) or beside others, bit for bit (test_attn_rows.c). */
__attribute__((target("avx2,fma,f16c"))) static void
attend_rows_avx2_f16(int R, const float *const *q, const uint16_t *K, const uint16_t *V, int n,
                     int ld, float scale, float *s, float *const *o, float *const *keep) {
  float acc[WD_CPU_ATTN_ROWS][8 * ATTN_NV] __attribute__((aligned(32)));
  for (int j0 = 0; j0 < n; j0 += ATTN_CHUNK) {
    const int j1 = j0 + ATTN_CHUNK < n ? j0 + ATTN_CHUNK : n;
    for (int r = 0; r < R; r++) {
      __m256 qv[ATTN_NV];
      _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) qv[c] = _mm256_loadu_ps(q[r] + 8 * c);
      float *sr = s + (size_t)r * (size_t)n;
      int j = j0;
      for (; j + 4 <= j1; j += 4) { /* four independent chains in flight */
        const uint16_t *k0 = K + (size_t)j * (size_t)ld;
        const uint16_t *k1 = k0 + ld, *k2 = k1 + ld, *k3 = k2 + ld;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int u = 0; u < 4 && j + ATTN_AHEAD + u < n; u++)
          attn_fetch_row(k0 + (size_t)(ATTN_AHEAD + u) * (size_t)ld);
        _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) {
          a0 = _mm256_fmadd_ps(qv[c], ATTN_LOAD_F16(k0 + 8 * c), a0);
          a1 = _mm256_fmadd_ps(qv[c], ATTN_LOAD_F16(k1 + 8 * c), a1);
          a2 = _mm256_fmadd_ps(qv[c], ATTN_LOAD_F16(k2 + 8 * c), a2);
          a3 = _mm256_fmadd_ps(qv[c], ATTN_LOAD_F16(k3 + 8 * c), a3);
        }
        sr[j] = attn_hsum(a0) * scale;
        sr[j + 1] = attn_hsum(a1) * scale;
        sr[j + 2] = attn_hsum(a2) * scale;
        sr[j + 3] = attn_hsum(a3) * scale;
      }
      for (; j < j1; j++) {
        const uint16_t *k0 = K + (size_t)j * (size_t)ld;
        __m256 a0 = _mm256_setzero_ps();
        _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) a0 =
            _mm256_fmadd_ps(qv[c], ATTN_LOAD_F16(k0 + 8 * c), a0);
        sr[j] = attn_hsum(a0) * scale;
      }
    }
  }
  float sum[WD_CPU_ATTN_ROWS];
  for (int r = 0; r < R; r++) {
    float *sr = s + (size_t)r * (size_t)n;
    float mx = -INFINITY;
    for (int j = 0; j < n; j++)
      mx = sr[j] > mx ? sr[j] : mx;
    if (keep && keep[r])
      for (int j = 0; j < n; j++)
        keep[r][j] = sr[j];
    sum[r] = wd_cpu_exp_sum_vec(sr, n, mx);
    _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++)
        _mm256_store_ps(acc[r] + 8 * c, _mm256_setzero_ps());
  }
  for (int j0 = 0; j0 < n; j0 += ATTN_CHUNK) {
    const int j1 = j0 + ATTN_CHUNK < n ? j0 + ATTN_CHUNK : n;
    for (int r = 0; r < R; r++) {
      const float *sr = s + (size_t)r * (size_t)n;
      __m256 a[ATTN_NV];
      _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) a[c] = _mm256_load_ps(acc[r] + 8 * c);
      for (int j = j0; j < j1; j++) {
        const uint16_t *v = V + (size_t)j * (size_t)ld;
        if (j + ATTN_AHEAD < n)
          attn_fetch_row(v + (size_t)ATTN_AHEAD * (size_t)ld);
        const __m256 p = _mm256_set1_ps(sr[j]);
        _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) a[c] =
            _mm256_fmadd_ps(p, ATTN_LOAD_F16(v + 8 * c), a[c]);
      }
      _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++) _mm256_store_ps(acc[r] + 8 * c, a[c]);
    }
  }
  for (int r = 0; r < R; r++) {
    const __m256 inv = _mm256_set1_ps(1.0f / sum[r]);
    _Pragma("GCC unroll 8") for (int c = 0; c < ATTN_NV; c++)
        _mm256_storeu_ps(o[r] + 8 * c, _mm256_mul_ps(_mm256_load_ps(acc[r] + 8 * c), inv));
  }
}

#endif

void wd_cpu_attend_one(const float *q, const float *K, const float *V, int n, int ld, int dh,
                       float scale, float *s, float *o, float *keep) {
#if CPU_X86
  if (dh == 8 * ATTN_NV && wd_cpu_use_avx2()) {
    attend_avx2(q, K, V, n, ld, scale, s, o, keep);
    return;
  }
#endif
  attend_portable(q, K, V, n, ld, dh, scale, s, o, keep);
}

void wd_cpu_attend_rows_f16(int R, const float *const *q, const uint16_t *K, const uint16_t *V,
                            int n, int ld, int dh, float scale, float *s, float *const *o,
                            float *const *keep) {
#if CPU_X86
  if (dh == 8 * ATTN_NV && wd_cpu_use_avx2()) {
    attend_rows_avx2_f16(R, q, K, V, n, ld, scale, s, o, keep);
    return;
  }
#endif
  for (int r = 0; r < R; r++)
    attend_portable_f16(q[r], K, V, n, ld, dh, scale, s, o[r], keep ? keep[r] : NULL);
}

void wd_cpu_attend_one_f16(const float *q, const uint16_t *K, const uint16_t *V, int n, int ld,
                           int dh, float scale, float *s, float *o, float *keep) {
  wd_cpu_attend_rows_f16(1, &q, K, V, n, ld, dh, scale, s, &o, &keep);
}
