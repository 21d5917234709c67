/*
 * vk_kv.c - KV-cache append and gather pipelines (see vk_kv.h,
 * shaders/kv_append.comp and shaders/kv_gather.comp).
 *
 * Threading: the GPU worker's thread only. Ownership: the object owns its
 * two pipelines; sets from the bind calls belong to the caller.
 */
#include "vk_kv.h"

#include <stdlib.h>

#include "vk_internal.h"

struct wd_vk_kv {
  wd_vk_pipeline_t *append;
  wd_vk_pipeline_t *gather;
  wd_vk_pipeline_t *to_f16; /* f16 caches only */
};

int wd_vk_kv_new(wd_vk_device_t *dev, wd_vk_kv_t **ret_kv) {
  return wd_vk_kv_new_fmt(dev, false, ret_kv);
}

int wd_vk_kv_new_fmt(wd_vk_device_t *dev, bool kv_f16, wd_vk_kv_t **ret_kv) {
  int rc = 0;
  wd_vk_kv_t *kv = calloc(1, sizeof *kv);
  if (!kv)
    return WD_ENOMEM;
  *kv = (wd_vk_kv_t){ .append = NULL, .gather = NULL, .to_f16 = NULL };
  const wd_vk_pipeline_desc_t app = {
    .shader = kv_f16 ? "kv_append_f16" : "kv_append",
    .n_args = 4,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_kv_t),
    .local_size = { 64, 1, 1 },
  };
  const wd_vk_pipeline_desc_t gat = {
    .shader = kv_f16 ? "kv_gather_f16" : "kv_gather",
    .n_args = 5,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE,
              WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_kv_t),
    .local_size = { 64, 1, 1 },
  };
  const wd_vk_pipeline_desc_t cvt = {
    .shader = "kv_to_f16",
    .n_args = 4,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_cvt_t),
    .local_size = { 64, 1, 1 },
  };
  if ((rc = wd_vk_pipeline_new(dev, &app, &kv->append)) < 0 ||
      (rc = wd_vk_pipeline_new(dev, &gat, &kv->gather)) < 0 ||
      (kv_f16 && (rc = wd_vk_pipeline_new(dev, &cvt, &kv->to_f16)) < 0))
    goto fail;
  *ret_kv = kv;
  return 0;
fail:
  wd_vk_kv_free(kv);
  return rc;
}

void wd_vk_kv_free(wd_vk_kv_t *kv) {
  if (!kv)
    return;
  wd_vk_pipeline_free(kv->append);
  wd_vk_pipeline_free(kv->gather);
  wd_vk_pipeline_free(kv->to_f16);
  free(kv);
}

int wd_vk_kv_bind_append(wd_vk_kv_t *kv, const wd_vk_arg_t *step, const wd_vk_arg_t *in,
                         const wd_vk_arg_t *k, const wd_vk_arg_t *v, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[4] = { *step, *in, *k, *v };
  return wd_vk_dset_new(kv->append, args, 4, ret_set);
}

int wd_vk_kv_record_append(wd_vk_kv_t *kv, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                           const wd_pc_kv_t *pc, uint32_t nb) {
  (void)kv;
  if (nb == 0 || pc->d == 0 || pc->n_ctx == 0 || pc->d % 4 || pc->ldi % 4 || pc->in_off % 4 ||
      pc->v_in_off % 4 || pc->cache_off % 4 || pc->ldi < pc->d)
    return WD_EINVAL;
  /* One vec4 per invocation, 64 per workgroup. */
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, WD_CEIL_DIV(pc->d, 256u), nb, 1);
  return 0;
}

int wd_vk_kv_bind_gather(wd_vk_kv_t *kv, const wd_vk_arg_t *step, const wd_vk_arg_t *k_src,
                         const wd_vk_arg_t *v_src, const wd_vk_arg_t *k_dst,
                         const wd_vk_arg_t *v_dst, wd_vk_dset_t **ret_set) {
  if (k_src->buf == k_dst->buf || v_src->buf == v_dst->buf || k_src->buf == v_dst->buf ||
      v_src->buf == k_dst->buf)
    return WD_EINVAL; /* an in-place gather would race */
  const wd_vk_arg_t args[5] = { *step, *k_src, *v_src, *k_dst, *v_dst };
  return wd_vk_dset_new(kv->gather, args, 5, ret_set);
}

int wd_vk_kv_record_gather(wd_vk_kv_t *kv, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                           const wd_pc_kv_t *pc, uint32_t nb, uint32_t n_layer) {
  (void)kv;
  if (nb == 0 || n_layer == 0 || pc->d == 0 || pc->n_ctx == 0 || pc->d % 4 ||
      pc->cache_off % 4 || pc->layer_stride % 4 ||
      (n_layer > 1 && pc->layer_stride < nb * pc->n_ctx * pc->d))
    return WD_EINVAL;
  const uint64_t n4 = (uint64_t)pc->n_ctx * pc->d / 4;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, (uint32_t)WD_CEIL_DIV(n4, 64u), nb, n_layer);
  return 0;
}

int wd_vk_kv_bind_to_f16(wd_vk_kv_t *kv, const wd_vk_arg_t *ks, const wd_vk_arg_t *vs,
                         const wd_vk_arg_t *kd, const wd_vk_arg_t *vd, wd_vk_dset_t **ret_set) {
  if (!kv->to_f16)
    return WD_EINVAL;
  const wd_vk_arg_t args[4] = { *ks, *vs, *kd, *vd };
  return wd_vk_dset_new(kv->to_f16, args, 4, ret_set);
}

int wd_vk_kv_record_to_f16(wd_vk_kv_t *kv, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                           uint32_t n4) {
  if (!kv->to_f16 || n4 == 0)
    return WD_EINVAL;
  /* 64 vec4s per workgroup; rows of at most 65535 workgroups. */
  const uint32_t groups = WD_CEIL_DIV(n4, 64u);
  const uint32_t gx = groups < 65535u ? groups : 65535u;
  const wd_pc_cvt_t pc = { .n4 = n4 };
  wd_vk_cmd_dispatch(cmd, set, &pc, sizeof pc, gx, WD_CEIL_DIV(groups, gx), 1);
  return 0;
}
