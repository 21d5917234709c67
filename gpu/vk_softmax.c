/*
 * vk_softmax.c - row-softmax pipelines (see vk_softmax.h and
 * shaders/softmax.comp).
 *
 * Threading: the GPU worker's thread only. Ownership: the object owns its
 * pipeline; sets from wd_vk_softmax_bind belong to the caller.
 */
#include "vk_softmax.h"

#include <stdlib.h>

#include "vk_internal.h"

struct wd_vk_softmax {
  wd_vk_softmax_variant_t variant;
  wd_vk_pipeline_t *pipe;
};

int wd_vk_softmax_new(wd_vk_device_t *dev, wd_vk_softmax_variant_t variant,
                      wd_vk_softmax_t **ret_sm) {
  const wd_vk_device_info_t *info = wd_vk_device_info(dev);
  if (variant == WD_VK_SOFTMAX_AUTO)
    variant = info->device_class == WD_VK_CLASS_CPU ? WD_VK_SOFTMAX_ROW
              : info->subgroup_arithmetic            ? WD_VK_SOFTMAX_SUBGROUP
                                                     : WD_VK_SOFTMAX_SHARED;
  const char *shader;
  switch (variant) {
  case WD_VK_SOFTMAX_ROW: shader = "softmax_row"; break;
  case WD_VK_SOFTMAX_SUBGROUP: shader = "softmax_wg_sg"; break;
  case WD_VK_SOFTMAX_SHARED: shader = "softmax_wg_shm"; break;
  default: return WD_EINVAL;
  }
  if (variant == WD_VK_SOFTMAX_SUBGROUP && !info->subgroup_arithmetic)
    return WD_EUNSUP;
  wd_vk_softmax_t *s = calloc(1, sizeof *s);
  if (!s)
    return WD_ENOMEM;
  *s = (wd_vk_softmax_t){ .variant = variant };
  const wd_vk_pipeline_desc_t desc = {
    .shader = shader,
    .n_args = 2,
    .args = { WD_VK_ARG_TEXEL_F32, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_softmax_t),
    .local_size = { 64, 1, 1 },
  };
  int rc = wd_vk_pipeline_new(dev, &desc, &s->pipe);
  if (rc < 0)
    goto fail;
  *ret_sm = s;
  return 0;
fail:
  wd_vk_softmax_free(s);
  return rc;
}

void wd_vk_softmax_free(wd_vk_softmax_t *s) {
  if (!s)
    return;
  wd_vk_pipeline_free(s->pipe);
  free(s);
}

wd_vk_softmax_variant_t wd_vk_softmax_variant(const wd_vk_softmax_t *s) { return s->variant; }

int wd_vk_softmax_bind(wd_vk_softmax_t *s, const wd_vk_arg_t *x, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[2] = { *x, *x };
  return wd_vk_dset_new(s->pipe, args, 2, ret_set);
}

int wd_vk_softmax_record(wd_vk_softmax_t *s, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                         const wd_pc_softmax_t *pc, uint32_t n_z) {
  if (n_z == 0 || pc->M == 0 || pc->N == 0 || pc->ld % 4 || pc->off % 4 || pc->z_stride % 4 ||
      pc->N > pc->ld)
    return WD_EINVAL;
  const uint32_t gx = s->variant == WD_VK_SOFTMAX_ROW ? WD_CEIL_DIV(pc->M, 64u) : pc->M;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, gx, n_z, 1);
  return 0;
}
