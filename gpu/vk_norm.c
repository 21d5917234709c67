/*
 * vk_norm.c - LayerNorm pipelines (see vk_norm.h and shaders/layernorm.comp).
 *
 * Threading: the GPU worker's thread only, like every gpu/ object.
 * Ownership: the wd_vk_norm_t owns its pipeline; descriptor sets made by
 * wd_vk_norm_bind belong to the caller and must be freed before it.
 */
#include "vk_norm.h"

#include <stdlib.h>

#include "vk_internal.h"

struct wd_vk_norm {
  wd_vk_norm_variant_t variant;
  wd_vk_pipeline_t *pipe;
};

int wd_vk_norm_new(wd_vk_device_t *dev, wd_vk_norm_variant_t variant, wd_vk_norm_t **ret_norm) {
  const bool sg = wd_vk_device_info(dev)->subgroup_arithmetic;
  /* On the CPU driver barriers and shared memory are the slow path, so
   * rows go one per invocation there. */
  if (variant == WD_VK_NORM_AUTO)
    variant = wd_vk_device_info(dev)->device_class == WD_VK_CLASS_CPU ? WD_VK_NORM_ROW
              : sg                                                    ? WD_VK_NORM_SUBGROUP
                                                                      : WD_VK_NORM_SHARED;
  if (variant != WD_VK_NORM_SUBGROUP && variant != WD_VK_NORM_SHARED && variant != WD_VK_NORM_ROW)
    return WD_EINVAL;
  if (variant == WD_VK_NORM_SUBGROUP && !sg)
    return WD_EUNSUP;
  wd_vk_norm_t *n = calloc(1, sizeof *n);
  if (!n)
    return WD_ENOMEM;
  *n = (wd_vk_norm_t){ .variant = variant };
  wd_vk_pipeline_desc_t desc = {
    .shader = variant == WD_VK_NORM_SUBGROUP ? "layernorm_sg"
              : variant == WD_VK_NORM_ROW    ? "layernorm_row"
                                             : "layernorm_shm",
    .n_args = 4,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_norm_t),
    .local_size = { 64, 1, 1 },
  };
  if (variant == WD_VK_NORM_ROW) /* reads X as RGBA32F texels */
    desc.args[0] = WD_VK_ARG_TEXEL_F32;
  int rc = wd_vk_pipeline_new(dev, &desc, &n->pipe);
  if (rc < 0)
    goto fail;
  *ret_norm = n;
  return 0;
fail:
  wd_vk_norm_free(n);
  return rc;
}

void wd_vk_norm_free(wd_vk_norm_t *n) {
  if (!n)
    return;
  wd_vk_pipeline_free(n->pipe);
  free(n);
}

wd_vk_norm_variant_t wd_vk_norm_variant(const wd_vk_norm_t *n) { return n->variant; }

int wd_vk_norm_bind(wd_vk_norm_t *n, const wd_vk_arg_t *x, const wd_vk_arg_t *y,
                    const wd_vk_arg_t *gamma, const wd_vk_arg_t *beta, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[4] = { *x, *y, *gamma, *beta };
  return wd_vk_dset_new(n->pipe, args, 4, ret_set);
}

int wd_vk_norm_record(wd_vk_norm_t *n, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_norm_t *pc) {
  if (pc->n_rows == 0 || pc->d == 0 || pc->ldx < pc->d || pc->ldy < pc->d || !(pc->eps >= 0.0f))
    return WD_EINVAL;
  if (n->variant == WD_VK_NORM_ROW && (pc->d | pc->x_off | pc->ldx | pc->y_off | pc->ldy) % 4u)
    return WD_EINVAL; /* vec4 accesses */
  /* One workgroup per row, or (ROW) one invocation per row. */
  const uint32_t groups = n->variant == WD_VK_NORM_ROW ? WD_CEIL_DIV(pc->n_rows, 64u) : pc->n_rows;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, groups, 1, 1);
  return 0;
}
