/*
 * cpu_plan.c - the CPU engine's host memory, as arithmetic over the model's
 * tensor table (see wd_cpu_engine_plan in cpu_engine.h): what `whisperd
 * info` prints, without converting a weight. tests/cpu checks it against
 * what wd_cpu_engine_new really allocates.
 */
#include <string.h>

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
  /* As plan_buffers allocates them (cpu_engine.c). */
  const double da = hp->n_audio_state, d = hp->n_text_state, na = hp->n_audio_ctx;
  const double nl = hp->n_text_layer, nc = hp->n_text_ctx, nm = hp->n_mels, f = sizeof(float);
  const double ms = o->max_seqs, rows = o->max_seqs > CPU_MAX_PREFILL ? ms : CPU_MAX_PREFILL;
  p->n_self_bufs = o->max_seqs + 2;
  p->self_bytes = 2.0 * p->n_self_bufs * nl * nc * d * f;
  p->cross_bytes = 2.0 * o->max_audio * nl * na * d * sizeof(uint16_t);
  const double col1 = 2 * na * nm * 3, col2 = na * da * 3;
  const double sc = na > nc ? na : nc;
  p->scratch_bytes = f * ((double)wd_cpu_gemm_scratch_elems(hp) + 2 * na * nm +
                          (col1 > col2 ? col1 : col2) + 2 * na * da + 3 * na * da +
                          na * (3 * da > 2 * d ? 3 * da : 2 * d) + na * 4 * da + na * na + rows * d * 3 + rows * 3 * d + rows * 4 * d +
                          ms * hp->n_vocab + CPU_ATTN_TASKS * sc);
  if (o->compute != WD_CPU_COMPUTE_F32) { /* the converted activations and their scales */
    const double xr = na > rows ? na : rows;
    const int dmax = hp->n_audio_state > hp->n_text_state ? hp->n_audio_state : hp->n_text_state;
    p->scratch_bytes += xr * ((double)wd_cpu_rgemm_row_bytes(o->compute, 4 * dmax) + f);
  }
  p->total_bytes = p->weight_bytes + p->self_bytes + p->cross_bytes + p->scratch_bytes;
}
