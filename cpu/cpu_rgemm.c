/*
 * cpu_rgemm.c - bf16 and int8 products (see cpu_rgemm.h for the layouts
 * and the order of the sums).
 *
 * The weights of 16 outputs are packed together, interleaved by the
 * instruction's group of k (4 int8, 2 bf16): one 64-byte load holds the
 * next group of every one of the 16 outputs, so an activation group
 * broadcast to all lanes and one vpdpbusd / vdpbf16ps advance 16 dot
 * products at once, each in its own lane, with no horizontal sums (the
 * layout oneDNN and CTranslate2 use). A tile is up to TR rows x 2 blocks
 * (32 outputs) on AVX-512, TR_AVX2 rows x 1 block on AVX2. Row blocks of
 * about 128 KiB of converted activations stay in L2 while a thread's
 * weight blocks stream past: an encoder window reads each weight block
 * once per row block, a decoder step once.
 */
#include "cpu_rgemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "cpu_vmath.h"
#include "error.h"

#define TR 8      /* rows an AVX-512 (and portable) tile takes at most */
#define TR_AVX2 4 /* rows an AVX2 tile takes at most (16 ymm registers) */
#define OB 16     /* outputs per packed block */

cpu_rpath_t wd_cpu_rgemm_pick(wd_cpu_compute_t ct, unsigned f) {
  const unsigned f512 = CPU_F_AVX512F | CPU_F_AVX512BW;
  if (ct == WD_CPU_COMPUTE_BF16)
    return (f & (f512 | CPU_F_AVX512BF16)) == (f512 | CPU_F_AVX512BF16) ? CPU_RPATH_BF16_512
                                                                       : CPU_RPATH_NONE;
  if (ct == WD_CPU_COMPUTE_INT8) {
    if ((f & (f512 | CPU_F_AVX512VNNI)) == (f512 | CPU_F_AVX512VNNI))
      return CPU_RPATH_VNNI512;
    return (f & CPU_F_AVX2) ? CPU_RPATH_AVX2 : CPU_RPATH_NONE;
  }
  return CPU_RPATH_NONE;
}

const char *wd_cpu_rpath_name(cpu_rpath_t p) {
  switch (p) {
  case CPU_RPATH_PORTABLE:
    return "portable C";
  case CPU_RPATH_AVX2:
    return "int8, AVX2 (16-bit products)";
  case CPU_RPATH_VNNI512:
    return "int8, AVX512-VNNI";
  case CPU_RPATH_BF16_512:
    return "bf16, AVX512-BF16";
  default:
    return "none";
  }
}

const char *wd_cpu_rgemm_refusal(wd_cpu_compute_t ct, unsigned f) {
  if (ct == WD_CPU_COMPUTE_F32 || wd_cpu_rgemm_pick(ct, f) != CPU_RPATH_NONE)
    return NULL;
  if (ct == WD_CPU_COMPUTE_BF16)
    return "--compute-type bf16 needs a CPU with AVX512-BF16 (Intel Cooper Lake, Sapphire "
           "Rapids or later, AMD Zen 4 or later); this one has none: use f32 or int8";
  return "--compute-type int8 needs a CPU with AVX2 or AVX512-VNNI; this one has neither: use "
         "f32";
}

size_t wd_cpu_rgemm_row_bytes(wd_cpu_compute_t ct, int k) {
  return (size_t)cpu_rgemm_kp(k) * (ct == WD_CPU_COMPUTE_BF16 ? 2u : 1u);
}

size_t wd_cpu_rgemm_mat_bytes(wd_cpu_compute_t ct, int n_out, int k) {
  const size_t blocks = (size_t)(n_out + OB - 1) / OB;
  const size_t extra = ct == WD_CPU_COMPUTE_INT8 ? sizeof(float) + sizeof(int32_t) : 0;
  return blocks * OB * wd_cpu_rgemm_row_bytes(ct, k) + (size_t)n_out * extra;
}

/* Byte offset of weight (o, k) in the packed matrix (kp elements a row). */
static size_t packed_at(wd_cpu_compute_t ct, int kp, int o, int k) {
  const size_t blk = (size_t)(o / OB) * OB * (size_t)kp;
  if (ct == WD_CPU_COMPUTE_BF16)
    return 2 * (blk + (size_t)(k / 2) * 2 * OB + (size_t)(o % OB) * 2 + (size_t)(k % 2));
  return blk + (size_t)(k / 4) * 4 * OB + (size_t)(o % OB) * 4 + (size_t)(k % 4);
}

void wd_cpu_rgemm_weight_row(const cpu_mat_t *w, int o, float *out) {
  const unsigned char *d = w->data;
  for (int k = 0; k < w->n_in; k++) {
    const size_t at = packed_at((wd_cpu_compute_t)w->ct, w->kp, o, k);
    if (w->ct == WD_CPU_COMPUTE_INT8) {
      out[k] = (float)(int8_t)d[at] * w->scale[o];
    } else {
      const uint32_t u = (uint32_t)(d[at] | d[at + 1] << 8) << 16;
      memcpy(out + k, &u, sizeof u);
    }
  }
}

/* ---- conversions (the same bits on every path) ---- */

/* f32 -> bf16, nearest-even; denormals become signed zero, NaN stays NaN,
 * as vcvtneps2bf16 does. */
static uint16_t to_bf16(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  if ((u & 0x7f800000u) == 0)
    return (uint16_t)((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* The scale of a row: max|v| / 127 (0 for a row of zeros), and the
 * multiplier that maps it to codes. */
static float row_amax(const float *v, int k) {
  float m = 0.0f;
  for (int i = 0; i < k; i++) {
    const float a = fabsf(v[i]);
    m = a > m ? a : m;
  }
  return m;
}

/* Codes of v (k elements) into q[kp] as q + off (0 for weights, 128 for
 * activations), zeros (as off) past k; returns the scale. */
static float quantize_row(const float *v, int k, int kp, int off, uint8_t *q) {
  const float amax = row_amax(v, k);
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < k; i++)
    q[i] = (uint8_t)((int)nearbyintf(v[i] * inv) + off);
  memset(q + k, off, (size_t)(kp - k));
  return amax / 127.0f;
}

#if CPU_X86
static void prep_i8_512(const float *v, int k, int kp, int off, uint8_t *q, float *scale);
static void prep_bf16_512(const float *v, int k, int kp, uint16_t *q);
#endif

typedef struct {
  const cpu_mat_t *w;
  wd_cpu_compute_t ct;
  int per; /* rows a task converts */
  unsigned char *dst;
  float *scale;
  int32_t *wsum;
  unsigned char *scratch; /* per task: a row as f32 (k) and its codes (2 kp bytes) */
} reduce_task_t;

static void reduce_task(void *arg, int t) {
  reduce_task_t *r = arg;
  const cpu_mat_t *w = r->w;
  const wd_cpu_compute_t ct = r->ct;
  const int k = w->n_in, kp = cpu_rgemm_kp(k);
  const int o0 = t * r->per, o1 = o0 + r->per < w->n_out ? o0 + r->per : w->n_out;
  float *row = (float *)(void *)(r->scratch + (size_t)t * ((size_t)k * 4 + (size_t)kp * 2));
  uint8_t *q = (uint8_t *)(row + k); /* one row's codes (int8) or bf16 values */
  const cpu_rpath_t fast = wd_cpu_rgemm_pick(ct, wd_cpu_features());
  (void)fast; /* x86 only */
  for (int o = o0; o < o1; o++) {
    if (w->type == WD_DTYPE_F16) /* most files: F16C, not the per-element table */
      wd_cpu_f16_to_f32_vec((const unsigned char *)w->data + (size_t)o * (size_t)k * 2, row,
                            (size_t)k);
    else
      wd_cpu_mat_row(w, o, row);
    /* Row o's place in its block: group g of the instruction's k-group
     * (4 int8 or 2 bf16 codes, 4 bytes) at blk + g * 64 + (o % 16) * 4. */
    unsigned char *at = r->dst + (size_t)(o / OB) * OB * wd_cpu_rgemm_row_bytes(ct, k) +
                        (size_t)(o % OB) * 4;
    if (ct == WD_CPU_COMPUTE_BF16) {
      uint16_t *h = (uint16_t *)(void *)q;
#if CPU_X86
      if (fast == CPU_RPATH_BF16_512)
        prep_bf16_512(row, k, kp, h);
      else
#endif
        for (int i = 0; i < kp; i++)
          h[i] = i < k ? to_bf16(row[i]) : 0;
    } else {
#if CPU_X86
      if (fast == CPU_RPATH_VNNI512) /* the same bits as quantize_row, faster */
        prep_i8_512(row, k, kp, 0, q, &r->scale[o]);
      else
#endif
        r->scale[o] = quantize_row(row, k, kp, 0, q);
      int32_t s = 0;
      for (int i = 0; i < k; i++)
        s += (int8_t)q[i];
      r->wsum[o] = s;
    }
    for (int g = 0; g < kp / (ct == WD_CPU_COMPUTE_BF16 ? 2 : 4); g++)
      memcpy(at + (size_t)g * 64, q + 4 * (size_t)g, 4);
  }
}

int wd_cpu_mat_reduce(cpu_mat_t *w, wd_cpu_compute_t ct, cpu_par_fn par, void *par_ctx) {
  if (ct == WD_CPU_COMPUTE_F32)
    return 0;
  if (ct != WD_CPU_COMPUTE_BF16 && ct != WD_CPU_COMPUTE_INT8)
    return WD_EINVAL;
  const int k = w->n_in, kp = cpu_rgemm_kp(k);
  const size_t blocks = (size_t)(w->n_out + OB - 1) / OB;
  reduce_task_t r = { .w = w, .ct = ct };
  r.dst = calloc(blocks * OB, wd_cpu_rgemm_row_bytes(ct, k));
  r.scale = ct == WD_CPU_COMPUTE_INT8 ? malloc((size_t)w->n_out * sizeof *r.scale) : NULL;
  r.wsum = ct == WD_CPU_COMPUTE_INT8 ? malloc((size_t)w->n_out * sizeof *r.wsum) : NULL;
  const int tasks = w->n_out < 16 ? 1 : 16; /* rows apart: tasks write disjoint bytes */
  r.per = (w->n_out + tasks - 1) / tasks;
  r.scratch = malloc((size_t)tasks * ((size_t)k * 4 + (size_t)kp * 2));
  if (!r.dst || !r.scratch || (ct == WD_CPU_COMPUTE_INT8 && (!r.scale || !r.wsum))) {
    free(r.dst), free(r.scale), free(r.wsum), free(r.scratch);
    return WD_ENOMEM;
  }
  if (par)
    par(par_ctx, (w->n_out + r.per - 1) / r.per, reduce_task, &r);
  else
    for (int t = 0; t * r.per < w->n_out; t++)
      reduce_task(&r, t);
  free(r.scratch);
  wd_cpu_mat_free(w); /* the f32 or f16 copy, if any */
  w->own = r.dst;
  w->data = r.dst;
  w->ct = (int)ct;
  w->kp = kp;
  w->scale = r.scale;
  w->wsum = r.wsum;
  return 0;
}

/* ---- kernels ----
 * A kernel takes nr rows (x[i]: converted row i, kp elements) against the
 * packed blocks w[0 .. nb) (each OB outputs x kp) and writes the sums to
 * out[i * nb * OB + j]: int32 for int8, f32 for bf16. */

/* Portable: the reference. int8 the same exact sums; bf16 per output one
 * f32 sum over the pairs in k order, odd element first, as vdpbf16ps's
 * pseudo-code adds them. */
static void i8_portable(const void *const *xv, int nr, const unsigned char *const *w, int nb,
                        int kp, void *outv) {
  int32_t *out = outv;
  for (int i = 0; i < nr; i++) {
    const uint8_t *x = xv[i];
    for (int b = 0; b < nb; b++)
      for (int j = 0; j < OB; j++) {
        int32_t s = 0;
        for (int k = 0; k < kp; k++)
          s += (int32_t)x[k] * (int32_t)(int8_t)w[b][(k / 4) * 4 * OB + j * 4 + k % 4];
        out[i * nb * OB + b * OB + j] = s;
      }
  }
}

static float bf16_f(const unsigned char *p) {
  const uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
  float v;
  memcpy(&v, &u, sizeof v);
  return v;
}

static void bf16_portable(const void *const *xv, int nr, const unsigned char *const *w, int nb,
                          int kp, void *outv) {
  float *out = outv;
  for (int i = 0; i < nr; i++) {
    const unsigned char *x = xv[i];
    for (int b = 0; b < nb; b++)
      for (int j = 0; j < OB; j++) {
        float s = 0.0f;
        for (int k = 0; k < kp; k += 2) {
          const unsigned char *wp = w[b] + 2 * ((size_t)(k / 2) * 2 * OB + (size_t)j * 2);
          s += bf16_f(x + 2 * (k + 1)) * bf16_f(wp + 2);
          s += bf16_f(x + 2 * k) * bf16_f(wp);
        }
        out[i * nb * OB + b * OB + j] = s;
      }
  }
}

#if CPU_X86
#include <immintrin.h>

#define T_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) static inline
#define T_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline
#define T_AVX2 __attribute__((target("avx2,fma"), always_inline)) static inline
#define T_VNNI_F __attribute__((target("avx512f,avx512bw,avx512vnni"))) static
#define T_BF16_F __attribute__((target("avx512f,avx512bw,avx512bf16"))) static
#define T_AVX2_F __attribute__((target("avx2,fma"))) static
#define UNROLL _Pragma("GCC unroll 8")

static inline int32_t ld32(const void *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* R rows x NB blocks: per group of 4 k, NB weight loads, R broadcasts of
 * the rows' 4 codes, R * NB vpdpbusd. */
T_VNNI void vnni_tile(const void *const *x, int R, const unsigned char *const *w, int NB, int kp,
                      int32_t *out) {
  __m512i a[TR][2];
  UNROLL for (int i = 0; i < R; i++) UNROLL for (int b = 0; b < NB; b++) a[i][b] =
      _mm512_setzero_si512();
  for (int g = 0; g < kp / 4; g++) {
    __m512i wv[2];
    UNROLL for (int b = 0; b < NB; b++) wv[b] =
        _mm512_loadu_si512((const void *)(w[b] + (size_t)g * 64));
    UNROLL for (int i = 0; i < R; i++) {
      const __m512i xb = _mm512_set1_epi32(ld32((const uint8_t *)x[i] + 4 * g));
      UNROLL for (int b = 0; b < NB; b++) a[i][b] = _mm512_dpbusd_epi32(a[i][b], xb, wv[b]);
    }
  }
  UNROLL for (int i = 0; i < R; i++) UNROLL for (int b = 0; b < NB; b++)
      _mm512_storeu_si512((void *)(out + (i * NB + b) * OB), a[i][b]);
}

T_BF16 void bf16_tile(const void *const *x, int R, const unsigned char *const *w, int NB, int kp,
                      float *out) {
  __m512 a[TR][2];
  UNROLL for (int i = 0; i < R; i++) UNROLL for (int b = 0; b < NB; b++) a[i][b] =
      _mm512_setzero_ps();
  for (int g = 0; g < kp / 2; g++) {
    __m512i wv[2];
    UNROLL for (int b = 0; b < NB; b++) wv[b] =
        _mm512_loadu_si512((const void *)(w[b] + (size_t)g * 64));
    UNROLL for (int i = 0; i < R; i++) {
      const __m512i xb = _mm512_set1_epi32(ld32((const unsigned char *)x[i] + 4 * g));
      UNROLL for (int b = 0; b < NB; b++) a[i][b] =
          _mm512_dpbf16_ps(a[i][b], (__m512bh)xb, (__m512bh)wv[b]);
    }
  }
  UNROLL for (int i = 0; i < R; i++) UNROLL for (int b = 0; b < NB; b++)
      _mm512_storeu_ps(out + (i * NB + b) * OB, a[i][b]);
}

/* AVX2, R rows x 1 block: a block's group is two ymm (outputs 0-7, 8-15).
 * The rows are s8 codes here (no + 128): vpmaddubsw takes |w| (u8 <= 127)
 * and x with w's sign, so each 16-bit pair sum is at most 2 * 127 * 127 and
 * never saturates; vpmaddwd by ones widens the pairs to 32-bit sums of 4,
 * exactly what vpdpbusd gives less the 128 * wsum term. */
T_AVX2 void avx2_tile(const void *const *x, int R, const unsigned char *const *w, int kp,
                      int32_t *out) {
  __m256i a[TR_AVX2][2];
  const __m256i ones = _mm256_set1_epi16(1);
  UNROLL for (int i = 0; i < R; i++) a[i][0] = a[i][1] = _mm256_setzero_si256();
  for (int g = 0; g < kp / 4; g++) {
    const __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(w[0] + (size_t)g * 64));
    const __m256i w1 =
        _mm256_loadu_si256((const __m256i *)(const void *)(w[0] + (size_t)g * 64 + 32));
    const __m256i u0 = _mm256_abs_epi8(w0), u1 = _mm256_abs_epi8(w1);
    UNROLL for (int i = 0; i < R; i++) {
      const __m256i xb = _mm256_set1_epi32(ld32((const uint8_t *)x[i] + 4 * g));
      a[i][0] = _mm256_add_epi32(
          a[i][0], _mm256_madd_epi16(_mm256_maddubs_epi16(u0, _mm256_sign_epi8(xb, w0)), ones));
      a[i][1] = _mm256_add_epi32(
          a[i][1], _mm256_madd_epi16(_mm256_maddubs_epi16(u1, _mm256_sign_epi8(xb, w1)), ones));
    }
  }
  UNROLL for (int i = 0; i < R; i++) {
    _mm256_storeu_si256((__m256i *)(void *)(out + i * OB), a[i][0]);
    _mm256_storeu_si256((__m256i *)(void *)(out + i * OB + 8), a[i][1]);
  }
}

/* One function per (rows, blocks), so the loops above unroll with both
 * constant. */
#define FN_RB(name, body, T, R, NB)                                                           \
  T void name##_##R##_##NB(const void *const *x, const unsigned char *const *w, int kp,     \
                           void *o) {                                                         \
    body;                                                                                     \
  }
#define FN_R(name, tile, T, OT, R)                                                            \
  FN_RB(name, tile(x, R, w, 1, kp, (OT *)o), T, R, 1)                                         \
  FN_RB(name, tile(x, R, w, 2, kp, (OT *)o), T, R, 2)
#define FN_8(name, tile, T, OT)                                                               \
  FN_R(name, tile, T, OT, 1) FN_R(name, tile, T, OT, 2) FN_R(name, tile, T, OT, 3)            \
  FN_R(name, tile, T, OT, 4) FN_R(name, tile, T, OT, 5) FN_R(name, tile, T, OT, 6)            \
  FN_R(name, tile, T, OT, 7) FN_R(name, tile, T, OT, 8)
FN_8(vnni, vnni_tile, T_VNNI_F, int32_t)
FN_8(bf16, bf16_tile, T_BF16_F, float)
FN_RB(avx2, avx2_tile(x, 1, w, kp, (int32_t *)o), T_AVX2_F, 1, 1)
FN_RB(avx2, avx2_tile(x, 2, w, kp, (int32_t *)o), T_AVX2_F, 2, 1)
FN_RB(avx2, avx2_tile(x, 3, w, kp, (int32_t *)o), T_AVX2_F, 3, 1)
FN_RB(avx2, avx2_tile(x, 4, w, kp, (int32_t *)o), T_AVX2_F, 4, 1)

/* The epilogue of one row of a tile on AVX-512: v = the sums as f32 (int8:
 * (sum - corr * wsum) * (xs * scale), the scalar epilogue's operations in
 * its order), then + b and the op; GELU goes to the caller (raw 0 and
 * GELU: the scalar loop). 16 outputs a time, the last ones masked. */
__attribute__((target("avx512f,avx512bw"))) static void epi_512(int int8, const void *accv, int no, int corr, const int32_t *wsum,
                      const float *scale, float xs, const float *b, int add, float *y) {
  for (int j = 0; j < no; j += 16) {
    const __mmask16 m = (__mmask16)(no - j >= 16 ? 0xffffu : (1u << (no - j)) - 1u);
    __m512 v;
    if (int8) {
      const __m512i s = _mm512_maskz_loadu_epi32(m, (const int32_t *)accv + j);
      const __m512i c = _mm512_mullo_epi32(_mm512_set1_epi32(corr), _mm512_maskz_loadu_epi32(m, wsum + j));
      const __m512 f = _mm512_mul_ps(_mm512_set1_ps(xs), _mm512_maskz_loadu_ps(m, scale + j));
      v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s, c)), f);
    } else {
      v = _mm512_maskz_loadu_ps(m, (const float *)accv + j);
    }
    if (b)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + j));
    if (add)
      v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + j), v);
    _mm512_mask_storeu_ps(y + j, m, v);
  }
}

/* Activations to int8 codes, 16 at a time: the same products and
 * nearest-even rounding (MXCSR's default) as quantize_row. */
T_VNNI_F void prep_i8_512(const float *v, int k, int kp, int off, uint8_t *q, float *scale) {
  __m512 m = _mm512_setzero_ps();
  int i = 0;
  for (; i + 16 <= k; i += 16)
    m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(v + i)));
  float amax = _mm512_reduce_max_ps(m);
  for (; i < k; i++)
    amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const __m512 iv = _mm512_set1_ps(inv);
  const __m512i ov = _mm512_set1_epi32(off);
  for (i = 0; i + 16 <= k; i += 16) {
    const __m512i c =
        _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(v + i), iv)), ov);
    _mm_storeu_si128((__m128i *)(void *)(q + i), _mm512_cvtepi32_epi8(c));
  }
  for (; i < k; i++)
    q[i] = (uint8_t)((int)nearbyintf(v[i] * inv) + off);
  memset(q + k, off, (size_t)(kp - k));
  *scale = amax / 127.0f;
}

T_BF16_F void prep_bf16_512(const float *v, int k, int kp, uint16_t *q) {
  int i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(v + i));
    _mm256_storeu_si256((__m256i *)(void *)(q + i), h);
  }
  for (; i < k; i++)
    q[i] = to_bf16(v[i]);
  memset(q + k, 0, (size_t)(kp - k) * 2);
}
#endif

/* ---- driver ---- */

typedef void (*tile_fn)(const void *const *x, const unsigned char *const *w, int kp, void *out);

/* A path's tiles: fn[R - 1][NB - 1] takes R rows and NB blocks. */
typedef struct {
  int tr, nb; /* most rows and blocks a tile takes */
  int off;    /* what the activation codes carry over q: 128 (u8) or 0 (s8) */
  tile_fn fn[TR][2];
  void (*any)(const void *const *x, int nr, const unsigned char *const *w, int nb, int kp,
              void *out); /* the portable kernel */
} tiles_t;

static tiles_t tiles_of(cpu_rpath_t p, wd_cpu_compute_t ct) {
  tiles_t t = { .tr = TR, .nb = 2, .off = 128 };
  switch (p) {
#if CPU_X86
#define ROW(n, r) { n##_##r##_1, n##_##r##_2 }
  case CPU_RPATH_VNNI512:
    return (tiles_t){ TR, 2, 128, { ROW(vnni, 1), ROW(vnni, 2), ROW(vnni, 3), ROW(vnni, 4),
                                    ROW(vnni, 5), ROW(vnni, 6), ROW(vnni, 7), ROW(vnni, 8) },
                      NULL };
  case CPU_RPATH_BF16_512:
    return (tiles_t){ TR, 2, 0, { ROW(bf16, 1), ROW(bf16, 2), ROW(bf16, 3), ROW(bf16, 4),
                                  ROW(bf16, 5), ROW(bf16, 6), ROW(bf16, 7), ROW(bf16, 8) },
                      NULL };
  case CPU_RPATH_AVX2:
    return (tiles_t){ TR_AVX2, 1, 0, { { avx2_1_1 }, { avx2_2_1 }, { avx2_3_1 }, { avx2_4_1 } },
                      NULL };
#undef ROW
#endif
  default:
    t.any = ct == WD_CPU_COMPUTE_BF16 ? bf16_portable : i8_portable;
    return t;
  }
}

void wd_cpu_rgemm_prep(const cpu_rgemm_t *g, int r0, int r1) {
  const wd_cpu_compute_t ct = (wd_cpu_compute_t)g->w->ct;
  const int k = g->w->n_in, kp = g->w->kp;
  const size_t rb = wd_cpu_rgemm_row_bytes(ct, k);
  const int off = g->path == CPU_RPATH_AVX2 ? 0 : 128;
  for (int r = r0; r < r1; r++) {
    const float *x = g->x + (size_t)r * (size_t)g->ldx;
    unsigned char *q = (unsigned char *)g->xq + (size_t)r * rb;
#if CPU_X86
    if (g->path == CPU_RPATH_VNNI512) {
      prep_i8_512(x, k, kp, off, q, &g->xs[r]);
      continue;
    }
    if (g->path == CPU_RPATH_BF16_512) {
      prep_bf16_512(x, k, kp, (uint16_t *)(void *)q);
      continue;
    }
#endif
    if (ct == WD_CPU_COMPUTE_INT8) {
      g->xs[r] = quantize_row(x, k, kp, off, q);
      continue;
    }
    for (int i = 0; i < k; i++) {
      const uint16_t h = to_bf16(x[i]);
      memcpy(q + 2 * (size_t)i, &h, 2);
    }
    memset(q + 2 * (size_t)k, 0, (size_t)(kp - k) * 2);
  }
}

void wd_cpu_rgemm_range(const cpu_rgemm_t *g, int a, int b) {
  const cpu_mat_t *w = g->w;
  const wd_cpu_compute_t ct = (wd_cpu_compute_t)w->ct;
  const tiles_t T = tiles_of(g->path, ct);
  const size_t rb = wd_cpu_rgemm_row_bytes(ct, w->n_in), bb = rb * OB; /* row, block bytes */
  /* Rows per block: about 128 KiB of converted activations. */
  int blk = (int)((128u << 10) / rb) / T.tr * T.tr;
  blk = blk < T.tr ? T.tr : blk;
  const int corr = T.off; /* int8: the sums carry corr * wsum[o] */
  const void *xp[TR];
  const unsigned char *wp[2];
  union {
    int32_t i[TR * 2 * OB];
    float f[TR * 2 * OB];
  } acc;
  for (int r0 = 0; r0 < g->n_rows; r0 += blk) {
    const int r1 = r0 + blk < g->n_rows ? r0 + blk : g->n_rows;
    for (int o = a; o < b; o += T.nb * OB) {
      /* Blocks of outputs [o, o + no) (the tile's last block may be a
       * padding block past n_out, or past b: computed, not stored). */
      const int no = b - o < T.nb * OB ? b - o : T.nb * OB;
      const int nb = (no + OB - 1) / OB;
      for (int j = 0; j < nb; j++)
        wp[j] = (const unsigned char *)w->data + (size_t)((g->o0 + o) / OB + j) * bb;
      for (int r = r0; r < r1; r += T.tr) {
        const int nr = r1 - r < T.tr ? r1 - r : T.tr;
        for (int i = 0; i < nr; i++)
          xp[i] = (const unsigned char *)g->xq + (size_t)(r + i) * rb;
        if (T.any)
          T.any(xp, nr, wp, nb, w->kp, &acc);
        else
          T.fn[nr - 1][nb - 1](xp, wp, w->kp, &acc);
        for (int i = 0; i < nr; i++) {
          float *y = g->y + (size_t)(r + i) * (size_t)g->ldy + o;
          const int32_t *ai = acc.i + i * nb * OB;
          const float *af = acc.f + i * nb * OB;
          const float xs = ct == WD_CPU_COMPUTE_INT8 ? g->xs[r + i] : 0.0f;
          const int ow = g->o0 + o;
#if CPU_X86
          if ((g->path == CPU_RPATH_VNNI512 || g->path == CPU_RPATH_BF16_512) &&
              (g->raw || g->op != CPU_GEMV_GELU)) {
            const int i8 = ct == WD_CPU_COMPUTE_INT8;
            epi_512(i8, i8 ? (const void *)ai : (const void *)af, no, corr,
                    i8 ? w->wsum + ow : NULL, i8 ? w->scale + ow : NULL, xs,
                    g->raw ? NULL : g->b ? g->b + o : NULL, g->op == CPU_GEMV_ADD, y);
            continue;
          }
#endif
          float v[2 * OB];
          if (ct == WD_CPU_COMPUTE_INT8)
            for (int j = 0; j < no; j++)
              v[j] = (float)(ai[j] - corr * w->wsum[ow + j]) * (xs * w->scale[ow + j]);
          else
            for (int j = 0; j < no; j++)
              v[j] = af[j];
          if (g->raw) {
            if (g->op == CPU_GEMV_ADD)
              for (int j = 0; j < no; j++)
                y[j] += v[j];
            else
              memcpy(y, v, (size_t)no * sizeof *v);
            continue;
          }
          for (int j = 0; j < no; j++) {
            const float u = g->b ? v[j] + g->b[o + j] : v[j];
            y[j] = g->op == CPU_GEMV_ADD ? y[j] + u : g->op == CPU_GEMV_GELU ? wd_cpu_gelu(u) : u;
          }
        }
      }
    }
  }
}
