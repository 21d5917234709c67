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
#include "quant.h"

/* calloc: large blocks come straight from mmap as zero pages, so planning
 * the caches for every slot costs address space, not time, until a slot is
 * used. The kernels load unaligned, so malloc's 16-byte alignment is all
 * they need. */
void *cpu_alloc(size_t bytes) { return calloc(bytes ? bytes : 1, 1); }

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

int cpu_mat_load(cpu_mat_t *w, const wd_model_t *m, const char *const *names, const int *rows,
                 int n, int n_in, int want_f32, char *err, size_t err_len) {
  memset(w, 0, sizeof *w);
  int all_f16 = 1, n_out = 0;
  for (int i = 0; i < n; i++) {
    const wd_tensor_t *t = wd_model_tensor(m, names[i]);
    if (!t || wd_tensor_n_elements(t) != (int64_t)rows[i] * n_in) {
      if (err)
        snprintf(err, err_len, "tensor '%s': missing or not %d x %d", names[i], rows[i], n_in);
      return WD_EMODEL;
    }
    all_f16 &= t->type == WD_DTYPE_F16;
    n_out += rows[i];
  }
  w->n_out = n_out;
  w->n_in = n_in;
  w->f16 = all_f16 && !want_f32;
  const size_t esz = w->f16 ? 2 : 4;
  w->data = cpu_alloc((size_t)n_out * (size_t)n_in * esz);
  if (!w->data)
    return WD_ENOMEM;
  size_t off = 0; /* elements */
  for (int i = 0; i < n; i++) {
    const wd_tensor_t *t = wd_model_tensor(m, names[i]);
    const size_t cnt = (size_t)rows[i] * (size_t)n_in;
    int rc = 0;
    if (w->f16)
      memcpy((uint16_t *)w->data + off, t->data, cnt * 2); /* the file's bytes as they are */
    else
      rc = tensor_f32(t, (float *)w->data + off);
    if (rc < 0) {
      if (err)
        snprintf(err, err_len, "tensor '%s': cannot read type %s", names[i],
                 wd_dtype_name(t->type));
      cpu_mat_free(w);
      return rc;
    }
    off += cnt;
  }
  return 0;
}

void cpu_mat_free(cpu_mat_t *w) {
  free(w->data);
  w->data = NULL;
}

size_t cpu_mat_bytes(const cpu_mat_t *w) {
  return (size_t)w->n_out * (size_t)w->n_in * (w->f16 ? 2u : 4u);
}

void cpu_mat_row(const cpu_mat_t *w, int o, float *out) {
  const size_t base = (size_t)o * (size_t)w->n_in;
  if (w->f16) {
    const uint16_t *src = (const uint16_t *)w->data + base;
    for (int i = 0; i < w->n_in; i++)
      out[i] = wd_f16_to_f32(src[i]);
  } else {
    memcpy(out, (const float *)w->data + base, (size_t)w->n_in * sizeof *out);
  }
}

float *cpu_vec_load(const wd_model_t *m, const char *name, size_t n, char *err, size_t err_len) {
  float *v = cpu_alloc(n * sizeof *v);
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
