/*
 * test_blas.c - the encoder's GEMM kernels are chosen from CPU features
 * (cpu/cpu_blas.c), never from the library's table of CPU models.
 *
 *   - the pick on masked feature sets: every host kind whisperd meets
 *     (AVX-512 with and without BF16, AVX-512F alone as on Xeon Phi, AVX2
 *     without FMA, AVX only, SSE only), whatever this host is;
 *   - the tiers of OpenBLAS's core names;
 *   - end to end, in child processes of this binary started without
 *     OPENBLAS_CORETYPE: the pre-init hook's pick is what OpenBLAS runs
 *     (openblas_get_corename), and with WHISPERD_CPU_NO_AVX512 an AVX-512
 *     host gets the AVX2 kernels; each child checks an odd-shaped sgemm on
 *     the kernels it got against a double-precision product;
 *   - in a child: OpenBLAS's idle thread pool, whose spin held a core for
 *     the first ~100 ms of every process, is gone when main starts (one
 *     thread), and a call that asks for several threads still gets them
 *     (OpenBLAS builds the pool again) and right sums;
 *   - in this process (whatever the environment says): the path line names
 *     the kernels OpenBLAS reports, and a warning comes exactly when they
 *     use less than the CPU has.
 */
#include <cblas.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cpu_blas.h"
#include "wd_test.h"
#include "wd_test_child.h"

#define F512 (CPU_F_AVX512F | CPU_F_AVX512CD | CPU_F_AVX512BW | CPU_F_AVX512DQ | CPU_F_AVX512VL)
#define FAVX2 (CPU_F_AVX | CPU_F_AVX2 | CPU_F_FMA | CPU_F_F16C)

static int same(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcasecmp(a, b) == 0);
}

WD_TEST(pick_from_masked_features) {
  WD_CHECK(same(wd_cpu_blas_pick(FAVX2 | F512 | CPU_F_AVX512BF16), "Cooperlake"));
  WD_CHECK(same(wd_cpu_blas_pick(FAVX2 | F512), "SkylakeX"));
  /* AVX-512F without BW/DQ/VL (Knights Landing): OpenBLAS's SkylakeX
   * kernels would fault; the AVX2 ones run. */
  WD_CHECK(same(wd_cpu_blas_pick(FAVX2 | CPU_F_AVX512F | CPU_F_AVX512CD), "Haswell"));
  WD_CHECK(same(wd_cpu_blas_pick(FAVX2), "Haswell"));
  WD_CHECK(same(wd_cpu_blas_pick(CPU_F_AVX | CPU_F_AVX2), "Sandybridge")); /* no FMA */
  WD_CHECK(same(wd_cpu_blas_pick(CPU_F_AVX), "Sandybridge"));
  WD_CHECK(wd_cpu_blas_pick(0) == NULL);
  WD_CHECK_EQ_INT(wd_cpu_blas_features_tier(FAVX2 | F512), CPU_TIER_AVX512);
  WD_CHECK_EQ_INT(wd_cpu_blas_features_tier(FAVX2), CPU_TIER_AVX2);
  WD_CHECK_EQ_INT(wd_cpu_blas_features_tier(0), CPU_TIER_SSE);
}

WD_TEST(core_name_tiers) {
  WD_CHECK_EQ_INT(wd_cpu_blas_core_tier("COOPERLAKE"), CPU_TIER_AVX512);
  WD_CHECK_EQ_INT(wd_cpu_blas_core_tier("SkylakeX"), CPU_TIER_AVX512);
  WD_CHECK_EQ_INT(wd_cpu_blas_core_tier("Haswell"), CPU_TIER_AVX2);
  WD_CHECK_EQ_INT(wd_cpu_blas_core_tier("Zen"), CPU_TIER_AVX2);
  WD_CHECK_EQ_INT(wd_cpu_blas_core_tier("Sandybridge"), CPU_TIER_AVX);
  WD_CHECK_EQ_INT(wd_cpu_blas_core_tier("Prescott"), CPU_TIER_SSE);
  WD_CHECK_EQ_INT(wd_cpu_blas_core_tier(NULL), CPU_TIER_SSE);
  /* Every pick has the tier of the features it was picked for. */
  const unsigned sets[] = { FAVX2 | F512 | CPU_F_AVX512BF16, FAVX2 | F512, FAVX2, CPU_F_AVX };
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
    WD_CHECK_EQ_INT(wd_cpu_blas_core_tier(wd_cpu_blas_pick(sets[i])),
                    wd_cpu_blas_features_tier(sets[i]));
}

/* C (m, n) = A (m, k) B (n, k)^T on the kernels this process got, against
 * double sums: the largest error relative to sum |a||b|. */
static double sgemm_rel_err(int m, int n, int k) {
  float *a = malloc(sizeof(float) * (size_t)m * (size_t)k);
  float *b = malloc(sizeof(float) * (size_t)n * (size_t)k);
  float *c = malloc(sizeof(float) * (size_t)m * (size_t)n);
  uint64_t rng = 0x2545f4914f6cdd1dull;
  for (int i = 0; i < m * k; i++)
    a[i] = wd_test_uniform(&rng);
  for (int i = 0; i < n * k; i++)
    b[i] = wd_test_uniform(&rng);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
  double worst = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0, mag = 0;
      for (int l = 0; l < k; l++) {
        s += (double)a[i * k + l] * (double)b[j * k + l];
        mag += fabs((double)a[i * k + l] * (double)b[j * k + l]);
      }
      const double e = fabs((double)c[i * n + j] - s) / (mag + 1e-30);
      if (e > worst)
        worst = e;
    }
  free(a), free(b), free(c);
  return worst;
}

/* Threads of this process now. */
static int threads_count(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

/* The same, given up to 200 ms to fall to 1: a thread just joined may
 * still be listed for a moment. */
static int threads_now(void) {
  int n = threads_count();
  for (int i = 0; i < 40 && n > 1; i++) {
    nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
    n = threads_count();
  }
  return n;
}

/* The pool child: "<parked>|<parallel>|<threads at main>|<threads after
 * the engine's wd_cpu_blas_one_thread>|<threads after a 2-thread
 * sgemm>|<its rel err>". */
static int pool_child(void) {
  const int t0 = threads_now(), parked = wd_cpu_blas_pool_parked();
  wd_cpu_blas_one_thread(); /* openblas_set_num_threads alone would start the pool again */
  const int t1 = threads_now();
  openblas_set_num_threads(2);
  const double err = sgemm_rel_err(256, 256, 256); /* above OpenBLAS's threading threshold */
  printf("%d|%d|%d|%d|%d|%g\n", parked, openblas_get_parallel(), t0, t1, threads_count(), err);
  return 0;
}

/* The child: "<corename>|<path>|<rel err>" on stdout. */
static int child(void) {
  if (getenv("WD_TEST_POOL_CHILD"))
    return pool_child();
  printf("%s|%s|%g\n", openblas_get_corename(), wd_cpu_blas_path(), sgemm_rel_err(37, 53, 129));
  return 0;
}

/* Runs this binary as a child without OPENBLAS_CORETYPE, with `extra` in
 * its environment; fills core and path. 0 on success. */
static int run_child(const char *extra, char *core, char *path, double *err) {
  char env[512], line[512];
  snprintf(env, sizeof env, "-u OPENBLAS_CORETYPE %s", extra);
  if (wd_test_child_line(env, line, sizeof line) != 0)
    return -1;
  char *bar1 = strchr(line, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
  if (!bar2)
    return -1;
  *bar1 = *bar2 = 0;
  snprintf(core, 64, "%.63s", line);
  snprintf(path, 256, "%.255s", bar1 + 1);
  *err = atof(bar2 + 1);
  fprintf(stderr, "  child [%s]: core %s, %s, sgemm rel err %.2g\n", extra, core, path, *err);
  return 0;
}

WD_TEST(startup_pick_is_what_openblas_runs) {
  char core[64], path[256];
  double err = 1;
  const unsigned f = wd_cpu_features();
  WD_CHECK_EQ_INT(run_child("WHISPERD_CPU_NO_AVX512=0", core, path, &err), 0);
  /* The kernels run are of the tier the features allow: the library's own
   * pick where it was of that tier, else the re-executed pick. */
  if (wd_cpu_blas_pick(f)) {
    WD_CHECK_EQ_INT(wd_cpu_blas_core_tier(core), wd_cpu_blas_features_tier(f));
    WD_CHECK(strstr(path, "picked from CPU features") || strstr(path, "OpenBLAS's own pick"));
  }
  WD_CHECK(strstr(path, core) != NULL);
  WD_CHECK(err < 1e-5);
  /* AVX-512 masked: the AVX2 kernels, by re-execution on an AVX-512 host
   * (whose library picked AVX-512 ones); on an AVX2-only host the same. */
  WD_CHECK_EQ_INT(run_child("WHISPERD_CPU_NO_AVX512=1", core, path, &err), 0);
  if (wd_cpu_blas_features_tier(f) >= CPU_TIER_AVX2)
    WD_CHECK_EQ_INT(wd_cpu_blas_core_tier(core), CPU_TIER_AVX2);
  if (wd_cpu_blas_features_tier(f) == CPU_TIER_AVX512)
    WD_CHECK(same(core, "Haswell") && strstr(path, "picked from CPU features"));
  WD_CHECK(err < 1e-5);
}

WD_TEST(idle_openblas_pool_parked_and_rebuilt_on_demand) {
  char line[256];
  WD_CHECK_EQ_INT(wd_test_child_line("-u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS "
                                     "-u GOTO_NUM_THREADS WD_TEST_POOL_CHILD=1",
                                     line, sizeof line), 0);
  int parked = -1, parallel = -1, t0 = -1, t1 = -1, t2 = -1;
  double err = 1;
  WD_CHECK_EQ_INT(sscanf(line, "%d|%d|%d|%d|%d|%lg", &parked, &parallel, &t0, &t1, &t2, &err), 6);
  fprintf(stderr, "  child: parked %d, parallel %d, threads %d at main, %d after one_thread, "
                  "%d after a 2-thread sgemm, rel err %.2g\n", parked, parallel, t0, t1, t2, err);
  /* A pthreads OpenBLAS on a host of several CPUs started a pool in its
   * initializer: the hook joined it, the engine's one-thread setting did
   * not start it again, and asking for 2 threads builds it again (the
   * whole pool: one thread per CPU, so at least 2). */
  if (parallel == OPENBLAS_THREAD && sysconf(_SC_NPROCESSORS_ONLN) > 1) {
    WD_CHECK_EQ_INT(parked, 1);
    WD_CHECK_EQ_INT(t0, 1);
    WD_CHECK_EQ_INT(t1, 1);
    WD_CHECK(t2 >= 2);
  }
  WD_CHECK(err < 1e-5);
}

WD_TEST(path_names_the_running_kernels) {
  const char *core = openblas_get_corename(), *path = wd_cpu_blas_path();
  fprintf(stderr, "  this process: %s\n", path);
  WD_CHECK(strstr(path, "OpenBLAS") != NULL);
  WD_CHECK(core && strstr(path, core) != NULL);
  WD_CHECK(strstr(path, wd_cpu_tier_name(wd_cpu_blas_core_tier(core))) != NULL);
  const int less = wd_cpu_blas_core_tier(core) < wd_cpu_blas_features_tier(wd_cpu_features());
  const char *warn = wd_cpu_blas_warning();
  WD_CHECK_EQ_INT(warn != NULL, less);
  if (warn) {
    fprintf(stderr, "  warning: %s\n", warn);
    WD_CHECK(strstr(warn, "as long") != NULL);
  }
  WD_CHECK(sgemm_rel_err(37, 53, 129) < 1e-5);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0)
    return child();
  return wd_test_main();
}
