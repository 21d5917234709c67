/*
 * vk_engine_rows.c - the engine's operations over many rows of one sequence
 * and over whole caches: prefill, align and seq_copy (core/engine.h). The
 * engine's struct and shared helpers are in vk_engine_internal.h.
 *
 * prefill (one submit). A prompt of n tokens into slot s is n rows of one
 * sequence at consecutive positions. kv_append writes every row's K and V
 * before the self-attention runs, and attn_dec lets row b attend to keys
 * [0, len[b]) of its slot, so len[b] = pos[b] + 1 is the causal mask: the
 * step recordings already compute a prefill when the rows share a slot.
 * Up to max_seqs tokens, prefill replays the step recording of n rows (the
 * GEMV kernels: bit for bit what n step() calls give). Longer prompts run a
 * "rows" recording of P = 16, 32, 64, 128 or 256 rows that uses the GEMM
 * kernels (M = P) instead, reading every weight once for all rows. The n
 * real rows are the last ones, so the last token is always row P - 1 and
 * the logits GEMV reads that one row. The P - n padding rows before them
 * have pos = n_text_ctx, which kv_append skips and embed clamps, and len =
 * 0, for which attention writes zeros: they touch no cache and no real row
 * (every kernel is row-wise except attention, which reads only the cache).
 * Attention runs wd_vk_attn_record_rows: on GPUs 16 rows of the one
 * sequence per workgroup, each key and value read once for all 16.
 *
 * align (two submits). The same rows recording, bound to a scratch cache
 * of one sequence (kx/vx, WD_ENG_MAX_PREFILL rows per layer) instead of the
 * slots, runs the tokens; its cross-attention queries of every layer stay
 * in qall and its final LayerNorm covers every row. Then a short recording
 * made for this call (it depends on the heads, the audio slot and the
 * tokens; its descriptor sets were made at load) computes
 *   qk[h] = (q_l[:, head] . xk_l[a][:, head]^T) / 8     one GEMM per head,
 * the pre-softmax scores openai's hook saves (q and k scaled by
 * d_head^-0.25 each), and, WD_ENG_LG_ROWS rows at a time, the logits of
 * every row against the token embedding, their log-sum-exp over [0, n_text)
 * (the argmax kernel with an additive mask) and the logit of the next token
 * (a buffer copy of one float per row): probs = exp(logit - lse). The scores
 * are recomputed from the saved queries rather than saved by attn_dec's
 * WD_ATTN_SAVE_QK path so that the heads can change per call without
 * re-recording the forward pass and without a (rows, n_head, 1500) buffer
 * per layer. ref: openai/whisper timing.py find_alignment.
 *
 * seq_copy (one submit). kv_gather copies cache rows between two different
 * buffers. Layer by layer, the sources go to a scratch of max_seqs slots
 * (record j: slot j <- src[j]), then, after a barrier, from the scratch to
 * their destinations (slot dst[j] <- j): any permutation, cycles included,
 * reads every source before writing any destination, and the scratch holds
 * one layer, not the whole cache. One recording per number of copies.
 *
 * Threading: the GPU worker's thread only. Ownership: everything made here
 * belongs to the engine (sets in e->sets, the rest freed by
 * wd__eng_rows_free).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "vk_engine_internal.h"

static const uint32_t wd_eng_buckets[WD_ENG_N_BUCKETS] = { 16, 32, 64, 128, 256 };
_Static_assert(WD_ENG_MAX_PREFILL == 256, "the largest bucket is WD_ENG_MAX_PREFILL");
_Static_assert(WD_ENG_MAX_PREFILL % WD_ENG_LG_ROWS == 0, "logits chunks tile the rows");
_Static_assert(WD_ENG_QK_ROWS >= WD_ENG_MAX_PREFILL, "one head's scores fit the qk buffer");

static wd_vk_arg_t whole(wd_vk_buffer_t *b) { return wd__eng_whole(b); }

static wd_vk_arg_t slice(wd_vk_buffer_t *b, uint64_t off_floats, uint64_t n_floats) {
  return wd__eng_slice(b, off_floats, n_floats);
}

/* The GEMM whose B operand is the cross keys: f16 caches are read like
 * weights (f16 texels), f32 ones by the f32-B variant. */
static wd_vk_gemm_t *qk_gemm(const wd_vk_engine_t *e) {
  return e->plan.kv_f16 ? e->gemm : e->gemm_f32b;
}

/* Logits row stride of the align chunks: n_vocab rounded up to a texel. */
static uint32_t ldv(const wd_vk_engine_t *e) { return ((uint32_t)e->hp.n_vocab + 3u) & ~3u; }

/* Floats per layer of the main caches and of the align scratch. */
static uint64_t main_layer(const wd_vk_engine_t *e) {
  return (uint64_t)e->max_seqs * (uint64_t)e->hp.n_text_ctx * (uint64_t)e->hp.n_text_state;
}
static uint64_t al_layer(const wd_vk_engine_t *e) {
  return (uint64_t)WD_ENG_MAX_PREFILL * (uint64_t)e->hp.n_text_state;
}

/* ---- the rows recordings (prefill and align), recorded side by side ----- */

/* Every rows recording runs the same operations with the same bindings, but
 * for the cache (main slots or align scratch) and the number of rows; the
 * helpers below bind once and record into all of them, so the descriptor
 * sets cost what one recording's would. */
typedef struct {
  wd_vk_engine_t *e;
  int n;
  wd_vk_cmd_t *cmd[2 * WD_ENG_N_BUCKETS];
  uint32_t rows[2 * WD_ENG_N_BUCKETS];
  int al[2 * WD_ENG_N_BUCKETS]; /* over the align scratch (else the slots) */
  uint32_t d;
  int prof_k; /* the recording that is profiled (the largest prefill), or -1 */
} rows_ctx_t;

/* Ends a profiled operation of the profiled recording (after a barrier). */
static void rows_mark(rows_ctx_t *c, const char *kind) {
  wd_eng_prof_t *p = c->e->prof_pf;
  if (!p || c->prof_k < 0 || p->n >= WD_ENG_PROF_MAX)
    return;
  wd_vk_cmd_timestamp(c->cmd[c->prof_k], (uint32_t)(2 + p->n));
  p->kind[p->n++] = kind;
}

static void rows_barrier(rows_ctx_t *c, const char *kind) {
  for (int k = 0; k < c->n; k++)
    wd_vk_cmd_barrier(c->cmd[k]);
  rows_mark(c, kind);
}

/* Y[:, y_off:] (rows, ldy) (+)= X (rows, n_in) . W^T (+b) in every recording. */
static int rows_linear(rows_ctx_t *c, wd_vk_buffer_t *x, uint32_t n_in, const wd_vk_arg_t *w,
                       const wd_vk_arg_t *b, wd_vk_buffer_t *y, uint32_t y_off, uint32_t ldy,
                       uint32_t n_out, uint32_t flags, int barrier) {
  wd_vk_engine_t *e = c->e;
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t ax = whole(x), ay = whole(y), ab = b ? *b : whole(e->dummy);
  int rc = wd__eng_keep(e, wd_vk_gemm_bind(e->gemm_rows, &ax, w, &ab, &ay, &s), &s);
  for (int k = 0; k < c->n && !rc; k++) {
    const wd_pc_gemm_t pc = { .M = c->rows[k], .N = n_out, .K = n_in, .lda = n_in, .ldb = n_in,
                              .ldc = ldy, .c_off = y_off,
                              .flags = flags | (b ? WD_GEMM_BIAS : 0u), .alpha = 1.0f };
    rc = wd_vk_gemm_record(e->gemm_rows, c->cmd[k], s, &pc, 1);
  }
  if (barrier)
    rows_barrier(c, "gemm-linear");
  return rc;
}

/* LayerNorm x -> h over every row; with last_only, the prefill recordings
 * normalise their last row only (the one whose logits they return). */
static int rows_norm(rows_ctx_t *c, const char *fmt, int l, int last_only)
    __attribute__((format(printf, 2, 0)));

static int rows_norm(rows_ctx_t *c, const char *fmt, int l, int last_only) {
  wd_vk_engine_t *e = c->e;
  wd_vk_arg_t g, b;
  int rc = wd__eng_norm_args(e, fmt, l, &g, &b);
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t ax = whole(e->x), ah = whole(e->h);
  if (!rc) rc = wd__eng_keep(e, wd_vk_norm_bind(e->norm, &ax, &ah, &g, &b, &s), &s);
  for (int k = 0; k < c->n && !rc; k++) {
    const int one = last_only && !c->al[k];
    const uint32_t off = one ? (c->rows[k] - 1) * c->d : 0;
    const wd_pc_norm_t pc = { .n_rows = one ? 1 : c->rows[k], .d = c->d, .x_off = off,
                              .ldx = c->d, .y_off = off, .ldy = c->d, .eps = 1e-5f };
    rc = wd_vk_norm_record(e->norm, c->cmd[k], s, &pc);
  }
  rows_barrier(c, "layernorm");
  return rc;
}

/* Appends every row's K and V (in qkv) to its cache, then self-attention. */
static int rows_self_attn(rows_ctx_t *c, int l) {
  wd_vk_engine_t *e = c->e;
  const uint32_t d = c->d, C = (uint32_t)e->hp.n_text_ctx;
  const wd_vk_arg_t st = whole(e->step), aqkv = whole(e->qkv), ao = whole(e->o);
  wd_vk_dset_t *app[2] = { NULL, NULL }, *att[2] = { NULL, NULL };
  int rc = 0;
  for (int i = 0; i < 2 && !rc; i++) {
    /* Layer l of the slots' caches (i = 0) or of the align scratch (i = 1). */
    const wd_vk_arg_t k = wd_vk_layers_arg(i ? e->kx : e->kc, (uint32_t)l, 0, 0);
    const wd_vk_arg_t v = wd_vk_layers_arg(i ? e->vx : e->vc, (uint32_t)l, 0, 0);
    rc = wd__eng_keep(e, wd_vk_kv_bind_append(e->kv, &st, &aqkv, &k, &v, &app[i]), &app[i]);
    if (!rc)
      rc = wd__eng_keep(e, wd_vk_attn_bind_rows(e->attn, &st, &aqkv, &k, &v, &ao, &att[i]),
                        &att[i]);
  }
  for (int k = 0; k < c->n && !rc; k++) {
    const int al = c->al[k];
    /* The align scratch holds one sequence of WD_ENG_MAX_PREFILL rows per layer. */
    const uint32_t n_ctx = al ? WD_ENG_MAX_PREFILL : C;
    const wd_pc_kv_t pk = { .d = d, .n_ctx = n_ctx, .in_off = d, .v_in_off = 2 * d,
                            .ldi = 3 * d, .cache_off = 0 };
    rc = wd_vk_kv_record_append(e->kv, c->cmd[k], app[al], &pk, c->rows[k]);
    /* Every row's key is in the cache before any row attends. */
    wd_vk_cmd_barrier(c->cmd[k]);
    const wd_pc_attn_t pa = { .n_head = (uint32_t)e->hp.n_text_head, .n_ctx = n_ctx,
                              .q_off = 0, .ldq = 3 * d, .kv_off = 0, .ldkv = d, .o_off = 0,
                              .ldo = d, .scale = 0.125f /* 1 / sqrt(64) */ };
    if (!rc) rc = wd_vk_attn_record_rows(e->attn, c->cmd[k], att[al], &pa, c->rows[k]);
  }
  rows_barrier(c, "attn-self");
  return rc;
}

/* Cross-attention of every row over its audio slot, queries from qall[l]. */
static int rows_cross_attn(rows_ctx_t *c, int l) {
  wd_vk_engine_t *e = c->e;
  const uint32_t d = c->d, na = (uint32_t)e->hp.n_audio_ctx;
  const wd_vk_arg_t st = whole(e->step), aq = whole(e->qall);
  const wd_vk_arg_t ak = wd_vk_layers_arg(e->xk, (uint32_t)l, 0, 0);
  const wd_vk_arg_t av = wd_vk_layers_arg(e->xv, (uint32_t)l, 0, 0);
  const wd_vk_arg_t ao = whole(e->o);
  wd_vk_dset_t *s = NULL;
  int rc = wd__eng_keep(e, wd_vk_attn_bind_rows(e->attn, &st, &aq, &ak, &av, &ao, &s), &s);
  const wd_pc_attn_t pa = {
    .n_head = (uint32_t)e->hp.n_text_head, .n_ctx = na, .n_keys = na, .flags = WD_ATTN_CROSS,
    .q_off = (uint32_t)((uint64_t)l * al_layer(e)), .ldq = d,
    .kv_off = 0, .ldkv = d,
    .o_off = 0, .ldo = d, .scale = 0.125f,
  };
  for (int k = 0; k < c->n && !rc; k++)
    rc = wd_vk_attn_record_rows(e->attn, c->cmd[k], s, &pa, c->rows[k]);
  rows_barrier(c, "attn-cross");
  return rc;
}

static int rows_layer(rows_ctx_t *c, int l) {
  wd_vk_engine_t *e = c->e;
  const uint32_t d = c->d;
  wd_vk_arg_t wq, bq, wk, wv, bv, wo, bo, cq, cbq, co, cbo, w1, b1, w2, b2;
  int rc = wd__eng_wt(e, &wq, "decoder.blocks.%d.attn.query.weight", l);
  if (!rc) rc = wd__eng_wt(e, &bq, "decoder.blocks.%d.attn.query.bias", l);
  if (!rc) rc = wd__eng_wt(e, &wk, "decoder.blocks.%d.attn.key.weight", l);
  if (!rc) rc = wd__eng_wt(e, &wv, "decoder.blocks.%d.attn.value.weight", l);
  if (!rc) rc = wd__eng_wt(e, &bv, "decoder.blocks.%d.attn.value.bias", l);
  if (!rc) rc = wd__eng_wt(e, &wo, "decoder.blocks.%d.attn.out.weight", l);
  if (!rc) rc = wd__eng_wt(e, &bo, "decoder.blocks.%d.attn.out.bias", l);
  if (!rc) rc = wd__eng_wt(e, &cq, "decoder.blocks.%d.cross_attn.query.weight", l);
  if (!rc) rc = wd__eng_wt(e, &cbq, "decoder.blocks.%d.cross_attn.query.bias", l);
  if (!rc) rc = wd__eng_wt(e, &co, "decoder.blocks.%d.cross_attn.out.weight", l);
  if (!rc) rc = wd__eng_wt(e, &cbo, "decoder.blocks.%d.cross_attn.out.bias", l);
  if (!rc) rc = wd__eng_wt(e, &w1, "decoder.blocks.%d.mlp.0.weight", l);
  if (!rc) rc = wd__eng_wt(e, &b1, "decoder.blocks.%d.mlp.0.bias", l);
  if (!rc) rc = wd__eng_wt(e, &w2, "decoder.blocks.%d.mlp.2.weight", l);
  if (!rc) rc = wd__eng_wt(e, &b2, "decoder.blocks.%d.mlp.2.bias", l);
  /* self-attention: q, k, v are independent, one barrier after the three */
  if (!rc) rc = rows_norm(c, "decoder.blocks.%d.attn_ln", l, 0);
  if (!rc) rc = rows_linear(c, e->h, d, &wq, &bq, e->qkv, 0, 3 * d, d, 0, 0);
  if (!rc) rc = rows_linear(c, e->h, d, &wk, NULL, e->qkv, d, 3 * d, d, 0, 0);
  if (!rc) rc = rows_linear(c, e->h, d, &wv, &bv, e->qkv, 2 * d, 3 * d, d, 0, 1);
  if (!rc) rc = rows_self_attn(c, l);
  if (!rc) rc = rows_linear(c, e->o, d, &wo, &bo, e->x, 0, d, d, WD_GEMM_ACCUMULATE, 1);
  /* cross-attention; the queries stay in qall[l] for align's scores */
  const uint32_t q_off = (uint32_t)((uint64_t)l * al_layer(e));
  if (!rc) rc = rows_norm(c, "decoder.blocks.%d.cross_attn_ln", l, 0);
  if (!rc) rc = rows_linear(c, e->h, d, &cq, &cbq, e->qall, q_off, d, d, 0, 1);
  if (!rc) rc = rows_cross_attn(c, l);
  if (!rc) rc = rows_linear(c, e->o, d, &co, &cbo, e->x, 0, d, d, WD_GEMM_ACCUMULATE, 1);
  /* MLP */
  if (!rc) rc = rows_norm(c, "decoder.blocks.%d.mlp_ln", l, 0);
  if (!rc) rc = rows_linear(c, e->h, d, &w1, &b1, e->f, 0, 4 * d, 4 * d, WD_GEMM_GELU, 1);
  if (!rc) rc = rows_linear(c, e->f, 4 * d, &w2, &b2, e->x, 0, d, d, WD_GEMM_ACCUMULATE, 1);
  return rc;
}

static int rec_rows(rows_ctx_t *c) {
  wd_vk_engine_t *e = c->e;
  const uint32_t d = c->d, nv = (uint32_t)e->hp.n_vocab;
  int rc = 0;
  for (int k = 0; k < c->n && !rc; k++) {
    rc = wd_vk_cmd_begin(c->cmd[k]);
    wd_vk_cmd_timestamp(c->cmd[k], 0);
  }
  wd_vk_arg_t emb, pos;
  if (!rc) rc = wd__eng_wt(e, &emb, "decoder.token_embedding.weight", 0);
  if (!rc) rc = wd__eng_wt(e, &pos, "decoder.positional_embedding", 0);
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t st = whole(e->step), ax = whole(e->x);
  if (!rc) rc = wd__eng_keep(e, wd_vk_misc_bind_embed(e->misc, &st, &emb, &pos, &ax, &s), &s);
  const wd_pc_embed_t pe = { .d = d, .ldx = d, .n_vocab = nv,
                             .n_pos = (uint32_t)e->hp.n_text_ctx };
  for (int k = 0; k < c->n && !rc; k++)
    rc = wd_vk_misc_record_embed(e->misc, c->cmd[k], s, &pe, c->rows[k]);
  rows_barrier(c, "embed");
  for (int l = 0; l < e->hp.n_text_layer && !rc; l++)
    rc = rows_layer(c, l);
  if (!rc) rc = rows_norm(c, "decoder.ln", 0, 1);
  /* Prefill: the logits of the last row into row 0 of the step's logits. */
  s = NULL;
  const wd_vk_arg_t ah = whole(e->h), alg = whole(e->logits), dm = whole(e->dummy);
  if (!rc) rc = wd__eng_keep(e, wd_vk_gemv_bind(e->gemv, d, 1, &ah, &emb, &dm, &alg, &s), &s);
  for (int k = 0; k < c->n && !rc; k++) {
    if (c->al[k])
      continue;
    const wd_pc_gemv_t pc = { .N = nv, .K = d, .nb = 1, .x_off = (c->rows[k] - 1) * d,
                              .ldx = d, .ldy = nv, .alpha = 1.0f };
    rc = wd_vk_gemv_record(e->gemv, c->cmd[k], s, &pc);
    if (!rc) rc = wd__eng_rec_readback(c->cmd[k], e->logits, e->lg_rb, (uint64_t)nv * 4);
  }
  rows_mark(c, "logits");
  int rc2 = 0;
  for (int k = 0; k < c->n; k++) {
    wd_vk_cmd_timestamp(c->cmd[k], 1);
    const int r = wd_vk_cmd_end(c->cmd[k]);
    if (!rc2)
      rc2 = r;
  }
  return rc ? rc : rc2;
}

/* ---- seq_copy recordings ------------------------------------------------- */

/* cp_cmd[k - 1]: per layer, k records kc/vc -> scratch, barrier, k records
 * scratch -> kc/vc, barrier (the next layer overwrites the scratch). */
static int rec_copy(wd_vk_engine_t *e, wd_vk_dset_t *const *set_in,
                    wd_vk_dset_t *const *set_out, uint32_t k) {
  wd_vk_cmd_t *cmd = e->cp_cmd[k - 1];
  const wd_pc_kv_t pc = { .d = (uint32_t)e->hp.n_text_state,
                          .n_ctx = (uint32_t)e->hp.n_text_ctx, .cache_off = 0,
                          .layer_stride = (uint32_t)main_layer(e) };
  int rc = wd_vk_cmd_begin(cmd);
  wd_vk_cmd_timestamp(cmd, 0);
  for (int l = 0; l < e->hp.n_text_layer && !rc; l++) {
    rc = wd_vk_kv_record_gather(e->kv, cmd, set_in[l], &pc, k, 1);
    wd_vk_cmd_barrier(cmd);
    if (!rc) rc = wd_vk_kv_record_gather(e->kv, cmd, set_out[l], &pc, k, 1);
    wd_vk_cmd_barrier(cmd);
  }
  wd_vk_cmd_timestamp(cmd, 1);
  const int rc2 = wd_vk_cmd_end(cmd);
  return rc ? rc : rc2;
}

static int new_copies(wd_vk_engine_t *e) {
  const int L = e->hp.n_text_layer;
  const uint64_t per = main_layer(e) * e->plan.kv_elem; /* bytes of one layer of the slots */
  wd_vk_dset_t **in = calloc((size_t)L, sizeof *in), **out = calloc((size_t)L, sizeof *out);
  int rc = in && out ? 0 : WD_ENOMEM;
  const wd_vk_arg_t ci = whole(e->cp_in), co = whole(e->cp_out);
  /* The scratch's start holds one layer of every slot (plan.scratch). */
  const wd_vk_arg_t xk = wd_vk_layers_head(e->kx, per), xv = wd_vk_layers_head(e->vx, per);
  for (int l = 0; l < L && !rc; l++) {
    const wd_vk_arg_t k = wd_vk_layers_arg(e->kc, (uint32_t)l, 0, 0);
    const wd_vk_arg_t v = wd_vk_layers_arg(e->vc, (uint32_t)l, 0, 0);
    rc = wd__eng_keep(e, wd_vk_kv_bind_gather(e->kv, &ci, &k, &v, &xk, &xv, &in[l]), &in[l]);
    if (!rc)
      rc = wd__eng_keep(e, wd_vk_kv_bind_gather(e->kv, &co, &xk, &xv, &k, &v, &out[l]), &out[l]);
  }
  for (int k = 1; k <= e->max_seqs && !rc; k++)
    if (!(rc = wd_vk_cmd_new(e->dev, 2, &e->cp_cmd[k - 1])))
      rc = rec_copy(e, in, out, (uint32_t)k);
  free(in);
  free(out);
  return rc;
}

/* ---- construction -------------------------------------------------------- */

int wd__eng_rows_new(wd_vk_engine_t *e) {
  const wd_hparams_t *hp = &e->hp;
  const uint64_t d = (uint64_t)hp->n_text_state, L = (uint64_t)hp->n_text_layer;
  const wd_vk_mem_t D = WD_VK_MEM_DEVICE, H = WD_VK_MEM_HOST, R = D; /* read back by copies */
  int rc;
  if ((rc = wd__eng_act(e, WD_ACT_QALL, D, &e->qall)) ||
      (rc = wd_vk_layers_new(e->dev, &e->plan.scratch, &e->kx)) ||
      (rc = wd_vk_layers_new(e->dev, &e->plan.scratch, &e->vx)) ||
      (rc = wd__eng_act(e, WD_ACT_CP_IN, H, &e->cp_in)) ||
      (rc = wd__eng_act(e, WD_ACT_CP_OUT, H, &e->cp_out)) ||
      (rc = wd__eng_act(e, WD_ACT_LGC, D, &e->lgc)) ||
      (rc = wd__eng_act(e, WD_ACT_MASK, H, &e->mask)) ||
      (rc = wd__eng_act(e, WD_ACT_STATS, R, &e->stats)) ||
      (rc = wd__eng_act(e, WD_ACT_TGT, R, &e->tgt)) ||
      (rc = wd__eng_act(e, WD_ACT_QK, R, &e->qk)))
    return rc;
  e->act_bytes += wd_vk_layers_bytes(e->kx) + wd_vk_layers_bytes(e->vx);
  e->cp_cmd = calloc((size_t)e->max_seqs, sizeof *e->cp_cmd);
  if (!e->cp_cmd)
    return WD_ENOMEM;
  /* Prefill recordings only where n > max_seqs can land (shorter prompts
   * replay the step recordings); align recordings for every size. */
  rows_ctx_t c = { .e = e, .d = (uint32_t)d, .prof_k = -1 };
  e->n_buckets = WD_ENG_N_BUCKETS;
  /* With profile, the largest prefill recording has a timestamp per operation. */
  if (e->opts.profile && !(e->prof_pf = calloc(1, sizeof *e->prof_pf)))
    return WD_ENOMEM;
  for (int k = 0; k < WD_ENG_N_BUCKETS && !rc; k++) {
    e->bucket[k] = wd_eng_buckets[k];
    const int prof = e->prof_pf && k == WD_ENG_N_BUCKETS - 1;
    if (e->bucket[k] > (uint32_t)e->max_seqs &&
        !(rc = wd_vk_cmd_new(e->dev, prof ? 2 + WD_ENG_PROF_MAX : 2, &e->pf_cmd[k]))) {
      c.prof_k = prof ? c.n : c.prof_k;
      c.cmd[c.n] = e->pf_cmd[k], c.rows[c.n] = e->bucket[k], c.al[c.n++] = 0;
    }
    if (!rc && !(rc = wd_vk_cmd_new(e->dev, 2, &e->al_cmd[k])))
      c.cmd[c.n] = e->al_cmd[k], c.rows[c.n] = e->bucket[k], c.al[c.n++] = 1;
  }
  if (!rc) rc = rec_rows(&c);
  if (!rc) rc = new_copies(e);
  /* The align tail's sets; its recording is made per call. */
  wd_vk_arg_t emb;
  const wd_vk_arg_t aqall = whole(e->qall), dm = whole(e->dummy);
  const wd_vk_arg_t aqk = whole(e->qk), ah = whole(e->h), algc = whole(e->lgc);
  const wd_vk_arg_t amask = whole(e->mask);
  if (!rc) rc = wd__eng_wt(e, &emb, "decoder.token_embedding.weight", 0);
  if (!rc && !(e->set_qk = calloc(L, sizeof *e->set_qk)))
    rc = WD_ENOMEM;
  for (uint32_t l = 0; l < L && !rc; l++) {
    const wd_vk_arg_t axk = wd_vk_layers_arg(e->xk, l, 0, 0);
    rc = wd__eng_keep(e, wd_vk_gemm_bind(qk_gemm(e), &aqall, &axk, &dm, &aqk, &e->set_qk[l]),
                      &e->set_qk[l]);
  }
  if (!rc)
    rc = wd__eng_keep(e, wd_vk_gemm_bind(e->gemm, &ah, &emb, &dm, &algc, &e->set_lg),
                      &e->set_lg);
  const uint64_t per = WD_ENG_LG_ROWS * sizeof(wd_argmax_out_t) / 4;
  for (uint32_t i = 0; i < WD_ENG_MAX_PREFILL / WD_ENG_LG_ROWS && !rc; i++) {
    const wd_vk_arg_t out = slice(e->stats, i * per, per);
    rc = wd__eng_keep(e, wd_vk_misc_bind_argmax(e->misc, &algc, &amask, &out, &e->set_am[i]),
                      &e->set_am[i]);
  }
  if (!rc) rc = wd_vk_cmd_new(e->dev, 2, &e->al_tail);
  return rc;
}

void wd__eng_rows_free(wd_vk_engine_t *e) {
  for (int k = 0; k < WD_ENG_N_BUCKETS; k++) {
    wd_vk_cmd_free(e->pf_cmd[k]);
    wd_vk_cmd_free(e->al_cmd[k]);
  }
  wd_vk_cmd_free(e->al_tail);
  for (int k = 0; e->cp_cmd && k < e->max_seqs; k++)
    wd_vk_cmd_free(e->cp_cmd[k]);
  free(e->cp_cmd);
  wd_vk_buffer_t *bufs[] = { e->qall, e->cp_in, e->cp_out, e->lgc,
                             e->mask, e->stats, e->tgt,    e->qk };
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    wd_vk_buffer_free(bufs[i]);
  wd_vk_layers_free(e->kx);
  wd_vk_layers_free(e->vx);
  free(e->set_qk); /* the sets themselves are in e->sets */
  free(e->prof_pf);
  e->prof_pf = NULL;
}

/* ---- operations ---------------------------------------------------------- */

/* The smallest bucket of at least n rows whose recording exists in cmds. */
static int bucket_for(const wd_vk_engine_t *e, wd_vk_cmd_t *const *cmds, int n) {
  for (int k = 0; k < e->n_buckets; k++)
    if (cmds[k] && e->bucket[k] >= (uint32_t)n)
      return k;
  return -1;
}

/* Writes the records of a rows recording of P rows: n tokens at positions
 * pos0.., on cache slot `slot` and audio slot a, after P - n padding rows. */
static int write_rows(wd_vk_engine_t *e, uint32_t P, int n, const int32_t *tokens, int pos0,
                      int slot, int a) {
  wd_seq_t *sp = wd_vk_buffer_map(e->step);
  if (!sp)
    return WD_EINTERNAL; /* host-visible by construction */
  const uint32_t pad = P - (uint32_t)n;
  for (uint32_t b = 0; b < P; b++) {
    const int i = (int)b - (int)pad;
    sp[b] = b < pad ? (wd_seq_t){ .token = 0, .pos = (uint32_t)e->hp.n_text_ctx, .len = 0,
                                  .audio = (uint32_t)a, .src = (uint32_t)slot,
                                  .slot = (uint32_t)slot }
                    : (wd_seq_t){ .token = (uint32_t)tokens[i], .pos = (uint32_t)(pos0 + i),
                                  .len = (uint32_t)(pos0 + i + 1), .audio = (uint32_t)a,
                                  .src = (uint32_t)slot, .slot = (uint32_t)slot };
  }
  return 0;
}

static int tokens_ok(const wd_vk_engine_t *e, int n, const int32_t *tokens) {
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= e->hp.n_vocab)
      return 0;
  return 1;
}

int wd__eng_prefill(void *self, int s, int n, const int32_t *tokens, const float **ret_logits) {
  wd_vk_engine_t *e = self;
  if (e->lost)
    return WD_EDEVLOST;
  if (s < 0 || s >= e->max_seqs || n < 1 || n > (int)WD_ENG_MAX_PREFILL || !tokens ||
      !ret_logits || e->len[s] + n > e->hp.n_text_ctx || !e->encoded[e->audio[s]] ||
      !tokens_ok(e, n, tokens))
    return WD_EINVAL;
  wd_vk_cmd_t *cmd;
  size_t row;
  int rc;
  if (n <= e->max_seqs) {
    /* Row i is token i of slot s: the step recording of n rows does it. */
    cmd = e->step_cmd[n - 1];
    row = (size_t)n - 1;
    rc = write_rows(e, (uint32_t)n, n, tokens, e->len[s], s, e->audio[s]);
  } else {
    const int k = bucket_for(e, e->pf_cmd, n);
    if (k < 0)
      return WD_EINTERNAL; /* every n above max_seqs has a recording */
    cmd = e->pf_cmd[k];
    row = 0;
    rc = write_rows(e, e->bucket[k], n, tokens, e->len[s], s, e->audio[s]);
  }
  if (!rc) rc = wd__eng_submit(e, cmd);
  if (rc < 0)
    return rc;
  e->prefill_ms = wd__eng_elapsed_ms(cmd);
  e->len[s] += n;
  const float *lg = wd__eng_host(e->lg_rb, (row + 1) * (uint64_t)e->hp.n_vocab * 4);
  if (!lg)
    return WD_EINTERNAL;
  *ret_logits = lg + row * (size_t)e->hp.n_vocab;
  return 0;
}

int wd__eng_seq_copy(void *self, int n, const int *dst, const int *src) {
  wd_vk_engine_t *e = self;
  if (e->lost)
    return WD_EDEVLOST;
  if (n < 0 || n > e->max_seqs || (n > 0 && (!dst || !src)))
    return WD_EINVAL;
  unsigned used = 0; /* bit s: slot s is a destination (max_seqs <= 16) */
  for (int i = 0; i < n; i++) {
    if (dst[i] < 0 || dst[i] >= e->max_seqs || src[i] < 0 || src[i] >= e->max_seqs ||
        (used >> dst[i]) & 1u)
      return WD_EINVAL;
    used |= 1u << dst[i];
  }
  wd_seq_t in[WD_ENG_MAX_SEQS], out[WD_ENG_MAX_SEQS];
  int len[WD_ENG_MAX_SEQS], audio[WD_ENG_MAX_SEQS];
  memcpy(len, e->len, sizeof len);
  memcpy(audio, e->audio, sizeof audio);
  uint32_t k = 0;
  for (int i = 0; i < n; i++) {
    if (dst[i] == src[i])
      continue;
    len[dst[i]] = e->len[src[i]];
    audio[dst[i]] = e->audio[src[i]];
    if (e->len[src[i]] == 0)
      continue; /* nothing cached to copy */
    in[k] = (wd_seq_t){ .len = (uint32_t)e->len[src[i]], .src = (uint32_t)src[i], .slot = k };
    out[k] = (wd_seq_t){ .len = (uint32_t)e->len[src[i]], .src = k, .slot = (uint32_t)dst[i] };
    k++;
  }
  if (k > 0) {
    int rc = wd_vk_buffer_write(e->cp_in, 0, in, k * sizeof *in);
    if (!rc) rc = wd_vk_buffer_write(e->cp_out, 0, out, k * sizeof *out);
    if (!rc) rc = wd__eng_submit(e, e->cp_cmd[k - 1]);
    if (rc < 0)
      return rc;
    e->copy_ms = wd__eng_elapsed_ms(e->cp_cmd[k - 1]);
  }
  memcpy(e->len, len, sizeof len);
  memcpy(e->audio, audio, sizeof audio);
  return 0;
}

/* Records the align tail for heads[h0, h1) (their scores at qk rows (h -
 * h0) * n ..) and, with probs, the logits chunks of rows 0 .. n - 2. */
static int rec_tail(wd_vk_engine_t *e, uint32_t P, int a, int n, const int32_t *tokens,
                    int n_text, const int (*heads)[2], int h0, int h1, int probs) {
  const uint32_t d = (uint32_t)e->hp.n_text_state, na = (uint32_t)e->hp.n_audio_ctx;
  const uint32_t first = P - (uint32_t)n; /* the row of token 0 */
  wd_vk_cmd_t *cmd = e->al_tail;
  int rc = wd_vk_cmd_begin(cmd);
  wd_vk_cmd_timestamp(cmd, 0);
  for (int h = h0; h < h1 && !rc; h++) {
    const uint32_t l = (uint32_t)heads[h][0], hd = (uint32_t)heads[h][1] * WD_ATTN_HEAD_DIM;
    const wd_pc_gemm_t pc = {
      .M = (uint32_t)n, .N = na, .K = WD_ATTN_HEAD_DIM, .lda = d, .ldb = d, .ldc = na,
      .a_off = (uint32_t)(l * al_layer(e) + first * d + hd),
      .b_off = (uint32_t)((uint64_t)a * na * d + hd), /* within layer l's binding */
      .c_off = (uint32_t)(h - h0) * (uint32_t)n * na,
      .alpha = 0.125f, /* (q d_head^-0.25) . (k d_head^-0.25) */
    };
    rc = wd_vk_gemm_record(qk_gemm(e), cmd, e->set_qk[l], &pc, 1); /* independent: no barrier */
  }
  const uint32_t nv = (uint32_t)e->hp.n_vocab, ld = ldv(e);
  for (uint32_t r0 = 0; probs && r0 + 1 < (uint32_t)n && !rc; r0 += WD_ENG_LG_ROWS) {
    const uint32_t m = (uint32_t)n - 1 - r0 < WD_ENG_LG_ROWS ? (uint32_t)n - 1 - r0
                                                              : WD_ENG_LG_ROWS;
    const wd_pc_gemm_t pc = { .M = m, .N = nv, .K = d, .lda = d, .ldb = d, .ldc = ld,
                              .a_off = (first + r0) * d, .alpha = 1.0f };
    rc = wd_vk_gemm_record(e->gemm, cmd, e->set_lg, &pc, 1);
    wd_vk_cmd_barrier(cmd);
    const wd_pc_argmax_t pm = { .n_vocab = nv, .nb = m, .off = 0, .ld = ld,
                                .flags = WD_ARGMAX_MASK };
    if (!rc) rc = wd_vk_misc_record_argmax(e->misc, cmd, e->set_am[r0 / WD_ENG_LG_ROWS], &pm);
    /* The next chunk overwrites lgc only after the argmax has read it. */
    wd_vk_cmd_barrier(cmd);
    wd_vk_copy_region_t reg[WD_ENG_LG_ROWS];
    uint32_t nr = 0;
    for (uint32_t j = 0; j < m; j++) {
      const int32_t t = tokens[r0 + j + 1];
      if (t < n_text)
        reg[nr++] = (wd_vk_copy_region_t){ .src = ((uint64_t)j * ld + (uint64_t)t) * 4,
                                           .dst = (uint64_t)(r0 + j) * 4, .n = 4 };
    }
    if (!rc && nr) rc = wd_vk_cmd_copy_regions(cmd, e->lgc, e->tgt, nr, reg);
  }
  /* What the host reads, into host-cached memory (vk_engine_io.c). */
  if (!rc && h1 > h0)
    rc = wd__eng_rec_readback(cmd, e->qk, e->qk_rb, (uint64_t)(h1 - h0) * (uint64_t)n * na * 4);
  if (!rc && probs && n > 1)
    rc = wd__eng_rec_readback(cmd, e->stats, e->stats_rb,
                              (uint64_t)(n - 1) * sizeof(wd_argmax_out_t));
  if (!rc && probs && n > 1)
    rc = wd__eng_rec_readback(cmd, e->tgt, e->tgt_rb, (uint64_t)(n - 1) * 4);
  wd_vk_cmd_timestamp(cmd, 1);
  const int rc2 = wd_vk_cmd_end(cmd);
  return rc ? rc : rc2;
}

int wd__eng_align(void *self, int a, int n, const int32_t *tokens, int n_text, int n_heads,
                  const int (*heads)[2], float *qk, float *probs) {
  wd_vk_engine_t *e = self;
  if (e->lost)
    return WD_EDEVLOST;
  if (a < 0 || a >= e->max_audio || !e->encoded[a] || n < 1 || n > (int)WD_ENG_MAX_PREFILL ||
      !tokens || !tokens_ok(e, n, tokens) || n_text < 1 || n_text > e->hp.n_vocab ||
      n_heads < 0 || (n_heads > 0 && (!heads || !qk)))
    return WD_EINVAL;
  for (int h = 0; h < n_heads; h++)
    if (heads[h][0] < 0 || heads[h][0] >= e->hp.n_text_layer || heads[h][1] < 0 ||
        heads[h][1] >= e->hp.n_text_head)
      return WD_EINVAL;
  const int k = bucket_for(e, e->al_cmd, n);
  if (k < 0)
    return WD_EINTERNAL;
  const uint32_t P = e->bucket[k];
  /* A fresh sequence on the scratch cache: slot 0 of kx/vx. */
  int rc = write_rows(e, P, n, tokens, 0, 0, a);
  if (!rc) rc = wd__eng_submit(e, e->al_cmd[k]);
  if (rc < 0)
    return rc;
  double ms = wd__eng_elapsed_ms(e->al_cmd[k]);
  const int want_probs = probs && n > 1;
  if (want_probs && e->mask_n_text != n_text) {
    float *mk = wd_vk_buffer_map(e->mask);
    if (!mk)
      return WD_EINTERNAL; /* host-visible by construction */
    for (int v = 0; v < e->hp.n_vocab; v++)
      mk[v] = v < n_text ? 0.0f : -INFINITY;
    e->mask_n_text = n_text;
  }
  /* As many heads per tail submit as the qk buffer holds (at least 4). */
  const int per = (int)(WD_ENG_QK_ROWS / (uint32_t)n);
  const size_t plane = (size_t)n * (size_t)e->hp.n_audio_ctx;
  for (int h0 = 0; (h0 < n_heads || (h0 == 0 && want_probs)) && !rc; h0 += per) {
    const int h1 = n_heads - h0 < per ? n_heads : h0 + per;
    rc = rec_tail(e, P, a, n, tokens, n_text, heads, h0, h1, want_probs && h0 == 0);
    if (!rc) rc = wd__eng_submit(e, e->al_tail);
    if (!rc && h1 > h0)
      rc = wd_vk_buffer_read(e->qk_rb, 0, qk + (size_t)h0 * plane,
                             (uint64_t)(h1 - h0) * plane * sizeof *qk);
    if (!rc && want_probs && h0 == 0) {
      wd_argmax_out_t st[WD_ENG_MAX_PREFILL];
      float tg[WD_ENG_MAX_PREFILL];
      rc = wd_vk_buffer_read(e->stats_rb, 0, st, (uint64_t)(n - 1) * sizeof *st);
      if (!rc) rc = wd_vk_buffer_read(e->tgt_rb, 0, tg, (uint64_t)(n - 1) * sizeof *tg);
      for (int i = 0; i < n - 1 && !rc; i++)
        probs[i] = tokens[i + 1] < n_text ? (float)exp((double)tg[i] - (double)st[i].lse) : 0.0f;
    }
    if (!rc)
      ms += wd__eng_elapsed_ms(e->al_tail);
  }
  if (rc < 0)
    return rc;
  e->align_ms = ms;
  return 0;
}
