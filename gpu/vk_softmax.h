/*
 * vk_softmax.h - row softmax in place over (Z, M, N) f32, with a scale and
 * an optional causal mask: the middle step of the encoder's attention
 * (QK^T by vk_gemm batched over heads, softmax, then P.V by vk_gemm).
 *
 * Variants: ROW (one invocation per row, no reductions: lavapipe), and the
 * workgroup-per-row GPU kernel with SUBGROUP or SHARED reductions. AUTO
 * picks ROW on CPU devices, else SUBGROUP where available, else SHARED.
 */
#ifndef WD_VK_SOFTMAX_H
#define WD_VK_SOFTMAX_H

#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "vk_push.h"

typedef enum {
  WD_VK_SOFTMAX_AUTO = 0,
  WD_VK_SOFTMAX_ROW = 1,
  WD_VK_SOFTMAX_SUBGROUP = 2,
  WD_VK_SOFTMAX_SHARED = 3,
} wd_vk_softmax_variant_t;

typedef struct wd_vk_softmax wd_vk_softmax_t;

int wd_vk_softmax_new(wd_vk_device_t *dev, wd_vk_softmax_variant_t variant,
                      wd_vk_softmax_t **ret_sm);
void wd_vk_softmax_free(wd_vk_softmax_t *s); /* accepts NULL */
wd_vk_softmax_variant_t wd_vk_softmax_variant(const wd_vk_softmax_t *s);

/* Binds x: one range, used through an RGBA32F texel view for the loads
 * and as storage for the stores (the buffer needs both usages). */
int wd_vk_softmax_bind(wd_vk_softmax_t *s, const wd_vk_arg_t *x, wd_vk_dset_t **ret_set);

/* Records the softmax of n_z x pc->M rows. WD_EINVAL when ld, off or
 * z_stride is not a multiple of 4 or N > ld. */
int wd_vk_softmax_record(wd_vk_softmax_t *s, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                         const wd_pc_softmax_t *pc, uint32_t n_z);

#endif
