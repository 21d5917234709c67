/*
 * cpu_plan.c - the CPU engine's host memory, as arithmetic over the model's
 * tensor table (see wd_cpu_engine_plan in cpu_engine.h): what `whisperd
 * info` prints, without converting a weight; and the table of the engine's
 * caches and scratch (wd_cpu_buffers), which the engine allocates from.
 * tests/cpu checks the plan against what wd_cpu_engine_new really takes.
 */
#include <string.h>

#include "cpu_attn.h"
#include "cpu_enc_attn.h"
#include "cpu_gemm.h"
#include "cpu_internal.h"
#include "cpu_rgemm.h"
#include "quant.h"

/* Bytes a weight matrix takes in the kernels' layout, by the rule
 * load_weights applies through wd_cpu_mat_load: every matrix as stored when
 * f16 or a block type (sgemm's products widen theirs per product,
 * cpu_gemm.h), else f32, and a convolution kernel in a block type in f32.
 * (wd_cpu_mat_load dequantizes a stack of tensors of different types, e.g. a
 * Q/K/V stack in a hand-mixed file, to f32; no published file mixes them,
 * and the plan counts each tensor by its own type.) */
static double matrix_bytes(const wd_tensor_t *t, wd_cpu_compute_t ct) {
  const double n = (double)wd_tensor_n_elements(t);
  if (ct != WD_CPU_COMPUTE_F32 && !strstr(t->name, ".conv")) /* converted (cpu_rgemm.h) */
    return (double)wd_cpu_rgemm_mat_bytes(ct, (int)(wd_tensor_n_elements(t) / t->ne[0]),
                                          (int)t->ne[0]);
  if (t->type == WD_DTYPE_F32 || (strstr(t->name, ".conv") && wd_dtype_is_quant(t->type)))
    return 4.0 * n;
  return (double)wd_dtype_row_bytes(t->type, t->ne[0]) * (n / (double)t->ne[0]);
}

/* Read in place from the model by wd_cpu_mat_load: kept as stored (not
 * widened to f32 above) and not stacked with others (the self-attention Q,
 * K and V are one matrix, the cross-attention K and V another). */
static int matrix_mapped(const wd_tensor_t *t, wd_cpu_compute_t ct) {
  if (ct != WD_CPU_COMPUTE_F32 && !strstr(t->name, ".conv"))
    return 0; /* converted: a copy */
  return matrix_bytes(t, ct) < 4.0 * (double)wd_tensor_n_elements(t) &&
         !(strstr(t->name, ".attn.query.") || strstr(t->name, ".attn.key.") ||
           strstr(t->name, ".attn.value.") || strstr(t->name, ".cross_attn.key.") ||
           strstr(t->name, ".cross_attn.value."));
}

/* A matrix the engine loads through wd_cpu_mat_load: every tensor with two
 * real dimensions (the conv biases are stored (1, d): vectors) but the
 * positional embeddings (kept as f32 vectors). */
static int is_matrix(const wd_tensor_t *t) {
  return t->n_dims >= 2 && t->ne[0] > 1 && t->ne[1] > 1 &&
         !strstr(t->name, "positional_embedding");
}

void wd_cpu_engine_plan(const wd_model_t *m, const wd_cpu_engine_opts_t *o,
                        wd_cpu_engine_plan_t *p) {
  memset(p, 0, sizeof *p);
  const wd_hparams_t *hp = wd_model_hparams(m);
  for (size_t i = 0; i < wd_model_n_tensors(m); i++) {
    const wd_tensor_t *t = wd_model_tensor_at(m, i);
    if (is_matrix(t)) {
      p->weight_bytes += matrix_bytes(t, o->compute);
      if (matrix_mapped(t, o->compute))
        p->mapped_bytes += matrix_bytes(t, o->compute);
    }
  }
  cpu_buf_t b[CPU_BUF_N];
  int rows = 0;
  wd_cpu_buffers(hp, o, b, &p->n_self_bufs, &rows);
  for (int i = 0; i < CPU_BUF_N; i++) {
    double *line = b[i].line == CPU_PLAN_CROSS  ? &p->cross_bytes
                   : b[i].line == CPU_PLAN_SELF ? &p->self_bytes
                                                : &p->scratch_bytes;
    *line += (double)b[i].bytes;
  }
  p->total_bytes = p->weight_bytes + p->self_bytes + p->cross_bytes + p->scratch_bytes;
}

void wd_cpu_buffers(const wd_hparams_t *hp, const wd_cpu_engine_opts_t *o, cpu_buf_t b[CPU_BUF_N],
                    int *ret_n_self_bufs, int *ret_max_rows) {
  const size_t da = (size_t)hp->n_audio_state, d = (size_t)hp->n_text_state;
  const size_t na = (size_t)hp->n_audio_ctx, nl = (size_t)hp->n_text_layer;
  const size_t nc = (size_t)hp->n_text_ctx, nm = (size_t)hp->n_mels, f = sizeof(float);
  const int max_rows = o->max_seqs > CPU_MAX_PREFILL ? o->max_seqs : CPU_MAX_PREFILL;
  const size_t rows = (size_t)max_rows, ms = (size_t)o->max_seqs;
  const size_t n_self = ms + 2, ma = (size_t)o->max_audio;
  const size_t col1 = 2 * na * nm * 3, col2 = na * da * 3, sc = na > nc ? na : nc;
  const size_t xr = na > rows ? na : rows, dmax = da > d ? da : d;
  const int conv = o->compute != WD_CPU_COMPUTE_F32;
  const size_t att = (size_t)hp->n_audio_head * wd_cpu_enc_attn_kv_elems((int)na) +
                     (size_t)WD_ENC_ATTN_TASKS * wd_cpu_enc_attn_scratch_elems((int)na);
  const size_t bytes[CPU_BUF_N] = {
    [CPU_BUF_XK] = ma * nl * na * d * sizeof(uint16_t),
    [CPU_BUF_XV] = ma * nl * na * d * sizeof(uint16_t),
    [CPU_BUF_KC] = n_self * nl * nc * d * f,
    [CPU_BUF_VC] = n_self * nl * nc * d * f,
    [CPU_BUF_W_F32] = wd_cpu_gemm_scratch_elems(hp) * f,
    [CPU_BUF_E_MELT] = 2 * na * nm * f,
    [CPU_BUF_E_COL] = (col1 > col2 ? col1 : col2) * f,
    [CPU_BUF_E_X1] = 2 * na * da * f,
    [CPU_BUF_E_X] = na * da * f,
    [CPU_BUF_E_H] = na * da * f,
    [CPU_BUF_E_O] = na * da * f,
    /* the encoder's Q K V, then the f32 cross K and V before they are f16 */
    [CPU_BUF_E_QKV] = na * (3 * da > 2 * d ? 3 * da : 2 * d) * f,
    [CPU_BUF_E_F] = na * 4 * da * f,
    /* one head's scores (the sgemm path), or every head's packed keys and
     * values and the blocked path's scratches (cpu_enc_attn.h), the larger */
    [CPU_BUF_E_S] = (na * na > att ? na * na : att) * f,
    [CPU_BUF_D_X] = rows * d * f,
    [CPU_BUF_D_H] = rows * d * f,
    [CPU_BUF_D_O] = rows * d * f,
    [CPU_BUF_D_QKV] = rows * 3 * d * f,
    [CPU_BUF_D_F] = rows * 4 * d * f,
    [CPU_BUF_D_LOGITS] = ms * (size_t)hp->n_vocab * f,
    [CPU_BUF_D_SCORES] = (size_t)CPU_ATTN_TASKS * WD_CPU_ATTN_ROWS * sc * f,
    [CPU_BUF_R_XQ] = conv ? xr * wd_cpu_rgemm_row_bytes(o->compute, 4 * (int)dmax) : 0,
    [CPU_BUF_R_XS] = conv ? xr * f : 0,
  };
  for (int i = 0; i < CPU_BUF_N; i++)
    b[i] = (cpu_buf_t){ bytes[i], i <= CPU_BUF_XV   ? CPU_PLAN_CROSS
                                  : i <= CPU_BUF_VC ? CPU_PLAN_SELF
                                                    : CPU_PLAN_SCRATCH };
  *ret_n_self_bufs = (int)n_self;
  *ret_max_rows = max_rows;
}
