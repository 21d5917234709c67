/*
 * cpu_mat.c - weights converted at load into the kernels' layout (see
 * cpu_mat.h).
 */
#include "cpu_mat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "f16.h"
#include "cpu_rgemm.h"
#include "quant.h"

/* calloc: large blocks come straight from mmap as zero pages, so planning
 * the caches for every slot costs address space, not time, until a slot is
 * used. The kernels load unaligned, so malloc's 16-byte alignment is all
 * they need. */
void *wd_cpu_alloc(size_t bytes) { return calloc(bytes ? bytes : 1, 1); }

/* Dequantizes every ggml row of t (ne[0] elements) into out. */
static int tensor_f32(const wd_tensor_t *t, float *out) {
  const int64_t row = t->ne[0], n = wd_tensor_n_elements(t);
  const size_t row_bytes = wd_dtype_row_bytes(t->type, row);
  if (!row_bytes || row <= 0)
    return WD_EMODEL;
  const unsigned char *src = t->data;
  for (int64_t r = 0; r < n / row; r++)
    if (wd_dequantize_row(t->type, src + (size_t)r * row_bytes, out + r * row, row) < 0)
      return WD_EMODEL;
  return 0;
}

int wd_cpu_mat_load(cpu_mat_t *w, const wd_model_t *m, const char *const *names, const int *rows,
                    int n, int n_in, int want_f32, char *err, size_t err_len) {
  memset(w, 0, sizeof *w);
  int same = 1, n_out = 0;
  wd_dtype_t type = WD_DTYPE_F32;
  for (int i = 0; i < n; i++) {
    const wd_tensor_t *t = wd_model_tensor(m, names[i]);
    if (!t || wd_tensor_n_elements(t) != (int64_t)rows[i] * n_in) {
      if (err)
        snprintf(err, err_len, "tensor '%s': missing or not %d x %d", names[i], rows[i], n_in);
      return WD_EMODEL;
    }
    if (i == 0)
      type = t->type;
    same &= t->type == type;
    n_out += rows[i];
  }
  /* Kept as stored: f16 and the block types, when every stacked tensor has
   * the type (a mixed stack is dequantized). */
  const int keep = !want_f32 && same && (type == WD_DTYPE_F16 || wd_dtype_is_quant(type));
  w->n_out = n_out;
  w->n_in = n_in;
  w->type = keep ? type : WD_DTYPE_F32;
  if (wd_dtype_is_quant(w->type) && n_in % WD_QK != 0) {
    if (err)
      snprintf(err, err_len, "tensor '%s': %s rows of %d, not a multiple of %d", names[0],
               wd_dtype_name(w->type), n_in, WD_QK);
    return WD_EMODEL;
  }
  const size_t row_bytes = wd_cpu_mat_row_bytes(w);
  if (keep && n == 1) {
    w->data = wd_model_tensor(m, names[0])->data; /* the file's bytes, not copied */
    return 0;
  }
  unsigned char *dst = w->own = wd_cpu_alloc((size_t)n_out * row_bytes);
  if (!dst)
    return WD_ENOMEM;
  w->data = dst;
  for (int i = 0; i < n; i++) {
    const wd_tensor_t *t = wd_model_tensor(m, names[i]);
    const size_t bytes = (size_t)rows[i] * row_bytes;
    int rc = 0;
    if (keep)
      memcpy(dst, t->data, bytes); /* the file's bytes as they are */
    else
      rc = tensor_f32(t, (float *)(void *)dst);
    if (rc < 0) {
      if (err)
        snprintf(err, err_len, "tensor '%s': cannot read type %s", names[i],
                 wd_dtype_name(t->type));
      wd_cpu_mat_free(w);
      return rc;
    }
    dst += bytes;
  }
  /* The copy is what the kernels read: the file's pages can go. */
  for (int i = 0; i < n; i++)
    (void)wd_model_release(m, wd_model_tensor(m, names[i]));
  return 0;
}

void wd_cpu_mat_free(cpu_mat_t *w) {
  free(w->own), free(w->scale), free(w->wsum);
  w->own = NULL;
  w->data = NULL;
  w->scale = NULL;
  w->wsum = NULL;
  w->ct = 0;
}

size_t wd_cpu_mat_row_bytes(const cpu_mat_t *w) {
  if (w->ct)
    return wd_cpu_rgemm_row_bytes((wd_cpu_compute_t)w->ct, w->n_in);
  return wd_dtype_row_bytes(w->type, w->n_in);
}

size_t wd_cpu_mat_bytes(const cpu_mat_t *w) {
  if (w->ct)
    return wd_cpu_rgemm_mat_bytes((wd_cpu_compute_t)w->ct, w->n_out, w->n_in);
  return (size_t)w->n_out * wd_cpu_mat_row_bytes(w);
}

size_t wd_cpu_mat_own_bytes(const cpu_mat_t *w) { return w->own ? wd_cpu_mat_bytes(w) : 0; }

void wd_cpu_mat_row(const cpu_mat_t *w, int o, float *out) {
  if (w->ct) {
    wd_cpu_rgemm_weight_row(w, o, out);
    return;
  }
  const unsigned char *src = (const unsigned char *)w->data + (size_t)o * wd_cpu_mat_row_bytes(w);
  /* Cannot fail: the type and n_in were checked at load. */
  (void)wd_dequantize_row(w->type, src, out, w->n_in);
}

float *wd_cpu_vec_load(const wd_model_t *m, const char *name, size_t n, char *err, size_t err_len) {
  float *v = wd_cpu_alloc(n * sizeof *v);
  if (!v) {
    if (err)
      snprintf(err, err_len, "out of memory");
    return NULL;
  }
  if (!name)
    return v;
  const wd_tensor_t *t = wd_model_tensor(m, name);
  if (!t || wd_tensor_n_elements(t) != (int64_t)n || tensor_f32(t, v) < 0) {
    if (err)
      snprintf(err, err_len, "tensor '%s': missing or not %zu elements", name, n);
    free(v);
    return NULL;
  }
  return v;
}
