/*
 * vk_norm.h - LayerNorm over rows (decoder and encoder blocks, ln_post).
 *
 * y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta, f32 in and out,
 * in place allowed (bind the same range as x and y). One workgroup per row.
 * Two variants compute the same thing: SUBGROUP reduces with subgroupAdd
 * (needs subgroup arithmetic in compute), SHARED with a shared-memory tree.
 * AUTO picks SUBGROUP where the device reports subgroup arithmetic.
 */
#ifndef WD_VK_NORM_H
#define WD_VK_NORM_H

#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "vk_push.h"

typedef enum {
  WD_VK_NORM_AUTO = 0,
  WD_VK_NORM_SUBGROUP = 1,
  WD_VK_NORM_SHARED = 2,
  WD_VK_NORM_ROW = 3, /* one invocation per row, no reductions: CPU devices; reads X as
                       * RGBA32F texels and needs d, offsets and strides % 4 == 0 */
} wd_vk_norm_variant_t;

typedef struct wd_vk_norm wd_vk_norm_t;

/* WD_EUNSUP when SUBGROUP is asked for on a device without subgroup arithmetic. */
int wd_vk_norm_new(wd_vk_device_t *dev, wd_vk_norm_variant_t variant, wd_vk_norm_t **ret_norm);
void wd_vk_norm_free(wd_vk_norm_t *n); /* accepts NULL */
wd_vk_norm_variant_t wd_vk_norm_variant(const wd_vk_norm_t *n);

/* Binds x (f32, read), y (f32, written; may be the same range as x),
 * gamma and beta (f32, d each). Element offsets go in the push constants. */
int wd_vk_norm_bind(wd_vk_norm_t *n, const wd_vk_arg_t *x, const wd_vk_arg_t *y,
                    const wd_vk_arg_t *gamma, const wd_vk_arg_t *beta, wd_vk_dset_t **ret_set);

/* Records LayerNorm of pc->n_rows rows of pc->d elements. WD_EINVAL (and
 * nothing recorded) for zero sizes or leading dimensions below d. */
int wd_vk_norm_record(wd_vk_norm_t *n, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_norm_t *pc);

#endif
