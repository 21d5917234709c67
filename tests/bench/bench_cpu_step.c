/*
 * bench_cpu_step.c - the CPU engine at one model file: the encoder's ms per
 * 30 s window (best of E encodes of a synthetic mel: the cost does not
 * depend on the audio), the decoder step at batch sizes 1 .. 16 (ms per
 * step and per row, each sequence at position 0 .. N), a 224-token prompt
 * (prefill, ms per token: the longest prompt openai/whisper sends) and the
 * process's peak RSS. The lines are what tests/bench/peers.py --shapes
 * reads. A benchmark, not a test.
 *
 * Usage: bench_cpu_step MODEL [steps per batch size, default 32] [encodes, default 3]
 *        [compute type: f32 (default), bf16, int8]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

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
  const int encodes = argc > 3 && atoi(argv[3]) > 0 ? atoi(argv[3]) : 3;
  char err[512] = "";
  wd_model_t *m = NULL;
  wd_cpu_engine_t *e = NULL;
  enum { MAXB = 16 };
  wd_cpu_compute_t ct;
  if (wd_cpu_compute_parse(argc > 4 ? argv[4] : "f32", &ct) < 0) {
    fprintf(stderr, "bench_cpu_step: compute type not f32, bf16 or int8\n");
    return 2;
  }
  int rc = wd_model_load(argv[1], &m, err, sizeof err);
  if (rc == 0)
    rc = wd_cpu_engine_new(
        m, &(wd_cpu_engine_opts_t){ .max_seqs = MAXB, .max_audio = 1, .compute = ct }, &e, err,
        sizeof err);
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
  printf("encoder GEMM: %s\n", st.gemm);
  if (st.kernel_choice)
    printf("decoder GEMV kernels by measurement: %s\n", st.kernel_choice);
  printf("compute type: %s%s%s\n", st.compute, st.compute_path ? ", " : "",
         st.compute_path ? st.compute_path : "");
  double enc = st.encode_ms, cross = st.cross_ms; /* the first, untimed by us */
  for (int r = 1; r < encodes && rc == 0; r++) {
    rc = v->encode(v->self, 0, mel);
    wd_cpu_engine_stats(e, &st);
    enc = st.encode_ms < enc ? st.encode_ms : enc;
    cross = st.cross_ms < cross ? st.cross_ms : cross;
  }
  printf("encoder: %.1f ms per window (best of %d), cross K/V %.1f ms\n", enc, encodes, cross);
  {
    /* The longest prompt: 224 tokens (openai's n_ctx // 2 - 1 and the
     * start of transcript) into slot 0, best of 3. */
    enum { NP = 224 };
    int32_t pt[NP];
    for (int i = 0; i < NP; i++)
      pt[i] = 400 + (i * 37) % 20000;
    double best = 1e30;
    const float *lg = NULL;
    for (int r = 0; r < 3 && rc == 0; r++) {
      if ((rc = v->seq_reset(v->self, 0, 0)) < 0)
        break;
      const double t0 = bench_now_s();
      rc = v->prefill(v->self, 0, NP, pt, &lg);
      const double t = bench_now_s() - t0;
      best = t < best ? t : best;
    }
    if (rc < 0) {
      fprintf(stderr, "bench_cpu_step: prefill: %s\n", wd_strerror(rc));
      return 1;
    }
    printf("prefill %d tokens: %.1f ms, %.3f ms per token\n", NP, best * 1e3, best * 1e3 / NP);
  }
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
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("weights %.1f MiB (%.1f MiB read in place), peak RSS %.1f MiB\n", st.weight_mib,
         st.mapped_mib, (double)ru.ru_maxrss / 1024.0);
  free(mel);
  wd_cpu_engine_free(e);
  wd_model_free(m);
  return 0;
}
