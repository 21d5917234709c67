/*
 * vk_engine.c - the planned Whisper forward pass (see vk_engine.h).
 *
 * Activations are f32, row-major (rows = frames or sequences, d
 * contiguous); weights stay in their file's type in the uploaded chunks
 * (vk_weights: f16, f32, or ggml blocks repacked word-aligned), and the
 * GEMM / GEMV / embed kernels dequantize them as they read. The
 * recordings, in dispatch order:
 *
 * encoder (one submit): im2col(mel) . conv1 + GELU -> x1 (3000, d);
 *   copy positional embedding -> xa; im2col(x1, stride 2) . conv2 + GELU
 *   accumulated onto xa (1500, d); per layer: LN -> h; q, k, v = h . W^T;
 *   S = (q . k^T) / 8 per head group; softmax(S); vt = v^T per head;
 *   o[:, head] = S . vt[head]^T; xa += o . Wo^T + bo; LN -> h;
 *   f = GELU(h . W1^T + b1); xa += f . W2^T + b2; finally LN(ln_post) on xa.
 * cross K/V (one submit per audio slot a): for every decoder layer l,
 *   xk[l][a] = xa . Wk^T, xv[l][a] = xa . Wv^T + bv (with f16 caches: into
 *   ka / va in f32, then kv_to_f16 into xk[l][a] / xv[l][a]).
 * Caches (xk, xv, kc, vc and the scratch kx, vx) are laid out per decoder
 * layer by the plan (vk_plan.h) and every kernel binds one layer of them,
 * so no binding spans more than one layer whatever the batch.
 * decoder step (one submit, per batch size nb): embed -> x (nb, d); per layer:
 *   LN -> h; q|k|v = h . W^T (+b) into qkv (nb, 3d); append k, v to the
 *   caches of the row's sequence slot at pos; self-attention over that
 *   slot's len keys -> o; x += o . Wo^T + bo;
 *   LN -> h; q = h . Wq^T + bq; cross-attention over the 1500 keys of the
 *   sequence's audio slot -> o (on GPUs in key chunks, merged: vk_attn.h); x += o . Wo^T + bo; LN -> h;
 *   f = GELU(h . W1^T + b1); x += f . W2^T + b2; final LN -> h;
 *   logits = h . token_embedding^T into a host-visible buffer.
 * Per-step values (token, position, length, audio slot, sequence slot) live
 * in the host-visible step buffer, so the step recording is replayed
 * unchanged. Batch row b of the recording for nb is whichever sequence slot
 * the host writes into record b: the caches stay where they are.
 * prefill, align and seq_copy (the recordings over many rows of one
 * sequence, and over whole caches) are in vk_engine_rows.c; the struct both
 * files share is in vk_engine_internal.h.
 * ref: openai/whisper model.py.
 */
#include "vk_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "vk_device.h"
#include "vk_engine_internal.h"
#include "vk_wquant.h"

/* ---- small helpers ------------------------------------------------------ */

static wd_vk_arg_t whole(wd_vk_buffer_t *b) { return wd__eng_whole(b); }

/* Keeps the set *ps for freeing with the engine; returns rc unchanged. It
 * takes a pointer because it is called as keep(e, bind(..., &s), &s): the
 * order in which C evaluates arguments is unspecified, so s itself could be
 * read before bind() has written it. */
static int keep(wd_vk_engine_t *e, int rc, wd_vk_dset_t **ps) {
  if (rc < 0)
    return rc;
  wd_vk_dset_t *s = *ps;
  if (e->n_sets == WD_ENG_MAX_SETS) {
    wd_vk_dset_free(s);
    return WD_ENOMEM;
  }
  e->sets[e->n_sets++] = s;
  return 0;
}

/* Ends a profiled operation: a timestamp after its barrier. */
static void mark(wd_vk_engine_t *e, wd_vk_cmd_t *cmd, const char *kind) {
  wd_eng_prof_t *p = e->prof_cur;
  if (!p || p->n >= WD_ENG_PROF_MAX)
    return;
  wd_vk_cmd_timestamp(cmd, (uint32_t)(2 + p->n));
  p->kind[p->n++] = kind;
}

static int buf(wd_vk_engine_t *e, uint64_t n_floats, wd_vk_mem_t mem, wd_vk_buffer_t **ret) {
  e->act_bytes += n_floats * 4;
  return wd_vk_buffer_new(e->dev, n_floats * 4, WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL, mem, ret);
}

/* The device range of weight tensor `fmt` formatted with layer l. */
static int wt(const wd_vk_engine_t *e, wd_vk_arg_t *a, const char *fmt, int l)
    __attribute__((format(printf, 3, 0)));

static int wt(const wd_vk_engine_t *e, wd_vk_arg_t *a, const char *fmt, int l) {
  char name[128];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  /* fmt is always one of this file's literals with at most one %d. */
  snprintf(name, sizeof name, fmt, l);
#pragma GCC diagnostic pop
  int rc = wd_vk_weights_arg(e->w, name, a);
  if (rc < 0)
    wd_log_debug("vk_engine: weight '%s' missing", name);
  return rc;
}

/* GEMM: C (M, N) [c_off, ldc] (+)= A (M, K) [a_off, lda] . B^T (+bias) ... */
typedef struct {
  wd_vk_arg_t a, b, bias, c;
  wd_pc_gemm_t pc;
  uint32_t z;
  int f32b;
  const char *kind; /* profile label */
} gemm_op_t;

static int rec_gemm(wd_vk_engine_t *e, wd_vk_cmd_t *cmd, const gemm_op_t *op) {
  wd_vk_gemm_t *g = op->f32b ? e->gemm_f32b : e->gemm;
  wd_vk_dset_t *s = NULL;
  int rc = keep(e, wd_vk_gemm_bind(g, &op->a, &op->b, &op->bias, &op->c, &s), &s);
  if (rc == 0)
    rc = wd_vk_gemm_record(g, cmd, s, &op->pc, op->z ? op->z : 1);
  wd_vk_cmd_barrier(cmd);
  mark(e, cmd, op->kind ? op->kind : "gemm-linear");
  return rc;
}

/* Linear layer over rows: Y (rows, n_out) = X (rows, n_in) . W^T (+b) with flags. */
static int rec_linear(wd_vk_engine_t *e, wd_vk_cmd_t *cmd, wd_vk_buffer_t *x, uint32_t rows,
                      uint32_t n_in, const wd_vk_arg_t *w, const wd_vk_arg_t *b,
                      wd_vk_buffer_t *y, uint32_t n_out, uint32_t flags) {
  gemm_op_t op = {
    .a = whole(x), .b = *w, .bias = b ? *b : whole(e->dummy), .c = whole(y),
    .pc = { .M = rows, .N = n_out, .K = n_in, .lda = n_in, .ldb = n_in, .ldc = n_out,
            .flags = flags | (b ? WD_GEMM_BIAS : 0u), .alpha = 1.0f },
  };
  return rec_gemm(e, cmd, &op);
}

/* The gain and bias of LayerNorm `fmt` (formatted with layer l). */
static int norm_args(const wd_vk_engine_t *e, const char *fmt, int l, wd_vk_arg_t *g,
                     wd_vk_arg_t *b) __attribute__((format(printf, 2, 0)));

static int norm_args(const wd_vk_engine_t *e, const char *fmt, int l, wd_vk_arg_t *g,
                     wd_vk_arg_t *b) {
  char prefix[128], gname[160], bname[160];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  snprintf(prefix, sizeof prefix, fmt, l);
#pragma GCC diagnostic pop
  snprintf(gname, sizeof gname, "%s.weight", prefix);
  snprintf(bname, sizeof bname, "%s.bias", prefix);
  int rc = wd_vk_weights_arg(e->w, gname, g);
  if (rc == 0)
    rc = wd_vk_weights_arg(e->w, bname, b);
  return rc;
}

static double elapsed_ms(wd_vk_cmd_t *cmd) {
  double ns = 0.0;
  return wd_vk_cmd_elapsed_ns(cmd, 0, 1, &ns) == 0 ? ns * 1e-6 : 0.0;
}

/* The same helpers for vk_engine_rows.c (vk_engine_internal.h). */
int wd__eng_keep(wd_vk_engine_t *e, int rc, wd_vk_dset_t **ps) { return keep(e, rc, ps); }

int wd__eng_buf(wd_vk_engine_t *e, uint64_t n_floats, wd_vk_mem_t mem, wd_vk_buffer_t **ret) {
  return buf(e, n_floats, mem, ret);
}

int wd__eng_act(wd_vk_engine_t *e, wd_vk_act_t id, wd_vk_mem_t mem, wd_vk_buffer_t **ret) {
  return buf(e, e->plan.act_floats[id], mem, ret);
}

int wd__eng_wt(const wd_vk_engine_t *e, wd_vk_arg_t *a, const char *fmt, int l) {
  return wt(e, a, fmt, l);
}

int wd__eng_norm_args(const wd_vk_engine_t *e, const char *fmt, int l, wd_vk_arg_t *g,
                      wd_vk_arg_t *b) {
  return norm_args(e, fmt, l, g, b);
}

double wd__eng_elapsed_ms(wd_vk_cmd_t *cmd) { return elapsed_ms(cmd); }

static int rec_norm(wd_vk_engine_t *e, wd_vk_cmd_t *cmd, wd_vk_buffer_t *x, wd_vk_buffer_t *y,
                    uint32_t rows, uint32_t d, const char *fmt, int l) {
  wd_vk_arg_t g, b;
  int rc = norm_args(e, fmt, l, &g, &b);
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t ax = whole(x), ay = whole(y);
  if (rc == 0)
    rc = keep(e, wd_vk_norm_bind(e->norm, &ax, &ay, &g, &b, &s), &s);
  const wd_pc_norm_t pc = { .n_rows = rows, .d = d, .ldx = d, .ldy = d, .eps = 1e-5f };
  if (rc == 0)
    rc = wd_vk_norm_record(e->norm, cmd, s, &pc);
  wd_vk_cmd_barrier(cmd);
  mark(e, cmd, "layernorm");
  return rc;
}

/* ---- encoder ------------------------------------------------------------ */

static int rec_encoder_layer(wd_vk_engine_t *e, wd_vk_cmd_t *cmd, int l) {
  const uint32_t d = (uint32_t)e->hp.n_audio_state, n = (uint32_t)e->hp.n_audio_ctx;
  const uint32_t nh = (uint32_t)e->hp.n_audio_head, dh = d / nh;
  wd_vk_arg_t wq, bq, wk, wv, bv, wo, bo, w1, b1, w2, b2;
  int rc = rec_norm(e, cmd, e->xa, e->ha, n, d, "encoder.blocks.%d.attn_ln", l);
  if (!rc) rc = wt(e, &wq, "encoder.blocks.%d.attn.query.weight", l);
  if (!rc) rc = wt(e, &bq, "encoder.blocks.%d.attn.query.bias", l);
  if (!rc) rc = wt(e, &wk, "encoder.blocks.%d.attn.key.weight", l);
  if (!rc) rc = wt(e, &wv, "encoder.blocks.%d.attn.value.weight", l);
  if (!rc) rc = wt(e, &bv, "encoder.blocks.%d.attn.value.bias", l);
  if (!rc) rc = wt(e, &wo, "encoder.blocks.%d.attn.out.weight", l);
  if (!rc) rc = wt(e, &bo, "encoder.blocks.%d.attn.out.bias", l);
  if (!rc) rc = wt(e, &w1, "encoder.blocks.%d.mlp.0.weight", l);
  if (!rc) rc = wt(e, &b1, "encoder.blocks.%d.mlp.0.bias", l);
  if (!rc) rc = wt(e, &w2, "encoder.blocks.%d.mlp.2.weight", l);
  if (!rc) rc = wt(e, &b2, "encoder.blocks.%d.mlp.2.bias", l);
  if (!rc) rc = rec_linear(e, cmd, e->ha, n, d, &wq, &bq, e->qa, d, 0);
  if (!rc) rc = rec_linear(e, cmd, e->ha, n, d, &wk, NULL, e->ka, d, 0);
  if (!rc) rc = rec_linear(e, cmd, e->ha, n, d, &wv, &bv, e->va, d, 0);
  wd_vk_dset_t *s = NULL;
  if (e->attn_enc) { /* fused on the matrix units: no scores, no V^T */
    const wd_vk_arg_t aq = whole(e->qa), ak = whole(e->ka), av = whole(e->va), ao = whole(e->oa);
    if (!rc) rc = keep(e, wd_vk_attn_enc_bind(e->attn_enc, &aq, &ak, &av, &ao, &s), &s);
    const wd_pc_attn_enc_t ap = { .n = n, .ld = d, .scale = (float)(1.0 / sqrt((double)dh)) };
    if (!rc) rc = wd_vk_attn_enc_record(e->attn_enc, cmd, s, &ap, nh);
    wd_vk_cmd_barrier(cmd);
    mark(e, cmd, "attn-enc");
    goto out_proj;
  }
  /* V^T per head: vt[h] (64, 1500) so that P . V is a GEMM against B = vt[h]. */
  const wd_vk_arg_t av = whole(e->va), avt = whole(e->vt);
  if (!rc) rc = keep(e, wd_vk_misc_bind_transpose(e->misc, &av, &avt, &s), &s);
  const wd_pc_transpose_t tp = { .R = n, .C = dh, .in_off = 0, .ldi = d, .in_bz = dh,
                                 .out_off = 0, .ldo = n, .out_bz = dh * n };
  if (!rc) rc = wd_vk_misc_record_transpose(e->misc, cmd, s, &tp, nh);
  wd_vk_cmd_barrier(cmd);
  mark(e, cmd, "transpose");
  /* Attention in groups of heads that fit the scores buffer. */
  const uint32_t group = e->plan.score_group;
  for (uint32_t h0 = 0; h0 < nh && !rc; h0 += group) {
    const uint32_t g = nh - h0 < group ? nh - h0 : group;
    gemm_op_t qk = {
      .a = whole(e->qa), .b = whole(e->ka), .bias = whole(e->dummy), .c = whole(e->scores),
      .pc = { .M = n, .N = n, .K = dh, .lda = d, .ldb = d, .ldc = n, .a_off = h0 * dh,
              .b_off = h0 * dh, .a_bz = dh, .b_bz = dh, .c_bz = n * n,
              /* d_head^-0.5: openai scales q and k by d_head^-0.25 each */
              .alpha = (float)(1.0 / sqrt((double)dh)) },
      .z = g, .f32b = 1, .kind = "gemm-qk",
    };
    rc = rec_gemm(e, cmd, &qk);
    const wd_vk_arg_t asc = whole(e->scores);
    s = NULL;
    if (!rc) rc = keep(e, wd_vk_softmax_bind(e->softmax, &asc, &s), &s);
    const wd_pc_softmax_t sp = { .M = n, .N = n, .ld = n, .off = 0, .z_stride = n * n,
                                 .scale = 1.0f };
    if (!rc) rc = wd_vk_softmax_record(e->softmax, cmd, s, &sp, g);
    wd_vk_cmd_barrier(cmd);
    mark(e, cmd, "softmax");
    gemm_op_t pv = {
      .a = whole(e->scores), .b = whole(e->vt), .bias = whole(e->dummy), .c = whole(e->oa),
      .pc = { .M = n, .N = dh, .K = n, .lda = n, .ldb = n, .ldc = d, .b_off = h0 * dh * n,
              .c_off = h0 * dh, .a_bz = n * n, .b_bz = dh * n, .c_bz = dh, .alpha = 1.0f },
      .z = g, .f32b = 1, .kind = "gemm-pv",
    };
    if (!rc) rc = rec_gemm(e, cmd, &pv);
  }
out_proj:
  if (!rc) rc = rec_linear(e, cmd, e->oa, n, d, &wo, &bo, e->xa, d, WD_GEMM_ACCUMULATE);
  if (!rc) rc = rec_norm(e, cmd, e->xa, e->ha, n, d, "encoder.blocks.%d.mlp_ln", l);
  if (!rc) rc = rec_linear(e, cmd, e->ha, n, d, &w1, &b1, e->fa, 4 * d, WD_GEMM_GELU);
  if (!rc) rc = rec_linear(e, cmd, e->fa, n, 4 * d, &w2, &b2, e->xa, d, WD_GEMM_ACCUMULATE);
  return rc;
}

static int rec_encoder(wd_vk_engine_t *e) {
  const uint32_t d = (uint32_t)e->hp.n_audio_state, n = (uint32_t)e->hp.n_audio_ctx;
  const uint32_t nm = (uint32_t)e->hp.n_mels, T = WD_ENG_FRAMES;
  wd_vk_cmd_t *cmd = e->enc_cmd;
  wd_vk_arg_t c1w, c1b, c2w, c2b, pos;
  int rc = wd_vk_cmd_begin(cmd);
  wd_vk_cmd_timestamp(cmd, 0);
  if (!rc) rc = wt(e, &c1w, "encoder.conv1.weight", 0);
  if (!rc) rc = wt(e, &c1b, "encoder.conv1.bias", 0);
  if (!rc) rc = wt(e, &c2w, "encoder.conv2.weight", 0);
  if (!rc) rc = wt(e, &c2b, "encoder.conv2.bias", 0);
  if (!rc) rc = wt(e, &pos, "encoder.positional_embedding", 0);
  /* conv1: the mel is (n_mels, 3000), channel-major. */
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t amel = whole(e->mel), acol = whole(e->col), ax1 = whole(e->x1);
  if (!rc) rc = keep(e, wd_vk_misc_bind_im2col(e->misc, &amel, &acol, &s), &s);
  const wd_pc_im2col_t i1 = { .cin = nm, .t_in = T, .t_out = T, .stride = 1, .in_cs = T,
                              .in_ts = 1, .ldo = nm * 3 };
  if (!rc) rc = wd_vk_misc_record_im2col(e->misc, cmd, s, &i1);
  wd_vk_cmd_barrier(cmd);
  mark(e, cmd, "im2col");
  if (!rc) rc = rec_linear(e, cmd, e->col, T, nm * 3, &c1w, &c1b, e->x1, d, WD_GEMM_GELU);
  /* conv2 (stride 2) accumulates onto the positional embedding. */
  s = NULL;
  if (!rc) rc = keep(e, wd_vk_misc_bind_im2col(e->misc, &ax1, &acol, &s), &s);
  const wd_pc_im2col_t i2 = { .cin = d, .t_in = T, .t_out = n, .stride = 2, .in_cs = 1,
                              .in_ts = d, .ldo = d * 3 };
  if (!rc) rc = wd_vk_misc_record_im2col(e->misc, cmd, s, &i2);
  if (!rc) rc = wd_vk_cmd_copy(cmd, &pos, &(wd_vk_arg_t){ .buf = e->xa }, (uint64_t)n * d * 4);
  wd_vk_cmd_barrier(cmd);
  mark(e, cmd, "im2col+copy");
  if (!rc)
    rc = rec_linear(e, cmd, e->col, n, d * 3, &c2w, &c2b, e->xa, d,
                    WD_GEMM_GELU | WD_GEMM_ACCUMULATE);
  for (int l = 0; l < e->hp.n_audio_layer && !rc; l++)
    rc = rec_encoder_layer(e, cmd, l);
  if (!rc) rc = rec_norm(e, cmd, e->xa, e->xa, n, d, "encoder.ln_post", 0);
  wd_vk_cmd_timestamp(cmd, 1);
  int rc2 = wd_vk_cmd_end(cmd);
  return rc ? rc : rc2;
}

static int rec_cross(wd_vk_engine_t *e, int a) {
  const uint32_t d = (uint32_t)e->hp.n_text_state, n = (uint32_t)e->hp.n_audio_ctx;
  const uint64_t per = (uint64_t)n * d; /* floats of one (layer, audio) block */
  wd_vk_cmd_t *cmd = e->cross_cmd[a];
  int rc = wd_vk_cmd_begin(cmd);
  wd_vk_cmd_timestamp(cmd, 0);
  for (int l = 0; l < e->hp.n_text_layer && !rc; l++) {
    wd_vk_arg_t wk, wv, bv;
    rc = wt(e, &wk, "decoder.blocks.%d.cross_attn.key.weight", l);
    if (!rc) rc = wt(e, &wv, "decoder.blocks.%d.cross_attn.value.weight", l);
    if (!rc) rc = wt(e, &bv, "decoder.blocks.%d.cross_attn.value.bias", l);
    /* Window a's block of layer l: its own binding (vk_plan.h). f16
     * caches: the GEMMs write f32 into ka / va (free after the encoder),
     * which kv_to_f16 converts into the block. */
    const uint64_t eb = e->plan.kv_elem, off = (uint64_t)a * per * eb;
    const wd_vk_arg_t kd = wd_vk_layers_arg(e->xk, (uint32_t)l, off, per * eb);
    const wd_vk_arg_t vd = wd_vk_layers_arg(e->xv, (uint32_t)l, off, per * eb);
    const int f16 = e->plan.kv_f16;
    gemm_op_t k = {
      .a = whole(e->xa), .b = wk, .bias = whole(e->dummy), .c = f16 ? whole(e->ka) : kd,
      .pc = { .M = n, .N = d, .K = d, .lda = d, .ldb = d, .ldc = d, .alpha = 1.0f },
    };
    gemm_op_t v = k;
    v.b = wv;
    v.bias = bv;
    v.c = f16 ? whole(e->va) : vd;
    v.pc.flags = WD_GEMM_BIAS;
    if (!rc) rc = rec_gemm(e, cmd, &k);
    if (!rc) rc = rec_gemm(e, cmd, &v);
    if (f16) {
      wd_vk_dset_t *s = NULL;
      const wd_vk_arg_t ks = whole(e->ka), vs = whole(e->va);
      if (!rc) rc = keep(e, wd_vk_kv_bind_to_f16(e->kv, &ks, &vs, &kd, &vd, &s), &s);
      if (!rc) rc = wd_vk_kv_record_to_f16(e->kv, cmd, s, (uint32_t)(per / 4));
      /* The next layer's GEMMs overwrite ka / va. */
      wd_vk_cmd_barrier(cmd);
      mark(e, cmd, "kv-to-f16");
    }
  }
  wd_vk_cmd_timestamp(cmd, 1);
  int rc2 = wd_vk_cmd_end(cmd);
  return rc ? rc : rc2;
}

/* ---- decoder step ------------------------------------------------------- */

typedef struct {
  wd_vk_engine_t *e;
  wd_vk_cmd_t *cmd;
  uint32_t nb, d;
} step_ctx_t;

/* Y[:, y_off:] (nb rows, ldy) (+)= X[:, x_off:] (ldx) . W^T (+b) */
static int rec_gemv(step_ctx_t *c, wd_vk_buffer_t *x, uint32_t x_off, uint32_t ldx, uint32_t K,
                    const wd_vk_arg_t *w, const wd_vk_arg_t *b, wd_vk_buffer_t *y, uint32_t y_off,
                    uint32_t ldy, uint32_t N, uint32_t flags, int barrier) {
  wd_vk_engine_t *e = c->e;
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t ax = whole(x), ay = whole(y), ab = b ? *b : whole(e->dummy);
  int rc = keep(e, wd_vk_gemv_bind(e->gemv, K, c->nb, &ax, w, &ab, &ay, &s), &s);
  const wd_pc_gemv_t pc = { .N = N, .K = K, .nb = c->nb, .x_off = x_off, .ldx = ldx,
                            .y_off = y_off, .ldy = ldy,
                            .flags = flags | (b ? WD_GEMM_BIAS : 0u), .alpha = 1.0f };
  if (!rc) rc = wd_vk_gemv_record(e->gemv, c->cmd, s, &pc);
  if (barrier)
    wd_vk_cmd_barrier(c->cmd);
  mark(e, c->cmd, N == (uint32_t)e->hp.n_vocab ? "gemv-logits" : "gemv");
  return rc;
}

static int rec_attn(step_ctx_t *c, int cross, int l) {
  wd_vk_engine_t *e = c->e;
  const uint32_t d = c->d, nh = (uint32_t)e->hp.n_text_head;
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t st = whole(e->step), q = cross ? whole(e->q) : whole(e->qkv);
  /* Layer l of the caches, bound alone: row0 of a slot or window is
   * relative to it (kv_off 0). */
  const wd_vk_arg_t k = wd_vk_layers_arg(cross ? e->xk : e->kc, (uint32_t)l, 0, 0);
  const wd_vk_arg_t v = wd_vk_layers_arg(cross ? e->xv : e->vc, (uint32_t)l, 0, 0);
  const wd_vk_arg_t o = whole(e->o), save = whole(e->dummy), part = whole(e->part);
  /* Cross-attention in key chunks where the device wants them (GPUs). */
  const uint32_t split = cross ? wd_vk_attn_splits(e->attn) : 1;
  int rc = keep(e,
                split > 1 ? wd_vk_attn_bind_split(e->attn, &st, &q, &k, &v, &o, &part, &s)
                          : wd_vk_attn_bind(e->attn, &st, &q, &k, &v, &o, &save, &s),
                &s);
  const uint32_t n_ctx = cross ? (uint32_t)e->hp.n_audio_ctx : (uint32_t)e->hp.n_text_ctx;
  wd_pc_attn_t pc = {
    .n_head = nh, .n_ctx = n_ctx, .n_keys = cross ? n_ctx : 0,
    .flags = cross ? WD_ATTN_CROSS : 0u, .q_off = 0, .ldq = cross ? d : 3 * d,
    .kv_off = 0, .ldkv = d, .o_off = 0, .ldo = d,
    .scale = (float)(1.0 / sqrt((double)(d / nh))), .n_split = split > 1 ? split : 0,
  };
  if (!rc)
    rc = split > 1 ? wd_vk_attn_record_split(e->attn, c->cmd, s, &pc, c->nb)
                   : wd_vk_attn_record(e->attn, c->cmd, s, &pc, c->nb);
  wd_vk_cmd_barrier(c->cmd);
  mark(e, c->cmd, cross ? "attn-cross" : "attn-self");
  return rc;
}

static int rec_step(wd_vk_engine_t *e, uint32_t nb) {
  const uint32_t d = (uint32_t)e->hp.n_text_state, nv = (uint32_t)e->hp.n_vocab;
  step_ctx_t c = { .e = e, .cmd = e->step_cmd[nb - 1], .nb = nb, .d = d };
  wd_vk_arg_t emb, pos;
  int rc = wd_vk_cmd_begin(c.cmd);
  wd_vk_cmd_timestamp(c.cmd, 0);
  if (!rc) rc = wt(e, &emb, "decoder.token_embedding.weight", 0);
  if (!rc) rc = wt(e, &pos, "decoder.positional_embedding", 0);
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t st = whole(e->step), ax = whole(e->x);
  if (!rc) rc = keep(e, wd_vk_misc_bind_embed(e->misc, &st, &emb, &pos, &ax, &s), &s);
  const wd_pc_embed_t pe = { .d = d, .ldx = d, .n_vocab = nv, .n_pos = (uint32_t)e->hp.n_text_ctx };
  if (!rc) rc = wd_vk_misc_record_embed(e->misc, c.cmd, s, &pe, nb);
  wd_vk_cmd_barrier(c.cmd);
  mark(e, c.cmd, "embed");
  for (int l = 0; l < e->hp.n_text_layer && !rc; l++) {
    wd_vk_arg_t wq, bq, wk, wv, bv, wo, bo, cq, cbq, co, cbo, w1, b1, w2, b2;
    rc = wt(e, &wq, "decoder.blocks.%d.attn.query.weight", l);
    if (!rc) rc = wt(e, &bq, "decoder.blocks.%d.attn.query.bias", l);
    if (!rc) rc = wt(e, &wk, "decoder.blocks.%d.attn.key.weight", l);
    if (!rc) rc = wt(e, &wv, "decoder.blocks.%d.attn.value.weight", l);
    if (!rc) rc = wt(e, &bv, "decoder.blocks.%d.attn.value.bias", l);
    if (!rc) rc = wt(e, &wo, "decoder.blocks.%d.attn.out.weight", l);
    if (!rc) rc = wt(e, &bo, "decoder.blocks.%d.attn.out.bias", l);
    if (!rc) rc = wt(e, &cq, "decoder.blocks.%d.cross_attn.query.weight", l);
    if (!rc) rc = wt(e, &cbq, "decoder.blocks.%d.cross_attn.query.bias", l);
    if (!rc) rc = wt(e, &co, "decoder.blocks.%d.cross_attn.out.weight", l);
    if (!rc) rc = wt(e, &cbo, "decoder.blocks.%d.cross_attn.out.bias", l);
    if (!rc) rc = wt(e, &w1, "decoder.blocks.%d.mlp.0.weight", l);
    if (!rc) rc = wt(e, &b1, "decoder.blocks.%d.mlp.0.bias", l);
    if (!rc) rc = wt(e, &w2, "decoder.blocks.%d.mlp.2.weight", l);
    if (!rc) rc = wt(e, &b2, "decoder.blocks.%d.mlp.2.bias", l);
    /* self-attention */
    if (!rc) rc = rec_norm(e, c.cmd, e->x, e->h, nb, d, "decoder.blocks.%d.attn_ln", l);
    /* q, k, v are independent: one barrier after all three. */
    if (!rc) rc = rec_gemv(&c, e->h, 0, d, d, &wq, &bq, e->qkv, 0, 3 * d, d, 0, 0);
    if (!rc) rc = rec_gemv(&c, e->h, 0, d, d, &wk, NULL, e->qkv, d, 3 * d, d, 0, 0);
    if (!rc) rc = rec_gemv(&c, e->h, 0, d, d, &wv, &bv, e->qkv, 2 * d, 3 * d, d, 0, 1);
    s = NULL;
    const wd_vk_arg_t aqkv = whole(e->qkv);
    const wd_vk_arg_t akc = wd_vk_layers_arg(e->kc, (uint32_t)l, 0, 0);
    const wd_vk_arg_t avc = wd_vk_layers_arg(e->vc, (uint32_t)l, 0, 0);
    if (!rc) rc = keep(e, wd_vk_kv_bind_append(e->kv, &st, &aqkv, &akc, &avc, &s), &s);
    const wd_pc_kv_t pk = { .d = d, .n_ctx = (uint32_t)e->hp.n_text_ctx, .in_off = d,
                            .v_in_off = 2 * d, .ldi = 3 * d,
                            .cache_off = 0 };
    if (!rc) rc = wd_vk_kv_record_append(e->kv, c.cmd, s, &pk, nb);
    wd_vk_cmd_barrier(c.cmd);
    mark(e, c.cmd, "kv-append");
    if (!rc) rc = rec_attn(&c, 0, l);
    if (!rc) rc = rec_gemv(&c, e->o, 0, d, d, &wo, &bo, e->x, 0, d, d, WD_GEMM_ACCUMULATE, 1);
    /* cross-attention */
    if (!rc) rc = rec_norm(e, c.cmd, e->x, e->h, nb, d, "decoder.blocks.%d.cross_attn_ln", l);
    if (!rc) rc = rec_gemv(&c, e->h, 0, d, d, &cq, &cbq, e->q, 0, d, d, 0, 1);
    if (!rc) rc = rec_attn(&c, 1, l);
    if (!rc) rc = rec_gemv(&c, e->o, 0, d, d, &co, &cbo, e->x, 0, d, d, WD_GEMM_ACCUMULATE, 1);
    /* MLP */
    if (!rc) rc = rec_norm(e, c.cmd, e->x, e->h, nb, d, "decoder.blocks.%d.mlp_ln", l);
    if (!rc) rc = rec_gemv(&c, e->h, 0, d, d, &w1, &b1, e->f, 0, 4 * d, 4 * d, WD_GEMM_GELU, 1);
    if (!rc)
      rc = rec_gemv(&c, e->f, 0, 4 * d, 4 * d, &w2, &b2, e->x, 0, d, d, WD_GEMM_ACCUMULATE, 1);
  }
  if (!rc) rc = rec_norm(e, c.cmd, e->x, e->h, nb, d, "decoder.ln", 0);
  /* Logits with the tied token embedding. */
  if (!rc) rc = rec_gemv(&c, e->h, 0, d, d, &emb, NULL, e->logits, 0, nv, nv, 0, 0);
  /* The nb rows the host reads, into host-cached memory (vk_engine_io.c). */
  if (!rc) rc = wd__eng_rec_readback(c.cmd, e->logits, e->lg_rb, (uint64_t)nb * nv * 4);
  wd_vk_cmd_timestamp(c.cmd, 1);
  int rc2 = wd_vk_cmd_end(c.cmd);
  return rc ? rc : rc2;
}

/* ---- weight types ------------------------------------------------------- */

/* Refuses a model whose tensors are not the types the kernels read. The
 * weight operands are every 2-D or 3-D ".weight": the GEMM B operand
 * (encoder linears, cross K/V projections, the conv kernels read as
 * (d, 3 * c_in) rows), the GEMV W operand (decoder linears, the tied token
 * embedding for the logits) and embed.comp's token table. The kernels read
 * them as f16, f32 or (matrices only: a conv row of 3 * n_mels elements is
 * no whole number of blocks) q4_0, q4_1, q5_0, q5_1 or q8_0, dequantized as
 * they load; each operand's type travels with its wd_vk_arg_t and picks the
 * pipeline variant. Everything else is read as f32: biases (conv biases are
 * 2-D {1, d}), LayerNorm gains and biases (1-D ".weight"/".bias"), and both
 * positional embeddings (embed.comp's POS table; the encoder's is copied
 * straight into the f32 activations). Any other type would be reinterpreted
 * as garbage, so it is an error at load, naming the first offending tensor
 * in model order. */
static int check_types(const wd_model_t *m, char *err, size_t err_len) {
  for (size_t i = 0; i < wd_model_n_tensors(m); i++) {
    const wd_tensor_t *t = wd_model_tensor_at(m, i);
    const size_t len = strlen(t->name);
    const int weight = t->n_dims >= 2 && len > 7 && strcmp(t->name + len - 7, ".weight") == 0;
    const int conv = weight && t->n_dims == 3;
    const wd_vk_wtype_t wt = wd_vk_wtype_of(t->type);
    const int ok = !weight ? t->type == WD_DTYPE_F32
                   : conv  ? t->type == WD_DTYPE_F16 || t->type == WD_DTYPE_F32
                           : wt != WD_VK_W_DEFAULT;
    if (!ok) {
      snprintf(err, err_len,
               "tensor '%s' is %s; the Vulkan engine reads %s", t->name,
               wd_dtype_name(t->type),
               !weight ? "biases, norms and positional embeddings as f32"
               : conv  ? "conv kernels as f16 or f32"
                       : "weight matrices as f32, f16, q8_0, q5_0, q5_1, q4_0 or q4_1");
      return WD_EUNSUP;
    }
  }
  return 0;
}

/* ---- wd_engine_t -------------------------------------------------------- */

static int eng_encode(void *self, int a, const float *mel) {
  wd_vk_engine_t *e = self;
  if (e->lost)
    return WD_EDEVLOST;
  if (a < 0 || a >= e->max_audio || !mel)
    return WD_EINVAL;
  const uint64_t n = (uint64_t)e->hp.n_mels * WD_ENG_FRAMES * 4;
  int rc = wd_vk_buffer_write(e->mel, 0, mel, n);
  if (!rc) rc = wd__eng_submit(e, e->enc_cmd);
  if (!rc) e->encode_ms = elapsed_ms(e->enc_cmd);
  if (!rc) rc = wd__eng_submit(e, e->cross_cmd[a]);
  if (!rc) e->cross_ms = elapsed_ms(e->cross_cmd[a]);
  if (a < 64)
    e->encoded[a] = rc == 0;
  return rc;
}

static int eng_seq_reset(void *self, int s, int a) {
  wd_vk_engine_t *e = self;
  if (s < 0 || s >= e->max_seqs || a < 0 || a >= e->max_audio)
    return WD_EINVAL;
  e->len[s] = 0;
  e->audio[s] = a;
  return 0;
}

static int eng_step(void *self, int n, const int *seqs, const int32_t *tokens,
                    const float **ret_logits) {
  wd_vk_engine_t *e = self;
  if (e->lost)
    return WD_EDEVLOST;
  if (n < 1 || n > e->max_seqs)
    return WD_EINVAL;
  wd_seq_t *sp = wd_vk_buffer_map(e->step);
  wd_seq_t tmp[WD_ENG_MAX_SEQS];
  unsigned used = 0; /* bit s: slot s already has a row (max_seqs <= 16) */
  for (int i = 0; i < n; i++) {
    /* Row i uses slot s's KV cache, length and audio (see vk_engine.h);
     * two rows on one slot would race in kv_append. */
    const int s = seqs[i];
    if (s < 0 || s >= e->max_seqs || (used >> s) & 1u)
      return WD_EINVAL;
    used |= 1u << s;
    if (tokens[i] < 0 || tokens[i] >= e->hp.n_vocab || e->len[s] >= e->hp.n_text_ctx ||
        !e->encoded[e->audio[s]])
      return WD_EINVAL;
    tmp[i] = (wd_seq_t){ .token = (uint32_t)tokens[i], .pos = (uint32_t)e->len[s],
                         .len = (uint32_t)e->len[s] + 1, .audio = (uint32_t)e->audio[s],
                         .src = (uint32_t)s, .slot = (uint32_t)s };
  }
  int rc = sp ? (memcpy(sp, tmp, (size_t)n * sizeof *sp), 0)
              : wd_vk_buffer_write(e->step, 0, tmp, (uint64_t)n * sizeof *tmp);
  if (!rc) rc = wd__eng_submit(e, e->step_cmd[n - 1]);
  if (rc < 0)
    return rc;
  e->step_ms = elapsed_ms(e->step_cmd[n - 1]);
  e->n_steps++;
  for (int i = 0; i < n; i++)
    e->len[seqs[i]]++;
  const float *lg = wd__eng_host(e->lg_rb, (uint64_t)n * (uint64_t)e->hp.n_vocab * 4);
  if (!lg)
    return WD_EINTERNAL; /* the readback buffer is host-visible by construction */
  *ret_logits = lg;
  return 0;
}

/* ---- construction ------------------------------------------------------- */

void wd_vk_engine_free(wd_vk_engine_t *e) {
  if (!e)
    return;
  wd_vk_cmd_free(e->enc_cmd);
  for (int i = 0; e->cross_cmd && i < e->max_audio; i++)
    wd_vk_cmd_free(e->cross_cmd[i]);
  for (int i = 0; e->step_cmd && i < e->max_seqs; i++)
    wd_vk_cmd_free(e->step_cmd[i]);
  free(e->cross_cmd);
  free(e->step_cmd);
  free(e->prof_enc);
  free(e->prof_step);
  for (int i = 0; i < e->n_sets; i++)
    wd_vk_dset_free(e->sets[i]);
  wd__eng_rows_free(e);
  wd__eng_io_free(e);
  wd_vk_buffer_t *bufs[] = { e->dummy, e->mel, e->col, e->x1, e->xa, e->ha, e->qa, e->ka,
                             e->va, e->oa, e->vt, e->scores, e->fa, e->step,
                             e->x, e->h, e->o, e->q, e->qkv, e->f, e->logits, e->part };
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    wd_vk_buffer_free(bufs[i]);
  wd_vk_layers_t *caches[] = { e->xk, e->xv, e->kc, e->vc };
  for (size_t i = 0; i < sizeof caches / sizeof caches[0]; i++)
    wd_vk_layers_free(caches[i]);
  wd_vk_gemm_free(e->gemm);
  wd_vk_gemm_free(e->gemm_f32b);
  wd_vk_gemm_free(e->gemm_rows);
  wd_vk_attn_enc_free(e->attn_enc);
  wd_vk_gemv_free(e->gemv);
  wd_vk_norm_free(e->norm);
  wd_vk_softmax_free(e->softmax);
  wd_vk_attn_free(e->attn);
  wd_vk_kv_free(e->kv);
  wd_vk_misc_free(e->misc);
  wd_vk_weights_free(e->w);
  wd_vk_device_free(e->dev);
  free(e);
}

/* Plans the caches and activations against the device's limits (lowered by
 * any override) before anything is uploaded: a batch that cannot fit is
 * refused here, with the largest one that would. AUTO takes f16 caches only
 * when f32 ones do not fit. */
static int make_plan(wd_vk_engine_t *e, uint64_t wbytes, char *err, size_t err_len) {
  const wd_vk_kv_type_t kv = e->opts.kv;
  const wd_vk_limits_t *lim = &wd_vk_device_info(e->dev)->limits;
  int rc = wd_vk_plan_make(&e->hp, wbytes, lim, e->max_seqs, e->max_audio, kv == WD_VK_KV_F16,
                           &e->plan, err, err_len);
  if (rc == WD_ENOMEM && kv == WD_VK_KV_AUTO) {
    rc = wd_vk_plan_make(&e->hp, wbytes, lim, e->max_seqs, e->max_audio, true, &e->plan, err,
                         err_len);
    if (rc == 0) {
      err[0] = '\0';
      wd_log_info("vk_engine: KV caches in f16: in f32 they would not fit the device's heap "
                  "at max_seqs %d, max_audio %d", e->max_seqs, e->max_audio);
    }
  }
  if (rc < 0)
    wd_log_debug("vk_engine: plan failed: %s", err);
  return rc;
}

static int make_pipelines(wd_vk_engine_t *e) {
  const bool f16 = e->plan.kv_f16;
  /* A family named in the options runs everywhere; AUTO picks per shape,
   * and only among the f32 families when the options ask for exact sums. */
  const wd_vk_device_info_t *di = wd_vk_device_info(e->dev);
  const wd_vk_gemm_family_t f = e->opts.gemm;
  const bool x = e->opts.exact;
  const wd_vk_gemm_family_t lin = f != WD_VK_GEMM_AUTO ? f : wd_vk_gemm_auto(di, WD_VK_GEMM_B_F16, x);
  const wd_vk_gemm_family_t att = f != WD_VK_GEMM_AUTO ? f : wd_vk_gemm_auto(di, WD_VK_GEMM_B_F32, x);
  const wd_vk_gemm_family_t rows = f != WD_VK_GEMM_AUTO ? f : wd_vk_gemm_auto_rows(di, x);
  int rc;
  if ((rc = wd_vk_gemm_new(e->dev, lin, &e->gemm)) < 0 ||
      (rc = wd_vk_gemm_new(e->dev, rows, &e->gemm_rows)) < 0 ||
      (rc = wd_vk_gemm_new_fmt(e->dev, att, WD_VK_GEMM_B_F32, &e->gemm_f32b)) < 0 ||
      (e->opts.attn_fused && wd_vk_gemm_family_f16(att) &&
       (rc = wd_vk_attn_enc_new(e->dev, &e->attn_enc)) < 0) ||
      (rc = wd_vk_gemv_new(e->dev, WD_VK_GEMV_AUTO, &e->gemv)) < 0 ||
      (rc = wd_vk_norm_new(e->dev, WD_VK_NORM_AUTO, &e->norm)) < 0 ||
      (rc = wd_vk_softmax_new(e->dev, WD_VK_SOFTMAX_AUTO, &e->softmax)) < 0 ||
      (rc = wd_vk_attn_new_fmt(e->dev, WD_VK_ATTN_AUTO, f16, &e->attn)) < 0 ||
      (rc = wd_vk_kv_new_fmt(e->dev, f16, &e->kv)) < 0 ||
      (rc = wd_vk_misc_new(e->dev, &e->misc)) < 0)
    return rc;
  return 0;
}

/* The encoder's and the step's buffers and the caches, each at the plan's
 * size (vk_plan.h), and the host readback buffers. */
static int make_buffers(wd_vk_engine_t *e) {
  const wd_vk_mem_t D = WD_VK_MEM_DEVICE, H = WD_VK_MEM_HOST;
  int rc;
  if ((rc = wd__eng_act(e, WD_ACT_DUMMY, D, &e->dummy)) ||
      (rc = wd__eng_act(e, WD_ACT_MEL, H, &e->mel)) ||
      (rc = wd__eng_act(e, WD_ACT_COL, D, &e->col)) ||
      (rc = wd__eng_act(e, WD_ACT_X1, D, &e->x1)) ||
      (rc = wd__eng_act(e, WD_ACT_XA, D, &e->xa)) ||
      (rc = wd__eng_act(e, WD_ACT_HA, D, &e->ha)) ||
      (rc = wd__eng_act(e, WD_ACT_QA, D, &e->qa)) ||
      (rc = wd__eng_act(e, WD_ACT_KA, D, &e->ka)) ||
      (rc = wd__eng_act(e, WD_ACT_VA, D, &e->va)) ||
      (rc = wd__eng_act(e, WD_ACT_OA, D, &e->oa)) ||
      (rc = wd__eng_act(e, WD_ACT_VT, D, &e->vt)) ||
      (rc = wd__eng_act(e, WD_ACT_SCORES, D, &e->scores)) ||
      (rc = wd__eng_act(e, WD_ACT_FA, D, &e->fa)) ||
      (rc = wd_vk_layers_new(e->dev, &e->plan.cross, &e->xk)) ||
      (rc = wd_vk_layers_new(e->dev, &e->plan.cross, &e->xv)) ||
      (rc = wd__eng_act(e, WD_ACT_STEP, H, &e->step)) ||
      (rc = wd__eng_act(e, WD_ACT_X, D, &e->x)) || (rc = wd__eng_act(e, WD_ACT_H, D, &e->h)) ||
      (rc = wd__eng_act(e, WD_ACT_O, D, &e->o)) || (rc = wd__eng_act(e, WD_ACT_Q, D, &e->q)) ||
      (rc = wd__eng_act(e, WD_ACT_QKV, D, &e->qkv)) ||
      (rc = wd__eng_act(e, WD_ACT_F, D, &e->f)) ||
      (rc = wd_vk_layers_new(e->dev, &e->plan.self, &e->kc)) ||
      (rc = wd_vk_layers_new(e->dev, &e->plan.self, &e->vc)) ||
      (rc = wd__eng_act(e, WD_ACT_LOGITS, D, &e->logits)) ||
      (rc = wd__eng_act(e, WD_ACT_PART, D, &e->part)) || (rc = wd__eng_io_new(e)))
    return rc;
  e->act_bytes += e->plan.self_bytes + e->plan.cross_bytes;
  return 0;
}

/* The command buffers, recorded once: the encoder, each window's cross
 * K/V, a step for every batch size, then prefill, align and seq_copy
 * (vk_engine_rows.c). The first encoder and one-row step are profiled when
 * asked. */
static int make_recordings(wd_vk_engine_t *e) {
  const int A = e->max_audio, S = e->max_seqs;
  e->cross_cmd = calloc((size_t)A, sizeof *e->cross_cmd);
  e->step_cmd = calloc((size_t)S, sizeof *e->step_cmd);
  if (!e->cross_cmd || !e->step_cmd)
    return WD_ENOMEM;
  if (e->opts.profile) {
    e->prof_enc = calloc(1, sizeof *e->prof_enc);
    e->prof_step = calloc(1, sizeof *e->prof_step);
    if (!e->prof_enc || !e->prof_step)
      return WD_ENOMEM;
  }
  const uint32_t n_ts = e->opts.profile ? 2 + WD_ENG_PROF_MAX : 2;
  int rc = wd_vk_cmd_new(e->dev, n_ts, &e->enc_cmd);
  for (int a = 0; a < A && !rc; a++)
    rc = wd_vk_cmd_new(e->dev, 2, &e->cross_cmd[a]);
  for (int s = 0; s < S && !rc; s++)
    rc = wd_vk_cmd_new(e->dev, s == 0 ? n_ts : 2, &e->step_cmd[s]);
  e->prof_cur = e->prof_enc;
  if (!rc) rc = rec_encoder(e);
  e->prof_cur = NULL;
  for (int a = 0; a < A && !rc; a++)
    rc = rec_cross(e, a);
  for (uint32_t nb = 1; nb <= (uint32_t)S && !rc; nb++) {
    e->prof_cur = nb == 1 ? e->prof_step : NULL;
    rc = rec_step(e, nb);
  }
  e->prof_cur = NULL;
  if (!rc) rc = wd__eng_rows_new(e);
  return rc;
}

int wd_vk_engine_new(const wd_model_t *m, const wd_vk_engine_opts_t *opts,
                     wd_vk_engine_t **ret_engine, char *err, size_t err_len) {
  int rc = 0;
  if (!m || !opts || opts->max_seqs < 1 || opts->max_seqs > WD_ENG_MAX_SEQS ||
      opts->max_audio < 1 || opts->max_audio > 64 || (unsigned)opts->kv > WD_VK_KV_F16) {
    snprintf(err, err_len, "engine: max_seqs must be 1..%d, max_audio 1..64 and kv a "
             "wd_vk_kv_type_t", WD_ENG_MAX_SEQS);
    return WD_EINVAL;
  }
  wd_vk_engine_t *e = calloc(1, sizeof *e);
  if (!e)
    return WD_ENOMEM;
  e->hp = *wd_model_hparams(m);
  e->model = m;
  e->opts = *opts;
  e->max_seqs = opts->max_seqs;
  e->max_audio = opts->max_audio;
  const wd_hparams_t *hp = &e->hp;
  if (hp->n_audio_state != hp->n_text_state || hp->n_audio_state % hp->n_audio_head ||
      hp->n_audio_state / hp->n_audio_head != 64 || hp->n_text_state / hp->n_text_head != 64 ||
      hp->n_audio_ctx * 2 != WD_ENG_FRAMES) {
    snprintf(err, err_len, "engine: unsupported model shape (state %d/%d, heads %d/%d)",
             hp->n_audio_state, hp->n_text_state, hp->n_audio_head, hp->n_text_head);
    rc = WD_EUNSUP;
    goto fail;
  }
  /* Before the device: a model the kernels cannot read fails fast. */
  if ((rc = check_types(m, err, err_len)) < 0)
    goto fail;
  const wd_vk_device_opts_t dopts = { .index = opts->device, .validation = opts->validation,
                                       .limits = opts->limits,
                                       .force_staging = opts->force_staging,
                                       .matrix = opts->matrix };
  if ((rc = wd_vk_device_new(&dopts, &e->dev)) < 0) {
    snprintf(err, err_len, "no usable Vulkan device: %s", wd_strerror(rc));
    goto fail;
  }
  const uint64_t wbytes = wd_vk_plan_weight_bytes(m);
  if ((rc = make_plan(e, wbytes, err, err_len)) < 0)
    goto fail;
  wd_vk_device_set_timeout(e->dev, (uint64_t)opts->timeout_ms * 1000000ull);
  if ((rc = wd_vk_weights_upload(e->dev, m, &e->w, err, err_len)) < 0)
    goto fail;
  if ((rc = make_pipelines(e)) < 0) {
    snprintf(err, err_len, "building pipelines failed: %s", wd_strerror(rc));
    goto fail;
  }
  if ((rc = make_buffers(e)) < 0) {
    snprintf(err, err_len, "allocating %.1f MiB of activations and caches failed: %s",
             (double)(e->plan.total - e->plan.weights) / 1048576.0, wd_strerror(rc));
    goto fail;
  }
  if ((rc = make_recordings(e)) < 0) {
    snprintf(err, err_len, "recording the command buffers failed: %s", wd_strerror(rc));
    goto fail;
  }
  /* Every buffer was sized from the plan's entries, so the sums agree; a
   * buffer allocated outside the table would break this. */
  if (e->act_bytes + wbytes != e->plan.total) {
    snprintf(err, err_len, "allocated %llu device bytes where the plan says %llu: a buffer is "
             "missing from gpu/vk_plan.h's table", (unsigned long long)(e->act_bytes + wbytes),
             (unsigned long long)e->plan.total);
    rc = WD_EINTERNAL;
    goto fail;
  }
  wd_log_debug("vk_engine: %s on %s: weights %.1f MiB, activations %.1f MiB, %d sets",
               wd_model_name(m), wd_vk_device_info(e->dev)->name,
               (double)wd_vk_weights_bytes(e->w) / 1048576.0, (double)e->act_bytes / 1048576.0,
               e->n_sets);
  e->iface = (wd_engine_t){
    .self = e, .n_vocab = hp->n_vocab, .n_mels = hp->n_mels, .n_text_ctx = hp->n_text_ctx,
    .max_seqs = e->max_seqs, .max_audio = e->max_audio,
    .encode = eng_encode, .seq_reset = eng_seq_reset, .step = eng_step,
    .max_prefill = (int)WD_ENG_MAX_PREFILL, .prefill = wd__eng_prefill,
    .seq_copy = wd__eng_seq_copy, .align = wd__eng_align, .n_audio_ctx = hp->n_audio_ctx,
    .reset = wd__eng_reset,
    /* A CPU driver (lavapipe) computes on the host's cores itself. */
    .device_offload = wd_vk_device_info(e->dev)->device_class != WD_VK_CLASS_CPU,
  };
  *ret_engine = e;
  return 0;
fail:
  wd_vk_engine_free(e);
  return rc;
}

const wd_engine_t *wd_vk_engine_iface(wd_vk_engine_t *e) { return &e->iface; }

void wd_vk_engine_stats(const wd_vk_engine_t *e, wd_vk_engine_stats_t *r) {
  if (!e->dev) { /* a reset that failed left nothing */
    *r = (wd_vk_engine_stats_t){ .device_name = "lost" };
    return;
  }
  *r = (wd_vk_engine_stats_t){
    .encode_ms = e->encode_ms, .cross_ms = e->cross_ms, .step_ms = e->step_ms,
    .prefill_ms = e->prefill_ms, .align_ms = e->align_ms, .copy_ms = e->copy_ms,
    .step_dispatches = wd_vk_cmd_n_dispatches(e->step_cmd[0]),
    .encode_dispatches = wd_vk_cmd_n_dispatches(e->enc_cmd), .n_steps = e->n_steps,
    .device_mib = (double)(wd_vk_weights_bytes(e->w) + e->act_bytes) / 1048576.0,
    .device_name = wd_vk_device_info(e->dev)->name,
    .gemm = e->gemm ? wd_vk_gemm_family_name(wd_vk_gemm_family(e->gemm)) : "none",
    .gemm_attn = e->gemm_f32b ? wd_vk_gemm_family_name(wd_vk_gemm_family(e->gemm_f32b)) : "none",
    .gemm_rows = e->gemm_rows ? wd_vk_gemm_family_name(wd_vk_gemm_family(e->gemm_rows)) : "none",
    .desc_pools = wd_vk_device_desc_pools(e->dev),
  };
}

int wd_vk_engine_read_encoded(wd_vk_engine_t *e, float *out) {
  return wd_vk_buffer_read(e->xa, 0, out,
                           (uint64_t)e->hp.n_audio_ctx * (uint64_t)e->hp.n_audio_state * 4);
}

int wd_vk_engine_profile(wd_vk_engine_t *e, int which, wd_vk_prof_row_t *rows, int max_rows,
                         int *ret_n) {
  const wd_eng_prof_t *p = which == 0 ? e->prof_enc : which == 1 ? e->prof_step : e->prof_pf;
  wd_vk_cmd_t *cmd = which == 0   ? e->enc_cmd
                     : which == 1 ? e->step_cmd[0]
                                  : e->pf_cmd[WD_ENG_N_BUCKETS - 1];
  if (!p || !cmd || which < 0 || which > 2)
    return WD_EINVAL;
  int n = 0;
  if (!wd_vk_cmd_has_timestamps(cmd)) { /* a queue without timestamps: nothing to report */
    *ret_n = 0;
    return 0;
  }
  for (int i = 0; i < p->n; i++) {
    double ns = 0.0;
    /* Operation i runs from the previous mark (or the start, slot 0). */
    int rc = wd_vk_cmd_elapsed_ns(cmd, i == 0 ? 0u : (uint32_t)(1 + i), (uint32_t)(2 + i), &ns);
    if (rc < 0)
      return rc;
    int r = 0;
    while (r < n && strcmp(rows[r].kind, p->kind[i]) != 0)
      r++;
    if (r == n) {
      if (n == max_rows)
        return WD_ERANGE;
      rows[n++] = (wd_vk_prof_row_t){ .kind = p->kind[i] };
    }
    rows[r].ms += ns * 1e-6;
    rows[r].count++;
  }
  *ret_n = n;
  return 0;
}
