/*
 * cpu_gemv_pick.c - the decoder GEMV's kernels chosen by measurement at
 * load (see cpu_tune.h for why, cpu_internal.h for gemv_path).
 *
 * Where the CPU runs the AVX-512 kernels (f16 and f32 weights), the AVX2
 * ones are the other candidate: both give the same sums bit for bit
 * (cpu_gemv.h), so only speed decides. Each candidate runs the model's
 * first decoder fc1 (d -> 4d, the step's largest matrix but the logits) on
 * the engine's threads, at 1, 2, 4, 8 and 16 rows (up to the batch), in
 * the decoder's own scratch; each row count takes the choice of the
 * nearest measured count at or above it. About 1 ms of weights a run for
 * base, 5 runs a candidate and row count: tens of milliseconds at load.
 * WHISPERD_CPU_NO_AVX512 (or a CPU without it) leaves one candidate and
 * nothing to measure.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_tune.h"

typedef struct {
  wd_cpu_engine_t *e;
  cpu_gemv_t g;
  int paths[2];
} pick_ctx_t;

static void run_cand(void *ctx, int cand) {
  pick_ctx_t *p = ctx;
  wd_cpu_gemv_run_path(p->e, &p->g, p->paths[cand]);
}

int wd_cpu_pick_test_twins;

int wd_cpu_gemv_pick_candidates(const wd_cpu_engine_t *e) {
  const cpu_mat_t *w = e->hp.n_text_layer > 0 ? &e->dec[0].fc1 : NULL;
  return (wd_cpu_gemv_widest() == 2 || wd_cpu_pick_test_twins) && w && !w->ct &&
         (w->type == WD_DTYPE_F16 || w->type == WD_DTYPE_F32);
}

void wd_cpu_gemv_pick(wd_cpu_engine_t *e) {
  const int widest = wd_cpu_gemv_widest();
  for (int r = 0; r <= CPU_GEMV_PICK_ROWS; r++)
    e->gemv_path[r] = (signed char)widest;
  e->gemv_choice[0] = '\0';
  if (!wd_cpu_gemv_pick_candidates(e))
    return;
  const cpu_mat_t *w = &e->dec[0].fc1;
  const int d = e->hp.n_text_state;
  const int max_r = e->max_seqs < CPU_GEMV_PICK_ROWS ? e->max_seqs : CPU_GEMV_PICK_ROWS;
  /* Inputs: the decoder's scratch rows, zeroed (speed does not depend on
   * the values; every step overwrites them). */
  memset(e->d_h, 0, (size_t)max_r * (size_t)d * sizeof(float));
  pick_ctx_t p = {
    .e = e,
    .g = { .w = w, .b = NULL, .x = e->d_h, .ldx = d, .y = e->d_f, .ldy = w->n_out,
           .op = CPU_GEMV_SET },
    .paths = { 2, 1 },
  };
  int n = snprintf(e->gemv_choice, sizeof e->gemv_choice, "measured on fc1 (%dx%d):", w->n_out, d);
  int r_lo = 1;
  for (int r = 1; r_lo <= max_r; r *= 2) {
    const int rm = r < max_r ? r : max_r; /* the last bucket measures max_r rows */
    p.g.n_rows = rm;
    double best[2];
    const wd_cpu_tune_t t = { .n_cand = 2, .rounds = 5, .run = run_cand, .ctx = &p };
    const int win = wd_cpu_tune_pick(&t, best);
    const int path = win >= 0 ? p.paths[win] : widest;
    for (int i = r_lo; i <= rm; i++)
      e->gemv_path[i] = (signed char)path;
    if (rm == max_r)
      for (int i = rm + 1; i <= CPU_GEMV_PICK_ROWS; i++)
        e->gemv_path[i] = (signed char)path;
    if (n > 0 && (size_t)n < sizeof e->gemv_choice)
      n += snprintf(e->gemv_choice + n, sizeof e->gemv_choice - (size_t)n,
                    " %d row%s %s (avx512 %.3f, avx2 %.3f ms)", rm, rm > 1 ? "s" : "",
                    path == 2 ? "avx512" : "avx2", best[0] * 1e3, best[1] * 1e3);
    r_lo = rm + 1;
  }
}
