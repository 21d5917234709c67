/*
 * vk_plan.c - the engine's memory plan (see vk_plan.h).
 *
 * The activation list below mirrors the buffers vk_engine.c and
 * vk_engine_rows.c allocate; the engine checks at load that what it
 * allocated equals the plan (a warning names the difference), and
 * tests/gpu/test_engine_limits.c checks it too.
 */
#include "vk_plan.h"

#include <stdio.h>
#include <string.h>

#include "error.h"
#include "vk_push.h"
#include "vk_wquant.h"

#define MIB(b) ((double)(b) / 1048576.0)

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint64_t wd_vk_plan_weight_bytes(const wd_model_t *m) {
  uint64_t b = 0;
  /* As vk_weights.c packs them: each tensor in its device layout (quantized
   * blocks repacked word-aligned, vk_wquant.h) at a 256-byte boundary. */
  for (size_t i = 0; i < wd_model_n_tensors(m); i++) {
    const wd_tensor_t *t = wd_model_tensor_at(m, i);
    b += round_up(wd_vk_wquant_bytes(t->type, wd_tensor_n_elements(t)), 256);
  }
  return b;
}

typedef struct {
  const wd_vk_limits_t *lim;
  char *err;
  size_t err_len;
} ctx_t;

static int fail(ctx_t *c, int rc, const char *what, uint64_t bytes, const char *limit,
                uint64_t lim) {
  if (c->err && c->err_len)
    snprintf(c->err, c->err_len, "%s: %llu bytes exceed the device's %s (%llu)", what,
             (unsigned long long)bytes, limit, (unsigned long long)lim);
  return rc;
}

/* A range of `bytes` that some kernel binds as a storage buffer (storage)
 * and/or reads through texel views of texel_size-byte texels (texel_size 0:
 * never). */
static int check_bind(ctx_t *c, const char *what, uint64_t bytes, int storage,
                      uint64_t texel_size) {
  const wd_vk_limits_t *l = c->lim;
  if (storage && l->max_storage_range && bytes > l->max_storage_range)
    return fail(c, WD_ERANGE, what, bytes, "maxStorageBufferRange", l->max_storage_range);
  if (texel_size && l->max_texel_elements && bytes / texel_size > l->max_texel_elements)
    return fail(c, WD_ERANGE, what, bytes, "maxTexelBufferElements x texel size",
                l->max_texel_elements * texel_size);
  return 0;
}

/* n_layers layers of layer_bytes, each at a multiple of align, packed into
 * buffers of at most the allocation cap; buffer 0 at least min_first. */
static int layout(ctx_t *c, const char *what, uint64_t layer_bytes, uint32_t n_layers,
                  uint64_t align, uint64_t min_first, wd_vk_layout_t *o) {
  const uint64_t cap = c->lim->max_alloc ? min64(c->lim->max_alloc, WD_PLAN_BUF_MAX)
                                         : WD_PLAN_BUF_MAX;
  const uint64_t stride = round_up(layer_bytes, align);
  if (max64(stride, min_first) > cap)
    return fail(c, WD_ERANGE, what, max64(stride, min_first), "allocation limit", cap);
  const uint32_t per = (uint32_t)min64(n_layers, cap / stride);
  const uint32_t nb = (n_layers + per - 1) / per;
  *o = (wd_vk_layout_t){ .layer_bytes = layer_bytes, .stride = stride, .n_layers = n_layers,
                         .per_buf = per, .n_bufs = nb };
  o->buf_bytes = (uint64_t)per * stride;
  o->last_bytes = (uint64_t)(n_layers - (nb - 1) * per) * stride;
  if (nb == 1)
    o->buf_bytes = o->last_bytes = max64(o->last_bytes, min_first);
  else if (o->buf_bytes < min_first)
    return fail(c, WD_ERANGE, what, min_first, "allocation limit", cap);
  o->total = (uint64_t)(nb - 1) * o->buf_bytes + o->last_bytes;
  return 0;
}

/* The plan without the heap check's advice. */
static int plan_core(const wd_hparams_t *hp, uint64_t weight_bytes, const wd_vk_limits_t *lim,
                     int max_seqs, int max_audio, bool kv_f16, wd_vk_plan_t *p, char *err,
                     size_t err_len) {
  ctx_t c = { .lim = lim, .err = err, .err_len = err_len };
  memset(p, 0, sizeof *p);
  if (max_seqs < 1 || max_audio < 1 || hp->n_text_layer < 1 || hp->n_audio_head < 1)
    return WD_EINVAL;
  const uint64_t d = (uint64_t)hp->n_text_state, n = (uint64_t)hp->n_audio_ctx;
  const uint64_t C = (uint64_t)hp->n_text_ctx, L = (uint64_t)hp->n_text_layer;
  const uint64_t nm = (uint64_t)hp->n_mels, nh = (uint64_t)hp->n_audio_head;
  const uint64_t nv = (uint64_t)hp->n_vocab, T = 2 * n; /* mel frames per window */
  const uint64_t S = (uint64_t)max_seqs, A = (uint64_t)max_audio, P = WD_PLAN_PREFILL;
  const uint64_t e = kv_f16 ? 2 : 4;
  *p = (wd_vk_plan_t){ .max_seqs = max_seqs, .max_audio = max_audio, .kv_f16 = kv_f16,
                       .kv_elem = (uint32_t)e, .weights = weight_bytes };
  /* Encoder attention scores: as many heads at once as one binding holds. */
  uint64_t bind = WD_PLAN_SCORES_MAX;
  if (lim->max_storage_range)
    bind = min64(bind, lim->max_storage_range);
  if (lim->max_texel_elements)
    bind = min64(bind, lim->max_texel_elements * 16);
  if (lim->max_alloc)
    bind = min64(bind, lim->max_alloc);
  const uint64_t group = min64(nh, bind / (n * n * 4));
  if (group == 0)
    return fail(&c, WD_ERANGE, "one head's encoder attention scores", n * n * 4,
                "binding limits", bind);
  p->score_group = (uint32_t)group;
  /* Activations in floats: the sizes the engine allocates (each bound whole
   * as storage or f32 texels somewhere). R: decoder rows. */
  const uint64_t R = max64(S, P), ldv = (nv + 3) & ~3ull, rec = sizeof(wd_seq_t) / 4;
  static const char *const names[WD_ACT_N] = {
    [WD_ACT_DUMMY] = "dummy", [WD_ACT_MEL] = "mel", [WD_ACT_COL] = "im2col rows",
    [WD_ACT_X1] = "conv1 output", [WD_ACT_XA] = "encoder residual stream",
    [WD_ACT_HA] = "encoder normed rows", [WD_ACT_QA] = "encoder queries",
    [WD_ACT_KA] = "encoder keys", [WD_ACT_VA] = "encoder values",
    [WD_ACT_OA] = "encoder attention output", [WD_ACT_VT] = "encoder values, transposed",
    [WD_ACT_SCORES] = "encoder attention scores", [WD_ACT_FA] = "encoder MLP",
    [WD_ACT_STEP] = "step records", [WD_ACT_X] = "decoder residual rows",
    [WD_ACT_H] = "decoder normed rows", [WD_ACT_O] = "decoder attention rows",
    [WD_ACT_Q] = "cross queries", [WD_ACT_QKV] = "decoder qkv", [WD_ACT_F] = "decoder MLP",
    [WD_ACT_LOGITS] = "logits", [WD_ACT_QALL] = "prefill cross queries",
    [WD_ACT_CP_IN] = "seq_copy records", [WD_ACT_CP_OUT] = "seq_copy results",
    [WD_ACT_LGC] = "align logits chunk", [WD_ACT_MASK] = "vocabulary mask",
    [WD_ACT_STATS] = "align statistics", [WD_ACT_TGT] = "align targets",
    [WD_ACT_QK] = "align scores", [WD_ACT_PART] = "cross-attention partials",
  };
  uint64_t *f = p->act_floats;
  f[WD_ACT_DUMMY] = 64, f[WD_ACT_MEL] = nm * T, f[WD_ACT_COL] = max64(T * nm * 3, n * d * 3);
  f[WD_ACT_X1] = T * d;
  for (int i = WD_ACT_XA; i <= WD_ACT_VT; i++)
    f[i] = n * d;
  f[WD_ACT_SCORES] = group * n * n, f[WD_ACT_FA] = n * 4 * d;
  f[WD_ACT_STEP] = R * rec, f[WD_ACT_X] = f[WD_ACT_H] = f[WD_ACT_O] = R * d;
  f[WD_ACT_Q] = S * d, f[WD_ACT_QKV] = R * 3 * d, f[WD_ACT_F] = R * 4 * d;
  f[WD_ACT_LOGITS] = S * nv, f[WD_ACT_QALL] = L * P * d;
  f[WD_ACT_CP_IN] = f[WD_ACT_CP_OUT] = rec * S;
  f[WD_ACT_LGC] = WD_PLAN_LG_ROWS * ldv, f[WD_ACT_MASK] = nv;
  f[WD_ACT_STATS] = P * sizeof(wd_argmax_out_t) / 4, f[WD_ACT_TGT] = P;
  f[WD_ACT_QK] = WD_PLAN_QK_ROWS * n;
  f[WD_ACT_PART] = S * (uint64_t)hp->n_text_head * WD_PLAN_ATTN_SPLIT * WD_ATTN_PART;
  int rc = 0;
  for (int i = 0; i < WD_ACT_N && !rc; i++) {
    rc = check_bind(&c, names[i], f[i] * 4, 1, 16);
    if (!rc && lim->max_alloc && f[i] * 4 > lim->max_alloc)
      rc = fail(&c, WD_ERANGE, names[i], f[i] * 4, "maxMemoryAllocationSize", lim->max_alloc);
    p->act_bytes += f[i] * 4;
  }
  /* Caches: layers at offsets that suit every binding kind. */
  uint64_t align = max64(16, max64(lim->texel_align, lim->storage_align));
  const uint64_t self = S * C * d * e, block = n * d * e, al = P * d * e;
  if (!rc) rc = layout(&c, "a self-attention cache layer", self, (uint32_t)L, align, 0, &p->self);
  if (!rc) rc = layout(&c, "a cross-attention layer", A * block, (uint32_t)L, align, 0, &p->cross);
  if (!rc) rc = layout(&c, "the scratch cache", al, (uint32_t)L, align, self, &p->scratch);
  /* kv_append and kv_gather bind a self layer as storage, attention reads
   * it as texels; one window's cross block is a GEMM (or conversion)
   * output, the whole layer attention's and align's texels; the scratch is
   * both an align cache (per layer) and seq_copy's (its start, as storage). */
  if (!rc) rc = check_bind(&c, "a self-attention cache layer", self, 1, 4 * e);
  if (!rc) rc = check_bind(&c, "one window of a cross-attention layer", block, 1, 0);
  if (!rc) rc = check_bind(&c, "a cross-attention layer", A * block, 0, 4 * e);
  if (!rc) rc = check_bind(&c, "an align cache layer", al, 1, 4 * e);
  /* Windows are bound at multiples of block within a layer (1500 x d x e
   * bytes with d a multiple of 64: a multiple of 256, Vulkan's largest
   * alignment). */
  const uint64_t ba = max64(1, max64(lim->storage_align, lim->texel_align));
  if (!rc && block % ba)
    rc = fail(&c, WD_ERANGE, "one window of a cross-attention layer", block,
              "offset alignment", ba);
  p->act_bytes += 2 * p->scratch.total;
  p->self_bytes = 2 * p->self.total;
  p->cross_bytes = 2 * p->cross.total;
  p->total = p->weights + p->self_bytes + p->cross_bytes + p->act_bytes;
  p->heap = lim->heap_bytes;
  if (!rc && lim->heap_bytes && p->total > lim->heap_bytes)
    rc = WD_ENOMEM;
  return rc;
}

int wd_vk_plan_fit(const wd_hparams_t *hp, uint64_t weight_bytes, const wd_vk_limits_t *lim,
                   int max_seqs, int max_audio, bool kv_f16, int *ret_seqs, int *ret_audio) {
  wd_vk_plan_t p;
  for (int b = max_seqs > max_audio ? max_seqs : max_audio; b >= 1; b--) {
    const int s = max_seqs < b ? max_seqs : b, a = max_audio < b ? max_audio : b;
    if (plan_core(hp, weight_bytes, lim, s, a, kv_f16, &p, NULL, 0) == 0) {
      *ret_seqs = s;
      *ret_audio = a;
      return b;
    }
  }
  *ret_seqs = *ret_audio = 0;
  return 0;
}

int wd_vk_plan_make(const wd_hparams_t *hp, uint64_t weight_bytes, const wd_vk_limits_t *lim,
                    int max_seqs, int max_audio, bool kv_f16, wd_vk_plan_t *p, char *err,
                    size_t err_len) {
  const int rc = plan_core(hp, weight_bytes, lim, max_seqs, max_audio, kv_f16, p, err, err_len);
  if (rc != WD_ENOMEM || !err || !err_len)
    return rc;
  int n = snprintf(err, err_len,
                   "the model needs %.0f MiB of device memory at max_seqs %d, max_audio %d "
                   "(weights %.0f, self-attention KV %.0f, cross-attention KV %.0f, "
                   "activations %.0f MiB) but the largest device-local heap holds %.0f MiB; ",
                   MIB(p->total), max_seqs, max_audio, MIB(p->weights), MIB(p->self_bytes),
                   MIB(p->cross_bytes), MIB(p->act_bytes), MIB(p->heap));
  if (n < 0 || (size_t)n >= err_len)
    return rc;
  int s = 0, a = 0;
  const int b = wd_vk_plan_fit(hp, weight_bytes, lim, max_seqs, max_audio, kv_f16, &s, &a);
  if (b > 0) {
    wd_vk_plan_t q;
    (void)plan_core(hp, weight_bytes, lim, s, a, kv_f16, &q, NULL, 0);
    snprintf(err + n, err_len - (size_t)n,
             "the largest batch that fits is %d (max_seqs %d, max_audio %d: %.0f MiB)", b, s, a,
             MIB(q.total));
  } else {
    wd_vk_plan_t q;
    (void)plan_core(hp, weight_bytes, lim, 1, 1, kv_f16, &q, NULL, 0);
    snprintf(err + n, err_len - (size_t)n,
             "not even a batch of 1 fits (%.0f MiB)", MIB(q.total));
  }
  return rc;
}
