/*
 * vk_gemm.h - the GEMM kernel family, chosen per device class.
 *
 * C[z][m][n] = alpha * sum_k A[z][m][k] * B[z][n][k] (+ bias[z][n]) (GELU)
 *              (+ old C), with A f32 activations, B f16 weights, C f32.
 * This is the encoder's workhorse (every Linear layer over 1500 frames, the
 * cross-attention K/V of all decoder layers, the attention products).
 *
 * Three families compute the same thing: TEXEL (register-blocked over texel
 * buffers, fast on lavapipe and fine on GPUs), TILED (shared-memory tiles
 * over storage buffers, 4 x 4 outputs per invocation) and RB (shared-memory
 * tiles, 8 x 8 outputs per invocation read as vec4s, double-buffered) run
 * in f32 on any device. CM (gemm_cm.comp) runs on the matrix units through
 * cooperative matrices, A and B rounded to f16 with f32 sums, on devices
 * whose wd_vk_device_info_t.matrix_ext is not NONE. AUTO picks TEXEL_8X8
 * on CPU drivers; on GPUs with matrix units CM; on other GPUs RB64 for f16
 * (and quantized) B, the Linear layers, and TILED for f32 B, the attention
 * products (vk_gemm.c has the measurements); exact (--vk-precision f32)
 * keeps the f32 families on every device.
 */
#ifndef WD_VK_GEMM_H
#define WD_VK_GEMM_H

#include "vk_buffer.h"
#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "vk_push.h"

typedef enum {
  WD_VK_GEMM_AUTO = 0,
  WD_VK_GEMM_TEXEL = 1,
  WD_VK_GEMM_TEXEL_8X8 = 2, /* smaller register block: for small M or N */
  WD_VK_GEMM_TILED = 3,
  /* Register-blocked shared-memory tiles (gemm_rb.comp), 8 x 8 outputs per
   * invocation, by tile size M x N: */
  WD_VK_GEMM_RB64 = 4,
  WD_VK_GEMM_RB128X64 = 5,
  /* Cooperative-matrix tiles (gemm_cm.comp), f16 inputs, f32 sums, by tile
   * size M x N: 8 subgroups of 64 x 32 outputs, or 4 of 32 x 32. */
  WD_VK_GEMM_CM128 = 6,
  WD_VK_GEMM_CM64 = 7,
  /* Candidates until a GPU has timed them, for f16 and f32 B only: the
   * same tiles with the loaded words converted when stored, not when
   * loaded (DEFER=1 in gemm_cm.comp), and that with the loads two
   * K-slices ahead (PF=2). */
  WD_VK_GEMM_CM128_DL = 8,
  WD_VK_GEMM_CM64_DL = 9,
  WD_VK_GEMM_CM128_PF2 = 10,
  WD_VK_GEMM_CM64_PF2 = 11,
} wd_vk_gemm_family_t;

/* Element format of B. F32 serves products of two activations (the
 * encoder's Q.K^T and P.V^T): on the texel families only the view format
 * differs, the tiled family has its own shader variant. */
typedef enum {
  WD_VK_GEMM_B_F16 = 0,
  WD_VK_GEMM_B_F32 = 1,
} wd_vk_gemm_bfmt_t;

typedef struct wd_vk_gemm wd_vk_gemm_t;

/* wd_vk_gemm_new_fmt with B in f16 (weights). A CM family on a device
 * without matrix units is WD_EUNSUP. */
int wd_vk_gemm_new(wd_vk_device_t *dev, wd_vk_gemm_family_t family, wd_vk_gemm_t **ret_gemm);
int wd_vk_gemm_new_fmt(wd_vk_device_t *dev, wd_vk_gemm_family_t family, wd_vk_gemm_bfmt_t bfmt,
                       wd_vk_gemm_t **ret_gemm);
void wd_vk_gemm_free(wd_vk_gemm_t *g); /* accepts NULL */
wd_vk_gemm_family_t wd_vk_gemm_family(const wd_vk_gemm_t *g);
const char *wd_vk_gemm_family_name(wd_vk_gemm_family_t f);
/* The family AUTO picks on device d for B of format bfmt; exact: only the
 * f32 families (--vk-precision f32). */
wd_vk_gemm_family_t wd_vk_gemm_auto(const wd_vk_device_info_t *d, wd_vk_gemm_bfmt_t bfmt,
                                    bool exact);
/* The family AUTO picks for the decoder's Linear layers over at most 256
 * rows (the prefill and align recordings), B in f16 or quantized. */
wd_vk_gemm_family_t wd_vk_gemm_auto_rows(const wd_vk_device_info_t *d, bool exact);
/* Whether family f rounds its inputs to f16 (the matrix-unit families). */
bool wd_vk_gemm_family_f16(wd_vk_gemm_family_t f);

/* The family a name from wd_vk_gemm_family_name (or "auto") stands for;
 * WD_EINVAL for another name. */
int wd_vk_gemm_family_parse(const char *name, wd_vk_gemm_family_t *ret);

/* Binds the four operands: a (f32), b, bias (f32), c (f32). b is read as
 * b->wtype says (vk_pipeline.h): f16, f32, or quantized blocks in the
 * vk_wquant.h layout, dequantized inside the kernel (then K, ldb, b_off and
 * b_bz must be multiples of 32); DEFAULT means the object's bfmt. The first
 * bind of a new type builds its pipeline. Each is a whole buffer range;
 * element offsets go in the push constants. */
int wd_vk_gemm_bind(wd_vk_gemm_t *g, const wd_vk_arg_t *a, const wd_vk_arg_t *b,
                    const wd_vk_arg_t *bias, const wd_vk_arg_t *c, wd_vk_dset_t **ret_set);

/* Records one GEMM over n_batch z-entries. pc->flags picks the epilogue,
 * which is compiled into a pipeline variant (built here on first use, so
 * plan at load time). Returns WD_EINVAL (and records nothing) when the
 * shapes break the family's alignment rules or flags has unknown bits. */
int wd_vk_gemm_record(wd_vk_gemm_t *g, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_gemm_t *pc, uint32_t n_batch);

#endif
