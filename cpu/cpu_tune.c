/*
 * cpu_tune.c - the fastest of a few candidates, by measurement (see
 * cpu_tune.h).
 */
#include "cpu_tune.h"

#include <stdlib.h>
#include <time.h>

static double mono_s(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int wd_cpu_tune_pick(const wd_cpu_tune_t *t, double *best_s) {
  if (!t || !t->run || t->n_cand < 1 || t->rounds < 1)
    return -1;
  double (*now)(void *) = t->now ? t->now : mono_s;
  double *best = calloc((size_t)t->n_cand, sizeof *best);
  if (!best)
    return -1;
  for (int c = 0; c < t->n_cand; c++) {
    t->run(t->ctx, c); /* warm-up: caches, page faults, frequency */
    best[c] = -1.0;
  }
  for (int r = 0; r < t->rounds; r++)
    for (int c = 0; c < t->n_cand; c++) {
      const double t0 = now(t->ctx);
      t->run(t->ctx, c);
      const double dt = now(t->ctx) - t0;
      if (best[c] < 0.0 || dt < best[c])
        best[c] = dt;
    }
  int win = 0;
  for (int c = 1; c < t->n_cand; c++)
    if (best[c] < best[win])
      win = c;
  if (best_s)
    for (int c = 0; c < t->n_cand; c++)
      best_s[c] = best[c];
  free(best);
  return win;
}
