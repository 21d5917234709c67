/*
 * cpu_tune.h - kernel choice by measurement: candidates that compute the
 * same thing are timed at load, on the model's own shapes, and the fastest
 * is kept.
 *
 * Why: a CPU's features say what can run, not what is fastest on its
 * cores. On a Zen 4 (AMD EPYC family 25 model 17, which executes AVX-512
 * as two 256-bit halves) the AVX-512 decoder GEMV took 8.95 ms per base
 * step at batch 1 against 6.42 ms with AVX2, and won at batch 8 (2.32
 * against 3.08 ms per row) (issue #40).
 *
 * Each candidate runs once to warm up, then `rounds` times, interleaved
 * with the others (a clock or load change hits every candidate alike);
 * each keeps its fastest run, and the fastest of those wins (ties: the
 * earlier candidate).
 */
#ifndef WD_CPU_TUNE_H
#define WD_CPU_TUNE_H

typedef struct {
  int n_cand;                         /* >= 1 */
  int rounds;                         /* timed runs per candidate (>= 1) */
  void (*run)(void *ctx, int cand);   /* one run of candidate cand */
  void *ctx;
  double (*now)(void *ctx);           /* seconds; NULL: CLOCK_MONOTONIC (tests pass a fake) */
} wd_cpu_tune_t;

/* The index of the fastest candidate; best_s (n_cand entries, or NULL)
 * gets each one's fastest run in seconds. -1 for a malformed t. */
int wd_cpu_tune_pick(const wd_cpu_tune_t *t, double *best_s);

#endif
