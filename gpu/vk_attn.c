/*
 * vk_attn.c - decoder attention pipelines (see vk_attn.h and
 * shaders/attn_dec.comp).
 *
 * Threading: the GPU worker's thread only. Ownership: the wd_vk_attn_t owns
 * its pipeline; sets from wd_vk_attn_bind belong to the caller.
 */
#include "vk_attn.h"

#include <stdlib.h>

#include "vk_internal.h"

struct wd_vk_attn {
  wd_vk_attn_variant_t variant;
  wd_vk_pipeline_t *pipe;
};

int wd_vk_attn_new(wd_vk_device_t *dev, wd_vk_attn_variant_t variant, wd_vk_attn_t **ret_attn) {
  return wd_vk_attn_new_fmt(dev, variant, false, ret_attn);
}

int wd_vk_attn_new_fmt(wd_vk_device_t *dev, wd_vk_attn_variant_t variant, bool kv_f16,
                       wd_vk_attn_t **ret_attn) {
  const wd_vk_arg_kind_t kv = kv_f16 ? WD_VK_ARG_TEXEL_F16 : WD_VK_ARG_TEXEL_F32;
  const bool sg = wd_vk_device_info(dev)->subgroup_arithmetic;
  if (variant == WD_VK_ATTN_AUTO)
    variant = sg ? WD_VK_ATTN_SUBGROUP : WD_VK_ATTN_SHARED;
  if (variant != WD_VK_ATTN_SUBGROUP && variant != WD_VK_ATTN_SHARED)
    return WD_EINVAL;
  if (variant == WD_VK_ATTN_SUBGROUP && !sg)
    return WD_EUNSUP;
  wd_vk_attn_t *a = calloc(1, sizeof *a);
  if (!a)
    return WD_ENOMEM;
  *a = (wd_vk_attn_t){ .variant = variant };
  const wd_vk_pipeline_desc_t desc = {
    .shader = variant == WD_VK_ATTN_SUBGROUP ? "attn_dec_sg" : "attn_dec_shm",
    .n_args = 6,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_TEXEL_F32, kv, kv, WD_VK_ARG_STORAGE,
              WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_attn_t),
    .local_size = { 64, 1, 1 },
  };
  int rc = wd_vk_pipeline_new(dev, &desc, &a->pipe);
  if (rc < 0)
    goto fail;
  *ret_attn = a;
  return 0;
fail:
  wd_vk_attn_free(a);
  return rc;
}

void wd_vk_attn_free(wd_vk_attn_t *a) {
  if (!a)
    return;
  wd_vk_pipeline_free(a->pipe);
  free(a);
}

wd_vk_attn_variant_t wd_vk_attn_variant(const wd_vk_attn_t *a) { return a->variant; }

int wd_vk_attn_bind(wd_vk_attn_t *a, const wd_vk_arg_t *step, const wd_vk_arg_t *q,
                    const wd_vk_arg_t *k, const wd_vk_arg_t *v, const wd_vk_arg_t *o,
                    const wd_vk_arg_t *save, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[6] = { *step, *q, *k, *v, *o, *save };
  return wd_vk_dset_new(a->pipe, args, 6, ret_set);
}

int wd_vk_attn_record(wd_vk_attn_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_attn_t *pc, uint32_t nb) {
  (void)a;
  const uint32_t width = pc->n_head * WD_ATTN_HEAD_DIM;
  const bool cross = (pc->flags & WD_ATTN_CROSS) != 0;
  const bool save = (pc->flags & (WD_ATTN_SAVE_QK | WD_ATTN_SAVE_P)) != 0;
  if (nb == 0 || pc->n_head == 0 || pc->n_ctx == 0 || pc->q_off % 4 || pc->ldq % 4 ||
      pc->kv_off % 4 || pc->ldkv % 4 || pc->ldq < width || pc->ldkv < width ||
      pc->ldo < width || !(pc->scale > 0.0f))
    return WD_EINVAL;
  if (cross ? (pc->n_keys == 0 || pc->n_keys > pc->n_ctx || pc->n_keys > WD_VK_ATTN_MAX_KEYS)
            : pc->n_ctx > WD_VK_ATTN_MAX_KEYS)
    return WD_EINVAL;
  /* A saved head must exist. */
  if (save && pc->n_head < 32 && (pc->save_heads >> pc->n_head) != 0)
    return WD_EINVAL;
  if (save && pc->save_ld < (cross ? pc->n_keys : pc->n_ctx))
    return WD_EINVAL;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, pc->n_head, nb, 1);
  return 0;
}
