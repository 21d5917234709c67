/*
 * cpu_blas.c - the encoder's GEMM kernels chosen from CPU features (see
 * cpu_blas.h): the pick, the start-up hook that hands it to OpenBLAS, and
 * the report of what OpenBLAS then runs.
 */
#include "cpu_blas.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define F_512 (CPU_F_AVX512F | CPU_F_AVX512CD | CPU_F_AVX512BW | CPU_F_AVX512DQ | CPU_F_AVX512VL)

cpu_tier_t wd_cpu_blas_features_tier(unsigned f) {
  if ((f & F_512) == F_512)
    return CPU_TIER_AVX512;
  if ((f & (CPU_F_AVX2 | CPU_F_FMA)) == (CPU_F_AVX2 | CPU_F_FMA))
    return CPU_TIER_AVX2;
  if (f & CPU_F_AVX)
    return CPU_TIER_AVX;
  return CPU_TIER_SSE;
}

const char *wd_cpu_blas_pick(unsigned f) {
  switch (wd_cpu_blas_features_tier(f)) {
  case CPU_TIER_AVX512:
    return (f & CPU_F_AVX512BF16) ? "Cooperlake" : "SkylakeX";
  case CPU_TIER_AVX2:
    return "Haswell";
  case CPU_TIER_AVX:
    return "Sandybridge";
  default:
    return NULL;
  }
}

cpu_tier_t wd_cpu_blas_core_tier(const char *core) {
  static const struct {
    const char *name;
    cpu_tier_t tier;
  } known[] = {
    { "SapphireRapids", CPU_TIER_AVX512 }, { "Cooperlake", CPU_TIER_AVX512 },
    { "SkylakeX", CPU_TIER_AVX512 },       { "Haswell", CPU_TIER_AVX2 },
    { "Zen", CPU_TIER_AVX2 },              { "Excavator", CPU_TIER_AVX2 },
    { "Sandybridge", CPU_TIER_AVX },       { "Bulldozer", CPU_TIER_AVX },
    { "Piledriver", CPU_TIER_AVX },        { "Steamroller", CPU_TIER_AVX },
  };
  for (size_t i = 0; core && i < sizeof known / sizeof known[0]; i++)
    if (strcasecmp(core, known[i].name) == 0)
      return known[i].tier;
  return CPU_TIER_SSE;
}

const char *wd_cpu_tier_name(cpu_tier_t t) {
  static const char *const names[] = { "SSE", "AVX", "AVX2", "AVX-512" };
  return names[t];
}

/* ---- the start-up hook ---- */

/* What the hook found: 0 it never ran, 1 this process was re-executed
 * with the features' pick, 2 the environment had OPENBLAS_CORETYPE, 3 the
 * features name no kernel set, 4 the re-exec failed (the library's own
 * pick stands), 5 the library's own pick is of the features' tier. */
static int g_how;

/* OpenBLAS's idle pool. A pthreads build starts its server threads in its
 * initializer (one fewer than the CPUs), and again whenever
 * openblas_set_num_threads() finds them gone; an idle server thread spins
 * for about 2^28 cycles before it sleeps, so each start held a core for
 * ~100 ms. The CPU engine runs sgemm inside its own pool, one OpenBLAS
 * thread each, so those threads are never given work: their spin only
 * slowed the engine's start (issue #40: on 2 cores the kernels'
 * measurement and the warm-up encode ran at half speed while it lasted).
 * blas_thread_shutdown_ is OpenBLAS's own fork handler: it joins the
 * threads, and OpenBLAS builds them again by itself the first time a call
 * wants several (exec_blas re-initializes a pool that is not there), so a
 * benchmark that sets more threads still gets them. Weak: a BLAS without
 * it (a serial build, another library) leaves it NULL; an OpenMP build
 * has one but is left alone (park_blas_threads). */
extern int blas_thread_shutdown_(void) __attribute__((weak));

static int g_parked; /* 1 once the idle pool has been joined */

static void park_blas_threads(void) {
  /* pthreads builds only: an OpenMP build's shutdown frees the threads'
   * buffers without a lock, and its threads are OpenMP's. */
  if (blas_thread_shutdown_ && openblas_get_parallel() == OPENBLAS_THREAD &&
      blas_thread_shutdown_() == 0)
    g_parked = 1;
}

void wd_cpu_blas_one_thread(void) {
  /* Already one thread and parked (a later engine's load): setting it again
   * would start the pool only to join it. */
  if (g_parked && openblas_get_num_threads() == 1)
    return;
  openblas_set_num_threads(1);
  park_blas_threads();
}

/* An executable's constructor: it runs after every shared object's, so
 * OpenBLAS has already chosen its kernels from its table of CPU models.
 * Where that choice is of another tier than the features' (SSE kernels on
 * an AVX-512 CPU; or wider ones than WHISPERD_CPU_NO_AVX512 allows; a
 * sibling of the same tier, SapphireRapids for Cooperlake, is kept: their
 * sgemm is the same), the process re-executes
 * itself at once (same pid, arguments, descriptors and environment, plus
 * the pick) so that OpenBLAS's initializer reads OPENBLAS_CORETYPE; the
 * marker WHISPERD_BLAS_REEXEC stops a second round, and both variables
 * are removed again in the new image, so child processes start clean.
 * Nothing has run yet (no thread of ours, no file opened but inherited
 * ones, which exec keeps), so the restart costs only the loader's time:
 * a few milliseconds, once, on hosts the library misjudges. The image
 * that goes on then parks OpenBLAS's idle pool (above). Returns g_how. */
static int blas_choose(char **argv) {
  if (getenv("WHISPERD_BLAS_REEXEC")) {
    unsetenv("WHISPERD_BLAS_REEXEC");
    unsetenv("OPENBLAS_CORETYPE");
    return 1;
  }
  if (getenv("OPENBLAS_CORETYPE"))
    return 2;
  const unsigned f = wd_cpu_features();
  const char *pick = wd_cpu_blas_pick(f);
  if (!pick)
    return 3;
  if (wd_cpu_blas_core_tier(openblas_get_corename()) == wd_cpu_blas_features_tier(f))
    return 5;
  if (!argv || !argv[0])
    return 4;
  if (setenv("OPENBLAS_CORETYPE", pick, 1) == 0 && setenv("WHISPERD_BLAS_REEXEC", "1", 1) == 0)
    execv("/proc/self/exe", argv);
  /* No /proc (a bare chroot), or exec refused: go on as the library chose. */
  unsetenv("WHISPERD_BLAS_REEXEC");
  unsetenv("OPENBLAS_CORETYPE");
  return 4;
}

__attribute__((constructor)) static void blas_hook(int argc, char **argv, char **envp) {
  (void)argc, (void)envp;
  g_how = blas_choose(argv);
  park_blas_threads();
}

int wd_cpu_blas_pool_parked(void) {
  return g_parked;
}

/* ---- the report ---- */

static char g_path[192], g_warn[320];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void report(void) {
  const char *core = openblas_get_corename();
  const char *cfg = openblas_get_config();
  /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64":
   * the first two words name the library. */
  char lib[48] = "OpenBLAS";
  if (cfg) {
    const char *sp = strchr(cfg, ' ');
    sp = sp ? strchr(sp + 1, ' ') : NULL;
    size_t n = sp ? (size_t)(sp - cfg) : strlen(cfg);
    if (n >= sizeof lib)
      n = sizeof lib - 1;
    memcpy(lib, cfg, n);
    lib[n] = 0;
  }
  const cpu_tier_t have = wd_cpu_blas_core_tier(core);
  const unsigned f = wd_cpu_features();
  const cpu_tier_t can = wd_cpu_blas_features_tier(f);
  const char *env = getenv("OPENBLAS_CORETYPE");
  static const char *const how[] = { "the library's own pick", "picked from CPU features",
                                     "OPENBLAS_CORETYPE from the environment",
                                     "the library's own pick",
                                     "the library's own pick (re-exec failed)",
                                     "OpenBLAS's own pick, of the tier the CPU's features allow" };
  snprintf(g_path, sizeof g_path, "%s sgemm, %s kernels (%s), %s", lib, core ? core : "unknown",
           wd_cpu_tier_name(have), how[g_how]);
  /* sgemm speed by tier, relative to SSE, OpenBLAS 0.3.21 at the
   * encoder's shapes: AVX-512 4.5x SSE3 (issue #22, a Xeon: 286 against 63
   * GFLOP/s), AVX-512 2x AVX2 (an EPYC with AVX-512: 257 against 131 on one
   * core); AVX between SSE and AVX2 (twice the width, no FMA). Estimates
   * for the warning, not promises. */
  static const double speed[] = { 1.0, 1.6, 2.25, 4.5 };
  if (have < can) {
    const char *why = g_how == 2   ? "OPENBLAS_CORETYPE is set in the environment"
                      : g_how == 1 ? "this OpenBLAS lacks the kernels asked for"
                      : g_how == 4 ? "whisperd could not restart itself with its pick"
                                   : "the library chose from its table of CPU models";
    snprintf(g_warn, sizeof g_warn,
             "the encoder's GEMM runs %s kernels (%s) on a CPU with %s: expect the encoder to "
             "take about %.1fx as long (%s%s%s)",
             core ? core : "unknown", wd_cpu_tier_name(have), wd_cpu_tier_name(can),
             speed[can] / speed[have], why, g_how == 2 ? ": " : "", g_how == 2 && env ? env : "");
  }
}

const char *wd_cpu_blas_path(void) {
  pthread_once(&g_once, report);
  return g_path;
}

const char *wd_cpu_blas_warning(void) {
  pthread_once(&g_once, report);
  return g_warn[0] ? g_warn : NULL;
}
