/*
 * diar_seg.c - pyannote's segmentation-3.0 (PyanNet) forward pass, see
 * diar_seg.h: the network over batches of windows (the loader is
 * diar_seg_load.c, the shapes diar_seg_internal.h).
 *
 * Layout: activations are time-major (a row per frame, channels
 * contiguous), weights k-major with their columns padded with zeros to a
 * multiple of 16 and packed at load for diar_gemm.h, all but the LSTM's
 * recurrent weights (vad_gemm.h, in panels of 64 columns, see panels()):
 * every product with many rows runs on diar_gemm's 6 x 16 blocks over
 * packed weights. Every convolution is "valid" (no padding), so its im2col
 * matrix needs no copy: with tap-major rows (row t = x[t] | x[t+1] | ... |
 * x[t+taps-1]) row t is the taps * cin floats that start at frame t, and
 * the product reads the activations themselves with a leading dimension of
 * cin (rows overlap). The sinc convolution (stride 10 over the raw
 * waveform) is the exception: its rows are folded by the filters'
 * symmetry first (see fold()), into a copy.
 *
 * Windows go through the convolutional front one at a time (15975 x 80
 * sinc outputs, pooled block by block as they are made), then up to GROUP
 * windows at once through the LSTM: each layer's input projection is one
 * product over all their frames, and the recurrence multiplies the states
 * of all windows of the group at one frame together.

 */
#include "diar_seg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "diar_gemm.h"
#include "diar_seg_internal.h"
#include "vad_gemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DIAR_X86 1
#endif

/* C (M x N, row stride ldc) = A (M x K) times panelled weights, panel by
 * panel. */
static void gemm_panels(const float *a, size_t lda, const float *w, float *c, size_t ldc,
                        size_t M, size_t N, size_t K) {
  for (size_t n = 0; n < N; n += PANEL)
    wd_vad_gemm(a, lda, w + n * K, PANEL, NULL, c + n, ldc, M, PANEL, K);
}

unsigned wd_diar_powerset_mask(int cls) {
  static const unsigned masks[N_CLASSES] = { 0u, 1u, 2u, 4u, 3u, 5u, 6u };
  return cls >= 0 && cls < N_CLASSES ? masks[cls] : 0u;
}

/* ------------------------------------------------------------------------ */
/* The forward pass                                                          */

typedef struct {
  float *wav;   /* WIN: the normalised waveform */
  float *uv;    /* SINC_BLOCK x 2 SYM_K: fold()'s rows */
  float *sinc;  /* SINC_BLOCK x 2 SYM_N: the even half's outputs, then the odd's */
  float *p1;    /* P1 x N_SINC */
  float *c;     /* C1 x CH16: a convolution's outputs */
  float *p2;    /* P2 x CH */
  float *x;     /* GROUP * N_FRAMES x CH: the LSTM's input */
  float *y[2];  /* GROUP * N_FRAMES x BI: layer outputs, then the head's */
  float *gates; /* GROUP * N_FRAMES x GATES */
  float *hc;    /* GROUP x (HID h, HID c, GATES g) */
} scratch_t;

static void scratch_free(scratch_t *s) {
  free(s->wav), free(s->uv), free(s->sinc), free(s->p1), free(s->c), free(s->p2), free(s->x);
  free(s->y[0]), free(s->y[1]), free(s->gates), free(s->hc);
}

static int scratch_new(scratch_t *s, size_t group) {
  const size_t rows = group * N_FRAMES;
  *s = (scratch_t){
    .wav = malloc(WIN * sizeof(float)),
    .uv = malloc(SINC_BLOCK * 2 * SYM_K * sizeof(float)),
    .sinc = malloc(SINC_BLOCK * 2 * SYM_N * sizeof(float)),
    .p1 = malloc(P1 * N_SINC * sizeof(float)),
    .c = malloc(C1 * CH16 * sizeof(float)),
    .p2 = malloc(P2 * CH * sizeof(float)),
    .x = malloc(rows * CH * sizeof(float)),
    .y = { malloc(rows * BI * sizeof(float)), malloc(rows * BI * sizeof(float)) },
    .gates = malloc(rows * GATES * sizeof(float)),
    .hc = malloc(group * (2 * HID + GATES) * sizeof(float)),
  };
  if (!s->wav || !s->uv || !s->sinc || !s->p1 || !s->c || !s->p2 || !s->x || !s->y[0] || !s->y[1] ||
      !s->gates || !s->hc) {
    scratch_free(s);
    return WD_ENOMEM;
  }
  return 0;
}

static inline float leaky(float x) { return x > 0.0f ? x : x * SLOPE; }

/* InstanceNorm1d(affine) over t rows of c channels (row stride ld), then
 * the leaky ReLU: per channel, the mean and biased variance over time.
 * Row by row (each channel's sums still in time order, so the same bits as
 * a pass per channel): a pass per channel strode through 5325 rows for
 * each of 80 channels. */
static void norm_leaky(float *x, size_t t, size_t c, size_t ld, const float *w, const float *b) {
  double sum[N_SINC] = { 0 }, sq[N_SINC] = { 0 }, mean[N_SINC];
  float alpha[N_SINC], beta[N_SINC];
  for (size_t r = 0; r < t; r++)
    for (size_t k = 0; k < c; k++)
      sum[k] += x[r * ld + k];
  for (size_t k = 0; k < c; k++)
    mean[k] = sum[k] / (double)t;
  for (size_t r = 0; r < t; r++)
    for (size_t k = 0; k < c; k++) {
      const double d = x[r * ld + k] - mean[k];
      sq[k] += d * d;
    }
  for (size_t k = 0; k < c; k++) {
    const float inv = (float)(1.0 / sqrt(sq[k] / (double)t + NORM_EPS));
    alpha[k] = inv * w[k], beta[k] = b[k] - (float)mean[k] * alpha[k];
  }
  for (size_t r = 0; r < t; r++)
    for (size_t k = 0; k < c; k++)
      x[r * ld + k] = leaky(x[r * ld + k] * alpha[k] + beta[k]);
}

/* Max over each 3 rows of in (t_out * 3 rows, row stride ld_in) into out
 * (t_out x c, row stride ld_out). */
static void pool3(const float *in, size_t ld_in, size_t t_out, size_t c, float *out,
                  size_t ld_out) {
  for (size_t r = 0; r < t_out; r++) {
    const float *a = in + 3 * r * ld_in, *b = a + ld_in, *d = b + ld_in;
    for (size_t k = 0; k < c; k++) {
      float v = a[k] > b[k] ? a[k] : b[k];
      out[r * ld_out + k] = v > d[k] ? v : d[k];
    }
  }
}

/* The sinc filters' symmetry: the cosine filters are even about the
 * centre tap 125 (h[250 - j] = h[j]) and the sine filters odd (h[250 - j]
 * = -h[j], h[125] = 0), so over a row w of 251 samples a cosine filter's
 * output is sum_j<=125 h[j] u[j] and a sine filter's sum_j<125 h[j] v[j]
 * with u[j] = w[j] + w[250 - j], v[j] = w[j] - w[250 - j]: two products of
 * 128 folded taps by 48 columns instead of one of 251 by 80 (39% fewer
 * multiply-adds). u[125] = 2 w[125] meets the halved centre tap (see
 * load_sinc); u and v past j = 125 meet zero weights. Row uv: u (SYM_K)
 * then v (SYM_K). The sums round differently from the unfolded product
 * (sincnet_matches_pytorch: 7.2e-6 -> 2.0e-5 of PyTorch, logp_matches_pytorch
 * 5.7e-5 -> 6.7e-5; their bounds 2e-4). */
typedef void (*fold_fn)(const float *w, float *uv);

static void fold_portable(const float *w, float *uv) {
  for (size_t j = 0; j < SYM_K; j++) {
    uv[j] = w[j] + w[SINC_TAPS - 1 - j];
    uv[SYM_K + j] = w[j] - w[SINC_TAPS - 1 - j];
  }
}

#ifdef DIAR_X86
/* 8 taps at a time: w[250 - j - 7 .. 250 - j] loaded and reversed. Taps
 * up to 127 read w[123..250]: within the row. */
__attribute__((target("avx2"))) static void fold_avx2(const float *w, float *uv) {
  const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  for (size_t j = 0; j < SYM_K; j += 8) {
    const __m256 a = _mm256_loadu_ps(w + j);
    const __m256 b = _mm256_permutevar8x32_ps(_mm256_loadu_ps(w + SINC_TAPS - 8 - j), rev);
    _mm256_storeu_ps(uv + j, _mm256_add_ps(a, b));
    _mm256_storeu_ps(uv + SYM_K + j, _mm256_sub_ps(a, b));
  }
}
#endif

/* fold_avx2 where diar_gemm runs AVX2 (the same bits either way). */
static fold_fn pick_fold(void) {
#ifdef DIAR_X86
  if (strcmp(wd_diar_gemm_kernel(), "avx2+fma") == 0)
    return fold_avx2;
#endif
  return fold_portable;
}

/* SincNet over one window: x (N_FRAMES x CH). */
static void front(const wd_diar_seg_t *m, const float *in, scratch_t *s, float *x) {
  /* the waveform's instance norm (one channel) */
  double sum = 0.0, sq = 0.0;
  for (size_t i = 0; i < WIN; i++)
    sum += in[i];
  const double mean = sum / WIN;
  for (size_t i = 0; i < WIN; i++)
    sq += (in[i] - mean) * (in[i] - mean);
  const float inv = (float)(1.0 / sqrt(sq / WIN + NORM_EPS));
  const float alpha = inv * m->wav_w, beta = m->wav_b - (float)mean * alpha;
  for (size_t i = 0; i < WIN; i++)
    s->wav[i] = in[i] * alpha + beta;
  /* the sinc convolution (row t = wav[10 t .. 10 t + 251)) folded, the
   * cosine filters then the sine ones; |.|, max-pool */
  const fold_fn fold = pick_fold();
  for (size_t r0 = 0; r0 < SINC_OUT; r0 += SINC_BLOCK) {
    const size_t rows = SINC_OUT - r0 < SINC_BLOCK ? SINC_OUT - r0 : SINC_BLOCK;
    for (size_t r = 0; r < rows; r++)
      fold(s->wav + (r0 + r) * SINC_STRIDE, s->uv + r * 2 * SYM_K);
    wd_diar_gemm(s->uv, 2 * SYM_K, m->sinc_even, NULL, s->sinc, 2 * SYM_N, rows, SYM_N, SYM_K);
    wd_diar_gemm(s->uv + SYM_K, 2 * SYM_K, m->sinc_odd, NULL, s->sinc + SYM_N, 2 * SYM_N, rows,
                 SYM_N, SYM_K);
    for (size_t i = 0; i < rows * 2 * SYM_N; i++)
      s->sinc[i] = fabsf(s->sinc[i]);
    float *p = s->p1 + (r0 / POOL) * N_SINC;
    pool3(s->sinc, 2 * SYM_N, rows / POOL, N_SINC / 2, p, N_SINC);
    pool3(s->sinc + SYM_N, 2 * SYM_N, rows / POOL, N_SINC / 2, p + N_SINC / 2, N_SINC);
  }
  norm_leaky(s->p1, P1, N_SINC, N_SINC, m->norm_w[0], m->norm_b[0]);
  /* conv 80 -> 60, pool, norm; conv 60 -> 60, pool, norm */
  wd_diar_gemm(s->p1, N_SINC, m->conv[0].w, m->conv[0].b, s->c, CH16, C1, CH16,
               CONV_TAPS * N_SINC);
  pool3(s->c, CH16, P2, CH, s->p2, CH);
  norm_leaky(s->p2, P2, CH, CH, m->norm_w[1], m->norm_b[1]);
  wd_diar_gemm(s->p2, CH, m->conv[1].w, m->conv[1].b, s->c, CH16, C2, CH16, CONV_TAPS * CH);
  pool3(s->c, CH16, N_FRAMES, CH, x, CH);
  norm_leaky(x, N_FRAMES, CH, CH, m->norm_w[2], m->norm_b[2]);
}

static inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* tanh through expf: (1 - e^-2|x|) / (1 + e^-2|x|) with x's sign, within
 * 9e-8 of tanh (absolute, over every float; the LSTM adds and multiplies its outputs, so
 * absolute error is what carries). glibc's tanhf goes through expm1f and
 * was a third of the whole forward pass. */
static inline float fast_tanh(float x) {
  const float t = expf(-2.0f * fabsf(x)), y = (1.0f - t) / (1.0f + t);
  return x < 0.0f ? -y : y;
}

/* One LSTM cell step for HID units: gx (the input projection with both
 * biases) + gw (the state's product) are the gates i, f, g, o (PyTorch's
 * order); c and h updated in place, h also copied to o. */
typedef void (*cell_fn)(const float *gx, const float *gw, float *c, float *h, float *o);

static void cell_portable(const float *gx, const float *gw, float *c, float *h, float *o) {
  for (size_t k = 0; k < HID; k++) {
    const float ig = sigmoid(gx[k] + gw[k]), fg = sigmoid(gx[HID + k] + gw[HID + k]),
                gg = fast_tanh(gx[2 * HID + k] + gw[2 * HID + k]),
                og = sigmoid(gx[3 * HID + k] + gw[3 * HID + k]);
    c[k] = fg * c[k] + ig * gg;
    h[k] = og * fast_tanh(c[k]);
    o[k] = h[k];
  }
}

#ifdef DIAR_X86

/* e^x, 8 at a time: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts,
 * so r is exact), e^r by Cephes' expf polynomial, 2^n through the exponent
 * bits. Within 1.2e-7 relative of e^x (measured over [-87, 88]); x is
 * clamped to [-87.3, 88] (n stays a normal exponent; sigmoid and tanh are
 * flat long before). */
__attribute__((target("avx2,fma"))) static inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                       _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

__attribute__((target("avx2,fma"))) static inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

/* fast_tanh's formula: sign(x) (1 - t) / (1 + t), t = e^-2|x|. */
__attribute__((target("avx2,fma"))) static inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 t = exp8(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
  const __m256 y = _mm256_div_ps(_mm256_sub_ps(one, t), _mm256_add_ps(one, t));
  return _mm256_or_ps(y, _mm256_and_ps(sign, x));
}

__attribute__((target("avx2,fma"))) static void cell_avx2(const float *gx, const float *gw,
                                                           float *c, float *h, float *o) {
  for (size_t k = 0; k < HID; k += 8) {
#define GATE(j)                                                                            \
  _mm256_add_ps(_mm256_loadu_ps(gx + (j) * HID + k), _mm256_loadu_ps(gw + (j) * HID + k))
    const __m256 ig = sigmoid8(GATE(0)), fg = sigmoid8(GATE(1)), gg = tanh8(GATE(2)),
                 og = sigmoid8(GATE(3));
#undef GATE
    const __m256 cn = _mm256_add_ps(_mm256_mul_ps(fg, _mm256_loadu_ps(c + k)),
                                    _mm256_mul_ps(ig, gg));
    const __m256 hn = _mm256_mul_ps(og, tanh8(cn));
    _mm256_storeu_ps(c + k, cn);
    _mm256_storeu_ps(h + k, hn);
    _mm256_storeu_ps(o + k, hn);
  }
}
#endif

/* The AVX2 cell where vad_gemm runs its AVX2 kernel (so forcing the
 * portable kernel in the tests runs the portable cell too). */
static cell_fn pick_cell(void) {
#ifdef DIAR_X86
  if (strcmp(wd_vad_gemm_kernel(), "avx2+fma") == 0)
    return cell_avx2;
#endif
  return cell_portable;
}

/* One direction of one layer over nw windows: in (nw N_FRAMES x d->in),
 * out columns [dir HID, dir HID + HID) of (nw N_FRAMES x BI). The state of
 * every window at one frame is one product with W_hh. */
static void lstm_dir(const lstm_dir_t *d, size_t dir, const float *in, size_t nw, scratch_t *s,
                     float *out) {
  const size_t rows = nw * N_FRAMES;
  const cell_fn cell = pick_cell();
  wd_diar_gemm(in, d->in, d->wih, d->bias, s->gates, GATES, rows, GATES, d->in);
  float *h = s->hc, *c = h + nw * HID, *g = c + nw * HID;
  memset(h, 0, 2 * nw * HID * sizeof(float));
  for (size_t step = 0; step < N_FRAMES; step++) {
    const size_t t = dir ? N_FRAMES - 1 - step : step;
    gemm_panels(h, HID, d->whh, g, GATES, nw, GATES, HID);
    for (size_t w = 0; w < nw; w++)
      cell(s->gates + (w * N_FRAMES + t) * GATES, g + w * GATES, c + w * HID, h + w * HID,
           out + (w * N_FRAMES + t) * BI + dir * HID);
  }
}

/* The LSTM, linear layers and classifier over nw windows whose SincNet
 * features are in s->x: logp (nw x N_FRAMES x N_CLASSES). */
static void back(const wd_diar_seg_t *m, size_t nw, scratch_t *s, float *logp) {
  const size_t rows = nw * N_FRAMES;
  const float *in = s->x;
  float *out = s->y[0];
  for (size_t l = 0; l < LAYERS; l++) {
    for (size_t d = 0; d < 2; d++)
      lstm_dir(&m->lstm[l][d], d, in, nw, s, out);
    in = out;
    out = out == s->y[0] ? s->y[1] : s->y[0];
  }
  /* in: the last layer's outputs (rows x BI); out is free */
  float *a = out, *b = s->gates;
  wd_diar_gemm(in, BI, m->lin_w[0], m->lin_b[0], a, LIN, rows, LIN, BI);
  for (size_t i = 0; i < rows * LIN; i++)
    a[i] = leaky(a[i]);
  wd_diar_gemm(a, LIN, m->lin_w[1], m->lin_b[1], b, LIN, rows, LIN, LIN);
  for (size_t i = 0; i < rows * LIN; i++)
    b[i] = leaky(b[i]);
  wd_diar_gemm(b, LIN, m->cls_w, m->cls_b, a, CLS16, rows, CLS16, LIN);
  for (size_t r = 0; r < rows; r++) {
    const float *z = a + r * CLS16;
    float mx = z[0];
    for (size_t k = 1; k < N_CLASSES; k++)
      mx = z[k] > mx ? z[k] : mx;
    double sum = 0.0;
    for (size_t k = 0; k < N_CLASSES; k++)
      sum += exp((double)(z[k] - mx));
    const float lse = (float)log(sum);
    for (size_t k = 0; k < N_CLASSES; k++)
      logp[r * N_CLASSES + k] = (z[k] - mx) - lse;
  }
}

int wd_diar_seg_forward(const wd_diar_seg_t *m, const float *const *windows, size_t n_windows,
                        float *logp) {
  if (n_windows == 0)
    return 0;
  scratch_t s;
  const size_t group = n_windows < GROUP ? n_windows : GROUP;
  int rc = scratch_new(&s, group);
  if (rc)
    return rc;
  for (size_t w0 = 0; w0 < n_windows; w0 += group) {
    const size_t nw = n_windows - w0 < group ? n_windows - w0 : group;
    for (size_t w = 0; w < nw; w++)
      front(m, windows[w0 + w], &s, s.x + w * N_FRAMES * CH);
    back(m, nw, &s, logp + w0 * N_FRAMES * N_CLASSES);
  }
  scratch_free(&s);
  return 0;
}

int wd__diar_seg_sincnet(const wd_diar_seg_t *m, const float *window, float *x) {
  scratch_t s;
  int rc = scratch_new(&s, 1);
  if (rc)
    return rc;
  front(m, window, &s, x);
  scratch_free(&s);
  return 0;
}
