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
  wd_vk_pipeline_t *rows; /* attn_rows: 16 rows of one cache per workgroup */
  bool use_rows;          /* the *_rows calls use it (else the one-row kernel) */
  wd_vk_pipeline_t *split, *merge; /* attn_dec_*_split and its sibling attn_merge */
  uint32_t n_split;                /* key chunks wd_vk_attn_splits reports */
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
  /* The rows kernel on GPUs only. On an NVIDIA H200 (large-v3-turbo, a
   * 224-token prefill, 2026-11-26) it took the cross-attention from 6.34
   * to 0.98 GPU ms and the self-attention from 0.55 to 0.21; on lavapipe,
   * whose shared memory is a scalar loop per lane (reference/lavapipe.md),
   * it made tiny.en's prefill 8x slower (352 -> 2754 ms). */
  const wd_vk_class_t cls = wd_vk_device_info(dev)->device_class;
  const bool gpu = cls == WD_VK_CLASS_DISCRETE || cls == WD_VK_CLASS_INTEGRATED;
  /* Cross-attention of a step in key chunks on GPUs: one row is n_head
   * workgroups (20 for large) otherwise, too few to fill one. 8 chunks of
   * 1500 keys: 188 per workgroup, 3 per invocation. */
  *a = (wd_vk_attn_t){ .variant = variant, .use_rows = gpu, .n_split = gpu ? 8u : 1u };
  wd_vk_pipeline_desc_t desc = {
    .shader = variant == WD_VK_ATTN_SUBGROUP ? "attn_dec_sg" : "attn_dec_shm",
    .n_args = 6,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_TEXEL_F32, kv, kv, WD_VK_ARG_STORAGE,
              WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_attn_t),
    .local_size = { 64, 1, 1 },
  };
  int rc = wd_vk_pipeline_new(dev, &desc, &a->pipe);
  desc.shader = "attn_rows";
  if (rc == 0)
    rc = wd_vk_pipeline_new(dev, &desc, &a->rows);
  desc.shader = variant == WD_VK_ATTN_SUBGROUP ? "attn_dec_sg_split" : "attn_dec_shm_split";
  if (rc == 0)
    rc = wd_vk_pipeline_new(dev, &desc, &a->split);
  if (rc == 0)
    rc = wd_vk_pipeline_sibling(a->split, "attn_merge", &a->merge);
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
  wd_vk_pipeline_free(a->rows);
  wd_vk_pipeline_free(a->merge); /* before its base */
  wd_vk_pipeline_free(a->split);
  free(a);
}

wd_vk_attn_variant_t wd_vk_attn_variant(const wd_vk_attn_t *a) { return a->variant; }

int wd_vk_attn_bind(wd_vk_attn_t *a, const wd_vk_arg_t *step, const wd_vk_arg_t *q,
                    const wd_vk_arg_t *k, const wd_vk_arg_t *v, const wd_vk_arg_t *o,
                    const wd_vk_arg_t *save, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[6] = { *step, *q, *k, *v, *o, *save };
  return wd_vk_dset_new(a->pipe, args, 6, ret_set);
}

void wd_vk_attn_use_rows(wd_vk_attn_t *a, bool on) { a->use_rows = on; }

int wd_vk_attn_bind_rows(wd_vk_attn_t *a, const wd_vk_arg_t *step, const wd_vk_arg_t *q,
                         const wd_vk_arg_t *k, const wd_vk_arg_t *v, const wd_vk_arg_t *o,
                         wd_vk_dset_t **ret_set) {
  /* Binding 5 (saved scores) is never written by either kernel here. */
  const wd_vk_arg_t args[6] = { *step, *q, *k, *v, *o, *o };
  return wd_vk_dset_new(a->use_rows ? a->rows : a->pipe, args, 6, ret_set);
}

/* The checks both kernels share; 0 when pc is valid for nb rows. */
static int check(const wd_pc_attn_t *pc, uint32_t nb) {
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
  return 0;
}

int wd_vk_attn_record(wd_vk_attn_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_attn_t *pc, uint32_t nb) {
  (void)a;
  const int rc = check(pc, nb);
  if (rc == 0)
    wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, pc->n_head, nb, 1);
  return rc;
}

int wd_vk_attn_record_rows(wd_vk_attn_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                           const wd_pc_attn_t *pc, uint32_t nb) {
  if (nb % WD_VK_ATTN_ROWS || (pc->flags & (WD_ATTN_SAVE_QK | WD_ATTN_SAVE_P)))
    return WD_EINVAL;
  const int rc = check(pc, nb);
  if (rc == 0)
    wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, pc->n_head,
                       a->use_rows ? nb / WD_VK_ATTN_ROWS : nb, 1);
  return rc;
}

uint32_t wd_vk_attn_splits(const wd_vk_attn_t *a) { return a->n_split; }

void wd_vk_attn_set_splits(wd_vk_attn_t *a, uint32_t n) {
  a->n_split = n < 1 ? 1 : n > WD_VK_ATTN_MAX_SPLIT ? WD_VK_ATTN_MAX_SPLIT : n;
}

int wd_vk_attn_bind_split(wd_vk_attn_t *a, const wd_vk_arg_t *step, const wd_vk_arg_t *q,
                          const wd_vk_arg_t *k, const wd_vk_arg_t *v, const wd_vk_arg_t *o,
                          const wd_vk_arg_t *part, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[6] = { *step, *q, *k, *v, *o, *part };
  return wd_vk_dset_new(a->split, args, 6, ret_set);
}

int wd_vk_attn_record_split(wd_vk_attn_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                            const wd_pc_attn_t *pc, uint32_t nb) {
  if (pc->n_split < 2 || pc->n_split > WD_VK_ATTN_MAX_SPLIT ||
      (pc->flags & (WD_ATTN_SAVE_QK | WD_ATTN_SAVE_P)))
    return WD_EINVAL;
  const int rc = check(pc, nb);
  if (rc < 0)
    return rc;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, pc->n_head, nb, pc->n_split);
  wd_vk_cmd_barrier(cmd);
  wd_vk_cmd_dispatch_pipe(cmd, a->merge, set, pc, sizeof *pc, pc->n_head, nb, 1);
  return 0;
}
