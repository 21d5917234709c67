/*
 * diar_seg_load.c - our segmentation-3.0 file's loader (see diar_seg.h and,
 * for the layouts it packs the weights into, diar_seg.c's comment).
 *
 * The sinc filters are computed at load from the file's parameters the
 * way asteroid-filterbanks' ParamSincFB computes them (float arithmetic in
 * the same order; sin and cos through double, correctly rounded where
 * torch's vectorised sinf is within an ulp): measured against PyTorch's
 * filters(), 94% of the taps are the same bits and the rest within 1.2e-6
 * (the centre tap is 1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "diar_gemm.h"
#include "diar_seg_internal.h"
#include "safetensors.h"

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */

#define MAX_FILE (64u << 20) /* ours is 5.9 MB */
#define HINT "scripts/fetch-diarization.sh makes one"

typedef struct {
  const wd_st_t *st;
  char *err;
  size_t err_len;
} loader_t;

static int get(const loader_t *l, const char *name, size_t n_dims, size_t d0, size_t d1,
               size_t d2, const float **ret) {
  const size_t shape[3] = { d0, d1, d2 };
  return wd_st_f32(l->st, name, n_dims, shape, ret, l->err, l->err_len);
}

/* dst[k][o] (rows of ld) = src[o][k] for a torch weight of rows x k. */
static float *transpose(const float *src, size_t rows, size_t k, size_t ld) {
  float *dst = calloc(k * ld, sizeof(float));
  if (dst)
    for (size_t o = 0; o < rows; o++)
      for (size_t i = 0; i < k; i++)
        dst[i * ld + o] = src[o * k + i];
  return dst;
}

static float *panels(const float *src, size_t rows, size_t k) {
  float *dst = malloc(rows * k * sizeof(float));
  if (dst)
    for (size_t o = 0; o < rows; o++)
      for (size_t i = 0; i < k; i++)
        dst[(o / PANEL) * k * PANEL + i * PANEL + o % PANEL] = src[o * k + i];
  return dst;
}

/* *w (K x N, k-major) replaced by its packed form for diar_gemm.h, whose
 * 6 x 16 blocks read the weights panel by panel (the SincNet products are
 * ~0.7 GFLOP a window: twice vad_gemm's speed there; the LSTM's input
 * projections and the head, 8 windows' 4712 rows at once, 10-20% faster
 * than vad_gemm over 64-column panels). The sums are the same FMA chains in
 * the same order as vad_gemm's, so the same bits. */
static int pack_in_place(float **w, size_t K, size_t N) {
  float *p = malloc(wd_diar_gemm_packed_size(K, N) * sizeof *p);
  if (!p)
    return WD_ENOMEM;
  wd_diar_gemm_pack(*w, N, K, N, p);
  free(*w);
  *w = p;
  return 0;
}

/* A torch weight (rows x k, rows a multiple of 16) as diar_gemm's packed
 * k x rows matrix: the transpose, then packed. */
static float *packed(const float *src, size_t rows, size_t k) {
  float *t = transpose(src, rows, k, rows);
  if (t && pack_in_place(&t, k, rows) < 0) {
    free(t);
    return NULL;
  }
  return t;
}

/* A vector padded with zeros to n16. */
static float *padded(const float *src, size_t n, size_t n16) {
  float *dst = calloc(n16, sizeof(float));
  if (dst)
    memcpy(dst, src, n * sizeof(float));
  return dst;
}

/* The 80 filters of ParamSincFB(80, 251, min_low_hz=50, min_band_hz=50) at
 * 16 kHz: for each of the 40 bands, low = 50 + |low_hz_|, high = low + 50 +
 * |band_hz_| clamped to [50, 8000]; over the left half of the taps (n_ =
 * 2 pi t / 16000 for t = -125..-1, window_ the left half of a Hamming
 * window) the cosine filter is (sin(high n) - sin(low n)) / (n / 2) *
 * window, mirrored on the right, 2 (high - low) at the centre; the sine
 * filter is (cos(low n) - cos(high n)) / (n / 2) * window, mirrored with
 * its sign flipped, 0 at the centre; every tap then divided by
 * 2 (high - low). Cosine filters are outputs 0..39, sine filters 40..79. */
static void sinc_filters(float *dst, const float *low_hz, const float *band_hz, const float *n,
                         const float *window) {
  for (size_t f = 0; f < N_SINC / 2; f++) {
    const float low = MIN_LOW_HZ + fabsf(low_hz[f]);
    float high = low + MIN_BAND_HZ + fabsf(band_hz[f]);
    high = high < MIN_LOW_HZ ? MIN_LOW_HZ : high > NYQUIST ? NYQUIST : high;
    const float band = high - low, scale = 2.0f * band;
    for (size_t j = 0; j < SINC_HALF; j++) {
      const float fl = low * n[j], fh = high * n[j], half = n[j] / 2.0f;
      const float even = (((float)sin(fh) - (float)sin(fl)) / half) * window[j];
      const float odd = (((float)cos(fl) - (float)cos(fh)) / half) * window[j];
      const size_t right = SINC_TAPS - 1 - j;
      dst[j * N_SINC + f] = even / scale;
      dst[right * N_SINC + f] = even / scale;
      dst[j * N_SINC + N_SINC / 2 + f] = odd / scale;
      dst[right * N_SINC + N_SINC / 2 + f] = -odd / scale;
    }
    dst[SINC_HALF * N_SINC + f] = scale / scale;
    dst[SINC_HALF * N_SINC + N_SINC / 2 + f] = 0.0f;
  }
}

/* The filter bank as the two folded halves fold() multiplies: rows j <
 * 125 of the cosine (even) filters and of the sine (odd) ones; the even
 * half's row 125 is the centre tap halved (fold's u[125] is twice the
 * centre sample: the product is the same, exactly), the odd half's is 0
 * (the sine filters' centre tap). Rows and columns past those: 0. */
static int load_sinc(wd_diar_seg_t *m, const float *low, const float *band, const float *n,
                     const float *window) {
  float *bank = malloc(SINC_TAPS * N_SINC * sizeof(float));
  m->sinc_even = calloc(SYM_K * SYM_N, sizeof(float));
  m->sinc_odd = calloc(SYM_K * SYM_N, sizeof(float));
  int rc = WD_ENOMEM;
  if (bank && m->sinc_even && m->sinc_odd) {
    sinc_filters(bank, low, band, n, window);
    for (size_t j = 0; j < SINC_HALF; j++)
      for (size_t f = 0; f < N_SINC / 2; f++) {
        m->sinc_even[j * SYM_N + f] = bank[j * N_SINC + f];
        m->sinc_odd[j * SYM_N + f] = bank[j * N_SINC + N_SINC / 2 + f];
      }
    for (size_t f = 0; f < N_SINC / 2; f++)
      m->sinc_even[SINC_HALF * SYM_N + f] = bank[SINC_HALF * N_SINC + f] / 2.0f;
    rc = pack_in_place(&m->sinc_even, SYM_K, SYM_N);
    if (!rc)
      rc = pack_in_place(&m->sinc_odd, SYM_K, SYM_N);
  }
  free(bank);
  return rc;
}

static int load_lstm(const loader_t *l, wd_diar_seg_t *m) {
  char name[64];
  for (size_t layer = 0; layer < LAYERS; layer++)
    for (size_t d = 0; d < 2; d++) {
      const char *sfx = d ? "_reverse" : "";
      const size_t in = layer ? BI : CH;
      const float *wih, *whh, *bih, *bhh;
      int rc;
      snprintf(name, sizeof name, "lstm.weight_ih_l%zu%s", layer, sfx);
      if ((rc = get(l, name, 2, GATES, in, 0, &wih)))
        return rc;
      snprintf(name, sizeof name, "lstm.weight_hh_l%zu%s", layer, sfx);
      if ((rc = get(l, name, 2, GATES, HID, 0, &whh)))
        return rc;
      snprintf(name, sizeof name, "lstm.bias_ih_l%zu%s", layer, sfx);
      if ((rc = get(l, name, 1, GATES, 0, 0, &bih)))
        return rc;
      snprintf(name, sizeof name, "lstm.bias_hh_l%zu%s", layer, sfx);
      if ((rc = get(l, name, 1, GATES, 0, 0, &bhh)))
        return rc;
      lstm_dir_t *ld = &m->lstm[layer][d];
      ld->in = in;
      ld->wih = packed(wih, GATES, in);
      ld->whh = panels(whh, GATES, HID);
      ld->bias = malloc(GATES * sizeof(float));
      if (!ld->wih || !ld->whh || !ld->bias)
        return WD_ENOMEM;
      for (size_t g = 0; g < GATES; g++)
        ld->bias[g] = bih[g] + bhh[g];
    }
  return 0;
}

static int load_front(const loader_t *l, wd_diar_seg_t *m) {
  const float *w, *b, *low, *band, *n, *window;
  int rc;
  if ((rc = get(l, "sincnet.wav_norm1d.weight", 1, 1, 0, 0, &w)) ||
      (rc = get(l, "sincnet.wav_norm1d.bias", 1, 1, 0, 0, &b)))
    return rc;
  m->wav_w = w[0], m->wav_b = b[0];
  if ((rc = get(l, "sincnet.conv1d.0.filterbank.low_hz_", 2, N_SINC / 2, 1, 0, &low)) ||
      (rc = get(l, "sincnet.conv1d.0.filterbank.band_hz_", 2, N_SINC / 2, 1, 0, &band)) ||
      (rc = get(l, "sincnet.conv1d.0.filterbank.n_", 2, 1, SINC_HALF, 0, &n)) ||
      (rc = get(l, "sincnet.conv1d.0.filterbank.window_", 1, SINC_HALF, 0, 0, &window)))
    return rc;
  if ((rc = load_sinc(m, low, band, n, window)) < 0)
    return rc;
  char name[64];
  for (size_t i = 0; i < 3; i++) {
    const size_t c = i ? CH : N_SINC;
    snprintf(name, sizeof name, "sincnet.norm1d.%zu.weight", i);
    if ((rc = get(l, name, 1, c, 0, 0, &w)))
      return rc;
    snprintf(name, sizeof name, "sincnet.norm1d.%zu.bias", i);
    if ((rc = get(l, name, 1, c, 0, 0, &b)))
      return rc;
    memcpy(m->norm_w[i], w, c * sizeof(float));
    memcpy(m->norm_b[i], b, c * sizeof(float));
  }
  for (size_t i = 0; i < 2; i++) {
    const size_t cin = i ? CH : N_SINC;
    snprintf(name, sizeof name, "sincnet.conv1d.%zu.weight", i + 1);
    if ((rc = get(l, name, 3, CH, cin, CONV_TAPS, &w)))
      return rc;
    snprintf(name, sizeof name, "sincnet.conv1d.%zu.bias", i + 1);
    if ((rc = get(l, name, 1, CH, 0, 0, &b)))
      return rc;
    conv_t *c = &m->conv[i];
    c->w = calloc(CONV_TAPS * cin * CH16, sizeof(float));
    c->b = padded(b, CH, CH16);
    if (!c->w || !c->b)
      return WD_ENOMEM;
    for (size_t o = 0; o < CH; o++)
      for (size_t k = 0; k < cin; k++)
        for (size_t tap = 0; tap < CONV_TAPS; tap++)
          c->w[(tap * cin + k) * CH16 + o] = w[(o * cin + k) * CONV_TAPS + tap];
    if ((rc = pack_in_place(&c->w, CONV_TAPS * cin, CH16)) < 0)
      return rc;
  }
  return 0;
}

static int load_head(const loader_t *l, wd_diar_seg_t *m) {
  const float *w, *b;
  int rc;
  if ((rc = get(l, "linear.0.weight", 2, LIN, BI, 0, &w)) ||
      (rc = get(l, "linear.0.bias", 1, LIN, 0, 0, &b)))
    return rc;
  m->lin_w[0] = packed(w, LIN, BI);
  m->lin_b[0] = padded(b, LIN, LIN);
  if ((rc = get(l, "linear.1.weight", 2, LIN, LIN, 0, &w)) ||
      (rc = get(l, "linear.1.bias", 1, LIN, 0, 0, &b)))
    return rc;
  m->lin_w[1] = packed(w, LIN, LIN);
  m->lin_b[1] = padded(b, LIN, LIN);
  if ((rc = get(l, "classifier.weight", 2, N_CLASSES, LIN, 0, &w)) ||
      (rc = get(l, "classifier.bias", 1, N_CLASSES, 0, 0, &b)))
    return rc;
  float *cls = transpose(w, N_CLASSES, LIN, CLS16);
  if (cls && pack_in_place(&cls, LIN, CLS16) < 0)
    free(cls), cls = NULL;
  m->cls_w = cls;
  m->cls_b = padded(b, N_CLASSES, CLS16);
  if (!m->lin_w[0] || !m->lin_b[0] || !m->lin_w[1] || !m->lin_b[1] || !m->cls_w || !m->cls_b)
    return WD_ENOMEM;
  return 0;
}

int wd_diar_seg_load(const char *path, wd_diar_seg_t **ret, char *err, size_t err_len) {
  *ret = NULL;
  wd_st_t *st = NULL;
  int rc = wd_st_open(path, MAX_FILE, "whisperd-diarization", "1", HINT, &st, err, err_len);
  if (rc)
    return rc;
  const char *model = wd_st_meta(st, "model");
  if (!model || strcmp(model, "pyannote-segmentation-3.0") != 0) {
    snprintf(err, err_len, "%s: not a pyannote segmentation-3.0 file (metadata model is %s)",
             path, model ? model : "missing");
    wd_st_close(st);
    return WD_EMODEL;
  }
  wd_diar_seg_t *m = calloc(1, sizeof *m);
  const loader_t l = { st, err, err_len };
  rc = !m ? WD_ENOMEM : load_front(&l, m);
  if (!rc)
    rc = load_lstm(&l, m);
  if (!rc)
    rc = load_head(&l, m);
  wd_st_close(st);
  if (rc) {
    wd_diar_seg_free(m);
    return rc;
  }
  *ret = m;
  return 0;
}

void wd_diar_seg_free(wd_diar_seg_t *m) {
  if (!m)
    return;
  free(m->sinc_even), free(m->sinc_odd);
  for (size_t i = 0; i < 2; i++) {
    free(m->conv[i].w), free(m->conv[i].b);
    free(m->lin_w[i]), free(m->lin_b[i]);
  }
  for (size_t l = 0; l < LAYERS; l++)
    for (size_t d = 0; d < 2; d++)
      free(m->lstm[l][d].wih), free(m->lstm[l][d].whh), free(m->lstm[l][d].bias);
  free(m->cls_w), free(m->cls_b);
  free(m);
}
