/*
 * cpu_mat.h - weight matrices in the layout the CPU kernels read.
 *
 * A matrix is (n_out, n_in) row-major: row o holds the n_in weights of
 * output o, as ggml stores a linear layer (ne = {n_in, n_out}). It is kept
 * exactly as the file stores it, f16 or one of the 32-element block types
 * (q8_0 .. q4_1, core/quant.h: a row is n_in / 32 blocks back to back), and
 * the decoder's GEMV converts on the fly, so each step reads 2x (f16) to
 * 6x (q4_0) fewer bytes than f32 weights, and sgemm's products widen it
 * one matrix at a time (cpu_gemm.h); or it is f32 (what an f32 file gives,
 * and a convolution kernel stored in a block type).
 * Several tensors may be stacked into one matrix (the Q, K and V
 * projections become one (3d, d) product).
 *
 * A single tensor kept as stored is not copied: data points into the
 * model (the file's read-only mapping for ggml and CTranslate2 files), so
 * its pages are the page cache's, shared with every process that maps the
 * file, and the decoder's f16 weights cost no private memory (tiny.en's
 * token embedding alone is 38 MiB). The model must outlive the matrix,
 * which the engine's contract already asks (engine.h: the model is
 * borrowed). Stacks and f32 conversions are copies, owned by the matrix.
 */
#ifndef WD_CPU_MAT_H
#define WD_CPU_MAT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct {
  int n_out, n_in;
  wd_dtype_t type; /* WD_DTYPE_F32, _F16 or a block type (then n_in % 32 == 0) */
  const void *data; /* (n_out, n_in) elements of type, n_out rows of
                       wd_dtype_row_bytes(type, n_in) bytes */
  void *own;        /* data when the matrix owns it (a copy), else NULL */
  /* --compute-type bf16 / int8 (cpu_rgemm.h): ct is the wd_cpu_compute_t
   * the matrix was converted to (0, f32: type says the layout), and data
   * then holds (n_out, kp) bf16 or int8 rows; int8 adds a scale and the
   * sum of the codes per output row. */
  int ct, kp;
  float *scale;  /* (n_out) int8 only */
  int32_t *wsum; /* (n_out) int8 only */
} cpu_mat_t;

/* Stacks tensors names[0 .. n) (each (rows[i], n_in)) into one matrix;
 * want_f32 forces f32, otherwise the tensors keep their type (f16 or a block
 * type) when all of them share it, and are dequantized to f32 when they do
 * not. WD_EMODEL (err names the tensor; a block type with n_in not a
 * multiple of 32) or WD_ENOMEM. */
int wd_cpu_mat_load(cpu_mat_t *w, const wd_model_t *m, const char *const *names, const int *rows,
                    int n, int n_in, int want_f32, char *err, size_t err_len);
void wd_cpu_mat_free(cpu_mat_t *w);
/* The bytes data holds (what the kernels read). */
size_t wd_cpu_mat_bytes(const cpu_mat_t *w);
/* The bytes the matrix allocated: wd_cpu_mat_bytes for a copy, 0 when it
 * reads the model's own. */
size_t wd_cpu_mat_own_bytes(const cpu_mat_t *w);
/* Bytes of one row. */
size_t wd_cpu_mat_row_bytes(const cpu_mat_t *w);
/* Row o as f32 into out (n_in), dequantized as core/quant.c does. */
void wd_cpu_mat_row(const cpu_mat_t *w, int o, float *out);

/* A vector tensor of n elements as f32 (malloc'd) or NULL
 * with err set; name NULL gives zeros (the key projection has no bias). */
float *wd_cpu_vec_load(const wd_model_t *m, const char *name, size_t n, char *err, size_t err_len);

void *wd_cpu_alloc(size_t bytes); /* zeroed; free() it */

#endif
