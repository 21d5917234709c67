/*
 * test_tune.c - the choice follows the measurement (cpu_tune.h): fake
 * candidates of known speeds on a fake clock, noisy runs (each candidate
 * keeps its fastest), ties, bad input; then two real candidates that spin
 * for 1 and 4 ms on the real clock. And the engine: on this CPU, the GEMV
 * paths it keeps are ones it can run, the measured choice where it had two.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_engine.h"
#include "cpu_internal.h"
#include "cpu_tune.h"
#include "wd_synth_model.h"
#include "wd_test.h"

/* A fake clock that a run advances by its candidate's cost, which can
 * change from one run to the next. */
typedef struct {
  double t;
  const double *cost; /* [cand * n_runs + run] */
  int n_runs, runs[8];
} fake_t;

/* Differences of the fake clock's sums, to rounding. */
static int near(double a, double b) { return fabs(a - b) < 1e-9; }

static double fake_now(void *ctx) { return ((fake_t *)ctx)->t; }

static void fake_run(void *ctx, int cand) {
  fake_t *f = ctx;
  const int i = f->runs[cand] < f->n_runs ? f->runs[cand] : f->n_runs - 1;
  f->t += f->cost[cand * f->n_runs + i];
  f->runs[cand]++;
}

WD_TEST(fastest_fake_candidate_wins) {
  /* Three candidates, steady costs 3, 1 and 2 (one warm-up + 4 runs). */
  const double cost[] = { 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2 };
  fake_t f = { .cost = cost, .n_runs = 5 };
  double best[3];
  const wd_cpu_tune_t t = { .n_cand = 3, .rounds = 4, .run = fake_run, .ctx = &f, .now = fake_now };
  WD_CHECK_EQ_INT(wd_cpu_tune_pick(&t, best), 1);
  WD_CHECK(near(best[0], 3) && near(best[1], 1) && near(best[2], 2));
  WD_CHECK_EQ_INT(f.runs[0], 5); /* warm-up + rounds each */
}

WD_TEST(each_keeps_its_fastest_run) {
  /* Candidate 0 is slow but for one run of 1.5; candidate 1 is 2 every
   * time; the warm-up (first cost) is never counted, even when fastest. */
  const double cost[] = { 0.1, 5, 1.5, 5, 5, 0.1, 2, 2, 2, 2 };
  fake_t f = { .cost = cost, .n_runs = 5 };
  double best[2];
  const wd_cpu_tune_t t = { .n_cand = 2, .rounds = 4, .run = fake_run, .ctx = &f, .now = fake_now };
  WD_CHECK_EQ_INT(wd_cpu_tune_pick(&t, best), 0);
  WD_CHECK(near(best[0], 1.5) && near(best[1], 2));
}

WD_TEST(a_tie_keeps_the_earlier) {
  const double cost[] = { 1, 1, 1, 1 };
  fake_t f = { .cost = cost, .n_runs = 2 };
  const wd_cpu_tune_t t = { .n_cand = 2, .rounds = 1, .run = fake_run, .ctx = &f, .now = fake_now };
  WD_CHECK_EQ_INT(wd_cpu_tune_pick(&t, NULL), 0);
}

WD_TEST(malformed_is_refused) {
  fake_t f = { 0 };
  wd_cpu_tune_t t = { .n_cand = 0, .rounds = 1, .run = fake_run, .ctx = &f, .now = fake_now };
  WD_CHECK_EQ_INT(wd_cpu_tune_pick(&t, NULL), -1);
  t.n_cand = 1, t.rounds = 0;
  WD_CHECK_EQ_INT(wd_cpu_tune_pick(&t, NULL), -1);
  t.rounds = 1, t.run = NULL;
  WD_CHECK_EQ_INT(wd_cpu_tune_pick(&t, NULL), -1);
  WD_CHECK_EQ_INT(wd_cpu_tune_pick(NULL, NULL), -1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Candidate c spins for spin_ms[c] of wall time. */
static void spin_run(void *ctx, int cand) {
  const double *ms = ctx;
  const double end = now_s() + ms[cand] * 1e-3;
  while (now_s() < end) {
  }
}

WD_TEST(real_clock_picks_the_shorter_spin) {
  double spin_ms[2] = { 4.0, 1.0 };
  double best[2];
  const wd_cpu_tune_t t = { .n_cand = 2, .rounds = 3, .run = spin_run, .ctx = spin_ms };
  WD_CHECK_EQ_INT(wd_cpu_tune_pick(&t, best), 1);
  WD_CHECK(best[1] >= 1e-3 && best[0] >= 4e-3);
}

WD_TEST(engine_paths_are_runnable) {
  /* A small random model (tests/wd_synth_model.h): the engine keeps, for
   * every row count, a path this CPU runs; with AVX-512 one of the two
   * measured, and says so; else the widest and no measurement. */
  char path[] = "/tmp/wd_test_tune_XXXXXX";
  const int fd = mkstemp(path);
  WD_CHECK(fd >= 0);
  if (fd < 0)
    return;
  close(fd);
  const wd_hparams_t hp = wd_synth_engine_hparams(1); /* f16, one layer each */
  WD_CHECK_EQ_INT(wd_synth_write(path, &hp), 0);
  char err[256] = "";
  wd_model_t *m = NULL;
  WD_CHECK_EQ_INT(wd_model_load(path, &m, err, sizeof err), 0);
  wd_cpu_engine_t *e = NULL;
  const wd_cpu_engine_opts_t o = { .max_seqs = 8, .max_audio = 1, .n_threads = 2 };
  WD_CHECK_EQ_INT(m ? wd_cpu_engine_new(m, &o, &e, err, sizeof err) : -1, 0);
  if (e) {
    const int widest = wd_cpu_gemv_widest();
    for (int r = 1; r <= CPU_GEMV_PICK_ROWS; r++)
      WD_CHECK(e->gemv_path[r] == widest || (widest == 2 && e->gemv_path[r] == 1));
    wd_cpu_engine_stats_t st;
    wd_cpu_engine_stats(e, &st);
    fprintf(stderr, "  GEMV: widest %s; %s\n", wd_cpu_gemv_path_name(widest),
            st.kernel_choice ? st.kernel_choice : "one candidate, nothing measured");
    WD_CHECK((st.kernel_choice != NULL) == (widest == 2));
    wd_cpu_engine_free(e);
  }
  wd_model_free(m);
  unlink(path);
}

int main(void) { return wd_test_main(); }
