/*
 * cpu_features.h - what this CPU can run, read once, in one place (issue #39).
 *
 * Every kernel of cpu/ picks its instruction set at run time: the GEMV
 * (cpu_gemv, cpu_gemv512, cpu_qgemv), the attention (cpu_attn,
 * cpu_enc_attn), the vector maths (cpu_vmath), the reduced-precision
 * products (cpu_rgemm) and the encoder's OpenBLAS kernel pick (cpu_blas).
 * They all ask here and nowhere else, so no kernel includes another
 * kernel's header to learn what the CPU has.
 *
 * This module owns the CPU's feature bits (libgcc's CPU model, which checks
 * that the OS keeps the YMM/ZMM registers, and CPUID leaf 1 for F16C) and
 * the environment overrides below. Both are read once per process, on the
 * first query from whichever thread asks first (pthread_once: the first
 * query comes from the executable's constructor in cpu_blas.c, or from any
 * pool thread), so every kernel in every thread sees the same answers.
 * cpu_features.c is compiled without -mavx* flags (it only asks), so it is
 * safe on any x86-64 CPU, and on arm64, where every feature reads 0.
 *
 * Overrides (set and not "0"; read once, with the CPU):
 *   WHISPERD_CPU_PORTABLE   the portable kernels run even where AVX2 is
 *                           there, so that x86 CI tests the path arm64
 *                           takes (wd_cpu_use_avx2 0; the compute types'
 *                           paths see no features, cpu_engine.c).
 *   WHISPERD_CPU_NO_AVX512  AVX-512 is masked: the GEMV and the encoder's
 *                           attention keep their AVX2 kernels, and
 *                           wd_cpu_features clears every AVX-512 bit (the
 *                           OpenBLAS pick, the int8/bf16 paths).
 */
#ifndef WD_CPU_FEATURES_H
#define WD_CPU_FEATURES_H

#include <stddef.h>

/* 1 where the x86 SIMD kernels are compiled in (picked at run time), 0
 * elsewhere. -DWD_CPU_NO_SIMD builds the portable path alone, as arm64
 * builds it, to check it compiles clean on x86 (every feature then reads 0). */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(WD_CPU_NO_SIMD)
#define CPU_X86 1
#else
#define CPU_X86 0
#endif

/* CPU feature bits, as wd_cpu_features reads them. */
enum {
  CPU_F_AVX = 1u << 0,
  CPU_F_AVX2 = 1u << 1,
  CPU_F_FMA = 1u << 2,
  CPU_F_AVX512F = 1u << 3,
  CPU_F_AVX512CD = 1u << 4,
  CPU_F_AVX512BW = 1u << 5,
  CPU_F_AVX512DQ = 1u << 6,
  CPU_F_AVX512VL = 1u << 7,
  CPU_F_AVX512BF16 = 1u << 8,
  CPU_F_F16C = 1u << 9,
  CPU_F_AVX512VNNI = 1u << 10, /* --compute-type int8's fast path (cpu_rgemm.h) */
};

/* Every AVX-512 bit: what WHISPERD_CPU_NO_AVX512 clears. */
#define CPU_F_AVX512_ALL                                                                   \
  ((unsigned)(CPU_F_AVX512F | CPU_F_AVX512CD | CPU_F_AVX512BW | CPU_F_AVX512DQ |           \
              CPU_F_AVX512VL | CPU_F_AVX512BF16 | CPU_F_AVX512VNNI))

/* This host's features (0 off x86); WHISPERD_CPU_NO_AVX512 clears the
 * AVX-512 bits. */
unsigned wd_cpu_features(void);
/* The same as the CPU reports them, overrides aside (tests, reports). */
unsigned wd_cpu_features_hw(void);

/* F16C, from CPUID leaf 1 (ECX bit 29): __builtin_cpu_supports("f16c") is
 * GCC's alone, and clang 14 (Debian 12's) refuses the name when compiling.
 * 0 off x86. */
int wd_cpu_has_f16c(void);

/* 1 where the AVX2 kernels are compiled in and the CPU has AVX2, FMA and
 * F16C, whatever WHISPERD_CPU_PORTABLE says (tests run both paths). */
int wd_cpu_has_avx2(void);

/* 1 when the AVX2+FMA+F16C kernels run (wd_cpu_has_avx2 and
 * WHISPERD_CPU_PORTABLE not set): the one switch the GEMV, attention and
 * vector kernels all follow. */
int wd_cpu_use_avx2(void);

/* 1 when the CPU has AVX-512F besides wd_cpu_has_avx2, and the OS keeps the
 * ZMM registers, and WHISPERD_CPU_NO_AVX512 is not set. (Not masked by
 * WHISPERD_CPU_PORTABLE: callers ask wd_cpu_use_avx2 first.) */
int wd_cpu_avx512_available(void);

/* WHISPERD_CPU_PORTABLE set (and not "0"). */
int wd_cpu_force_portable(void);

/* WHISPERD_CPU_NO_AVX512 set (and not "0"). */
int wd_cpu_no_avx512_env(void);

/* This CPU's model as CPUID reports it, for the kernel cache's key
 * (cpu_pick_cache.h): "<brand string> (family F model M stepping S)",
 * family and model with their extended fields added as the vendors
 * document; "unknown" off x86 or without the brand leaves. */
void wd_cpu_ident(char *buf, size_t len);

#endif
