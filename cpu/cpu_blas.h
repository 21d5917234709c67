/*
 * cpu_blas.h - which GEMM kernels the encoder's products run, chosen from
 * the CPU's features (issue #22).
 *
 * The encoder's products are OpenBLAS sgemm calls. Debian's OpenBLAS is a
 * DYNAMIC_ARCH build: it carries kernels for every x86-64 level and picks
 * one at load from a table of CPU models. A CPU newer than the library
 * (OpenBLAS 0.3.21 on an Intel Xeon of family 6, model 207) misses the table
 * and gets the SSE3 "Prescott" kernels: a quarter of the speed the same
 * library reaches on that CPU's AVX-512 kernels. So we decide: before the
 * process goes on (a constructor of the executable, cpu_blas.c), the CPU's
 * feature bits name the kernel set; where OpenBLAS chose one of another
 * tier (instruction width), the process restarts itself once with
 * OPENBLAS_CORETYPE set to the pick, which OpenBLAS's initializer reads. (Nothing can run before a linked
 * library's initializer and still set the environment it reads: glibc
 * sets environ for libc after the executable's pre-init functions.) A
 * value the user set is kept (an explicit choice, e.g. to work around a
 * library bug) and reported with what it costs.
 *
 * The kernel sets by the instructions they need (their sgemm is what counts):
 *   Cooperlake   AVX-512 F/CD/BW/DQ/VL + AVX512_BF16 (sgemm as SkylakeX;
 *                its sbgemm uses the BF16 dot products)
 *   SkylakeX     AVX-512 F/CD/BW/DQ/VL
 *   Haswell      AVX2 + FMA
 *   Sandybridge  AVX
 *   (none)       the library's own choice: SSE-level kernels
 * Each needs the OS to save the registers (XCR0); libgcc's
 * __builtin_cpu_supports checks that. The bits are cpu_features.h's
 * (wd_cpu_features), where WHISPERD_CPU_NO_AVX512 (set, not "0") masks
 * AVX-512 for this pick as it does for the decoder's GEMV.
 */
#ifndef WD_CPU_BLAS_H
#define WD_CPU_BLAS_H

#include "cpu_features.h" /* the CPU_F_* bits; wd_cpu_features */

/* Instruction tiers of a kernel set, ordered. */
typedef enum { CPU_TIER_SSE, CPU_TIER_AVX, CPU_TIER_AVX2, CPU_TIER_AVX512 } cpu_tier_t;

/* The OpenBLAS kernel set for features f, or NULL (leave it to the
 * library). Pure: tests call it with masked feature sets. */
const char *wd_cpu_blas_pick(unsigned f);
/* The tier of an OpenBLAS core name (as openblas_get_corename prints it,
 * any case): SSE for names it does not know. */
cpu_tier_t wd_cpu_blas_core_tier(const char *core);
/* The tier the features allow. */
cpu_tier_t wd_cpu_blas_features_tier(unsigned f);
const char *wd_cpu_tier_name(cpu_tier_t t);

/* One line naming the GEMM path and ISA actually used, e.g.
 * "OpenBLAS 0.3.21 sgemm, Cooperlake kernels (AVX-512), picked from CPU
 * features". Static storage, built once. */
const char *wd_cpu_blas_path(void);
/* NULL, or one line when the kernels use less than the CPU has (what it
 * costs, and why). */
const char *wd_cpu_blas_warning(void);
/* Every sgemm on the calling threads, none on OpenBLAS's own: sets
 * OpenBLAS to one thread and joins its idle pool (cpu_blas.c says why).
 * Process-wide; the CPU engine calls it at each load. */
void wd_cpu_blas_one_thread(void);
/* 1 once OpenBLAS's idle pool has been joined (at start-up, or by
 * wd_cpu_blas_one_thread); 0 where the library has no such pool. */
int wd_cpu_blas_pool_parked(void);

#endif
