/*
 * cpu_decoder.c - the decoder over a batch of rows: step() (one row per
 * sequence), prefill() (one row per token of one sequence) and align()
 * (prefill's rows on a spare buffer, keeping cross-attention scores).
 *
 * A row r is a token at position r_pos[r] of the KV buffer r_buf[r],
 * attending to audio slot r_audio[r]. Per layer: every row's K and V are
 * written to its buffer first, then each row attends causally to positions
 * 0 .. r_pos[r], so a prefill's rows see each other as n steps would. The
 * GEMVs take all rows at once (each weight row read once per layer); a
 * long prompt's rows go to sgemm instead; the attention runs (row, head)
 * pairs in parallel. Nothing a step's row computes depends on the other
 * rows: its logits are the same alone or batched.
 */
#include <math.h>
#include <string.h>

#include "cpu_attn.h"
#include "cpu_gemm.h"
#include "cpu_internal.h"
#include "cpu_vmath.h"
#include "clock.h"
#include "error.h"

/* What align keeps: the scores of heads (layer, head) per row. */
typedef struct {
  int n_heads;
  const int (*heads)[2];
  float *qk; /* (n_heads, n_rows, n_audio_ctx) */
} keep_t;

typedef struct {
  wd_cpu_engine_t *e;
  int n, l, cross, tasks;
  const keep_t *keep;
  /* cross: rows of one audio slot in groups of up to WD_CPU_ATTN_ROWS,
   * group g being order[first[g] .. first[g] + count[g]) */
  int n_groups;
  int order[CPU_MAX_ROWS], first[CPU_MAX_ROWS], count[CPU_MAX_ROWS];
} attn_task_t;

/* Self-attention: one (row, head) pair per item, each row on its own
 * buffer up to its own position. */
static void self_item(const attn_task_t *a, int p, float *s) {
  wd_cpu_engine_t *e = a->e;
  const int d = e->hp.n_text_state, nh = e->hp.n_text_head, dh = d / nh;
  const size_t nl = (size_t)e->hp.n_text_layer, nc = (size_t)e->hp.n_text_ctx;
  const int r = p / nh, h = p % nh;
  const float *q = e->d_qkv + (size_t)r * 3 * (size_t)d + (size_t)(h * dh);
  float *o = e->d_o + (size_t)r * (size_t)d + (size_t)(h * dh);
  const size_t base = ((size_t)e->r_buf[r] * nl + (size_t)a->l) * nc * (size_t)d;
  wd_cpu_attend_one(q, e->kc + base + (size_t)(h * dh), e->vc + base + (size_t)(h * dh),
                    e->r_pos[r] + 1, d, dh, (float)(1.0 / sqrt((double)dh)), s, o, NULL);
}

/* Cross-attention: one (group, head) pair per item; the group's rows
 * share an audio slot, so its keys and values are read once for all of
 * them (beams, samples, fallback attempts, a prompt's rows). */
static void cross_item(const attn_task_t *a, int p, float *s) {
  wd_cpu_engine_t *e = a->e;
  const int d = e->hp.n_text_state, nh = e->hp.n_text_head, dh = d / nh;
  const size_t nl = (size_t)e->hp.n_text_layer, na = (size_t)e->hp.n_audio_ctx;
  const int g = p / nh, h = p % nh, R = a->count[g];
  const float *q[WD_CPU_ATTN_ROWS];
  float *o[WD_CPU_ATTN_ROWS], *keep[WD_CPU_ATTN_ROWS];
  for (int i = 0; i < R; i++) {
    const int r = a->order[a->first[g] + i];
    q[i] = e->d_qkv + (size_t)r * 3 * (size_t)d + (size_t)(h * dh);
    o[i] = e->d_o + (size_t)r * (size_t)d + (size_t)(h * dh);
    keep[i] = NULL;
    for (int k = 0; a->keep && k < a->keep->n_heads; k++)
      if (a->keep->heads[k][0] == a->l && a->keep->heads[k][1] == h)
        keep[i] = a->keep->qk + ((size_t)k * (size_t)a->n + (size_t)r) * na;
  }
  const int r0 = a->order[a->first[g]];
  const size_t base = ((size_t)e->r_audio[r0] * nl + (size_t)a->l) * na * (size_t)d;
  wd_cpu_attend_rows_f16(R, q, e->xk + base + (size_t)(h * dh), e->xv + base + (size_t)(h * dh),
                         (int)na, d, dh, (float)(1.0 / sqrt((double)dh)), s, o, keep);
}

static void attn_task(void *arg, int t) {
  const attn_task_t *a = arg;
  wd_cpu_engine_t *e = a->e;
  const size_t nc = (size_t)e->hp.n_text_ctx, na = (size_t)e->hp.n_audio_ctx;
  float *s = e->d_scores + (size_t)t * WD_CPU_ATTN_ROWS * (na > nc ? na : nc);
  const int items = (a->cross ? a->n_groups : a->n) * e->hp.n_text_head;
  for (int p = t; p < items; p += a->tasks) {
    if (a->cross)
      cross_item(a, p, s);
    else
      self_item(a, p, s);
  }
}

/* Rows into groups of one audio slot each, in row order, at most
 * WD_CPU_ATTN_ROWS per group. */
static void group_rows(const wd_cpu_engine_t *e, attn_task_t *a) {
  unsigned char taken[CPU_MAX_ROWS] = { 0 };
  int m = 0;
  a->n_groups = 0;
  for (int r = 0; r < a->n; r++) {
    if (taken[r])
      continue;
    const int g = a->n_groups++;
    a->first[g] = m;
    a->count[g] = 0;
    for (int q = r; q < a->n && a->count[g] < WD_CPU_ATTN_ROWS; q++)
      if (!taken[q] && e->r_audio[q] == e->r_audio[r]) {
        taken[q] = 1;
        a->order[m++] = q;
        a->count[g]++;
      }
  }
}

static void attention(wd_cpu_engine_t *e, int n, int l, int cross, const keep_t *keep) {
  attn_task_t a = { .e = e, .n = n, .l = l, .cross = cross, .keep = keep };
  if (cross)
    group_rows(e, &a);
  const int items = (cross ? a.n_groups : n) * e->hp.n_text_head;
  a.tasks = items < CPU_ATTN_TASKS ? items : CPU_ATTN_TASKS;
  wd_cpu_parallel(e, a.tasks, attn_task, &a);
}

static void ln_rows(const float *x, float *y, int n, int d, const float *g, const float *b) {
  for (int r = 0; r < n; r++)
    wd_cpu_layernorm_vec(x + (size_t)r * (size_t)d, d, g, b, y + (size_t)r * (size_t)d);
}

static void gemv(wd_cpu_engine_t *e, const cpu_mat_t *w, const float *b, int n, const float *x,
                 int ldx, float *y, int ldy, cpu_gemv_op_t op) {
  const cpu_gemv_t g = { .w = w, .b = b, .n_rows = n, .x = x, .ldx = ldx, .y = y, .ldy = ldy,
                         .op = op };
  wd_cpu_gemv_run(e, &g);
}

/* A prompt of at least this many rows runs its linear layers on sgemm
 * (cpu_gemm.h): each weight matrix is then read once into cache-sized
 * panels for all rows, where the GEMV streams it once per four rows. */
#define CPU_PREFILL_GEMM_ROWS 16

/* The linear layers of run_rows: sgemm for a long prompt, else the GEMV. */
static void linear(wd_cpu_engine_t *e, int gemm, const cpu_mat_t *w, const float *b, int n,
                   const float *x, int ldx, float *y, int ldy, cpu_gemv_op_t op) {
  if (gemm)
    wd_cpu_linear_rows(e, n, x, ldx, w, b, op, y, ldy);
  else
    gemv(e, w, b, n, x, ldx, y, ldy, op);
}

/* Runs rows 0 .. n (r_buf, r_pos, r_audio set) with tokens tok through
 * every layer, leaving the final hidden states, LayerNorm'd, in d_h.
 * prompt: the rows are one sequence's prompt (prefill, align), whose row
 * count no batch changes, so a long one may take sgemm; a step's rows stay
 * on the GEMV, whose sums do not depend on the batch. */
static void run_rows(wd_cpu_engine_t *e, int n, const int32_t *tok, const keep_t *keep,
                     int prompt) {
  const int gm = prompt && n >= CPU_PREFILL_GEMM_ROWS;
  const wd_hparams_t *hp = &e->hp;
  const int d = hp->n_text_state;
  const size_t nl = (size_t)hp->n_text_layer, nc = (size_t)hp->n_text_ctx, ud = (size_t)d;
  float *x = e->d_x, *h = e->d_h, *qkv = e->d_qkv;
  for (int r = 0; r < n; r++) {
    float *xr = x + (size_t)r * ud;
    const float *pe = e->dec_pos + (size_t)e->r_pos[r] * ud;
    wd_cpu_mat_row(&e->emb, tok[r], xr);
    for (int c = 0; c < d; c++)
      xr[c] += pe[c];
  }
  for (int l = 0; l < hp->n_text_layer; l++) {
    const cpu_dec_layer_t *L = &e->dec[l];
    /* Self attention: Q K V for every row; K and V go to the cache. */
    ln_rows(x, h, n, d, L->attn_g, L->attn_b);
    linear(e, gm, &L->qkv, L->bqkv, n, h, d, qkv, 3 * d, CPU_GEMV_SET);
    for (int r = 0; r < n; r++) {
      const size_t at = (((size_t)e->r_buf[r] * nl + (size_t)l) * nc + (size_t)e->r_pos[r]) * ud;
      memcpy(e->kc + at, qkv + (size_t)r * 3 * ud + ud, ud * sizeof(float));
      memcpy(e->vc + at, qkv + (size_t)r * 3 * ud + 2 * ud, ud * sizeof(float));
    }
    attention(e, n, l, 0, NULL);
    linear(e, gm, &L->o, L->bo, n, e->d_o, d, x, d, CPU_GEMV_ADD);
    /* Cross attention over the audio slot's K/V (computed at encode). */
    ln_rows(x, h, n, d, L->x_g, L->x_b);
    linear(e, gm, &L->xq, L->bxq, n, h, d, qkv, 3 * d, CPU_GEMV_SET);
    attention(e, n, l, 1, keep);
    linear(e, gm, &L->xo, L->bxo, n, e->d_o, d, x, d, CPU_GEMV_ADD);
    /* MLP: fc1 + GELU fused, fc2 into the residual. */
    ln_rows(x, h, n, d, L->mlp_g, L->mlp_b);
    linear(e, gm, &L->fc1, L->b1, n, h, d, e->d_f, 4 * d, CPU_GEMV_GELU);
    linear(e, gm, &L->fc2, L->b2, n, e->d_f, 4 * d, x, d, CPU_GEMV_ADD);
  }
  ln_rows(x, h, n, d, e->dec_ln_g, e->dec_ln_b);
}

/* logits (n, n_vocab) of hidden rows h (n, d): the tied projection. */
static void logits(wd_cpu_engine_t *e, int n, const float *h, float *out) {
  gemv(e, &e->emb, NULL, n, h, e->hp.n_text_state, out, e->hp.n_vocab, CPU_GEMV_SET);
}

int wd_cpu_step(void *self, int n, const int *seqs, const int32_t *tokens,
                const float **ret_logits) {
  wd_cpu_engine_t *e = self;
  if (n < 1 || n > e->max_seqs || !seqs || !tokens || !ret_logits)
    return WD_EINVAL;
  for (int i = 0; i < n; i++) {
    const int s = seqs[i];
    if (s < 0 || s >= e->max_seqs || tokens[i] < 0 || tokens[i] >= e->hp.n_vocab ||
        e->len[s] >= e->hp.n_text_ctx)
      return WD_EINVAL;
    for (int j = 0; j < i; j++)
      if (seqs[j] == s)
        return WD_EINVAL; /* core/engine.h: slots are distinct */
  }
  const double t0 = wd_now_ms();
  for (int i = 0; i < n; i++) {
    e->r_buf[i] = e->phys[seqs[i]];
    e->r_pos[i] = e->len[seqs[i]];
    e->r_audio[i] = e->audio[seqs[i]];
  }
  run_rows(e, n, tokens, NULL, 0);
  logits(e, n, e->d_h, e->d_logits);
  for (int i = 0; i < n; i++)
    e->len[seqs[i]]++;
  *ret_logits = e->d_logits;
  e->step_ms_sum += wd_now_ms() - t0;
  e->n_steps++;
  return 0;
}

static int tokens_ok(const wd_cpu_engine_t *e, int n, const int32_t *tokens) {
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= e->hp.n_vocab)
      return 0;
  return 1;
}

int wd_cpu_prefill(void *self, int s, int n, const int32_t *tokens, const float **ret_logits) {
  wd_cpu_engine_t *e = self;
  if (s < 0 || s >= e->max_seqs || n < 1 || n > CPU_MAX_PREFILL || !tokens || !ret_logits ||
      e->len[s] + n > e->hp.n_text_ctx || !tokens_ok(e, n, tokens))
    return WD_EINVAL;
  for (int i = 0; i < n; i++) {
    e->r_buf[i] = e->phys[s];
    e->r_pos[i] = e->len[s] + i;
    e->r_audio[i] = e->audio[s];
  }
  run_rows(e, n, tokens, NULL, 1);
  /* Only the last token's logits are asked for. */
  logits(e, 1, e->d_h + (size_t)(n - 1) * (size_t)e->hp.n_text_state, e->d_logits);
  e->len[s] += n;
  *ret_logits = e->d_logits;
  return 0;
}

int wd_cpu_align(void *self, int a, int n, const int32_t *tokens, int n_text, int n_heads,
                 const int (*heads)[2], float *qk, float *probs) {
  wd_cpu_engine_t *e = self;
  const wd_hparams_t *hp = &e->hp;
  if (a < 0 || a >= e->max_audio || n < 1 || n > CPU_MAX_PREFILL || n > hp->n_text_ctx ||
      !e->audio_ok[a] || !tokens || !tokens_ok(e, n, tokens) || n_text < 1 || n_text > hp->n_vocab ||
      n_heads < 0 || (n_heads > 0 && (!heads || !qk)))
    return WD_EINVAL;
  for (int k = 0; k < n_heads; k++)
    if (heads[k][0] < 0 || heads[k][0] >= hp->n_text_layer || heads[k][1] < 0 ||
        heads[k][1] >= hp->n_text_head)
      return WD_EINVAL;
  /* A buffer no slot holds (there are two). */
  int spare = 0;
  for (int used = 1; used && spare < e->n_bufs; spare += used) {
    used = 0;
    for (int s = 0; s < e->max_seqs; s++)
      used |= e->phys[s] == spare;
  }
  if (spare >= e->n_bufs)
    return WD_EINTERNAL;
  for (int i = 0; i < n; i++) {
    e->r_buf[i] = spare;
    e->r_pos[i] = i;
    e->r_audio[i] = a;
  }
  const keep_t keep = { .n_heads = n_heads, .heads = heads, .qk = qk };
  run_rows(e, n, tokens, n_heads > 0 ? &keep : NULL, 1);
  if (!probs)
    return 0;
  /* openai timing.py: logits[:, :eot].softmax(-1) at the next token, in
   * chunks of max_seqs rows through the logits buffer. */
  const int nv = hp->n_vocab, d = hp->n_text_state;
  for (int r0 = 0; r0 < n - 1; r0 += e->max_seqs) {
    const int m = n - 1 - r0 < e->max_seqs ? n - 1 - r0 : e->max_seqs;
    logits(e, m, e->d_h + (size_t)r0 * (size_t)d, e->d_logits);
    for (int i = 0; i < m; i++) {
      const float *lg = e->d_logits + (size_t)i * (size_t)nv;
      const int32_t t = tokens[r0 + i + 1];
      double mx = -INFINITY, sum = 0.0;
      for (int v = 0; v < n_text; v++)
        mx = lg[v] > mx ? lg[v] : mx;
      for (int v = 0; v < n_text; v++)
        sum += exp((double)lg[v] - mx);
      probs[r0 + i] = t < n_text ? (float)(exp((double)lg[t] - mx) / sum) : 0.0f;
    }
  }
  return 0;
}
