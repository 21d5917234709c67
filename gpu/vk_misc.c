/*
 * vk_misc.c - embedding, im2col, transpose and argmax pipelines (see
 * vk_misc.h and the shaders of the same names).
 *
 * Threading: the GPU worker's thread only. Ownership: the object owns its
 * four pipelines; sets from the bind calls belong to the caller.
 */
#include "vk_misc.h"

#include <stdio.h>
#include <stdlib.h>

#include "vk_internal.h"
#include "vk_pipeline_internal.h"
#include "vk_wquant.h"

struct wd_vk_misc {
  wd_vk_device_t *dev;
  wd_vk_pipeline_t *embed; /* f16 token table */
  /* Other token-table types (f32, quantized: the variant reading them),
   * made by the first bind that needs one; [WD_VK_W_F16] stays NULL. */
  wd_vk_pipeline_t *embed_w[WD_VK_W_COUNT];
  wd_vk_pipeline_t *im2col;
  wd_vk_pipeline_t *transpose;
  wd_vk_pipeline_t *argmax;
};

int wd_vk_misc_new(wd_vk_device_t *dev, wd_vk_misc_t **ret_misc) {
  int rc = 0;
  wd_vk_misc_t *m = calloc(1, sizeof *m);
  if (!m)
    return WD_ENOMEM;
  *m = (wd_vk_misc_t){ .dev = dev };
  const wd_vk_pipeline_desc_t embed = {
    .shader = "embed",
    .n_args = 4,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_TEXEL_F16, WD_VK_ARG_TEXEL_F32, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_embed_t),
    .local_size = { 64, 1, 1 },
  };
  const wd_vk_pipeline_desc_t im2col = {
    .shader = "im2col",
    .n_args = 2,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_im2col_t),
    .local_size = { 64, 1, 1 },
  };
  const wd_vk_pipeline_desc_t transpose = {
    .shader = "transpose",
    .n_args = 2,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_transpose_t),
    .local_size = { 8, 8, 1 },
  };
  const wd_vk_pipeline_desc_t argmax = {
    .shader = "argmax",
    .n_args = 3,
    .args = { WD_VK_ARG_TEXEL_F32, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_argmax_t),
    .local_size = { 64, 1, 1 },
  };
  if ((rc = wd_vk_pipeline_new(dev, &embed, &m->embed)) < 0 ||
      (rc = wd_vk_pipeline_new(dev, &im2col, &m->im2col)) < 0 ||
      (rc = wd_vk_pipeline_new(dev, &transpose, &m->transpose)) < 0 ||
      (rc = wd_vk_pipeline_new(dev, &argmax, &m->argmax)) < 0)
    goto fail;
  *ret_misc = m;
  return 0;
fail:
  wd_vk_misc_free(m);
  return rc;
}

void wd_vk_misc_free(wd_vk_misc_t *m) {
  if (!m)
    return;
  wd_vk_pipeline_free(m->embed);
  for (int i = 0; i < WD_VK_W_COUNT; i++)
    wd_vk_pipeline_free(m->embed_w[i]);
  wd_vk_pipeline_free(m->im2col);
  wd_vk_pipeline_free(m->transpose);
  wd_vk_pipeline_free(m->argmax);
  free(m);
}

int wd_vk_misc_bind_embed(wd_vk_misc_t *m, const wd_vk_arg_t *step, const wd_vk_arg_t *tok,
                          const wd_vk_arg_t *pos, const wd_vk_arg_t *x, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[4] = { *step, *tok, *pos, *x };
  wd_vk_pipeline_t *pipe = m->embed;
  const wd_vk_wtype_t wt = tok->wtype;
  if (wt != WD_VK_W_DEFAULT && wt != WD_VK_W_F16) {
    if (wt >= WD_VK_W_COUNT)
      return WD_EINVAL;
    if (!m->embed_w[wt]) {
      /* The same bindings with the table read as f32 texels or as words. */
      wd_vk_pipeline_desc_t desc = *wd_vk_pipeline_desc(m->embed);
      char name[32];
      const char *sfx = wd_vk_wtype_suffix(wt);
      snprintf(name, sizeof name, "embed_%s", sfx ? sfx : "");
      desc.shader = sfx ? name : "embed";
      desc.args[1] = sfx ? WD_VK_ARG_TEXEL_U32 : WD_VK_ARG_TEXEL_F32;
      int rc = wd_vk_pipeline_new(m->dev, &desc, &m->embed_w[wt]);
      if (rc < 0)
        return rc;
    }
    pipe = m->embed_w[wt];
  }
  return wd_vk_dset_new(pipe, args, 4, ret_set);
}

int wd_vk_misc_record_embed(wd_vk_misc_t *m, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                            const wd_pc_embed_t *pc, uint32_t nb) {
  /* A quantized table is read in whole 32-element blocks per row. */
  int quant = 0;
  for (int i = WD_VK_W_Q4_0; i < WD_VK_W_COUNT; i++)
    quant |= m->embed_w[i] && set->pipe == m->embed_w[i];
  if (nb == 0 || pc->d == 0 || pc->d % 4 || pc->ldx % 4 || pc->x_off % 4 || pc->ldx < pc->d ||
      pc->n_vocab == 0 || pc->n_pos == 0 || (quant && pc->d % 32))
    return WD_EINVAL;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, WD_CEIL_DIV(pc->d, 256u), nb, 1);
  return 0;
}

int wd_vk_misc_bind_im2col(wd_vk_misc_t *m, const wd_vk_arg_t *in, const wd_vk_arg_t *out,
                           wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[2] = { *in, *out };
  return wd_vk_dset_new(m->im2col, args, 2, ret_set);
}

int wd_vk_misc_record_im2col(wd_vk_misc_t *m, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                             const wd_pc_im2col_t *pc) {
  (void)m;
  if (pc->cin == 0 || pc->t_in == 0 || pc->t_out == 0 || pc->stride == 0 ||
      pc->ldo < 3 * pc->cin || pc->t_out > (pc->t_in - 1) / pc->stride + 1)
    return WD_EINVAL;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, WD_CEIL_DIV(3 * pc->cin, 64u), pc->t_out, 1);
  return 0;
}

int wd_vk_misc_bind_transpose(wd_vk_misc_t *m, const wd_vk_arg_t *in, const wd_vk_arg_t *out,
                              wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[2] = { *in, *out };
  return wd_vk_dset_new(m->transpose, args, 2, ret_set);
}

int wd_vk_misc_record_transpose(wd_vk_misc_t *m, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                                const wd_pc_transpose_t *pc, uint32_t n_z) {
  (void)m;
  if (n_z == 0 || pc->R == 0 || pc->C == 0 || pc->ldi < pc->C || pc->ldo < pc->R)
    return WD_EINVAL;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, WD_CEIL_DIV(pc->R, 8u), WD_CEIL_DIV(pc->C, 8u),
                     n_z);
  return 0;
}

int wd_vk_misc_bind_argmax(wd_vk_misc_t *m, const wd_vk_arg_t *logits, const wd_vk_arg_t *mask,
                           const wd_vk_arg_t *out, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[3] = { *logits, *mask, *out };
  return wd_vk_dset_new(m->argmax, args, 3, ret_set);
}

int wd_vk_misc_record_argmax(wd_vk_misc_t *m, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                             const wd_pc_argmax_t *pc) {
  (void)m;
  if (pc->nb == 0 || pc->n_vocab == 0 || pc->off % 4 || pc->ld % 4 || pc->ld < pc->n_vocab)
    return WD_EINVAL;
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, pc->nb, 1, 1);
  return 0;
}
