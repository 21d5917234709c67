/*
 * whisper_ref.c - reference forward pass (see whisper_ref.h).
 * ref: openai/whisper model.py (AudioEncoder, TextDecoder, MultiHeadAttention,
 * ResidualAttentionBlock). Activations are row-major (rows = frames or
 * tokens, d contiguous), as in the engine.
 */
#include "whisper_ref.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_blas.h"
#include "error.h"
#include "quant.h"

const char *wd_ref_blas_path(void) { return wd_cpu_blas_path(); }

/* The tensor as f32 (malloc'd), or NULL when absent or of another size. */
float *wd_ref_tensor(const wd_model_t *m, const char *name, size_t numel) {
  const wd_tensor_t *t = wd_model_tensor(m, name);
  if (!t)
    return NULL;
  size_t n = 1;
  for (int i = 0; i < t->n_dims; i++)
    n *= (size_t)t->ne[i];
  if (n != numel)
    return NULL;
  float *out = malloc(n * sizeof *out);
  if (!out)
    return NULL;
  /* Every type through core/quant.h, one ggml row (ne[0] elements) at a
   * time: the plain-C reading the kernels are checked against. Tensor data
   * may sit unaligned in the mapped file; wd_dequantize_row copies, never
   * casts. */
  const int64_t row = t->ne[0];
  const size_t row_bytes = wd_dtype_row_bytes(t->type, row);
  const unsigned char *src = t->data;
  for (size_t r = 0; row_bytes && r < n / (size_t)row; r++)
    if (wd_dequantize_row(t->type, src + r * row_bytes, out + r * (size_t)row, row) < 0) {
      free(out);
      return NULL;
    }
  if (!row_bytes) {
    free(out);
    return NULL;
  }
  return out;
}

static double ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* y (rows, n_out) = x (rows, n_in) . W^T (W: (n_out, n_in)) + b (b may be NULL). */
static void ref_linear(const float *x, int rows, int n_in, const float *w, const float *b,
                       int n_out, float *y) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n_out, n_in, 1.0f, x, n_in, w, n_in,
              0.0f, y, n_out);
  if (b)
    for (int r = 0; r < rows; r++)
      for (int o = 0; o < n_out; o++)
        y[(size_t)r * (size_t)n_out + (size_t)o] += b[o];
}

void wd_ref_layernorm(const float *x, int rows, int d, const float *g, const float *b,
                      float *y) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * (size_t)d;
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < d; i++)
      mean += xr[i];
    mean /= d;
    for (int i = 0; i < d; i++)
      var += (xr[i] - mean) * (xr[i] - mean);
    var /= d;
    const double inv = 1.0 / sqrt(var + 1e-5);
    for (int i = 0; i < d; i++)
      y[(size_t)r * (size_t)d + (size_t)i] = (float)((xr[i] - mean) * inv * g[i] + b[i]);
  }
}

/* Where a pass keeps pre-softmax attention scores: head h's (nq, nk) block
 * goes to out + idx[h] * nq * nk when idx[h] >= 0 (idx has n_head entries). */
typedef struct {
  const int *idx;
  float *out;
} ref_keep_t;

/* Multi-head attention: q (nq, d), k/v (nk, d) -> out (nq, d). Causal masks
 * key j > query i. Products by OpenBLAS per head, softmax in double. */
static int ref_attention(const float *q, int nq, const float *k, const float *v, int nk, int d,
                         int n_head, int causal, const ref_keep_t *keep, float *out) {
  const int dh = d / n_head;
  const float scale = (float)(1.0 / sqrt((double)dh));
  float *s = malloc((size_t)nq * (size_t)nk * sizeof *s);
  if (!s)
    return WD_ENOMEM;
  for (int h = 0; h < n_head; h++) {
    /* S (nq, nk) = scale * Q_h K_h^T; heads are column slices of q, k, v. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, dh, scale, q + h * dh, d,
                k + h * dh, d, 0.0f, s, nk);
    if (keep && keep->idx[h] >= 0)
      memcpy(keep->out + (size_t)keep->idx[h] * (size_t)nq * (size_t)nk, s,
             (size_t)nq * (size_t)nk * sizeof *s);
    for (int i = 0; i < nq; i++) {
      float *row = s + (size_t)i * (size_t)nk;
      const int nj = causal ? i + 1 : nk;
      double mx = -INFINITY, sum = 0.0;
      for (int j = 0; j < nj; j++)
        if (row[j] > mx)
          mx = row[j];
      for (int j = 0; j < nj; j++)
        sum += exp((double)row[j] - mx);
      for (int j = 0; j < nk; j++)
        row[j] = j < nj ? (float)(exp((double)row[j] - mx) / sum) : 0.0f;
    }
    /* O_h (nq, dh) = S V_h */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, dh, nk, 1.0f, s, nk, v + h * dh,
                d, 0.0f, out + h * dh, d);
  }
  free(s);
  return 0;
}

void wd_ref_attn_free(wd_ref_attn_w_t *a) {
  free(a->wq), free(a->bq), free(a->wk), free(a->wv), free(a->bv);
  free(a->wo), free(a->bo), free(a->ln_g), free(a->ln_b);
}

int wd_ref_attn_load(const wd_model_t *m, const char *prefix, const char *ln, int d,
                     wd_ref_attn_w_t *a) {
  char n[256];
  const size_t dd = (size_t)d * (size_t)d;
#define LOAD(field, suffix, count)                                  \
  snprintf(n, sizeof n, "%s.%s", prefix, suffix);                   \
  a->field = wd_ref_tensor(m, n, count);
  LOAD(wq, "query.weight", dd);
  LOAD(bq, "query.bias", (size_t)d);
  LOAD(wk, "key.weight", dd);
  LOAD(wv, "value.weight", dd);
  LOAD(bv, "value.bias", (size_t)d);
  LOAD(wo, "out.weight", dd);
  LOAD(bo, "out.bias", (size_t)d);
#undef LOAD
  snprintf(n, sizeof n, "%s.weight", ln);
  a->ln_g = wd_ref_tensor(m, n, (size_t)d);
  snprintf(n, sizeof n, "%s.bias", ln);
  a->ln_b = wd_ref_tensor(m, n, (size_t)d);
  return (a->wq && a->bq && a->wk && a->wv && a->bv && a->wo && a->bo && a->ln_g && a->ln_b)
             ? 0
             : WD_EMODEL;
}

/* x (nq, d) += out(attn(LN(x) as queries; keys/values from kv_src or LN(x))). */
static int ref_attn_block(const wd_ref_attn_w_t *a, float *x, int nq, const float *kv_src, int nk,
                          int d, int n_head, int causal, const ref_keep_t *keep) {
  const size_t nqd = (size_t)nq * (size_t)d, nkd = (size_t)(kv_src ? nk : nq) * (size_t)d;
  float *h = malloc(nqd * 4), *q = malloc(nqd * 4), *k = malloc(nkd * 4), *v = malloc(nkd * 4);
  float *o = malloc(nqd * 4), *y = malloc(nqd * 4);
  int rc = (h && q && k && v && o && y) ? 0 : WD_ENOMEM;
  if (!rc) {
    wd_ref_layernorm(x, nq, d, a->ln_g, a->ln_b, h);
    ref_linear(h, nq, d, a->wq, a->bq, d, q);
    const float *src = kv_src ? kv_src : h;
    const int ns = kv_src ? nk : nq;
    ref_linear(src, ns, d, a->wk, NULL, d, k);
    ref_linear(src, ns, d, a->wv, a->bv, d, v);
    rc = ref_attention(q, nq, k, v, ns, d, n_head, causal, keep, o);
  }
  if (!rc) {
    ref_linear(o, nq, d, a->wo, a->bo, d, y);
    for (size_t i = 0; i < nqd; i++)
      x[i] += y[i];
  }
  free(h), free(q), free(k), free(v), free(o), free(y);
  return rc;
}

/* x (rows, d) += fc2(GELU(fc1(LN(x)))). */
static int ref_mlp_block(const wd_model_t *m, const char *prefix, float *x, int rows, int d) {
  char n[256];
  const size_t d4 = 4 * (size_t)d, rd = (size_t)rows * (size_t)d;
  snprintf(n, sizeof n, "%s.mlp_ln.weight", prefix);
  float *g = wd_ref_tensor(m, n, (size_t)d);
  snprintf(n, sizeof n, "%s.mlp_ln.bias", prefix);
  float *b = wd_ref_tensor(m, n, (size_t)d);
  snprintf(n, sizeof n, "%s.mlp.0.weight", prefix);
  float *w1 = wd_ref_tensor(m, n, d4 * (size_t)d);
  snprintf(n, sizeof n, "%s.mlp.0.bias", prefix);
  float *b1 = wd_ref_tensor(m, n, d4);
  snprintf(n, sizeof n, "%s.mlp.2.weight", prefix);
  float *w2 = wd_ref_tensor(m, n, d4 * (size_t)d);
  snprintf(n, sizeof n, "%s.mlp.2.bias", prefix);
  float *b2 = wd_ref_tensor(m, n, (size_t)d);
  float *h = malloc(rd * 4), *f = malloc(rd * 4 * 4), *y = malloc(rd * 4);
  int rc = (g && b && w1 && b1 && w2 && b2) ? 0 : WD_EMODEL;
  if (!rc && !(h && f && y))
    rc = WD_ENOMEM;
  if (!rc) {
    wd_ref_layernorm(x, rows, d, g, b, h);
    ref_linear(h, rows, d, w1, b1, (int)d4, f);
    for (size_t i = 0; i < rd * 4; i++)
      f[i] = (float)ref_gelu(f[i]);
    ref_linear(f, rows, (int)d4, w2, b2, d, y);
    for (size_t i = 0; i < rd; i++)
      x[i] += y[i];
  }
  free(g), free(b), free(w1), free(b1), free(w2), free(b2), free(h), free(f), free(y);
  return rc;
}

/* 1-D convolution, kernel 3, padding 1: in (n_in_frames, cin) row-major,
 * W (cout, cin, 3) as ggml stores it (ne = {3, cin, cout}); GELU after bias.
 * Done as im2col (n_out, cin * 3) times W^T so OpenBLAS does the work. */
static int ref_conv_gelu(const float *in, int n_in, int cin, const float *w, const float *b,
                         int cout, int stride, float *out, int n_out) {
  const size_t kc = (size_t)cin * 3;
  float *col = calloc((size_t)n_out * kc, sizeof *col);
  if (!col)
    return WD_ENOMEM;
  for (int t = 0; t < n_out; t++)
    for (int kk = 0; kk < 3; kk++) {
      const int src = t * stride + kk - 1;
      if (src < 0 || src >= n_in)
        continue; /* zero padding */
      for (int i = 0; i < cin; i++)
        col[(size_t)t * kc + (size_t)i * 3 + (size_t)kk] = in[(size_t)src * (size_t)cin + (size_t)i];
    }
  ref_linear(col, n_out, (int)kc, w, b, cout, out);
  for (size_t i = 0; i < (size_t)n_out * (size_t)cout; i++)
    out[i] = (float)ref_gelu(out[i]);
  free(col);
  return 0;
}

int wd_ref_encode(const wd_model_t *m, const float *mel, float *out) {
  const wd_hparams_t *hp = wd_model_hparams(m);
  const int d = hp->n_audio_state, nm = hp->n_mels, T = 2 * hp->n_audio_ctx, n = hp->n_audio_ctx;
  int rc = 0;
  float *melT = malloc((size_t)T * (size_t)nm * 4), *x1 = malloc((size_t)T * (size_t)d * 4);
  float *c1w = wd_ref_tensor(m, "encoder.conv1.weight", (size_t)d * (size_t)nm * 3);
  float *c1b = wd_ref_tensor(m, "encoder.conv1.bias", (size_t)d);
  float *c2w = wd_ref_tensor(m, "encoder.conv2.weight", (size_t)d * (size_t)d * 3);
  float *c2b = wd_ref_tensor(m, "encoder.conv2.bias", (size_t)d);
  float *pos = wd_ref_tensor(m, "encoder.positional_embedding", (size_t)n * (size_t)d);
  float *lg = wd_ref_tensor(m, "encoder.ln_post.weight", (size_t)d);
  float *lb = wd_ref_tensor(m, "encoder.ln_post.bias", (size_t)d);
  if (!(c1w && c1b && c2w && c2b && pos && lg && lb)) {
    rc = WD_EMODEL;
    goto out;
  }
  if (!(melT && x1)) {
    rc = WD_ENOMEM;
    goto out;
  }
  /* The mel is (n_mels, frames); the convolution wants frames as rows. */
  for (int i = 0; i < nm; i++)
    for (int t = 0; t < T; t++)
      melT[(size_t)t * (size_t)nm + (size_t)i] = mel[(size_t)i * (size_t)T + (size_t)t];
  rc = ref_conv_gelu(melT, T, nm, c1w, c1b, d, 1, x1, T);
  if (!rc)
    rc = ref_conv_gelu(x1, T, d, c2w, c2b, d, 2, out, n);
  if (rc)
    goto out;
  for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
    out[i] += pos[i];
  for (int l = 0; l < hp->n_audio_layer && !rc; l++) {
    char p[128], ln[128];
    wd_ref_attn_w_t a = { 0 };
    snprintf(p, sizeof p, "encoder.blocks.%d.attn", l);
    snprintf(ln, sizeof ln, "encoder.blocks.%d.attn_ln", l);
    rc = wd_ref_attn_load(m, p, ln, d, &a);
    if (!rc)
      rc = ref_attn_block(&a, out, n, NULL, 0, d, hp->n_audio_head, 0, NULL);
    wd_ref_attn_free(&a);
    snprintf(p, sizeof p, "encoder.blocks.%d", l);
    if (!rc)
      rc = ref_mlp_block(m, p, out, n, d);
  }
  if (!rc)
    wd_ref_layernorm(out, n, d, lg, lb, out);
out:
  free(melT), free(x1), free(c1w), free(c1b), free(c2w), free(c2b), free(pos), free(lg), free(lb);
  return rc;
}

int wd_ref_decode(const wd_model_t *m, const float *enc, const int32_t *tokens, int n,
                  float *logits) {
  return wd_ref_decode_qk(m, enc, tokens, n, logits, 0, NULL, NULL);
}

int wd_ref_decode_qk(const wd_model_t *m, const float *enc, const int32_t *tokens, int n,
                     float *logits, int n_heads, const int (*heads)[2], float *qk) {
  const wd_hparams_t *hp = wd_model_hparams(m);
  const int d = hp->n_text_state, nv = hp->n_vocab;
  if (n < 1 || n > hp->n_text_ctx || n_heads < 0 || (n_heads > 0 && !(heads && qk)))
    return WD_EINVAL;
  for (int k = 0; k < n_heads; k++)
    if (heads[k][0] < 0 || heads[k][0] >= hp->n_text_layer || heads[k][1] < 0 ||
        heads[k][1] >= hp->n_text_head)
      return WD_EINVAL;
  int rc = 0;
  float *emb = wd_ref_tensor(m, "decoder.token_embedding.weight", (size_t)nv * (size_t)d);
  float *pos = wd_ref_tensor(m, "decoder.positional_embedding", (size_t)hp->n_text_ctx * (size_t)d);
  float *lg = wd_ref_tensor(m, "decoder.ln.weight", (size_t)d);
  float *lb = wd_ref_tensor(m, "decoder.ln.bias", (size_t)d);
  float *x = malloc((size_t)n * (size_t)d * 4);
  if (!(emb && pos && lg && lb)) {
    rc = WD_EMODEL;
    goto out;
  }
  if (!x) {
    rc = WD_ENOMEM;
    goto out;
  }
  for (int i = 0; i < n; i++) {
    if (tokens[i] < 0 || tokens[i] >= nv) {
      rc = WD_EINVAL;
      goto out;
    }
    for (int c = 0; c < d; c++)
      x[(size_t)i * (size_t)d + (size_t)c] =
          emb[(size_t)tokens[i] * (size_t)d + (size_t)c] + pos[(size_t)i * (size_t)d + (size_t)c];
  }
  for (int l = 0; l < hp->n_text_layer && !rc; l++) {
    char p[128], ln[128];
    wd_ref_attn_w_t a = { 0 }, ca = { 0 };
    snprintf(p, sizeof p, "decoder.blocks.%d.attn", l);
    snprintf(ln, sizeof ln, "decoder.blocks.%d.attn_ln", l);
    rc = wd_ref_attn_load(m, p, ln, d, &a);
    if (!rc)
      rc = ref_attn_block(&a, x, n, NULL, 0, d, hp->n_text_head, 1, NULL);
    snprintf(p, sizeof p, "decoder.blocks.%d.cross_attn", l);
    snprintf(ln, sizeof ln, "decoder.blocks.%d.cross_attn_ln", l);
    if (!rc)
      rc = wd_ref_attn_load(m, p, ln, d, &ca);
    /* The requested heads of this layer keep their scores in qk[k]. */
    int idx[64], n_keep = 0;
    for (int h = 0; h < hp->n_text_head && h < 64; h++)
      idx[h] = -1;
    for (int k = 0; k < n_heads; k++)
      if (heads[k][0] == l && heads[k][1] < 64)
        idx[heads[k][1]] = k, n_keep++;
    const ref_keep_t keep = { .idx = idx, .out = qk };
    if (!rc)
      rc = ref_attn_block(&ca, x, n, enc, hp->n_audio_ctx, d, hp->n_text_head, 0,
                          n_keep ? &keep : NULL);
    wd_ref_attn_free(&a);
    wd_ref_attn_free(&ca);
    snprintf(p, sizeof p, "decoder.blocks.%d", l);
    if (!rc)
      rc = ref_mlp_block(m, p, x, n, d);
  }
  if (!rc) {
    wd_ref_layernorm(x, n, d, lg, lb, x);
    /* Tied output projection: logits = x . token_embedding^T. */
    ref_linear(x, n, d, emb, NULL, nv, logits);
  }
out:
  free(emb), free(pos), free(lg), free(lb), free(x);
  return rc;
}
