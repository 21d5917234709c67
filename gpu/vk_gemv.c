/*
 * vk_gemv.c - batched-GEMV pipelines, variant choice and dispatch geometry
 * (see vk_gemv.h and shaders/gemv.comp).
 *
 * Threading: the GPU worker's thread only. Ownership: the wd_vk_gemv_t owns
 * its pipelines (weight types x families x 5 batch variants; the f16 ones
 * made up front, those of other weight types by the first bind that needs
 * them, i.e. at plan time); sets from wd_vk_gemv_bind belong to the caller
 * and must be freed before it.
 */
#include "vk_gemv.h"

#include <stdio.h>
#include <stdlib.h>

#include "vk_internal.h"
#include "vk_pipeline_internal.h"
#include "vk_wquant.h"

#define WD_GEMV_N_BATCH 5      /* variants NB = 1, 2, 4, 8, 16 */
#define WD_GEMV_N_FAMILY 4     /* indexed by wd_vk_gemv_family_t (0 unused) */
#define WD_GEMV_WG 64u         /* invocations per workgroup, all modes */
#define WD_GEMV_SPLIT_K 1536u  /* CPU devices: K from which SUBGROUP wins */

static const uint32_t wd_gemv_batches[WD_GEMV_N_BATCH] = { 1, 2, 4, 8, 16 };
/* ROW family: output rows per invocation (RPI in shaders.cmake), per batch
 * variant: fewer as the per-sequence accumulators take the registers. */
static const uint32_t wd_gemv_row_rpi[WD_GEMV_N_BATCH] = { 4, 4, 4, 2, 1 };

struct wd_vk_gemv {
  wd_vk_device_t *dev;
  wd_vk_gemv_family_t family; /* as asked, AUTO included */
  wd_vk_class_t device_class;
  bool subgroup;              /* device has subgroup arithmetic */
  uint32_t sg_rows;           /* SUBGROUP: rows per workgroup (64 / subgroup size) */
  /* [weight type][family][batch]; WD_VK_W_DEFAULT is unused (f16 lives at
   * WD_VK_W_F16). */
  wd_vk_pipeline_t *pipes[WD_VK_W_COUNT][WD_GEMV_N_FAMILY][WD_GEMV_N_BATCH];
};

const char *wd_vk_gemv_family_name(wd_vk_gemv_family_t f) {
  switch (f) {
  case WD_VK_GEMV_ROW: return "row";
  case WD_VK_GEMV_SUBGROUP: return "subgroup";
  case WD_VK_GEMV_SHARED: return "shared";
  default: return "auto";
  }
}

/* Creates the five batch variants of one family for weights of type wt:
 * f16 and f32 share the shader (only the texel view's format differs), a
 * quantized type has its own (gemv_<family>_b<nb>_<type>, reading words). */
static int wd_gemv_make_family(wd_vk_gemv_t *g, wd_vk_gemv_family_t f, wd_vk_wtype_t wt) {
  static const char *const prefix[WD_GEMV_N_FAMILY] = { NULL, "row", "sg", "shm" };
  const char *sfx = wd_vk_wtype_suffix(wt);
  const wd_vk_arg_kind_t wkind = sfx                  ? WD_VK_ARG_TEXEL_U32X4
                                 : wt == WD_VK_W_F32 ? WD_VK_ARG_TEXEL_F32
                                                     : WD_VK_ARG_TEXEL_F16;
  for (int i = 0; i < WD_GEMV_N_BATCH; i++) {
    if (g->pipes[wt][f][i])
      continue;
    char name[40];
    snprintf(name, sizeof name, "gemv_%s_b%u%s%s", prefix[f], wd_gemv_batches[i], sfx ? "_" : "",
             sfx ? sfx : "");
    wd_vk_pipeline_desc_t desc = {
      .shader = name,
      .n_args = 4,
      .args = { WD_VK_ARG_TEXEL_F32, wkind, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
      .push_size = sizeof(wd_pc_gemv_t),
      .n_spec = 1,
      .spec = { g->sg_rows },
      .local_size = { WD_GEMV_WG, 1, 1 },
    };
    int rc = wd_vk_pipeline_new(g->dev, &desc, &g->pipes[wt][f][i]);
    if (rc < 0)
      return rc;
  }
  return 0;
}

int wd_vk_gemv_new(wd_vk_device_t *dev, wd_vk_gemv_family_t family, wd_vk_gemv_t **ret_gemv) {
  int rc = 0;
  const wd_vk_device_info_t *info = wd_vk_device_info(dev);
  if (family > WD_VK_GEMV_SHARED)
    return WD_EINVAL;
  if (family == WD_VK_GEMV_SUBGROUP && !info->subgroup_arithmetic)
    return WD_EUNSUP;
  wd_vk_gemv_t *g = calloc(1, sizeof *g);
  if (!g)
    return WD_ENOMEM;
  /* Rows per workgroup in SUBGROUP mode: the shader loops over them, so a
   * subgroup larger than reported still covers every row. */
  const uint32_t sgs = info->subgroup_size ? info->subgroup_size : 1;
  *g = (wd_vk_gemv_t){
    .dev = dev,
    .family = family,
    .device_class = info->device_class,
    .subgroup = info->subgroup_arithmetic,
    .sg_rows = sgs >= WD_GEMV_WG ? 1 : WD_GEMV_WG / sgs,
  };
  for (int f = WD_VK_GEMV_ROW; f <= WD_VK_GEMV_SHARED; f++) {
    bool need = family == (wd_vk_gemv_family_t)f;
    if (family == WD_VK_GEMV_AUTO) {
      /* Whatever wd_vk_gemv_choose can return for some K. */
      for (uint32_t k = WD_GEMV_SPLIT_K - 4; k <= WD_GEMV_SPLIT_K; k += 4)
        need = need || wd_vk_gemv_choose(g, k) == (wd_vk_gemv_family_t)f;
    }
    if (need && (rc = wd_gemv_make_family(g, (wd_vk_gemv_family_t)f, WD_VK_W_F16)) < 0)
      goto fail;
  }
  *ret_gemv = g;
  return 0;
fail:
  wd_vk_gemv_free(g);
  return rc;
}

void wd_vk_gemv_free(wd_vk_gemv_t *g) {
  if (!g)
    return;
  for (int t = 0; t < WD_VK_W_COUNT; t++)
    for (int f = 0; f < WD_GEMV_N_FAMILY; f++)
      for (int i = 0; i < WD_GEMV_N_BATCH; i++)
        wd_vk_pipeline_free(g->pipes[t][f][i]);
  free(g);
}

/* The family depends on K and the device only, never on the batch size: a
 * row's summation order, and so its bits, must not change when other
 * sequences join the batch (see gemv.comp, "Batch independence"). */
wd_vk_gemv_family_t wd_vk_gemv_choose(const wd_vk_gemv_t *g, uint32_t K) {
  if (g->family != WD_VK_GEMV_AUTO)
    return g->family;
  if (g->device_class == WD_VK_CLASS_DISCRETE || g->device_class == WD_VK_CLASS_INTEGRATED)
    return g->subgroup ? WD_VK_GEMV_SUBGROUP : WD_VK_GEMV_SHARED;
  /* CPU devices (reference/lavapipe.md): one row per lane wins until K is
   * large enough that splitting it over the 8 SIMD lanes pays (2x at 1536). */
  return (K >= WD_GEMV_SPLIT_K && g->subgroup) ? WD_VK_GEMV_SUBGROUP : WD_VK_GEMV_ROW;
}

int wd_vk_gemv_bind(wd_vk_gemv_t *g, uint32_t K, uint32_t nb, const wd_vk_arg_t *x,
                    const wd_vk_arg_t *w, const wd_vk_arg_t *bias, const wd_vk_arg_t *y,
                    wd_vk_dset_t **ret_set) {
  if (nb == 0 || nb > WD_VK_GEMV_MAX_BATCH)
    return WD_EINVAL;
  const wd_vk_wtype_t wt = w->wtype == WD_VK_W_DEFAULT ? WD_VK_W_F16 : w->wtype;
  if (wt >= WD_VK_W_COUNT)
    return WD_EINVAL;
  int i = 0;
  while (wd_gemv_batches[i] < nb)
    i++;
  const wd_vk_gemv_family_t fam = wd_vk_gemv_choose(g, K);
  if (!g->pipes[wt][fam][i]) {
    /* First use of this weight type with this family. */
    int rc = wd_gemv_make_family(g, fam, wt);
    if (rc < 0)
      return rc;
  }
  wd_vk_pipeline_t *pipe = g->pipes[wt][fam][i];
  const wd_vk_arg_t args[4] = { *x, *w, *bias, *y };
  return wd_vk_dset_new(pipe, args, 4, ret_set);
}

int wd_vk_gemv_record(wd_vk_gemv_t *g, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_gemv_t *pc) {
  /* Find the variant the set was bound for: its family sets the grid and
   * its batch size bounds pc->nb. */
  int fam = -1, bi = -1, wt = -1;
  for (int t = 0; t < WD_VK_W_COUNT && fam < 0; t++)
    for (int f = 0; f < WD_GEMV_N_FAMILY && fam < 0; f++)
      for (int i = 0; i < WD_GEMV_N_BATCH; i++)
        if (g->pipes[t][f][i] && g->pipes[t][f][i] == set->pipe) {
          wt = t;
          fam = f;
          bi = i;
          break;
        }
  if (fam < 0)
    return WD_EINVAL;
  /* Quantized rows are whole 32-element blocks. */
  const uint32_t walign = wd_vk_wtype_is_quant((wd_vk_wtype_t)wt) ? 32u : 4u;
  if (pc->N == 0 || pc->K == 0 || pc->nb == 0 || pc->nb > wd_gemv_batches[bi] || pc->K % walign ||
      pc->x_off % 4 || pc->ldx % 4 || pc->w_off % walign || pc->ldx < pc->K || pc->ldy < pc->N)
    return WD_EINVAL;
  uint32_t groups;
  switch ((wd_vk_gemv_family_t)fam) {
  case WD_VK_GEMV_ROW: groups = WD_CEIL_DIV(pc->N, WD_GEMV_WG * wd_gemv_row_rpi[bi]); break;
  case WD_VK_GEMV_SUBGROUP: groups = WD_CEIL_DIV(pc->N, g->sg_rows); break;
  default: groups = pc->N; break;
  }
  /* SHARED at the largest vocabulary needs 51866 groups: within the
   * 65535 every Vulkan device allows, so no folding into y is needed. */
  wd_vk_cmd_dispatch(cmd, set, pc, sizeof *pc, groups, 1, 1);
  return 0;
}
