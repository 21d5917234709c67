/*
 * ref_engine.c - incremental reference decoder (see ref_engine.h).
 * ref: openai/whisper model.py TextDecoder with kv_cache.
 */
#include "ref_engine.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "whisper_ref.h"

typedef struct {
  wd_ref_attn_w_t self, cross;
  float *mlp_ln_g, *mlp_ln_b, *w1, *b1, *w2, *b2; /* w1 (4d, d), w2 (d, 4d) */
} ref_layer_t;

struct wd_ref_engine {
  wd_engine_t iface;
  const wd_model_t *m;
  int d, n_layer, n_head, n_ctx, n_audio_ctx, n_vocab, max_seqs, max_audio;
  float *emb, *pos, *ln_g, *ln_b; /* emb (n_vocab, d), pos (n_ctx, d) */
  ref_layer_t *layers;
  float *enc;       /* (max_audio, n_audio_ctx, d_audio) */
  float *xk, *xv;   /* cross K/V: (max_audio, n_layer, n_audio_ctx, d) */
  float *kc, *vc;   /* self K/V cache: (max_seqs + 1, n_layer, n_ctx, d); the last slot is
                     * align's scratch sequence */
  int *len, *audio; /* per sequence (max_seqs + 1): tokens so far, audio slot */
  float *logits;    /* (max_seqs, n_vocab) */
  float *x, *h, *q, *o, *f; /* scratch: (d) x4, (4d) */
};

void wd_ref_engine_free(wd_ref_engine_t *r) {
  if (!r)
    return;
  for (int l = 0; r->layers && l < r->n_layer; l++) {
    ref_layer_t *L = &r->layers[l];
    wd_ref_attn_free(&L->self);
    wd_ref_attn_free(&L->cross);
    free(L->mlp_ln_g), free(L->mlp_ln_b), free(L->w1), free(L->b1), free(L->w2), free(L->b2);
  }
  free(r->layers);
  free(r->emb), free(r->pos), free(r->ln_g), free(r->ln_b);
  free(r->enc), free(r->xk), free(r->xv), free(r->kc), free(r->vc);
  free(r->len), free(r->audio), free(r->logits);
  free(r->x), free(r->h), free(r->q), free(r->o), free(r->f);
  free(r);
}

/* y (n_out) = W (n_out, n_in) . x + b */
static void gemv(const float *w, const float *x, const float *b, int n_out, int n_in, float *y) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, n_out, n_in, 1.0f, w, n_in, x, 1, 0.0f, y, 1);
  if (b)
    for (int i = 0; i < n_out; i++)
      y[i] += b[i];
}

/* One query q (d) against n keys/values K, V (n, d) per head -> o (d). */
static void attend(const float *q, const float *K, const float *V, int n, int d, int n_head,
                   float *o) {
  const int dh = d / n_head;
  const double scale = 1.0 / sqrt((double)dh);
  double *s = malloc((size_t)(n + dh) * sizeof *s);
  if (!s) {
    for (int i = 0; i < d; i++)
      o[i] = NAN; /* poisons the logits: the caller's comparison fails */
    return;
  }
  double *sums = s + n; /* (dh) */
  for (int h = 0; h < n_head; h++) {
    double mx = -INFINITY, sum = 0.0;
    /* A key's score is its own sum over the columns in order; four keys
     * at a time keep four such chains in flight (the same roundings). */
    const float *qh = q + h * dh;
    int j = 0;
    for (; j + 4 <= n; j += 4) {
      const float *k0 = K + (size_t)j * (size_t)d + (size_t)(h * dh);
      const float *k1 = k0 + d, *k2 = k1 + d, *k3 = k2 + d;
      double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
      for (int c = 0; c < dh; c++) {
        a0 += (double)qh[c] * k0[c];
        a1 += (double)qh[c] * k1[c];
        a2 += (double)qh[c] * k2[c];
        a3 += (double)qh[c] * k3[c];
      }
      s[j] = a0 * scale, s[j + 1] = a1 * scale, s[j + 2] = a2 * scale, s[j + 3] = a3 * scale;
    }
    for (; j < n; j++) {
      const float *k0 = K + (size_t)j * (size_t)d + (size_t)(h * dh);
      double a0 = 0.0;
      for (int c = 0; c < dh; c++)
        a0 += (double)qh[c] * k0[c];
      s[j] = a0 * scale;
    }
    for (j = 0; j < n; j++)
      if (s[j] > mx)
        mx = s[j];
    for (j = 0; j < n; j++)
      sum += (s[j] = exp(s[j] - mx));
    /* Each column's sum still runs over j in order (the same roundings);
     * the values are read a row at a time, not a column at a time. */
    for (int c = 0; c < dh; c++)
      sums[c] = 0.0;
    for (j = 0; j < n; j++) {
      const float *v = V + (size_t)j * (size_t)d + (size_t)(h * dh);
      for (int c = 0; c < dh; c++)
        sums[c] += s[j] * v[c];
    }
    for (int c = 0; c < dh; c++)
      o[h * dh + c] = (float)(sums[c] / sum);
  }
  free(s);
}

static int ref_encode(void *self, int a, const float *mel) {
  wd_ref_engine_t *r = self;
  if (a < 0 || a >= r->max_audio)
    return WD_EINVAL;
  const size_t nd = (size_t)r->n_audio_ctx * (size_t)r->d;
  float *enc = r->enc + (size_t)a * nd;
  int rc = wd_ref_encode(r->m, mel, enc);
  if (rc < 0)
    return rc;
  /* Cross-attention K/V for every layer, once per window. */
  for (int l = 0; l < r->n_layer; l++) {
    const wd_ref_attn_w_t *c = &r->layers[l].cross;
    float *K = r->xk + ((size_t)a * (size_t)r->n_layer + (size_t)l) * nd;
    float *V = r->xv + ((size_t)a * (size_t)r->n_layer + (size_t)l) * nd;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r->n_audio_ctx, r->d, r->d, 1.0f, enc,
                r->d, c->wk, r->d, 0.0f, K, r->d);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r->n_audio_ctx, r->d, r->d, 1.0f, enc,
                r->d, c->wv, r->d, 0.0f, V, r->d);
    for (int i = 0; i < r->n_audio_ctx; i++)
      for (int j = 0; j < r->d; j++)
        V[(size_t)i * (size_t)r->d + (size_t)j] += c->bv[j];
  }
  return 0;
}

static int ref_seq_reset(void *self, int s, int a) {
  wd_ref_engine_t *r = self;
  if (s < 0 || s >= r->max_seqs || a < 0 || a >= r->max_audio)
    return WD_EINVAL;
  r->len[s] = 0;
  r->audio[s] = a;
  return 0;
}

/* What align() keeps of a step: the cross-attention scores of the heads
 * heads[0 .. n_heads) (layer, head) for this token, at qk[h][row][:] of
 * (n_heads, n_rows, n_audio_ctx). */
typedef struct {
  int n_heads;
  const int (*heads)[2];
  float *qk;
  int row, n_rows;
} ref_save_t;

static int ref_step_one(wd_ref_engine_t *r, int s, int32_t tok, float *logits,
                        const ref_save_t *sv) {
  const int d = r->d, p = r->len[s];
  if (tok < 0 || tok >= r->n_vocab || p >= r->n_ctx)
    return WD_EINVAL;
  float *x = r->x, *h = r->h, *q = r->q, *o = r->o;
  for (int i = 0; i < d; i++)
    x[i] = r->emb[(size_t)tok * (size_t)d + (size_t)i] + r->pos[(size_t)p * (size_t)d + (size_t)i];
  const size_t lstride = (size_t)r->n_ctx * (size_t)d;
  const size_t nd = (size_t)r->n_audio_ctx * (size_t)d;
  for (int l = 0; l < r->n_layer; l++) {
    const ref_layer_t *L = &r->layers[l];
    float *K = r->kc + ((size_t)s * (size_t)r->n_layer + (size_t)l) * lstride;
    float *V = r->vc + ((size_t)s * (size_t)r->n_layer + (size_t)l) * lstride;
    wd_ref_layernorm(x, 1, d, L->self.ln_g, L->self.ln_b, h);
    gemv(L->self.wq, h, L->self.bq, d, d, q);
    gemv(L->self.wk, h, NULL, d, d, K + (size_t)p * (size_t)d);
    gemv(L->self.wv, h, L->self.bv, d, d, V + (size_t)p * (size_t)d);
    attend(q, K, V, p + 1, d, r->n_head, o);
    gemv(L->self.wo, o, L->self.bo, d, d, h);
    for (int i = 0; i < d; i++)
      x[i] += h[i];
    wd_ref_layernorm(x, 1, d, L->cross.ln_g, L->cross.ln_b, h);
    gemv(L->cross.wq, h, L->cross.bq, d, d, q);
    const size_t ai = (size_t)r->audio[s] * (size_t)r->n_layer + (size_t)l;
    for (int k = 0; sv && k < sv->n_heads; k++) {
      if (sv->heads[k][0] != l)
        continue;
      /* The pre-softmax score q_h . k_h / sqrt(d_head), in double. */
      const int dh = d / r->n_head, c0 = sv->heads[k][1] * dh;
      const float *xk = r->xk + ai * nd;
      float *out = sv->qk + ((size_t)k * (size_t)sv->n_rows + (size_t)sv->row) *
                                (size_t)r->n_audio_ctx;
      for (int j = 0; j < r->n_audio_ctx; j++) {
        double acc = 0.0;
        for (int c = 0; c < dh; c++)
          acc += (double)q[c0 + c] * xk[(size_t)j * (size_t)d + (size_t)(c0 + c)];
        out[j] = (float)(acc / sqrt((double)dh));
      }
    }
    attend(q, r->xk + ai * nd, r->xv + ai * nd, r->n_audio_ctx, d, r->n_head, o);
    gemv(L->cross.wo, o, L->cross.bo, d, d, h);
    for (int i = 0; i < d; i++)
      x[i] += h[i];
    wd_ref_layernorm(x, 1, d, L->mlp_ln_g, L->mlp_ln_b, h);
    gemv(L->w1, h, L->b1, 4 * d, d, r->f);
    for (int i = 0; i < 4 * d; i++)
      r->f[i] = (float)(0.5 * r->f[i] * (1.0 + erf(r->f[i] / sqrt(2.0))));
    gemv(L->w2, r->f, L->b2, d, 4 * d, h);
    for (int i = 0; i < d; i++)
      x[i] += h[i];
  }
  wd_ref_layernorm(x, 1, d, r->ln_g, r->ln_b, h);
  gemv(r->emb, h, NULL, r->n_vocab, d, logits); /* tied output projection */
  r->len[s] = p + 1;
  return 0;
}

static int ref_step(void *self, int n, const int *seqs, const int32_t *tokens,
                    const float **ret_logits) {
  wd_ref_engine_t *r = self;
  if (n < 1 || n > r->max_seqs)
    return WD_EINVAL;
  for (int i = 0; i < n; i++) {
    if (seqs[i] < 0 || seqs[i] >= r->max_seqs)
      return WD_EINVAL;
    for (int j = 0; j < i; j++)
      if (seqs[j] == seqs[i])
        return WD_EINVAL; /* core/engine.h: slots are distinct */
  }
  for (int i = 0; i < n; i++) {
    int rc =
        ref_step_one(r, seqs[i], tokens[i], r->logits + (size_t)i * (size_t)r->n_vocab, NULL);
    if (rc < 0)
      return rc;
  }
  *ret_logits = r->logits;
  return 0;
}

static int ref_tokens_ok(const wd_ref_engine_t *r, int n, const int32_t *tokens) {
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= r->n_vocab)
      return 0;
  return 1;
}

/* n steps of one sequence, one after the other: the definition of prefill. */
static int ref_prefill(void *self, int s, int n, const int32_t *tokens,
                       const float **ret_logits) {
  wd_ref_engine_t *r = self;
  if (s < 0 || s >= r->max_seqs || n < 1 || n > r->iface.max_prefill || !tokens ||
      r->len[s] + n > r->n_ctx || !ref_tokens_ok(r, n, tokens))
    return WD_EINVAL;
  for (int i = 0; i < n; i++) {
    int rc = ref_step_one(r, s, tokens[i], r->logits, NULL);
    if (rc < 0)
      return rc;
  }
  *ret_logits = r->logits;
  return 0;
}

static int ref_seq_copy(void *self, int n, const int *dst, const int *src) {
  wd_ref_engine_t *r = self;
  if (n < 0 || n > r->max_seqs || (n > 0 && (!dst || !src)))
    return WD_EINVAL;
  for (int i = 0; i < n; i++) {
    if (dst[i] < 0 || dst[i] >= r->max_seqs || src[i] < 0 || src[i] >= r->max_seqs)
      return WD_EINVAL;
    for (int j = 0; j < i; j++)
      if (dst[j] == dst[i])
        return WD_EINVAL;
  }
  /* Every source as it was before the call, then every destination. */
  const size_t slot = (size_t)r->n_layer * (size_t)r->n_ctx * (size_t)r->d;
  float *tk = malloc((size_t)n * slot * sizeof *tk), *tv = malloc((size_t)n * slot * sizeof *tv);
  int *tl = malloc((size_t)n * sizeof *tl), *ta = malloc((size_t)n * sizeof *ta);
  if (n > 0 && !(tk && tv && tl && ta)) {
    free(tk), free(tv), free(tl), free(ta);
    return WD_ENOMEM;
  }
  for (int i = 0; i < n; i++) {
    memcpy(tk + (size_t)i * slot, r->kc + (size_t)src[i] * slot, slot * sizeof *tk);
    memcpy(tv + (size_t)i * slot, r->vc + (size_t)src[i] * slot, slot * sizeof *tv);
    tl[i] = r->len[src[i]];
    ta[i] = r->audio[src[i]];
  }
  for (int i = 0; i < n; i++) {
    memcpy(r->kc + (size_t)dst[i] * slot, tk + (size_t)i * slot, slot * sizeof *tk);
    memcpy(r->vc + (size_t)dst[i] * slot, tv + (size_t)i * slot, slot * sizeof *tv);
    r->len[dst[i]] = tl[i];
    r->audio[dst[i]] = ta[i];
  }
  free(tk), free(tv), free(tl), free(ta);
  return 0;
}

/* The tokens as a fresh sequence on the scratch slot (index max_seqs),
 * keeping the scores of the heads and each row's softmax over [0, n_text). */
static int ref_align(void *self, int a, int n, const int32_t *tokens, int n_text, int n_heads,
                     const int (*heads)[2], float *qk, float *probs) {
  wd_ref_engine_t *r = self;
  if (a < 0 || a >= r->max_audio || n < 1 || n > r->iface.max_prefill || !tokens ||
      !ref_tokens_ok(r, n, tokens) || n_text < 1 || n_text > r->n_vocab || n_heads < 0 ||
      (n_heads > 0 && (!heads || !qk)))
    return WD_EINVAL;
  for (int h = 0; h < n_heads; h++)
    if (heads[h][0] < 0 || heads[h][0] >= r->n_layer || heads[h][1] < 0 ||
        heads[h][1] >= r->n_head)
      return WD_EINVAL;
  const int s = r->max_seqs;
  r->len[s] = 0;
  r->audio[s] = a;
  float *lg = malloc((size_t)r->n_vocab * sizeof *lg);
  if (!lg)
    return WD_ENOMEM;
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    const ref_save_t sv = { .n_heads = n_heads, .heads = heads, .qk = qk, .row = i, .n_rows = n };
    rc = ref_step_one(r, s, tokens[i], lg, &sv);
    if (rc || !probs || i == n - 1)
      continue;
    /* openai timing.py: logits[:, :eot].softmax(-1) taken at the next token. */
    const int32_t t = tokens[i + 1];
    double mx = -INFINITY, sum = 0.0;
    for (int v = 0; v < n_text; v++)
      mx = lg[v] > mx ? lg[v] : mx;
    for (int v = 0; v < n_text; v++)
      sum += exp((double)lg[v] - mx);
    probs[i] = t < n_text ? (float)(exp((double)lg[t] - mx) / sum) : 0.0f;
  }
  free(lg);
  return rc;
}

int wd_ref_engine_new(const wd_model_t *m, int max_seqs, int max_audio, wd_ref_engine_t **ret) {
  const wd_hparams_t *hp = wd_model_hparams(m);
  wd_ref_engine_t *r = calloc(1, sizeof *r);
  if (!r)
    return WD_ENOMEM;
  /* The reference steps one row at a time; OpenBLAS's own threads would
   * only spin between its small products (on 2 cores that was half the
   * CPU time of the worker test, taken from the test ctest runs beside it). */
  openblas_set_num_threads(1);
  r->m = m;
  r->d = hp->n_text_state;
  r->n_layer = hp->n_text_layer;
  r->n_head = hp->n_text_head;
  r->n_ctx = hp->n_text_ctx;
  r->n_audio_ctx = hp->n_audio_ctx;
  r->n_vocab = hp->n_vocab;
  r->max_seqs = max_seqs;
  r->max_audio = max_audio;
  const size_t d = (size_t)r->d;
  int rc = 0;
  r->layers = calloc((size_t)r->n_layer, sizeof *r->layers);
  r->emb = wd_ref_tensor(m, "decoder.token_embedding.weight", (size_t)r->n_vocab * d);
  r->pos = wd_ref_tensor(m, "decoder.positional_embedding", (size_t)r->n_ctx * d);
  r->ln_g = wd_ref_tensor(m, "decoder.ln.weight", d);
  r->ln_b = wd_ref_tensor(m, "decoder.ln.bias", d);
  if (!r->layers || !r->emb || !r->pos || !r->ln_g || !r->ln_b)
    rc = WD_EMODEL;
  for (int l = 0; l < r->n_layer && !rc; l++) {
    char p[96], ln[96];
    ref_layer_t *L = &r->layers[l];
    snprintf(p, sizeof p, "decoder.blocks.%d.attn", l);
    snprintf(ln, sizeof ln, "decoder.blocks.%d.attn_ln", l);
    rc = wd_ref_attn_load(m, p, ln, r->d, &L->self);
    snprintf(p, sizeof p, "decoder.blocks.%d.cross_attn", l);
    snprintf(ln, sizeof ln, "decoder.blocks.%d.cross_attn_ln", l);
    if (!rc)
      rc = wd_ref_attn_load(m, p, ln, r->d, &L->cross);
    snprintf(p, sizeof p, "decoder.blocks.%d.mlp_ln.weight", l);
    L->mlp_ln_g = wd_ref_tensor(m, p, d);
    snprintf(p, sizeof p, "decoder.blocks.%d.mlp_ln.bias", l);
    L->mlp_ln_b = wd_ref_tensor(m, p, d);
    snprintf(p, sizeof p, "decoder.blocks.%d.mlp.0.weight", l);
    L->w1 = wd_ref_tensor(m, p, 4 * d * d);
    snprintf(p, sizeof p, "decoder.blocks.%d.mlp.0.bias", l);
    L->b1 = wd_ref_tensor(m, p, 4 * d);
    snprintf(p, sizeof p, "decoder.blocks.%d.mlp.2.weight", l);
    L->w2 = wd_ref_tensor(m, p, 4 * d * d);
    snprintf(p, sizeof p, "decoder.blocks.%d.mlp.2.bias", l);
    L->b2 = wd_ref_tensor(m, p, d);
    if (!rc && !(L->mlp_ln_g && L->mlp_ln_b && L->w1 && L->b1 && L->w2 && L->b2))
      rc = WD_EMODEL;
  }
  const size_t nd = (size_t)r->n_audio_ctx * (size_t)hp->n_audio_state;
  r->enc = malloc((size_t)max_audio * nd * sizeof(float));
  r->xk = malloc((size_t)max_audio * (size_t)r->n_layer * nd * sizeof(float));
  r->xv = malloc((size_t)max_audio * (size_t)r->n_layer * nd * sizeof(float));
  const size_t slots = (size_t)max_seqs + 1; /* + align's scratch */
  r->kc = malloc(slots * (size_t)r->n_layer * (size_t)r->n_ctx * d * sizeof(float));
  r->vc = malloc(slots * (size_t)r->n_layer * (size_t)r->n_ctx * d * sizeof(float));
  r->len = calloc(slots, sizeof *r->len);
  r->audio = calloc(slots, sizeof *r->audio);
  r->logits = malloc((size_t)max_seqs * (size_t)r->n_vocab * sizeof(float));
  r->x = malloc(d * 4), r->h = malloc(d * 4), r->q = malloc(d * 4), r->o = malloc(d * 4);
  r->f = malloc(4 * d * 4);
  if (!rc && !(r->enc && r->xk && r->xv && r->kc && r->vc && r->len && r->audio && r->logits &&
               r->x && r->h && r->q && r->o && r->f))
    rc = WD_ENOMEM;
  if (rc < 0) {
    wd_ref_engine_free(r);
    return rc;
  }
  r->iface = (wd_engine_t){
    .self = r, .n_vocab = r->n_vocab, .n_mels = hp->n_mels, .n_text_ctx = r->n_ctx,
    .max_seqs = max_seqs, .max_audio = max_audio,
    .encode = ref_encode, .seq_reset = ref_seq_reset, .step = ref_step,
    .max_prefill = 256, .prefill = ref_prefill, .seq_copy = ref_seq_copy, .align = ref_align,
    .n_audio_ctx = r->n_audio_ctx,
  };
  *ret = r;
  return 0;
}

const wd_engine_t *wd_ref_engine_iface(wd_ref_engine_t *r) { return &r->iface; }

const float *wd_ref_engine_encoded(const wd_ref_engine_t *r, int a) {
  return r->enc + (size_t)a * (size_t)r->n_audio_ctx * (size_t)wd_model_hparams(r->m)->n_audio_state;
}
