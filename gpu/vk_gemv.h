/*
 * vk_gemv.h - batched GEMV ("skinny GEMM") for the decoder step.
 *
 * Y[b][n] = alpha * W[n] . X[b] (+ bias[n]) (GELU) (+ Y_old[b][n]) for the
 * nb <= 16 live sequences of a step: W (N, K) f16 in an RGBA16F texel view
 * (or f32 in an RGBA32F one, or quantized blocks in an R32UI one, which the
 * kernel dequantizes as it reads: shaders/wquant.glsl),
 * X f32 (nb, ldx) in an RGBA32F texel view, Y f32 storage. The weights are
 * read once per step for all nb rows. Flags are the WD_GEMM_* values.
 *
 * Families (each compiled for batch variants 1, 2, 4, 8, 16; a batch in
 * between runs on the next larger variant):
 *   ROW       one invocation per output row (lavapipe, K < 1536),
 *   SUBGROUP  one subgroup per row, K split over its lanes + subgroupAdd
 *             (lavapipe for K >= 1536; GPUs with subgroup arithmetic),
 *   SHARED    one workgroup per row + shared-memory tree (other GPUs).
 * AUTO chooses per call of wd_vk_gemv_bind, from the device class and K:
 * on CPU devices ROW below K = 1536 and SUBGROUP from there; on GPUs
 * SUBGROUP when available, else SHARED.
 */
#ifndef WD_VK_GEMV_H
#define WD_VK_GEMV_H

#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "vk_push.h"

typedef enum {
  WD_VK_GEMV_AUTO = 0,
  WD_VK_GEMV_ROW = 1,
  WD_VK_GEMV_SUBGROUP = 2,
  WD_VK_GEMV_SHARED = 3,
} wd_vk_gemv_family_t;

#define WD_VK_GEMV_MAX_BATCH 16u

typedef struct wd_vk_gemv wd_vk_gemv_t;

/* Creates the pipelines the family needs (AUTO: those it may choose).
 * WD_EUNSUP for SUBGROUP on a device without subgroup arithmetic. */
int wd_vk_gemv_new(wd_vk_device_t *dev, wd_vk_gemv_family_t family, wd_vk_gemv_t **ret_gemv);
void wd_vk_gemv_free(wd_vk_gemv_t *g); /* accepts NULL */
const char *wd_vk_gemv_family_name(wd_vk_gemv_family_t f);

/* The family a bind for this K would use. */
wd_vk_gemv_family_t wd_vk_gemv_choose(const wd_vk_gemv_t *g, uint32_t K);

/* Binds x (f32 texels), w (weights), bias (f32) and y (f32) for products
 * with inner size K and up to nb sequences: the set is tied to the kernel
 * variant chosen for (K, nb, w->wtype). w is f16 when w->wtype is DEFAULT
 * or F16, f32 for F32, or quantized blocks in the vk_wquant.h layout (then
 * K and pc->w_off must be multiples of 32). The first bind for a weight
 * type other than f16 builds its pipelines. WD_EINVAL for nb outside 1..16. */
int wd_vk_gemv_bind(wd_vk_gemv_t *g, uint32_t K, uint32_t nb, const wd_vk_arg_t *x,
                    const wd_vk_arg_t *w, const wd_vk_arg_t *bias, const wd_vk_arg_t *y,
                    wd_vk_dset_t **ret_set);

/* Records one batched GEMV. WD_EINVAL (nothing recorded) when the shapes
 * break the alignment rules (K, x_off, ldx, w_off multiples of 4), when
 * ldx < K or ldy < N, or pc->nb exceeds the batch the set was bound for. */
int wd_vk_gemv_record(wd_vk_gemv_t *g, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_gemv_t *pc);

#endif
