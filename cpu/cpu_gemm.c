/*
 * cpu_gemm.c - products of many rows on sgemm over weights as stored (see
 * cpu_gemm.h).
 */
#include "cpu_gemm.h"

#include <cblas.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_rgemm.h"
#include "cpu_vmath.h"

size_t wd_cpu_gemm_scratch_elems(const wd_hparams_t *hp) {
  const size_t da = (size_t)hp->n_audio_state, d = (size_t)hp->n_text_state;
  const size_t nm = (size_t)hp->n_mels;
  /* Encoder fc1/fc2 (4 da x da) and Q K V (3 da x da), conv2 (da x 3 da),
   * conv1 (da x 3 n_mels); one half of the cross K/V stack (d x da); the
   * decoder's fc1/fc2 (4 d x d) in a prefill. */
  size_t m = 4 * da * da;
  const size_t c[] = { da * 3 * nm, d * da, 4 * d * d };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
    m = c[i] > m ? c[i] : m;
  return m;
}

/* ---- widening ---- */

typedef struct {
  const cpu_mat_t *w;
  int o0, n, per;
  float *out; /* (n, n_in) */
} widen_task_t;

static void widen_task(void *arg, int i) {
  const widen_task_t *t = arg;
  const int a = i * t->per, b = a + t->per < t->n ? a + t->per : t->n;
  const size_t k = (size_t)t->w->n_in;
  if (a >= b)
    return;
  if (t->w->type == WD_DTYPE_F16) { /* rows are contiguous: one run */
    const unsigned char *src = (const unsigned char *)t->w->data + (size_t)(t->o0 + a) * k * 2;
    wd_cpu_f16_to_f32_vec(src, t->out + (size_t)a * k, (size_t)(b - a) * k);
    return;
  }
  for (int r = a; r < b; r++)
    wd_cpu_mat_row(t->w, t->o0 + r, t->out + (size_t)r * k);
}

/* A slice [a, b) of wd_cpu_gemm_xwt's outputs: its weight rows widened
 * (into the same rows of the scratch that a whole widening uses), then
 * its columns of y. */
typedef struct {
  wd_cpu_engine_t *e;
  int rows, ldx, o0, n, per, ldy;
  const float *x;
  const cpu_mat_t *w;
  float beta;
  const float *b; /* bias of the n outputs, or NULL (wd_cpu_gemm_xwt_bias) */
  float *y;
} xwt_task_t;

static void xwt_task(void *arg, int i) {
  const xwt_task_t *t = arg;
  const int a = i * t->per, b = a + t->per < t->n ? a + t->per : t->n;
  if (a >= b)
    return;
  const size_t k = (size_t)t->w->n_in;
  const float *wf;
  if (t->w->type == WD_DTYPE_F32) {
    wf = (const float *)t->w->data + (size_t)(t->o0 + a) * k;
  } else {
    widen_task_t wt = { .w = t->w, .o0 = t->o0 + a, .n = b - a, .per = b - a,
                        .out = t->e->w_f32 + (size_t)a * k };
    widen_task(&wt, 0);
    wf = wt.out;
  }
  float beta = t->beta;
  if (t->b) { /* the slice's rows start as the bias: sgemm adds onto it */
    for (int r = 0; r < t->rows; r++)
      memcpy(t->y + (size_t)r * (size_t)t->ldy + a, t->b + a, (size_t)(b - a) * sizeof *t->b);
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t->rows, b - a, (int)k, 1.0f, t->x, t->ldx,
              wf, (int)k, beta, t->y + a, t->ldy);
}

/* ---- bf16 and int8 (cpu_rgemm.h) ---- */

typedef struct {
  const cpu_rgemm_t *g;
  int per; /* rows (prep) or outputs (range) a task takes */
} rgemm_task_t;

static void rgemm_prep_task(void *arg, int i) {
  const rgemm_task_t *t = arg;
  const int a = i * t->per, b = a + t->per < t->g->n_rows ? a + t->per : t->g->n_rows;
  wd_cpu_rgemm_prep(t->g, a, b);
}

static void rgemm_range_task(void *arg, int i) {
  const rgemm_task_t *t = arg;
  const int a = i * t->per, b = a + t->per < t->g->n ? a + t->per : t->g->n;
  wd_cpu_rgemm_range(t->g, a, b);
}

/* raw: the products alone, bias and GELU after (wd_cpu_linear_rows). */
static void rgemm(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                  int o0, int n, const float *b, cpu_gemv_op_t op, float *y, int ldy, int raw) {
  const cpu_rgemm_t g = { .w = w, .o0 = o0, .n = n, .b = b, .n_rows = rows, .x = x, .ldx = ldx,
                          .y = y, .ldy = ldy, .op = op, .xq = e->r_xq, .xs = e->r_xs,
                          .path = (cpu_rpath_t)e->rpath, .raw = raw };
  rgemm_task_t t = { .g = &g };
  /* A step's few rows are converted on this thread; a window's over all. */
  if (rows <= 16)
    wd_cpu_rgemm_prep(&g, 0, rows);
  else
    wd_cpu_parallel(e, wd_cpu_row_chunks(e, rows, &t.per), rgemm_prep_task, &t);
  /* Outputs in chunks, a few a thread, whole tiles of 32 (two packed
   * blocks, cpu_rgemm.c). */
  int chunk = (n + e->n_threads * 4 - 1) / (e->n_threads * 4);
  t.per = (chunk + 31) / 32 * 32;
  wd_cpu_parallel(e, (n + t.per - 1) / t.per, rgemm_range_task, &t);
}

void wd_cpu_rgemm_run(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                      int o0, int n, const float *b, cpu_gemv_op_t op, float *y, int ldy) {
  rgemm(e, rows, x, ldx, w, o0, n, b, op, y, ldy, 0);
}

/* wd_cpu_gemm_xwt and wd_cpu_gemm_xwt_bias: b, when not NULL, replaces
 * beta's y. */
static void gemm_xwt(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                     int o0, int n, float beta, const float *b, float *y, int ldy) {
  if (w->ct) {
    if (b) {
      rgemm(e, rows, x, ldx, w, o0, n, NULL, CPU_GEMV_SET, y, ldy, 1);
      wd_cpu_bias_rows(e, y, rows, ldy, n, b, 0, NULL);
      return;
    }
    rgemm(e, rows, x, ldx, w, o0, n, NULL, beta != 0.0f ? CPU_GEMV_ADD : CPU_GEMV_SET, y, ldy, 1);
    return;
  }
  /* One slice of the outputs per engine thread, each widened and
   * multiplied on that thread by a single-threaded sgemm (OpenBLAS is told
   * to use one thread: cpu_engine.c): the widened slice is still in the
   * thread's cache when sgemm reads it, and no core is handed between our
   * pool and OpenBLAS's threads, which after every call spun on
   * sched_yield for about 0.1 s (OpenBLAS's THREAD_TIMEOUT), on the cores
   * the decoder's steps then wanted. A slice's edge may round differently
   * from the same outputs inside one whole sgemm (OpenBLAS's edge kernels),
   * so results depend on the engine's thread count in the last bit, as
   * they did with OpenBLAS's own threads (measured: 1 and 2 OpenBLAS
   * threads differ on this encoder's shapes). */
  xwt_task_t t = { .e = e, .rows = rows, .x = x, .ldx = ldx, .w = w, .o0 = o0, .n = n,
                   .beta = beta, .b = b, .y = y, .ldy = ldy };
  const int tasks = e->n_threads < (n + 63) / 64 ? e->n_threads : (n + 63) / 64;
  t.per = (n + tasks - 1) / tasks;
  t.per = (t.per + 63) / 64 * 64; /* slices of 64 columns: interior tiles stay interior */
  wd_cpu_parallel(e, (n + t.per - 1) / t.per, xwt_task, &t);
}

void wd_cpu_gemm_xwt(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                     int o0, int n, float beta, float *y, int ldy) {
  gemm_xwt(e, rows, x, ldx, w, o0, n, beta, NULL, y, ldy);
}

void wd_cpu_gemm_xwt_bias(wd_cpu_engine_t *e, int rows, const float *x, int ldx,
                          const cpu_mat_t *w, int o0, int n, const float *b, float *y, int ldy) {
  gemm_xwt(e, rows, x, ldx, w, o0, n, 0.0f, b, y, ldy);
}

/* ---- bias and activation over rows ---- */

typedef struct {
  float *y;
  int ld, n;       /* row stride, columns */
  const float *b;  /* bias (n) or NULL */
  int gelu;
  const float *add; /* (rows, n) added after the bias (positional embedding) or NULL */
  int rows_per;
  int rows;
} bias_task_t;

static void bias_task(void *arg, int i) {
  const bias_task_t *t = arg;
  const int r0 = i * t->rows_per, r1 = r0 + t->rows_per < t->rows ? r0 + t->rows_per : t->rows;
  for (int r = r0; r < r1; r++) {
    float *y = t->y + (size_t)r * (size_t)t->ld;
    if (t->gelu)
      wd_cpu_bias_gelu_vec(y, t->b, t->n);
    else if (t->b)
      for (int c = 0; c < t->n; c++)
        y[c] += t->b[c];
    if (t->add)
      for (int c = 0; c < t->n; c++)
        y[c] += t->add[(size_t)r * (size_t)t->n + (size_t)c];
  }
}

void wd_cpu_bias_rows(wd_cpu_engine_t *e, float *y, int rows, int ld, int n, const float *b,
                      int gelu, const float *add) {
  if (!b && !gelu && !add)
    return;
  bias_task_t t = { .y = y, .ld = ld, .n = n, .b = b, .gelu = gelu, .add = add, .rows = rows };
  wd_cpu_parallel(e, wd_cpu_row_chunks(e, rows, &t.rows_per), bias_task, &t);
}

void wd_cpu_linear_rows(wd_cpu_engine_t *e, int rows, const float *x, int ldx, const cpu_mat_t *w,
                        const float *b, cpu_gemv_op_t op, float *y, int ldy) {
  if (w->ct) {
    /* Many rows: the products, then the bias and GELU over all rows at
     * once as the sgemm path does (vectorized, not per output). */
    rgemm(e, rows, x, ldx, w, 0, w->n_out, NULL, op == CPU_GEMV_ADD ? op : CPU_GEMV_SET, y, ldy,
          1);
    wd_cpu_bias_rows(e, y, rows, ldy, w->n_out, b, op == CPU_GEMV_GELU, NULL);
    return;
  }
  if (op == CPU_GEMV_ADD || !b) {
    wd_cpu_gemm_xwt(e, rows, x, ldx, w, 0, w->n_out, op == CPU_GEMV_ADD ? 1.0f : 0.0f, y, ldy);
    wd_cpu_bias_rows(e, y, rows, ldy, w->n_out, b, op == CPU_GEMV_GELU, NULL);
    return;
  }
  wd_cpu_gemm_xwt_bias(e, rows, x, ldx, w, 0, w->n_out, b, y, ldy);
  wd_cpu_bias_rows(e, y, rows, ldy, w->n_out, NULL, op == CPU_GEMV_GELU, NULL);
}
