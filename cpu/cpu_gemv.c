/*
 * cpu_gemv.c - batched GEMV kernels (see cpu_gemv.h).
 *
 * One weight row against up to 4 activation rows at a time: the weights
 * (16 per iteration, converted from f16 by F16C) stay in registers while
 * each row's two accumulators take an FMA. Rows beyond the first four reuse
 * the weight row from L1. The decoder's matrices are 384 .. 5120 wide, all
 * multiples of 16; a tail (synthetic shapes) runs scalar, in order. The
 * block types' kernels are in cpu_qgemv.c, in the same lane order.
 */
#include "cpu_gemv.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "cpu_features.h"
#include "cpu_gemv512.h"
#include "cpu_qgemv.h"
#include "cpu_vmath.h"
#include "f16.h"

float wd_cpu_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

/* f16 -> f32 for the portable kernel: one load instead of the branchy
 * conversion (256 KiB, built once, shared by every engine). */
static float g_f16_table[65536];
static pthread_once_t g_f16_once = PTHREAD_ONCE_INIT;

static void f16_table_build(void) {
  for (uint32_t i = 0; i < 65536; i++)
    g_f16_table[i] = wd_f16_to_f32((uint16_t)i);
}

void wd_cpu_gemv_init(void) { (void)pthread_once(&g_f16_once, f16_table_build); }

const float *wd_cpu_f16_lut(void) { return g_f16_table; }

/* Weight element i of a row as f32. Rows may sit at any byte address: a
 * matrix read in place from a ggml file (cpu_mat.h) starts where the file
 * put it, odd addresses included, so the loads go through memcpy (one
 * plain load on x86), never through a uint16_t or float pointer. */
static inline float w_at(const unsigned char *w, int i, int f16) {
  if (f16) {
    uint16_t h;
    memcpy(&h, w + 2 * (size_t)i, sizeof h);
    return g_f16_table[h];
  }
  float v;
  memcpy(&v, w + 4 * (size_t)i, sizeof v);
  return v;
}

/* Portable: 16 lanes, lane i sums elements i, i + 16, ...; lanes fold
 * pairwise as the AVX2 kernel folds them (not bit-equal to it: FMA). */
static void dot_portable(const void *wrow, int k, const float *const *x, int R, float *res,
                         int f16) {
  const unsigned char *w = wrow;
  for (int r = 0; r < R; r++) {
    float lane[16] = { 0 };
    int i = 0;
    for (; i + 16 <= k; i += 16)
      for (int j = 0; j < 16; j++)
        lane[j] += w_at(w, i + j, f16) * x[r][i + j];
    float s = cpu_lanes_fold(lane);
    for (; i < k; i++)
      s += w_at(w, i, f16) * x[r][i];
    res[r] = s;
  }
}

static void dot_portable_f16(const void *w, int k, const float *const *x, int R, float *res) {
  dot_portable(w, k, x, R, res, 1);
}
static void dot_portable_f32(const void *w, int k, const float *const *x, int R, float *res) {
  dot_portable(w, k, x, R, res, 0);
}

#if CPU_X86

/* One body for both weight types: LOAD(p) gives 8 f32 weights at byte
 * address p (any alignment: unaligned loads), TAIL(p) one. */
#define CPU_DOT_BODY(WT, LOAD)                                                     \
  const unsigned char *w = wrow;                                                   \
  __m256 a0[4], a1[4];                                                             \
  _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                              \
    a0[r] = a1[r] = _mm256_setzero_ps();                                           \
  int i = 0;                                                                       \
  for (; i + 16 <= k; i += 16) {                                                   \
    const __m256 w0 = LOAD(w + sizeof(WT) * (size_t)i);                            \
    const __m256 w1 = LOAD(w + sizeof(WT) * (size_t)(i + 8));                      \
    _Pragma("GCC unroll 4") for (int r = 0; r < R4; r++) {                         \
      a0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[r] + i), a0[r]);               \
      a1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[r] + i + 8), a1[r]);           \
    }                                                                              \
  }                                                                                \
  for (int r = 0; r < R4; r++) {                                                   \
    float s = cpu_hsum8(a0[r], a1[r]);                                             \
    for (int j = i; j < k; j++)                                                    \
      s += TAIL(w + sizeof(WT) * (size_t)j) * x[r][j];                             \
    res[r] = s;                                                                    \
  }

#define LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define LOAD_F32(p) _mm256_loadu_ps((const float *)(const void *)(p))

/* R4 is a constant in each instance and the row loops are unrolled (GCC
 * leaves a 4-trip loop rolled at -O2, and the accumulator arrays then live
 * on the stack: 2.5x slower) so that the eight accumulators stay in
 * registers. */
#define TAIL(p) wd_f16_to_f32(cpu_ld_u16(p))
#define DEF_F16(R)                                                                        \
  CPU_TARGET static void dot_f16_##R(const void *wrow, int k, const float *const *x,       \
                                     float *res) {                                        \
    enum { R4 = R };                                                                      \
    CPU_DOT_BODY(uint16_t, LOAD_F16)                                                      \
  }
DEF_F16(1)
DEF_F16(2)
DEF_F16(3)
DEF_F16(4)
#undef TAIL
#define TAIL(p) cpu_ld_f32(p)
#define DEF_F32(R)                                                                        \
  CPU_TARGET static void dot_f32_##R(const void *wrow, int k, const float *const *x,       \
                                     float *res) {                                        \
    enum { R4 = R };                                                                      \
    CPU_DOT_BODY(float, LOAD_F32)                                                         \
  }
DEF_F32(1)
DEF_F32(2)
DEF_F32(3)
DEF_F32(4)
#undef TAIL

static void dot_avx2_f16(const void *w, int k, const float *const *x, int R, float *res) {
  switch (R) {
  case 1: dot_f16_1(w, k, x, res); break;
  case 2: dot_f16_2(w, k, x, res); break;
  case 3: dot_f16_3(w, k, x, res); break;
  default: dot_f16_4(w, k, x, res); break;
  }
}
static void dot_avx2_f32(const void *w, int k, const float *const *x, int R, float *res) {
  switch (R) {
  case 1: dot_f32_1(w, k, x, res); break;
  case 2: dot_f32_2(w, k, x, res); break;
  case 3: dot_f32_3(w, k, x, res); break;
  default: dot_f32_4(w, k, x, res); break;
  }
}

#endif

/* The path wd_cpu_gemv_range takes: 2 AVX-512 (f16 and f32 weights; block
 * types stay on AVX2), 1 AVX2, 0 portable. */
static int widest_path(void) { return wd_cpu_use_avx2() ? (wd_cpu_avx512_available() ? 2 : 1) : 0; }

int wd_cpu_gemv_widest(void) { return widest_path(); }

const char *wd_cpu_gemv_path_name(int path) {
  static const char *const names[] = { "portable", "avx2+fma+f16c", "avx512f+avx2+fma+f16c" };
  return names[path < 0 ? 0 : path > 2 ? 2 : path];
}

const char *wd_cpu_gemv_kernel(void) { return wd_cpu_gemv_path_name(widest_path()); }

/* simd as asked, lowered to what the CPU has. */
static int path_available(int simd) {
  if (simd >= 2 && !wd_cpu_avx512_available())
    simd = 1;
  return simd && wd_cpu_has_avx2() ? simd : 0;
}

/* The dot kernel for w's type on the chosen path (never NULL: wd_cpu_mat_load
 * makes f32, f16 and block types only). */
static cpu_dot_fn pick_dot(wd_dtype_t type, int simd) {
  simd = path_available(simd);
  if (simd == 2 && wd_cpu_gemv512_dot(type))
    return wd_cpu_gemv512_dot(type);
#if CPU_X86
  if (simd && type == WD_DTYPE_F16)
    return dot_avx2_f16;
  if (simd && type == WD_DTYPE_F32)
    return dot_avx2_f32;
#endif
  if (type == WD_DTYPE_F16)
    return dot_portable_f16;
  if (type == WD_DTYPE_F32)
    return dot_portable_f32;
  return wd_cpu_qgemv_dot(type, simd);
}

void wd_cpu_gemv_range(const cpu_gemv_t *g, int o0, int o1) {
  wd_cpu_gemv_range_path(g, o0, o1, widest_path());
}

/* Output o of activation row r from its sum: the bias, then the op (GELU
 * after the range: gelu_range). */
static inline void put(const cpu_gemv_t *g, int r, int o, float sum) {
  float *y = g->y + (size_t)r * (size_t)g->ldy + o;
  const float v = sum + (g->b ? g->b[o] : 0.0f);
  *y = g->op == CPU_GEMV_ADD ? *y + v : v;
}

/* GELU over outputs [o0, o1) of every row, 8 lanes at a time (cpu_vmath.h,
 * the encoder's and a long prefill's GELU), not a scalar erff per output
 * (base, bench_cpu_step, batch 8: a step 12.4 -> 10.8 ms). An output's
 * value depends on its own sum alone: the engine's ranges start at
 * multiples of 8 and every Whisper width is one, so none falls in the
 * scalar tail, whatever the rows or threads. */
static void gelu_range(const cpu_gemv_t *g, int o0, int o1) {
  for (int r = 0; r < g->n_rows; r++)
    wd_cpu_bias_gelu_vec(g->y + (size_t)r * (size_t)g->ldy + o0, NULL, o1 - o0);
}

/* Block rows staged as f32 when more than 4 activation rows read them:
 * the widest decoder row (large's fc2, 5120) fits. */
enum { STAGE_MAX = 8192 };

void wd_cpu_gemv_range_path(const cpu_gemv_t *g, int o0, int o1, int simd) {
  const cpu_mat_t *w = g->w;
  const int k = w->n_in;
  simd = path_available(simd);
  cpu_dot_fn dot = pick_dot(w->type, simd);
  const size_t row_bytes = wd_cpu_mat_row_bytes(w);
  /* A block row read by more than one group of 4 rows is dequantized once
   * into L1 and the f32 kernel runs over it: the same sums, bit for bit
   * (cpu_qgemv.h), without dequantizing it again for every 4 rows. */
  float stage[STAGE_MAX];
  const cpu_deq_fn deq = g->n_rows > 4 && k <= STAGE_MAX ? wd_cpu_qgemv_deq(w->type, simd) : NULL;
  if (deq)
    dot = pick_dot(WD_DTYPE_F32, simd);
  /* f16 and f32 rows on AVX-512: four outputs at a time (cpu_dot4_fn), the
   * rest one by one; the sums are the same either way. */
  const cpu_dot4_fn dot4 = simd == 2 && !deq ? wd_cpu_gemv512_dot4(w->type) : NULL;
  int o = o0;
  for (; dot4 && o + 4 <= o1; o += 4) {
    const void *wrow = (const char *)w->data + (size_t)o * row_bytes;
    for (int r0 = 0; r0 < g->n_rows; r0 += 4) {
      const int R = g->n_rows - r0 < 4 ? g->n_rows - r0 : 4;
      const float *x[4];
      float res[16];
      for (int r = 0; r < R; r++)
        x[r] = g->x + (size_t)(r0 + r) * (size_t)g->ldx;
      dot4(wrow, row_bytes, k, x, R, res);
      for (int j = 0; j < 4; j++)
        for (int r = 0; r < R; r++)
          put(g, r0 + r, o + j, res[j * 4 + r]);
    }
  }
  for (; o < o1; o++) {
    const void *wrow = (const char *)w->data + (size_t)o * row_bytes;
    if (deq) {
      deq(wrow, k, stage);
      wrow = stage;
    }
    for (int r0 = 0; r0 < g->n_rows; r0 += 4) {
      const int R = g->n_rows - r0 < 4 ? g->n_rows - r0 : 4;
      const float *x[4];
      float res[4];
      for (int r = 0; r < R; r++)
        x[r] = g->x + (size_t)(r0 + r) * (size_t)g->ldx;
      dot(wrow, k, x, R, res);
      for (int r = 0; r < R; r++)
        put(g, r0 + r, o, res[r]);
    }
  }
  if (g->op == CPU_GEMV_GELU)
    gelu_range(g, o0, o1);
}
