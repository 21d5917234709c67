/*
 * bench_cpu_step.c - the CPU engine's decoder step at batch sizes 1 .. 16:
 * ms per step and per row, each sequence at position 0 .. N of a window
 * encoded from a synthetic mel (the step's cost does not depend on the
 * audio). A benchmark, not a test.
 *
 * Usage: bench_cpu_step MODEL [steps per batch size, default 32]
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "cpu_engine.h"
#include "error.h"
#include "model.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_cpu_step MODEL [steps]\n");
    return 2;
  }
  const int steps = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 32;
  char err[512] = "";
  wd_model_t *m = NULL;
  wd_cpu_engine_t *e = NULL;
  enum { MAXB = 16 };
  int rc = wd_model_load(argv[1], &m, err, sizeof err);
  if (rc == 0)
    rc = wd_cpu_engine_new(m, &(wd_cpu_engine_opts_t){ .max_seqs = MAXB, .max_audio = 1 }, &e,
                           err, sizeof err);
  if (rc < 0) {
    fprintf(stderr, "bench_cpu_step: %s %s\n", wd_strerror(rc), err);
    return 1;
  }
  const wd_engine_t *v = wd_cpu_engine_iface(e);
  const int nm = wd_model_hparams(m)->n_mels;
  float *mel = calloc((size_t)nm * 3000, sizeof *mel);
  if (!mel || (rc = v->encode(v->self, 0, mel)) < 0) {
    fprintf(stderr, "bench_cpu_step: encode: %s\n", wd_strerror(rc < 0 ? rc : WD_ENOMEM));
    return 1;
  }
  wd_cpu_engine_stats_t st;
  wd_cpu_engine_stats(e, &st);
  printf("model %s, CPU engine %s, %d threads\n", wd_model_name(m), st.kernel, st.n_threads);
  static const int bs[] = { 1, 2, 4, 8, 16 };
  for (size_t k = 0; k < sizeof bs / sizeof bs[0]; k++) {
    const int n = bs[k];
    int seqs[MAXB];
    int32_t toks[MAXB];
    for (int i = 0; i < n; i++) {
      seqs[i] = i;
      toks[i] = 50257;
      if ((rc = v->seq_reset(v->self, i, 0)) < 0)
        return 1;
    }
    const float *lg = NULL;
    double best = 1e30, sum = 0;
    for (int s = 0; s < steps && rc == 0; s++) {
      const double t0 = bench_now_s();
      rc = v->step(v->self, n, seqs, toks, &lg);
      const double t = bench_now_s() - t0;
      sum += t;
      best = t < best ? t : best;
      for (int i = 0; i < n; i++)
        toks[i] = 400 + (s * 31 + i * 7) % 20000;
    }
    if (rc < 0) {
      fprintf(stderr, "bench_cpu_step: step: %s\n", wd_strerror(rc));
      return 1;
    }
    printf("batch %2d: %7.2f ms per step (best %.2f), %6.2f ms per row\n", n,
           sum / steps * 1e3, best * 1e3, sum / steps * 1e3 / n);
  }
  free(mel);
  wd_cpu_engine_free(e);
  wd_model_free(m);
  return 0;
}
