/*
 * test_cpu_features.c - the CPU's features, read once (cpu_features.h):
 * threads that race to ask first all get the same answers, and so does
 * every later call; the answers agree with each other as the module
 * defines them (AVX-512 available => AVX2 set => its bits); and the
 * environment overrides act, in child processes of this binary started
 * with WHISPERD_CPU_PORTABLE / WHISPERD_CPU_NO_AVX512 set or not (they are
 * read once, so a process cannot change them after its first query).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "wd_test.h"
#include "wd_test_child.h"

/* Every query's answer. */
typedef struct {
  unsigned f, hw;
  int f16c, has_avx2, use_avx2, avx512, portable, no_avx512;
} answers_t;

static answers_t ask(void) {
  answers_t a;
  a.f = wd_cpu_features();
  a.hw = wd_cpu_features_hw();
  a.f16c = wd_cpu_has_f16c();
  a.has_avx2 = wd_cpu_has_avx2();
  a.use_avx2 = wd_cpu_use_avx2();
  a.avx512 = wd_cpu_avx512_available();
  a.portable = wd_cpu_force_portable();
  a.no_avx512 = wd_cpu_no_avx512_env();
  return a;
}

static int same(const answers_t *a, const answers_t *b) {
  return a->f == b->f && a->hw == b->hw && a->f16c == b->f16c && a->has_avx2 == b->has_avx2 &&
         a->use_avx2 == b->use_avx2 && a->avx512 == b->avx512 && a->portable == b->portable &&
         a->no_avx512 == b->no_avx512;
}

/* The relations cpu_features.h promises, for one set of answers. */
static void check_consistent(const answers_t *a) {
  const unsigned avx2_set = CPU_F_AVX2 | CPU_F_FMA | CPU_F_F16C;
  WD_CHECK_EQ_INT(a->f, a->no_avx512 ? a->hw & ~CPU_F_AVX512_ALL : a->hw);
  WD_CHECK_EQ_INT(a->f16c, (a->hw & CPU_F_F16C) != 0);
  WD_CHECK_EQ_INT(a->has_avx2, (a->hw & avx2_set) == avx2_set);
  WD_CHECK_EQ_INT(a->use_avx2, a->has_avx2 && !a->portable);
  WD_CHECK_EQ_INT(a->avx512, a->has_avx2 && (a->f & CPU_F_AVX512F) != 0);
  /* avx512 => has_avx2 => AVX2, FMA and F16C bits; use_avx2 => has_avx2. */
  WD_CHECK(!a->avx512 || a->has_avx2);
  WD_CHECK(!a->use_avx2 || a->has_avx2);
  WD_CHECK(!a->no_avx512 || !a->avx512);
  WD_CHECK_EQ_INT(a->hw & ~((CPU_F_AVX512VNNI << 1) - 1u), 0); /* no unknown bits */
  if (!CPU_X86) /* arm64, or -DWD_CPU_NO_SIMD: the portable kernels alone */
    WD_CHECK(a->hw == 0 && a->f == 0 && !a->has_avx2 && !a->use_avx2 && !a->avx512);
}

enum { N_THREADS = 8, N_CALLS = 1000 };

static pthread_barrier_t g_start;

static void *racer(void *arg) {
  answers_t *out = arg;
  pthread_barrier_wait(&g_start);
  *out = ask();
  for (int i = 0; i < N_CALLS; i++) {
    const answers_t again = ask();
    if (!same(out, &again))
      out->hw = ~0u; /* reported by the caller */
  }
  return NULL;
}

/* First in file order: the threads race to make the first query. */
WD_TEST(threads_racing_to_ask_first_agree) {
  pthread_t t[N_THREADS];
  answers_t got[N_THREADS];
  WD_CHECK_EQ_INT(pthread_barrier_init(&g_start, NULL, N_THREADS), 0);
  for (int i = 0; i < N_THREADS; i++)
    WD_CHECK_EQ_INT(pthread_create(&t[i], NULL, racer, &got[i]), 0);
  for (int i = 0; i < N_THREADS; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&g_start);
  const answers_t here = ask();
  for (int i = 0; i < N_THREADS; i++)
    WD_CHECK(same(&got[i], &here));
  fprintf(stderr, "  features 0x%x (as read 0x%x): f16c %d, avx2 set %d, avx2 used %d, "
          "avx512 %d, portable %d, no-avx512 %d\n", here.f, here.hw, here.f16c, here.has_avx2,
          here.use_avx2, here.avx512, here.portable, here.no_avx512);
}

WD_TEST(answers_are_stable_and_consistent) {
  const answers_t a = ask();
  for (int i = 0; i < N_CALLS; i++) {
    const answers_t b = ask();
    WD_CHECK(same(&a, &b));
  }
  check_consistent(&a);
}

WD_TEST(read_once_later_environment_is_not_seen) {
  const answers_t a = ask();
  const char *old = getenv("WHISPERD_CPU_PORTABLE");
  char *keep = old ? strdup(old) : NULL;
  setenv("WHISPERD_CPU_PORTABLE", a.portable ? "0" : "1", 1);
  const answers_t b = ask();
  WD_CHECK(same(&a, &b));
  if (keep)
    setenv("WHISPERD_CPU_PORTABLE", keep, 1);
  else
    unsetenv("WHISPERD_CPU_PORTABLE");
  free(keep);
}

/* The child: every answer on one line of stdout. */
static int child(void) {
  const answers_t a = ask();
  printf("%u %u %d %d %d %d %d %d\n", a.f, a.hw, a.f16c, a.has_avx2, a.use_avx2, a.avx512,
         a.portable, a.no_avx512);
  return 0;
}

/* Runs this binary as a child with both overrides removed from its
 * environment, then `extra` (NAME=value ..., or ""); fills *a. 0 on success. */
static int run_child(const char *extra, answers_t *a) {
  char env[512], line[256];
  snprintf(env, sizeof env, "-u WHISPERD_CPU_PORTABLE -u WHISPERD_CPU_NO_AVX512 %s", extra);
  if (wd_test_child_line(env, line, sizeof line) != 0)
    return -1;
  if (sscanf(line, "%u %u %d %d %d %d %d %d", &a->f, &a->hw, &a->f16c, &a->has_avx2,
             &a->use_avx2, &a->avx512, &a->portable, &a->no_avx512) != 8)
    return -1;
  fprintf(stderr, "  child [%s]: %s\n", extra, line);
  return 0;
}

WD_TEST(environment_overrides_act) {
  answers_t plain, port, port0, port_empty, no512, no512_0, both;
  WD_CHECK_EQ_INT(run_child("", &plain), 0);
  WD_CHECK_EQ_INT(run_child("WHISPERD_CPU_PORTABLE=1", &port), 0);
  WD_CHECK_EQ_INT(run_child("WHISPERD_CPU_PORTABLE=0", &port0), 0);
  WD_CHECK_EQ_INT(run_child("WHISPERD_CPU_PORTABLE=", &port_empty), 0);
  WD_CHECK_EQ_INT(run_child("WHISPERD_CPU_NO_AVX512=1", &no512), 0);
  WD_CHECK_EQ_INT(run_child("WHISPERD_CPU_NO_AVX512=0", &no512_0), 0);
  WD_CHECK_EQ_INT(run_child("WHISPERD_CPU_PORTABLE=yes WHISPERD_CPU_NO_AVX512=1", &both), 0);
  const answers_t *all[] = { &plain, &port, &port0, &port_empty, &no512, &no512_0, &both };
  const answers_t here = ask();
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    check_consistent(all[i]);
    WD_CHECK_EQ_INT(all[i]->hw, here.hw); /* the same CPU, whatever the overrides */
    WD_CHECK_EQ_INT(all[i]->has_avx2, here.has_avx2);
  }
  /* No override, "0" and "" are the same: none. */
  WD_CHECK(!plain.portable && !plain.no_avx512 && plain.f == plain.hw);
  WD_CHECK(same(&port0, &plain) && same(&port_empty, &plain) && same(&no512_0, &plain));
  WD_CHECK_EQ_INT(plain.use_avx2, plain.has_avx2);
  /* WHISPERD_CPU_PORTABLE: the AVX2 kernels off, the features as read. */
  WD_CHECK(port.portable && !port.no_avx512);
  WD_CHECK_EQ_INT(port.use_avx2, 0);
  WD_CHECK_EQ_INT(port.f, plain.f);
  WD_CHECK_EQ_INT(port.avx512, plain.avx512);
  /* WHISPERD_CPU_NO_AVX512: every AVX-512 bit and path off, AVX2 kept. */
  WD_CHECK(no512.no_avx512 && !no512.portable);
  WD_CHECK_EQ_INT(no512.f & CPU_F_AVX512_ALL, 0);
  WD_CHECK_EQ_INT(no512.f, plain.f & ~CPU_F_AVX512_ALL);
  WD_CHECK_EQ_INT(no512.avx512, 0);
  WD_CHECK_EQ_INT(no512.use_avx2, plain.use_avx2);
  /* Both. */
  WD_CHECK(both.portable && both.no_avx512 && !both.use_avx2 && !both.avx512);
  WD_CHECK_EQ_INT(both.f, no512.f);
  if (!plain.avx512)
    fprintf(stderr, "  (no AVX-512 on this host: WHISPERD_CPU_NO_AVX512 has nothing to mask)\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0)
    return child();
  return wd_test_main();
}
