/*
 * vk_attn_enc.c - the fused encoder self-attention's pipeline and grid
 * (see vk_attn_enc.h and shaders/attn_cm.comp).
 *
 * Threading: the GPU worker's thread only. Ownership: the object owns its
 * pipeline; sets from wd_vk_attn_enc_bind belong to the caller.
 */
#include "vk_attn_enc.h"

#include <stdlib.h>

#include "vk_internal.h"

#define QUERIES_PER_GROUP 64u /* attn_cm.comp's QB */
#define HEAD_DIM 64u

struct wd_vk_attn_enc {
  wd_vk_pipeline_t *pipe;
};

int wd_vk_attn_enc_new(wd_vk_device_t *dev, wd_vk_attn_enc_t **ret) {
  if (wd_vk_device_info(dev)->matrix_ext == WD_VK_CM_NONE)
    return WD_EUNSUP;
  wd_vk_attn_enc_t *a = calloc(1, sizeof *a);
  if (!a)
    return WD_ENOMEM;
  const wd_vk_pipeline_desc_t desc = {
    .shader = "attn_cm",
    .n_args = 4,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_attn_enc_t),
    .local_size = { 128, 1, 1 },
  };
  int rc = wd_vk_pipeline_new(dev, &desc, &a->pipe);
  if (rc < 0) {
    free(a);
    return rc;
  }
  *ret = a;
  return 0;
}

void wd_vk_attn_enc_free(wd_vk_attn_enc_t *a) {
  if (!a)
    return;
  wd_vk_pipeline_free(a->pipe);
  free(a);
}

int wd_vk_attn_enc_bind(wd_vk_attn_enc_t *a, const wd_vk_arg_t *q, const wd_vk_arg_t *k,
                        const wd_vk_arg_t *v, const wd_vk_arg_t *o, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[4] = { *q, *k, *v, *o };
  return wd_vk_dset_new(a->pipe, args, 4, ret_set);
}

int wd_vk_attn_enc_record(wd_vk_attn_enc_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                          const wd_pc_attn_enc_t *pc, uint32_t n_head) {
  if (!set || pc->n == 0 || n_head == 0 || pc->ld < n_head * HEAD_DIM || pc->ld % 4 ||
      pc->q_off % 4 || pc->k_off % 4 || pc->v_off % 4 || pc->o_off % 4)
    return WD_EINVAL;
  wd_vk_cmd_dispatch_pipe(cmd, a->pipe, set, pc, sizeof *pc,
                          WD_CEIL_DIV(pc->n, QUERIES_PER_GROUP), n_head, 1);
  return 0;
}
