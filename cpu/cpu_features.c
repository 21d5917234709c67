/*
 * cpu_features.c - the CPU's features and the overrides, read once (see
 * cpu_features.h). Compiled with the tree's plain flags, no -mavx*: it
 * runs before any kernel is picked, on whatever CPU the daemon got.
 */
#include "cpu_features.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if CPU_X86
#include <cpuid.h>
#endif

/* Written once under g_once, read-only after: pthread_once orders the
 * writes before every reader's return from it. */
static struct {
  unsigned hw;   /* CPU_F_* as the CPU reports them */
  unsigned f;    /* hw, AVX-512 masked by WHISPERD_CPU_NO_AVX512 */
  int portable;  /* WHISPERD_CPU_PORTABLE */
  int no_avx512; /* WHISPERD_CPU_NO_AVX512 */
  int has_avx2;  /* AVX2 + FMA + F16C */
} g;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int env_set(const char *name) {
  const char *v = getenv(name);
  return v && v[0] && strcmp(v, "0") != 0;
}

static unsigned read_hw(void) {
  unsigned f = 0;
#if CPU_X86
  /* Safe before constructors run: it fills libgcc's CPU model itself.
   * __builtin_cpu_supports takes literals only, hence the macro. libgcc
   * sets the AVX and AVX-512 bits only when the OS saves the YMM / ZMM
   * state (XCR0). */
  __builtin_cpu_init();
#define CPU_HAS(name, bit) (__builtin_cpu_supports(name) ? (unsigned)(bit) : 0u)
  f = CPU_HAS("avx", CPU_F_AVX) | CPU_HAS("avx2", CPU_F_AVX2) | CPU_HAS("fma", CPU_F_FMA) |
      CPU_HAS("avx512f", CPU_F_AVX512F) | CPU_HAS("avx512cd", CPU_F_AVX512CD) |
      CPU_HAS("avx512bw", CPU_F_AVX512BW) | CPU_HAS("avx512dq", CPU_F_AVX512DQ) |
      CPU_HAS("avx512vl", CPU_F_AVX512VL) | CPU_HAS("avx512bf16", CPU_F_AVX512BF16) |
      CPU_HAS("avx512vnni", CPU_F_AVX512VNNI);
#undef CPU_HAS
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0)
    f |= CPU_F_F16C;
#endif
  return f;
}

static void read_once(void) {
  const unsigned avx2_set = CPU_F_AVX2 | CPU_F_FMA | CPU_F_F16C;
  g.hw = read_hw();
  g.portable = env_set("WHISPERD_CPU_PORTABLE");
  g.no_avx512 = env_set("WHISPERD_CPU_NO_AVX512");
  g.f = g.no_avx512 ? g.hw & ~CPU_F_AVX512_ALL : g.hw;
  g.has_avx2 = (g.hw & avx2_set) == avx2_set;
}

static void ready(void) { (void)pthread_once(&g_once, read_once); }

unsigned wd_cpu_features(void) {
  ready();
  return g.f;
}

unsigned wd_cpu_features_hw(void) {
  ready();
  return g.hw;
}

int wd_cpu_has_f16c(void) {
  ready();
  return (g.hw & CPU_F_F16C) != 0;
}

int wd_cpu_has_avx2(void) {
  ready();
  return g.has_avx2;
}

int wd_cpu_use_avx2(void) {
  ready();
  return g.has_avx2 && !g.portable;
}

int wd_cpu_avx512_available(void) {
  ready();
  return g.has_avx2 && (g.f & CPU_F_AVX512F) != 0;
}

int wd_cpu_force_portable(void) {
  ready();
  return g.portable;
}

int wd_cpu_no_avx512_env(void) {
  ready();
  return g.no_avx512;
}

void wd_cpu_ident(char *buf, size_t len) {
  if (!buf || len == 0)
    return;
  snprintf(buf, len, "unknown");
#if CPU_X86
  unsigned r[12] = { 0 }, a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000004u ||
      !__get_cpuid(1, &a, &b, &c, &d))
    return;
  const unsigned base_fam = (a >> 8) & 0xfu, base_model = (a >> 4) & 0xfu;
  /* Extended family only where the base one is 15; extended model where
   * it is 6 or 15 (Intel's and AMD's manuals agree on this). */
  const unsigned fam = base_fam == 0xfu ? base_fam + ((a >> 20) & 0xffu) : base_fam;
  const unsigned model =
      base_fam == 0xfu || base_fam == 6u ? base_model | (((a >> 16) & 0xfu) << 4) : base_model;
  const unsigned stepping = a & 0xfu;
  for (unsigned i = 0; i < 3; i++)
    __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
  char brand[49];
  memcpy(brand, r, 48);
  brand[48] = '\0';
  /* Trim the padding some CPUs put at either end; keep printable ASCII. */
  char *s = brand;
  while (*s == ' ')
    s++;
  size_t n = strlen(s);
  while (n > 0 && s[n - 1] == ' ')
    s[--n] = '\0';
  for (size_t i = 0; i < n; i++)
    if (s[i] < 0x20 || s[i] > 0x7e)
      s[i] = '?';
  snprintf(buf, len, "%s (family %u model %u stepping %u)", n ? s : "unnamed", fam, model,
           stepping);
#endif
}
