/*
 * cpu_mat.h - weight matrices in the layout the CPU kernels read.
 *
 * A matrix is (n_out, n_in) row-major: row o holds the n_in weights of
 * output o, as ggml stores a linear layer (ne = {n_in, n_out}). It is f16
 * exactly as the file stores it (the decoder's GEMV converts on the fly,
 * halving the bytes each step reads) or f32 (what sgemm wants, and what the
 * GEMV reads for f32 and quantized files, whose blocks are dequantized once
 * at load). Several tensors may be stacked into one matrix (the Q, K and V
 * projections become one (3d, d) product).
 */
#ifndef WD_CPU_MAT_H
#define WD_CPU_MAT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct {
  int n_out, n_in;
  int f16;    /* 1: data holds uint16_t f16 values, 0: float */
  void *data; /* (n_out, n_in) */
} cpu_mat_t;

/* Stacks tensors names[0 .. n) (each (rows[i], n_in)) into one matrix;
 * want_f32 forces f32, otherwise f16 tensors stay f16 when all of them are.
 * WD_EMODEL (err names the tensor) or WD_ENOMEM. */
int cpu_mat_load(cpu_mat_t *w, const wd_model_t *m, const char *const *names, const int *rows,
                 int n, int n_in, int want_f32, char *err, size_t err_len);
void cpu_mat_free(cpu_mat_t *w);
size_t cpu_mat_bytes(const cpu_mat_t *w);
/* Row o as f32 into out (n_in). */
void cpu_mat_row(const cpu_mat_t *w, int o, float *out);

/* A vector tensor of n elements as f32 (malloc'd) or NULL
 * with err set; name NULL gives zeros (the key projection has no bias). */
float *cpu_vec_load(const wd_model_t *m, const char *name, size_t n, char *err, size_t err_len);

void *cpu_alloc(size_t bytes); /* zeroed; free() it */

#endif
