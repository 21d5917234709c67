/*
 * cpu_engine.c - load and plan the CPU engine, sequence slots (see
 * cpu_engine.h). Everything a job needs is allocated here, once.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_blas.h"
#include "cpu_features.h"
#include "cpu_gemm.h"
#include "cpu_internal.h"
#include "cpu_rgemm.h"
#include "error.h"
#include "quant.h"

int wd_cpu_row_chunks(const wd_cpu_engine_t *e, int rows, int *rows_per) {
  const int n = e->n_threads * 4 < rows ? e->n_threads * 4 : rows;
  *rows_per = n > 0 ? (rows + n - 1) / n : 1;
  return n > 0 ? (rows + *rows_per - 1) / *rows_per : 0;
}

void wd_cpu_parallel(wd_cpu_engine_t *e, int n, void (*fn)(void *arg, int i), void *arg) {
  if (n <= 0)
    return;
  if (n == 1 || e->n_threads == 1) {
    for (int i = 0; i < n; i++)
      fn(arg, i);
    return;
  }
  wd_pool_run(e->pool, n, fn, arg);
}

typedef struct {
  const cpu_gemv_t *g;
  int chunk, path;
} gemv_task_t;

static void gemv_task(void *arg, int i) {
  const gemv_task_t *t = arg;
  const int n = t->g->w->n_out, o0 = i * t->chunk;
  const int o1 = o0 + t->chunk < n ? o0 + t->chunk : n;
  wd_cpu_gemv_range_path(t->g, o0, o1, t->path);
}

void wd_cpu_gemv_run_path(wd_cpu_engine_t *e, const cpu_gemv_t *g, int path) {
  if (g->w->ct) { /* --compute-type bf16 / int8 */
    wd_cpu_rgemm_run(e, g->n_rows, g->x, g->ldx, g->w, 0, g->w->n_out, g->b, g->op, g->y, g->ldy);
    return;
  }
  /* Chunks of outputs, a few per thread so that uneven threads even out;
   * a multiple of 8 outputs keeps each chunk's y writes off its
   * neighbours' cache lines. Which thread computes an output never changes
   * its value. */
  const int n = g->w->n_out;
  int chunk = (n + e->n_threads * 4 - 1) / (e->n_threads * 4);
  chunk = (chunk + 7) / 8 * 8;
  if (chunk < 16)
    chunk = 16;
  gemv_task_t t = { g, chunk, path };
  wd_cpu_parallel(e, (n + chunk - 1) / chunk, gemv_task, &t);
}

void wd_cpu_gemv_run(wd_cpu_engine_t *e, const cpu_gemv_t *g) {
  const int r = g->n_rows < CPU_GEMV_PICK_ROWS ? g->n_rows : CPU_GEMV_PICK_ROWS;
  wd_cpu_gemv_run_path(e, g, e->gemv_path[r > 0 ? r : 1]);
}

static void free_enc_layer(cpu_enc_layer_t *L) {
  wd_cpu_mat_free(&L->qkv), wd_cpu_mat_free(&L->o);
  wd_cpu_mat_free(&L->fc1), wd_cpu_mat_free(&L->fc2);
  free(L->bqkv), free(L->bo), free(L->b1), free(L->b2);
  free(L->attn_g), free(L->attn_b), free(L->mlp_g), free(L->mlp_b);
}

static void free_dec_layer(cpu_dec_layer_t *L) {
  wd_cpu_mat_free(&L->qkv), wd_cpu_mat_free(&L->o), wd_cpu_mat_free(&L->xq);
  wd_cpu_mat_free(&L->xo);
  wd_cpu_mat_free(&L->fc1), wd_cpu_mat_free(&L->fc2), wd_cpu_mat_free(&L->xkv);
  free(L->bqkv), free(L->bo), free(L->bxq), free(L->bxo), free(L->bxkv), free(L->b1);
  free(L->b2), free(L->attn_g), free(L->attn_b), free(L->x_g), free(L->x_b), free(L->mlp_g);
  free(L->mlp_b);
}

void wd_cpu_engine_free(wd_cpu_engine_t *e) {
  if (!e)
    return;
  wd_pool_free(e->pool);
  wd_cpu_mat_free(&e->conv1), wd_cpu_mat_free(&e->conv2), wd_cpu_mat_free(&e->emb);
  free(e->conv1_b), free(e->conv2_b), free(e->enc_pos), free(e->enc_ln_g), free(e->enc_ln_b);
  free(e->dec_pos), free(e->dec_ln_g), free(e->dec_ln_b);
  for (int l = 0; e->enc && l < e->hp.n_audio_layer; l++)
    free_enc_layer(&e->enc[l]);
  for (int l = 0; e->dec && l < e->hp.n_text_layer; l++)
    free_dec_layer(&e->dec[l]);
  free(e->enc), free(e->dec);
  free(e->xk), free(e->xv), free(e->audio_ok), free(e->kc), free(e->vc);
  free(e->phys), free(e->len), free(e->audio);
  free(e->t_phys), free(e->t_len), free(e->t_audio), free(e->t_used), free(e->t_isdst);
  free(e->t_copy);
  free(e->w_f32);
  free(e->e_melT), free(e->e_col), free(e->e_x1), free(e->e_x), free(e->e_h), free(e->e_o);
  free(e->e_qkv), free(e->e_f), free(e->e_s);
  free(e->d_x), free(e->d_h), free(e->d_o), free(e->d_qkv), free(e->d_f), free(e->d_logits);
  free(e->d_scores), free(e->d_keep), free(e->r_buf), free(e->r_pos), free(e->r_audio);
  free(e->r_xq), free(e->r_xs);
  free(e);
}

/* wd_cpu_parallel as cpu_rgemm.h's cpu_par_fn. */
static void engine_par(void *ctx, int n, void (*fn)(void *arg, int i), void *arg) {
  wd_cpu_parallel(ctx, n, fn, arg);
}

/* wd_cpu_mat_load, then the conversion of --compute-type bf16 / int8
 * (cpu_rgemm.h) at once, the model's pages of the tensors released after
 * each matrix: the peak holds one matrix twice, not the model. */
static int mat_load(wd_cpu_engine_t *e, cpu_mat_t *w, const char *const *names, const int *rows,
                    int n, int n_in, char *err, size_t el) {
  const wd_model_t *m = e->m;
  int rc = wd_cpu_mat_load(w, m, names, rows, n, n_in, 0, err, el);
  if (rc < 0 || e->compute == WD_CPU_COMPUTE_F32)
    return rc;
  if ((rc = wd_cpu_mat_reduce(w, e->compute, engine_par, e)) < 0)
    return rc;
  for (int i = 0; i < n; i++)
    (void)wd_model_release(m, wd_model_tensor(m, names[i]));
  return 0;
}

/* Loads the weights of one attention block: Q, K, V stacked, out; biases
 * with a zero block where the key has none. */
static int load_attn(wd_cpu_engine_t *e, const char *p, int d, int d_in,
                     cpu_mat_t *qkv, float **bqkv, cpu_mat_t *o, float **bo, char *err,
                     size_t el) {
  char nq[160], nk[160], nv[160], no[160];
  snprintf(nq, sizeof nq, "%s.query.weight", p);
  snprintf(nk, sizeof nk, "%s.key.weight", p);
  snprintf(nv, sizeof nv, "%s.value.weight", p);
  snprintf(no, sizeof no, "%s.out.weight", p);
  const char *names[3] = { nq, nk, nv };
  const int rows[3] = { d, d, d };
  const wd_model_t *m = e->m;
  int rc = mat_load(e, qkv, names, rows, 3, d_in, err, el);
  if (rc < 0)
    return rc;
  const char *on[1] = { no };
  if ((rc = mat_load(e, o, on, rows, 1, d, err, el)) < 0)
    return rc;
  float *bq, *bv;
  snprintf(nq, sizeof nq, "%s.query.bias", p);
  snprintf(nv, sizeof nv, "%s.value.bias", p);
  snprintf(no, sizeof no, "%s.out.bias", p);
  *bqkv = wd_cpu_alloc(3 * (size_t)d * sizeof(float));
  bq = wd_cpu_vec_load(m, nq, (size_t)d, err, el);
  bv = wd_cpu_vec_load(m, nv, (size_t)d, err, el);
  *bo = wd_cpu_vec_load(m, no, (size_t)d, err, el);
  if (*bqkv && bq && bv) {
    memcpy(*bqkv, bq, (size_t)d * sizeof(float));
    memcpy(*bqkv + 2 * (size_t)d, bv, (size_t)d * sizeof(float));
  }
  rc = (*bqkv && bq && bv && *bo) ? 0 : WD_EMODEL;
  free(bq), free(bv);
  return rc;
}

static int load_mlp(wd_cpu_engine_t *e, const char *p, int d, cpu_mat_t *fc1,
                    float **b1, cpu_mat_t *fc2, float **b2, float **g, float **b, char *err,
                    size_t el) {
  char n1[160], n2[160];
  snprintf(n1, sizeof n1, "%s.mlp.0.weight", p);
  snprintf(n2, sizeof n2, "%s.mlp.2.weight", p);
  const char *a1[1] = { n1 }, *a2[1] = { n2 };
  const int r1[1] = { 4 * d }, r2[1] = { d };
  const wd_model_t *m = e->m;
  int rc = mat_load(e, fc1, a1, r1, 1, d, err, el);
  if (rc == 0)
    rc = mat_load(e, fc2, a2, r2, 1, 4 * d, err, el);
  if (rc < 0)
    return rc;
  snprintf(n1, sizeof n1, "%s.mlp.0.bias", p);
  snprintf(n2, sizeof n2, "%s.mlp.2.bias", p);
  *b1 = wd_cpu_vec_load(m, n1, 4 * (size_t)d, err, el);
  *b2 = wd_cpu_vec_load(m, n2, (size_t)d, err, el);
  snprintf(n1, sizeof n1, "%s.mlp_ln.weight", p);
  snprintf(n2, sizeof n2, "%s.mlp_ln.bias", p);
  *g = wd_cpu_vec_load(m, n1, (size_t)d, err, el);
  *b = wd_cpu_vec_load(m, n2, (size_t)d, err, el);
  return (*b1 && *b2 && *g && *b) ? 0 : WD_EMODEL;
}

static int load_ln(const wd_model_t *m, const char *p, int d, float **g, float **b, char *err,
                   size_t el) {
  char n[160];
  snprintf(n, sizeof n, "%s.weight", p);
  *g = wd_cpu_vec_load(m, n, (size_t)d, err, el);
  snprintf(n, sizeof n, "%s.bias", p);
  *b = wd_cpu_vec_load(m, n, (size_t)d, err, el);
  return (*g && *b) ? 0 : WD_EMODEL;
}

/* A convolution kernel stored in a block type is dequantized at load (its
 * rows, n_in * 3 long, need not be whole 32-element blocks); f16 and f32
 * stay as stored. */
static int conv_f32(const wd_model_t *m, const char *name) {
  const wd_tensor_t *t = wd_model_tensor(m, name);
  return t && wd_dtype_is_quant(t->type);
}

static int load_weights(wd_cpu_engine_t *e, char *err, size_t el) {
  const wd_model_t *m = e->m;
  const wd_hparams_t *hp = &e->hp;
  const int da = hp->n_audio_state, d = hp->n_text_state;
  int rc = 0;
  {
    const char *c1[1] = { "encoder.conv1.weight" }, *c2[1] = { "encoder.conv2.weight" };
    const int r[1] = { da };
    if ((rc = wd_cpu_mat_load(&e->conv1, m, c1, r, 1, hp->n_mels * 3, conv_f32(m, c1[0]), err,
                              el)) < 0 ||
        (rc = wd_cpu_mat_load(&e->conv2, m, c2, r, 1, da * 3, conv_f32(m, c2[0]), err, el)) < 0)
      return rc;
  }
  e->conv1_b = wd_cpu_vec_load(m, "encoder.conv1.bias", (size_t)da, err, el);
  e->conv2_b = wd_cpu_vec_load(m, "encoder.conv2.bias", (size_t)da, err, el);
  e->enc_pos = wd_cpu_vec_load(m, "encoder.positional_embedding",
                               (size_t)hp->n_audio_ctx * (size_t)da, err, el);
  if (!e->conv1_b || !e->conv2_b || !e->enc_pos)
    return WD_EMODEL;
  if ((rc = load_ln(m, "encoder.ln_post", da, &e->enc_ln_g, &e->enc_ln_b, err, el)) < 0)
    return rc;
  e->enc = calloc((size_t)hp->n_audio_layer, sizeof *e->enc);
  e->dec = calloc((size_t)hp->n_text_layer, sizeof *e->dec);
  if (!e->enc || !e->dec)
    return WD_ENOMEM;
  char p[128], q[128];
  for (int l = 0; l < hp->n_audio_layer; l++) {
    cpu_enc_layer_t *L = &e->enc[l];
    snprintf(p, sizeof p, "encoder.blocks.%d.attn", l);
    if ((rc = load_attn(e, p, da, da, &L->qkv, &L->bqkv, &L->o, &L->bo, err, el)) < 0)
      return rc;
    snprintf(p, sizeof p, "encoder.blocks.%d.attn_ln", l);
    if ((rc = load_ln(m, p, da, &L->attn_g, &L->attn_b, err, el)) < 0)
      return rc;
    snprintf(p, sizeof p, "encoder.blocks.%d", l);
    if ((rc = load_mlp(e, p, da, &L->fc1, &L->b1, &L->fc2, &L->b2, &L->mlp_g, &L->mlp_b, err,
                       el)) < 0)
      return rc;
  }
  for (int l = 0; l < hp->n_text_layer; l++) {
    cpu_dec_layer_t *L = &e->dec[l];
    snprintf(p, sizeof p, "decoder.blocks.%d.attn", l);
    if ((rc = load_attn(e, p, d, d, &L->qkv, &L->bqkv, &L->o, &L->bo, err, el)) < 0)
      return rc;
    snprintf(p, sizeof p, "decoder.blocks.%d.attn_ln", l);
    if ((rc = load_ln(m, p, d, &L->attn_g, &L->attn_b, err, el)) < 0)
      return rc;
    /* Cross attention: Q and out for the GEMV; K and V (sgemm) for the
     * once-per-window projection of the encoder output. */
    snprintf(p, sizeof p, "decoder.blocks.%d.cross_attn", l);
    char nq[160], nk[160], nv[160], no[160];
    snprintf(nq, sizeof nq, "%s.query.weight", p);
    snprintf(nk, sizeof nk, "%s.key.weight", p);
    snprintf(nv, sizeof nv, "%s.value.weight", p);
    snprintf(no, sizeof no, "%s.out.weight", p);
    const char *aq[1] = { nq }, *ao[1] = { no }, *akv[2] = { nk, nv };
    const int r1[1] = { d }, r2[2] = { d, d };
    if ((rc = mat_load(e, &L->xq, aq, r1, 1, d, err, el)) < 0 ||
        (rc = mat_load(e, &L->xo, ao, r1, 1, d, err, el)) < 0 ||
        (rc = mat_load(e, &L->xkv, akv, r2, 2, da, err, el)) < 0)
      return rc;
    snprintf(nq, sizeof nq, "%s.query.bias", p);
    snprintf(nv, sizeof nv, "%s.value.bias", p);
    snprintf(no, sizeof no, "%s.out.bias", p);
    L->bxq = wd_cpu_vec_load(m, nq, (size_t)d, err, el);
    L->bxo = wd_cpu_vec_load(m, no, (size_t)d, err, el);
    L->bxkv = wd_cpu_alloc(2 * (size_t)d * sizeof(float));
    float *bv = wd_cpu_vec_load(m, nv, (size_t)d, err, el);
    if (L->bxkv && bv)
      memcpy(L->bxkv + d, bv, (size_t)d * sizeof(float));
    const int ok = L->bxq && L->bxo && L->bxkv && bv;
    free(bv);
    if (!ok)
      return WD_EMODEL;
    snprintf(q, sizeof q, "decoder.blocks.%d.cross_attn_ln", l);
    if ((rc = load_ln(m, q, d, &L->x_g, &L->x_b, err, el)) < 0)
      return rc;
    snprintf(p, sizeof p, "decoder.blocks.%d", l);
    if ((rc = load_mlp(e, p, d, &L->fc1, &L->b1, &L->fc2, &L->b2, &L->mlp_g, &L->mlp_b, err,
                       el)) < 0)
      return rc;
  }
  const char *en[1] = { "decoder.token_embedding.weight" };
  const int er[1] = { hp->n_vocab };
  if ((rc = mat_load(e, &e->emb, en, er, 1, d, err, el)) < 0)
    return rc;
  e->dec_pos = wd_cpu_vec_load(m, "decoder.positional_embedding",
                               (size_t)hp->n_text_ctx * (size_t)d, err, el);
  if (!e->dec_pos)
    return WD_EMODEL;
  if ((rc = load_ln(m, "decoder.ln", d, &e->dec_ln_g, &e->dec_ln_b, err, el)) < 0)
    return rc;
  return 0;
}

/* What the matrices take (stats; tests check it
 * against wd_cpu_engine_plan). */
static void count_weights(wd_cpu_engine_t *e) {
  const wd_hparams_t *hp = &e->hp;
  /* What the matrices take (vectors are small). */
  double b = (double)wd_cpu_mat_bytes(&e->conv1) + (double)wd_cpu_mat_bytes(&e->conv2) +
             (double)wd_cpu_mat_bytes(&e->emb);
  for (int l = 0; l < hp->n_audio_layer; l++) {
    const cpu_enc_layer_t *L = &e->enc[l];
    b += (double)(wd_cpu_mat_bytes(&L->qkv) + wd_cpu_mat_bytes(&L->o) + wd_cpu_mat_bytes(&L->fc1) +
                  wd_cpu_mat_bytes(&L->fc2));
  }
  for (int l = 0; l < hp->n_text_layer; l++) {
    const cpu_dec_layer_t *L = &e->dec[l];
    b += (double)(wd_cpu_mat_bytes(&L->qkv) + wd_cpu_mat_bytes(&L->o) + wd_cpu_mat_bytes(&L->xq) +
                  wd_cpu_mat_bytes(&L->xo) + wd_cpu_mat_bytes(&L->xkv) + wd_cpu_mat_bytes(&L->fc1) +
                  wd_cpu_mat_bytes(&L->fc2));
  }
  e->weight_bytes = b;
  /* Of those, the matrices that read the model's bytes in place: a single
   * tensor kept as stored (cpu_mat.h). */
  double mb = (double)(wd_cpu_mat_bytes(&e->emb) - wd_cpu_mat_own_bytes(&e->emb)) +
              (double)(wd_cpu_mat_bytes(&e->conv1) - wd_cpu_mat_own_bytes(&e->conv1)) +
              (double)(wd_cpu_mat_bytes(&e->conv2) - wd_cpu_mat_own_bytes(&e->conv2));
  for (int l = 0; l < hp->n_audio_layer; l++) {
    const cpu_mat_t *ms[] = { &e->enc[l].qkv, &e->enc[l].o, &e->enc[l].fc1, &e->enc[l].fc2 };
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
      mb += (double)(wd_cpu_mat_bytes(ms[i]) - wd_cpu_mat_own_bytes(ms[i]));
  }
  for (int l = 0; l < hp->n_text_layer; l++) {
    const cpu_mat_t *ms[] = { &e->dec[l].qkv, &e->dec[l].o,   &e->dec[l].xq, &e->dec[l].xo,
                              &e->dec[l].xkv, &e->dec[l].fc1, &e->dec[l].fc2 };
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
      mb += (double)(wd_cpu_mat_bytes(ms[i]) - wd_cpu_mat_own_bytes(ms[i]));
  }
  e->mapped_bytes = mb;
}

/* wd_cpu_alloc that counts what the caches and scratch take (stats,
 * checked against wd_cpu_engine_plan by tests/cpu). */
static void *state_alloc(wd_cpu_engine_t *e, size_t bytes) {
  e->state_bytes += (double)bytes;
  return wd_cpu_alloc(bytes);
}

/* The caches and scratch of wd_cpu_buffers' table, and the small
 * per-slot and per-row bookkeeping arrays beside them. */
static int plan_buffers(wd_cpu_engine_t *e, const wd_cpu_engine_opts_t *o) {
  cpu_buf_t b[CPU_BUF_N];
  wd_cpu_buffers(&e->hp, o, b, &e->n_bufs, &e->max_rows);
  void *p[CPU_BUF_N] = { 0 };
  int ok = 1;
  for (int i = 0; i < CPU_BUF_N; i++)
    if (b[i].bytes)
      ok &= (p[i] = state_alloc(e, b[i].bytes)) != NULL;
  e->xk = p[CPU_BUF_XK], e->xv = p[CPU_BUF_XV];
  e->kc = p[CPU_BUF_KC], e->vc = p[CPU_BUF_VC];
  e->w_f32 = p[CPU_BUF_W_F32];
  e->e_melT = p[CPU_BUF_E_MELT], e->e_col = p[CPU_BUF_E_COL], e->e_x1 = p[CPU_BUF_E_X1];
  e->e_x = p[CPU_BUF_E_X], e->e_h = p[CPU_BUF_E_H], e->e_o = p[CPU_BUF_E_O];
  e->e_qkv = p[CPU_BUF_E_QKV], e->e_f = p[CPU_BUF_E_F], e->e_s = p[CPU_BUF_E_S];
  e->d_x = p[CPU_BUF_D_X], e->d_h = p[CPU_BUF_D_H], e->d_o = p[CPU_BUF_D_O];
  e->d_qkv = p[CPU_BUF_D_QKV], e->d_f = p[CPU_BUF_D_F], e->d_logits = p[CPU_BUF_D_LOGITS];
  e->d_scores = p[CPU_BUF_D_SCORES];
  e->r_xq = p[CPU_BUF_R_XQ], e->r_xs = p[CPU_BUF_R_XS];
  const size_t ms = (size_t)e->max_seqs, rows = (size_t)e->max_rows;
  e->audio_ok = calloc((size_t)e->max_audio, sizeof(int));
  e->phys = calloc(ms, sizeof(int)), e->len = calloc(ms, sizeof(int));
  e->audio = calloc(ms, sizeof(int));
  e->t_phys = calloc(ms, sizeof(int)), e->t_len = calloc(ms, sizeof(int));
  e->t_audio = calloc(ms, sizeof(int)), e->t_copy = calloc(ms, sizeof(int));
  e->t_used = calloc((size_t)e->n_bufs, sizeof(int)), e->t_isdst = calloc(ms, sizeof(int));
  e->r_buf = calloc(rows, sizeof(int)), e->r_pos = calloc(rows, sizeof(int));
  e->r_audio = calloc(rows, sizeof(int));
  if (!(ok && e->audio_ok && e->phys && e->len && e->audio && e->t_phys && e->t_len &&
        e->t_audio && e->t_copy && e->t_used && e->t_isdst && e->r_buf && e->r_pos &&
        e->r_audio))
    return WD_ENOMEM;
  for (int s = 0; s < e->max_seqs; s++)
    e->phys[s] = s;
  return 0;
}

static int cpu_seq_reset(void *self, int s, int a) {
  wd_cpu_engine_t *e = self;
  if (s < 0 || s >= e->max_seqs || a < 0 || a >= e->max_audio)
    return WD_EINVAL;
  e->len[s] = 0;
  e->audio[s] = a;
  return 0;
}

/* seq_copy without a staging copy of the caches: a destination whose
 * source slot is itself overwritten (and not yet taken) takes the source's
 * buffer; every other destination copies the rows in use into a buffer no
 * slot keeps. With n_bufs = max_seqs + 2 there is always one: the buffers
 * kept or taken number max_seqs - copies. Sources are read before anything
 * is written, since no kept or taken buffer is ever a copy's target. */
static int cpu_seq_copy(void *self, int n, const int *dst, const int *src) {
  wd_cpu_engine_t *e = self;
  if (n < 0 || n > e->max_seqs || (n > 0 && (!dst || !src)))
    return WD_EINVAL;
  for (int i = 0; i < n; i++) {
    if (dst[i] < 0 || dst[i] >= e->max_seqs || src[i] < 0 || src[i] >= e->max_seqs)
      return WD_EINVAL;
    for (int j = 0; j < i; j++)
      if (dst[j] == dst[i])
        return WD_EINVAL;
  }
  for (int s = 0; s < e->max_seqs; s++)
    e->t_isdst[s] = 0;
  for (int b = 0; b < e->n_bufs; b++)
    e->t_used[b] = 0;
  for (int i = 0; i < n; i++)
    e->t_isdst[dst[i]] = 1;
  for (int s = 0; s < e->max_seqs; s++)
    if (!e->t_isdst[s])
      e->t_used[e->phys[s]] = 1;
  for (int i = 0; i < n; i++) {
    const int b = e->phys[src[i]];
    e->t_len[i] = e->len[src[i]];
    e->t_audio[i] = e->audio[src[i]];
    e->t_copy[i] = !e->t_isdst[src[i]] || e->t_used[b];
    if (!e->t_copy[i]) {
      e->t_phys[i] = b;
      e->t_used[b] = 1;
    }
  }
  const size_t d = (size_t)e->hp.n_text_state, nc = (size_t)e->hp.n_text_ctx;
  const size_t nl = (size_t)e->hp.n_text_layer;
  for (int i = 0; i < n; i++) {
    if (!e->t_copy[i])
      continue;
    int fb = 0;
    while (fb < e->n_bufs && e->t_used[fb])
      fb++;
    if (fb == e->n_bufs)
      return WD_EINTERNAL; /* cannot happen: see above */
    e->t_used[fb] = 1;
    e->t_phys[i] = fb;
    const size_t from = (size_t)e->phys[src[i]], rows = (size_t)e->t_len[i] * d;
    for (size_t l = 0; l < nl; l++) {
      const size_t so = (from * nl + l) * nc * d, dof = ((size_t)fb * nl + l) * nc * d;
      memcpy(e->kc + dof, e->kc + so, rows * sizeof(float));
      memcpy(e->vc + dof, e->vc + so, rows * sizeof(float));
    }
  }
  for (int i = 0; i < n; i++) {
    e->phys[dst[i]] = e->t_phys[i];
    e->len[dst[i]] = e->t_len[i];
    e->audio[dst[i]] = e->t_audio[i];
  }
  return 0;
}

/* The features --compute-type picks its kernels from: none where
 * WHISPERD_CPU_PORTABLE asks for the portable kernels (the arm64 path,
 * which has no int8 or bf16 kernels of its own). */
static unsigned compute_features(void) {
  return wd_cpu_force_portable() ? 0u : wd_cpu_features();
}

int wd_cpu_engine_new(const wd_model_t *m, const wd_cpu_engine_opts_t *o,
                      wd_cpu_engine_t **ret, char *err, size_t err_len) {
  char dummy[8];
  if (!err) {
    err = dummy;
    err_len = sizeof dummy;
  }
  err[0] = '\0';
  if (!m || !o || !ret || o->max_seqs < 1 || o->max_seqs > WD_CPU_MAX_SEQS || o->max_audio < 1 ||
      o->max_audio > 64 || o->n_threads < 0) {
    snprintf(err, err_len, "bad CPU engine options");
    return WD_EINVAL;
  }
  const wd_hparams_t *hp = wd_model_hparams(m);
  if (hp->n_audio_state % hp->n_audio_head || hp->n_text_state % hp->n_text_head) {
    snprintf(err, err_len, "state not a multiple of the heads");
    return WD_EMODEL;
  }
  if (o->compute != WD_CPU_COMPUTE_F32 && hp->n_text_state % 16) {
    /* The cross K/V product starts V at output n_text_state: a packed
     * block boundary (cpu_rgemm.h). Every Whisper model has it. */
    snprintf(err, err_len, "--compute-type %s needs a text state that is a multiple of 16",
             wd_cpu_compute_name(o->compute));
    return WD_EMODEL;
  }
  const unsigned feat = compute_features();
  const char *refusal = wd_cpu_rgemm_refusal(o->compute, feat);
  if (refusal) {
    snprintf(err, err_len, "%s", refusal);
    return WD_EINVAL;
  }
  wd_cpu_gemv_init();
  wd_cpu_engine_t *e = calloc(1, sizeof *e);
  if (!e)
    return WD_ENOMEM;
  e->m = m;
  e->hp = *hp;
  e->max_seqs = o->max_seqs;
  e->max_audio = o->max_audio;
  e->compute = o->compute;
  e->rpath = (int)wd_cpu_rgemm_pick(o->compute, feat);
  e->max_rows = o->max_seqs > CPU_MAX_PREFILL ? o->max_seqs : CPU_MAX_PREFILL;
  long nc = sysconf(_SC_NPROCESSORS_ONLN);
  e->n_threads = o->n_threads ? o->n_threads : (nc > 0 ? (int)(nc > 64 ? 64 : nc) : 1);
  int rc = wd_pool_new(e->n_threads - 1, &e->pool);
  if (rc == 0)
    rc = load_weights(e, err, err_len);
  if (rc == 0)
    count_weights(e);
  if (rc == 0)
    rc = plan_buffers(e, o);
  if (rc < 0) {
    if (!err[0])
      snprintf(err, err_len, "%s", rc == WD_ENOMEM ? "out of memory" : "cannot plan the CPU engine");
    wd_cpu_engine_free(e);
    return rc;
  }
  /* sgemm runs inside the pool's tasks, one thread each (cpu_gemm.c):
   * OpenBLAS's own threads are joined, not left to spin through the
   * measurement and the warm-up. Process-wide, the same for every
   * engine. */
  wd_cpu_blas_one_thread();
  wd_cpu_kernels_pick(e);
  e->iface = (wd_engine_t){
    .self = e, .n_vocab = hp->n_vocab, .n_mels = hp->n_mels, .n_text_ctx = hp->n_text_ctx,
    .max_seqs = e->max_seqs, .max_audio = e->max_audio,
    .encode = wd_cpu_encode, .seq_reset = cpu_seq_reset, .step = wd_cpu_step,
    .max_prefill = CPU_MAX_PREFILL, .prefill = wd_cpu_prefill, .seq_copy = cpu_seq_copy,
    .align = wd_cpu_align, .n_audio_ctx = hp->n_audio_ctx,
  };
  *ret = e;
  return 0;
}

const wd_engine_t *wd_cpu_engine_iface(wd_cpu_engine_t *e) { return &e->iface; }

int wd_cpu_engine_read_encoded(const wd_cpu_engine_t *e, float *out) {
  if (!e || !out)
    return WD_EINVAL;
  memcpy(out, e->e_x,
         (size_t)e->hp.n_audio_ctx * (size_t)e->hp.n_audio_state * sizeof(float));
  return 0;
}

void wd_cpu_engine_stats(const wd_cpu_engine_t *e, wd_cpu_engine_stats_t *st) {
  memset(st, 0, sizeof *st);
  st->encode_ms = e->encode_ms;
  st->cross_ms = e->cross_ms;
  st->attn_ms = e->attn_ms;
  st->n_steps = e->n_steps;
  st->step_ms = e->n_steps ? e->step_ms_sum / (double)e->n_steps : 0.0;
  st->n_threads = e->n_threads;
  st->kernel = wd_cpu_gemv_kernel();
  st->kernel_choice = e->gemv_choice[0] ? e->gemv_choice : NULL;
  st->attn_choice = e->attn_choice[0] ? e->attn_choice : NULL;
  st->enc_attn = e->enc_blocked ? "blocked (AVX-512)" : "sgemm (OpenBLAS)";
  st->pick_source = e->pick_source;
  st->pick_note = e->pick_note;
  st->gemm = wd_cpu_blas_path();
  st->compute = wd_cpu_compute_name(e->compute);
  st->compute_path = e->compute ? wd_cpu_rpath_name((cpu_rpath_t)e->rpath) : NULL;
  st->weight_mib = e->weight_bytes / (1024.0 * 1024.0);
  st->mapped_mib = e->mapped_bytes / (1024.0 * 1024.0);
  st->state_mib = e->state_bytes / (1024.0 * 1024.0);
}

const char *wd_cpu_engine_kernel(void) { return wd_cpu_gemv_kernel(); }

const char *wd_cpu_compute_name(wd_cpu_compute_t c) {
  return c == WD_CPU_COMPUTE_BF16 ? "bf16" : c == WD_CPU_COMPUTE_INT8 ? "int8" : "f32";
}

int wd_cpu_compute_parse(const char *name, wd_cpu_compute_t *ret) {
  *ret = WD_CPU_COMPUTE_F32;
  if (!name || !name[0] || strcmp(name, "f32") == 0)
    return 0;
  if (strcmp(name, "bf16") == 0)
    *ret = WD_CPU_COMPUTE_BF16;
  else if (strcmp(name, "int8") == 0)
    *ret = WD_CPU_COMPUTE_INT8;
  else
    return WD_EINVAL;
  return 0;
}

const char *wd_cpu_compute_refusal(wd_cpu_compute_t c) {
  return wd_cpu_rgemm_refusal(c, compute_features());
}

const char *wd_cpu_compute_path(wd_cpu_compute_t c) {
  return c ? wd_cpu_rpath_name(wd_cpu_rgemm_pick(c, compute_features())) : NULL;
}

const char *wd_cpu_engine_gemm(void) { return wd_cpu_blas_path(); }

const char *wd_cpu_engine_gemm_warning(void) { return wd_cpu_blas_warning(); }
