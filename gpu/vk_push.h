/*
 * vk_push.h - C mirrors of the push-constant blocks in shaders/common.glsl.
 *
 * The layouts must match std430 push-constant layout byte for byte; the
 * static asserts below catch a field added on one side only.
 */
#ifndef WD_VK_PUSH_H
#define WD_VK_PUSH_H

#include <stddef.h>
#include <stdint.h>

/* struct wd_pc_gemm in common.glsl. */
typedef struct {
  uint32_t M, N, K;
  uint32_t lda, ldb, ldc;
  uint32_t a_off, b_off, c_off, bias_off;
  uint32_t a_bz, b_bz, c_bz, bias_bz;
  uint32_t flags;
  float alpha;
} wd_pc_gemm_t;

enum {
  WD_GEMM_BIAS = 1u,
  WD_GEMM_GELU = 2u,
  WD_GEMM_ACCUMULATE = 4u,
};

_Static_assert(sizeof(wd_pc_gemm_t) <= 128, "push constants are limited to 128 bytes");
_Static_assert(sizeof(wd_pc_gemm_t) == 64, "wd_pc_gemm_t must match common.glsl");
_Static_assert(offsetof(wd_pc_gemm_t, flags) == 56, "wd_pc_gemm_t.flags offset");
_Static_assert(offsetof(wd_pc_gemm_t, alpha) == 60, "wd_pc_gemm_t.alpha offset");

#endif
