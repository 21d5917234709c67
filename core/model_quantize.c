/*
 * model_quantize.c - writes a loaded model as a ggml file of another weight
 * type (`whisperd quantize`), in the layout and with the choices of
 * whisper.cpp's quantize tool, so that either program reads the result and
 * a quantization of the same f16 file is byte for byte the same.
 *
 * What whisper.cpp does (ref: whisper.cpp examples/quantize/quantize.cpp,
 * examples/common-ggml.cpp ggml_common_quantize_0, at 233fe1f):
 *   - header: the 10 shape hyper-parameters as they are; ftype becomes the
 *     ggml ftype of the target + 1000 * GGML_QNT_VERSION (2), e.g. q8_0 ->
 *     2007;
 *   - the mel filterbank and the vocabulary are copied byte for byte;
 *   - every tensor with exactly 2 dimensions is quantized, except
 *     encoder.conv1.bias, encoder.conv2.bias (stored as [1, n_state]) and
 *     the two positional embeddings: that is every linear weight and the
 *     token embedding. 3-D conv kernels keep their type (f16) and the 1-D
 *     biases and norms stay f32;
 *   - f16 input is widened to f32 exactly, then quantized with ggml's
 *     reference quantizers over whole rows (quant.c does the same).
 * Every quantized row is n_state or 4 * n_state long (a multiple of 32 in
 * every OpenAI model). whisper.cpp has no rule for other lengths: ggml's
 * checks there are plain asserts, so a release build would write blocks
 * straddling rows, a file no loader reads. Here the hyper-parameter check
 * refuses such a model before anything is written.
 *
 * The 2-D-and-not-skipped rule picks exactly the tensors of kind
 * WD__TK_MATRIX, so every tensor is written as the type its kind has in a
 * file of the target ftype (wd__model_expect_type): that is what both
 * loaders demand. The one place this departs from whisper.cpp's tool is an
 * all-f32 input: there the tool keeps f32 conv kernels, which no loader
 * accepts in a quantized file; here they become f16.
 *
 * Input that is already quantized is dequantized to f32 first (lossy twice;
 * whisper.cpp's tool refuses it). The work is one tensor at a time: one row
 * of f32 and one converted tensor in memory, the input stays mapped.
 *
 * Threading: no shared state. Ownership: the model is only read.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "model_internal.h"
#include "quant.h"

/* ggml's quantization version, carried in ftype / 1000 (ref: ggml.h
 * GGML_QNT_VERSION). */
#define WD_QNT_VERSION 2

int wd_dtype_ftype(wd_dtype_t type, int32_t *ret) {
  /* ref: ggml.h enum ggml_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2,
   * MOSTLY_Q4_1 3, MOSTLY_Q8_0 7, MOSTLY_Q5_0 8, MOSTLY_Q5_1 9. f32 and f16
   * files carry no quantization version (convert-pt-to-ggml.py writes 0/1). */
  int32_t f;
  switch (type) {
  case WD_DTYPE_F32: *ret = 0; return 0;
  case WD_DTYPE_F16: *ret = 1; return 0;
  case WD_DTYPE_Q4_0: f = 2; break;
  case WD_DTYPE_Q4_1: f = 3; break;
  case WD_DTYPE_Q8_0: f = 7; break;
  case WD_DTYPE_Q5_0: f = 8; break;
  case WD_DTYPE_Q5_1: f = 9; break;
  default: return WD_EINVAL;
  }
  *ret = WD_QNT_VERSION * WD__MODEL_QNT_FACTOR + f;
  return 0;
}

/* The per-tensor state of one quantization (a wd__tensor_source_fn ctx). */
typedef struct {
  const wd_hparams_t *hp_out;    /* the output's hyper-parameters */
  const wd__tensor_spec_t *specs; /* canonical list, same order as the model's tensors */
  void *row;                      /* one input row as f32, ne[0] floats */
  size_t row_cap;
  void *buf;                      /* the converted tensor */
  size_t buf_cap;
  size_t n_converted;             /* tensors whose type changed */
} wd_quant_job_t;

static int wd_grow(void **p, size_t *cap, size_t want) {
  if (want <= *cap)
    return 0;
  void *q = realloc(*p, want);
  if (!q)
    return WD_ENOMEM;
  *p = q;
  *cap = want;
  return 0;
}

static int wd_quant_source(void *ctx, size_t i, const wd_tensor_t *t, wd_dtype_t *ret_type,
                           const void **ret_data, size_t *ret_nbytes, char *err, size_t err_len) {
  wd_quant_job_t *job = ctx;
  wd_dtype_t want;
  int rc = wd__model_expect_type(job->hp_out, job->specs[i].kind, &want);
  if (rc < 0)
    return wd__model_fail(err, err_len, rc, "tensor '%s': no type for ftype %d", t->name,
                          (int)job->hp_out->ftype);
  if (want == t->type) {
    /* Conv kernels, vectors, and matrices already of the target type. */
    *ret_type = t->type;
    *ret_data = t->data;
    *ret_nbytes = t->nbytes;
    return 0;
  }
  /* Row by row: (ne[1] * ne[2] * ne[3]) rows of ne[0] elements, each
   * widened to f32 and converted; the rows stay in order. */
  const int64_t n_row = t->ne[0], n_rows = wd_tensor_n_elements(t) / t->ne[0];
  const size_t in_row = wd_dtype_row_bytes(t->type, n_row), out_row = wd_dtype_row_bytes(want, n_row);
  if (in_row == 0 || out_row == 0)
    return wd__model_fail(err, err_len, WD_EINVAL,
                          "tensor '%s': a row of %lld elements is not a whole number of %s blocks",
                          t->name, (long long)n_row, wd_dtype_name(out_row == 0 ? want : t->type));
  if ((rc = wd_grow(&job->row, &job->row_cap, (size_t)n_row * sizeof(float))) < 0 ||
      (rc = wd_grow(&job->buf, &job->buf_cap, out_row * (size_t)n_rows)) < 0)
    return wd__model_fail(err, err_len, rc, "tensor '%s': out of memory", t->name);
  const uint8_t *src = t->data;
  float *row = job->row;
  uint8_t *dst = job->buf;
  for (int64_t r = 0; r < n_rows; r++) {
    if ((rc = wd_dequantize_row(t->type, src + (size_t)r * in_row, row, n_row)) < 0 ||
        (rc = wd_quantize_row(want, row, dst + (size_t)r * out_row, n_row)) < 0)
      return wd__model_fail(err, err_len, rc, "tensor '%s': cannot convert %s to %s", t->name,
                            wd_dtype_name(t->type), wd_dtype_name(want));
  }
  *ret_type = want;
  *ret_data = job->buf;
  *ret_nbytes = out_row * (size_t)n_rows;
  job->n_converted++;
  return 0;
}

int wd_model_quantize(const wd_model_t *m, wd_dtype_t type, const char *path,
                      size_t *ret_n_converted, char *err, size_t err_len) {
  if (!m || !path)
    return WD_EINVAL;
  wd_hparams_t hp = m->hp;
  if (wd_dtype_ftype(type, &hp.ftype) < 0)
    return wd__model_fail(err, err_len, WD_EINVAL, "unknown target type %d", (int)type);
  /* The same check a loader makes: it refuses, among others, a state that
   * is not a multiple of the 32-element block. */
  int rc = wd__model_check_hparams(&hp, err, err_len);
  if (rc < 0)
    return rc;
  wd__tensor_spec_t *specs = NULL;
  size_t n_specs = 0;
  if ((rc = wd__model_expect(&hp, &specs, &n_specs)) < 0)
    return rc;
  if (n_specs != m->n_tensors) {
    free(specs);
    return wd__model_fail(err, err_len, WD_EINTERNAL, "model has %zu tensors, expected %zu",
                          m->n_tensors, n_specs);
  }
  for (size_t i = 0; i < n_specs; i++) {
    if (strcmp(specs[i].name, m->tensors[i].name) != 0) {
      rc = wd__model_fail(err, err_len, WD_EINTERNAL, "tensor %zu is '%s', expected '%s'", i,
                          m->tensors[i].name, specs[i].name);
      free(specs);
      return rc;
    }
  }
  wd_quant_job_t job = { .hp_out = &hp, .specs = specs };
  rc = wd__model_write_ggml_as(m, hp.ftype, wd_quant_source, &job, path, err, err_len);
  if (rc == 0) {
    wd_log_debug("model_quantize: '%s': %s, %zu of %zu tensors converted", path,
                 wd_dtype_name(type), job.n_converted, m->n_tensors);
    if (ret_n_converted)
      *ret_n_converted = job.n_converted;
  }
  free(job.row);
  free(job.buf);
  free(specs);
  return rc;
}
