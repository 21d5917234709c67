/*
 * vk_gemm.c - GEMM pipelines and dispatch geometry (see vk_gemm.h).
 *
 * Pipelines by B's element type: the one of the object's bfmt is made by
 * wd_vk_gemm_new_fmt; a bind whose B carries another wtype (vk_pipeline.h)
 * makes that type's pipeline then (at plan time). Each type's epilogue
 * variants derive from its EPI = 0 pipeline.
 */
#include "vk_gemm.h"

#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"
#include "vk_pipeline_internal.h"
#include "vk_wquant.h"

struct wd_vk_gemm {
  wd_vk_device_t *dev;
  wd_vk_gemm_family_t family;
  wd_vk_wtype_t bdef;       /* B's type when the bound arg says DEFAULT */
  /* [B type][epilogue bits]: [t][0] is type t's EPI = 0 pipeline, whose
   * sets bind to all its variants; the others are made on first use. */
  wd_vk_pipeline_t *epi[WD_VK_W_COUNT][8];
  uint32_t tile_m, tile_n; /* outputs per workgroup, for the grid */
};

/* Each family: its shader (the f16-B variant; f32 B on storage buffers is
 * <shader>_b32, quantized B <shader>_<type>), the outputs one workgroup
 * computes (for the grid), its workgroup size, and whether it reads A and B
 * through texel buffers (the lavapipe kernels) or storage buffers. */
static const struct {
  const char *name, *shader;
  uint32_t tile_m, tile_n, lx, ly;
  int texel;
} families[] = {
  [WD_VK_GEMM_TEXEL] = { "texel-16x16", "gemm_tex", 8 * 16, 8 * 16, 8, 8, 1 },
  [WD_VK_GEMM_TEXEL_8X8] = { "texel-8x8", "gemm_tex_8x8", 8 * 8, 8 * 8, 8, 8, 1 },
  [WD_VK_GEMM_TILED] = { "tiled-64x64", "gemm_tiled", 64, 64, 16, 16, 0 },
  [WD_VK_GEMM_RB64] = { "rb-64x64", "gemm_rb64", 64, 64, 64, 1, 0 },
  [WD_VK_GEMM_RB128X64] = { "rb-128x64", "gemm_rb128x64", 128, 64, 128, 1, 0 },
  [WD_VK_GEMM_CM128] = { "cm-128x128", "gemm_cm128", 128, 128, 256, 1, 0 },
  [WD_VK_GEMM_CM64] = { "cm-64x64", "gemm_cm64", 64, 64, 128, 1, 0 },
  [WD_VK_GEMM_CM128_DL] = { "cm-128x128-dl", "gemm_cm128dl", 128, 128, 256, 1, 0 },
  [WD_VK_GEMM_CM64_DL] = { "cm-64x64-dl", "gemm_cm64dl", 64, 64, 128, 1, 0 },
  [WD_VK_GEMM_CM128_PF2] = { "cm-128x128-pf2", "gemm_cm128pf2", 128, 128, 256, 1, 0 },
  [WD_VK_GEMM_CM64_PF2] = { "cm-64x64-pf2", "gemm_cm64pf2", 64, 64, 128, 1, 0 },
};
#define N_FAMILIES (sizeof families / sizeof families[0])

static int family_known(wd_vk_gemm_family_t f) {
  return f > WD_VK_GEMM_AUTO && (size_t)f < N_FAMILIES && families[f].name;
}

/* The candidate matrix-unit families (vk_gemm.h): built for f16 and f32 B
 * only, to be timed beside the others (bench_gemm), not chosen by AUTO. */
static bool family_candidate(wd_vk_gemm_family_t f) {
  return f == WD_VK_GEMM_CM128_DL || f == WD_VK_GEMM_CM64_DL || f == WD_VK_GEMM_CM128_PF2 ||
         f == WD_VK_GEMM_CM64_PF2;
}

/* The EPI = 0 pipeline of g's family reading B of type wt. */
static int wd_gemm_make(wd_vk_gemm_t *g, wd_vk_wtype_t wt) {
  const char *sfx = wd_vk_wtype_suffix(wt);
  const int texel = families[g->family].texel;
  if (sfx && family_candidate(g->family)) {
    wd_log_error("vk_gemm: %s runs f16 and f32 weights only, not %s (another --vk-gemm, or auto)",
                 families[g->family].name, sfx);
    return WD_EUNSUP;
  }
  char name[40];
  wd_vk_pipeline_desc_t desc = {
    .shader = name,
    .n_args = 4,
    .args = { WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE, WD_VK_ARG_STORAGE },
    .push_size = sizeof(wd_pc_gemm_t),
    .local_size = { families[g->family].lx, families[g->family].ly, 1 },
    .n_spec = 1, /* EPI, 0 here: the variants differ only in it */
  };
  if (!sfx && wt == WD_VK_W_F32 && !texel)
    sfx = "b32";
  snprintf(name, sizeof name, "%s%s%s", families[g->family].shader, sfx ? "_" : "", sfx ? sfx : "");
  /* The texel kernels read f16 and f32 B through one samplerBuffer: the
   * view's format decides; quantized B is read as R32UI words. */
  if (texel) {
    desc.args[0] = WD_VK_ARG_TEXEL_F32;
    desc.args[1] = wd_vk_wtype_suffix(wt) ? WD_VK_ARG_TEXEL_U32
                   : wt == WD_VK_W_F32    ? WD_VK_ARG_TEXEL_F32
                                          : WD_VK_ARG_TEXEL_F16;
  }
  return wd_vk_pipeline_new(g->dev, &desc, &g->epi[wt][0]);
}

const char *wd_vk_gemm_family_name(wd_vk_gemm_family_t f) {
  return family_known(f) ? families[f].name : "auto";
}

int wd_vk_gemm_family_parse(const char *name, wd_vk_gemm_family_t *ret) {
  for (size_t f = 0; f < N_FAMILIES; f++)
    if (strcmp(name, wd_vk_gemm_family_name((wd_vk_gemm_family_t)f)) == 0) {
      *ret = (wd_vk_gemm_family_t)f;
      return 0;
    }
  return WD_EINVAL;
}

bool wd_vk_gemm_family_f16(wd_vk_gemm_family_t f) {
  return f == WD_VK_GEMM_CM128 || f == WD_VK_GEMM_CM64 || family_candidate(f);
}

wd_vk_gemm_family_t wd_vk_gemm_auto(const wd_vk_device_info_t *d, wd_vk_gemm_bfmt_t bfmt,
                                    bool exact) {
  const wd_vk_class_t c = d->device_class;
  const bool gpu = c == WD_VK_CLASS_DISCRETE || c == WD_VK_CLASS_INTEGRATED;
  /* On the CPU driver the 8x8 block runs as fast as 16x16 per core
   * (lavapipe, one thread, 1500x1536x384: 17.1 vs 17.6 GFLOP/s), wastes
   * no half-tile on N = 64 (P.V) and compiles in 21 ms instead of 100.
   * On GPUs, measured on an NVIDIA H200 (large-v3-turbo encoder, GPU ms
   * per window by kind, 2026-11-26): the Linear layers (f16 B) 67.2 ms
   * with rb-64x64, 70.7 rb-128x64, 66.3 a 128 x 128 tile (dropped), 91.0
   * tiled-64x64; the attention products (f32 B, K = 64 or N = 64) Q.K^T 11.1 / 12.4 /
   * 12.1 / 8.7 ms and P.V 12.2 / 13.1 / 20.7 / 12.6 ms. */
  if (!gpu)
    return WD_VK_GEMM_TEXEL_8X8;
  /* The matrix units. NVIDIA H200, large-v3-turbo shape, GPU ms per window
   * (2026-11-28): cm-128x128 for the Linear layers 25.3 (rb-64x64: 67.2);
   * the attention products Q.K^T 4.7 and P.V 5.5 with cm-64x64 against
   * 6.2 and 8.4 with 128 x 128 tiles (batched over 20 heads, the smaller
   * tile fills the GPU better, although one head alone runs faster in
   * 128 x 128); encoder 41.2 ms as a whole, 94.1 with the f32 kernels. A
   * 128 x 128 tile of 4 subgroups of 64 x 64 ran 2-4x slower than 8 of
   * 64 x 32 (bench_gemm). */
  if (!exact && d->matrix_ext != WD_VK_CM_NONE)
    return bfmt == WD_VK_GEMM_B_F32 ? WD_VK_GEMM_CM64 : WD_VK_GEMM_CM128;
  return bfmt == WD_VK_GEMM_B_F32 ? WD_VK_GEMM_TILED : WD_VK_GEMM_RB64;
}

wd_vk_gemm_family_t wd_vk_gemm_auto_rows(const wd_vk_device_info_t *d, bool exact) {
  /* At M = 256 the 64 x 64 tiles make 80 workgroups of a d x d product,
   * fewer than a large GPU's multiprocessors, and rb's 64 invocations
   * per tile leave each of them nearly idle; tiled's 256 hide more
   * latency. NVIDIA H200, large-v3-turbo shapes, GPU ms (2026-11-26):
   * 256 x 1280 x 1280 0.077 tiled / 0.110 rb-64x64, 256 x 5120 x 1280
   * 0.184 / 0.162, 256 x 1280 x 5120 0.295 / 0.415. */
  const wd_vk_class_t c = d->device_class;
  if (c == WD_VK_CLASS_DISCRETE || c == WD_VK_CLASS_INTEGRATED)
    /* With matrix units, cm-64x64: the 224-row prefill's Linear layers
     * 2.16 GPU ms against 2.50 in cm-128x128 (H200, 2026-11-28). */
    return !exact && d->matrix_ext != WD_VK_CM_NONE ? WD_VK_GEMM_CM64 : WD_VK_GEMM_TILED;
  return wd_vk_gemm_auto(d, WD_VK_GEMM_B_F16, exact);
}

int wd_vk_gemm_new(wd_vk_device_t *dev, wd_vk_gemm_family_t family, wd_vk_gemm_t **ret_gemm) {
  return wd_vk_gemm_new_fmt(dev, family, WD_VK_GEMM_B_F16, ret_gemm);
}

int wd_vk_gemm_new_fmt(wd_vk_device_t *dev, wd_vk_gemm_family_t family, wd_vk_gemm_bfmt_t bfmt,
                       wd_vk_gemm_t **ret_gemm) {
  if (bfmt != WD_VK_GEMM_B_F16 && bfmt != WD_VK_GEMM_B_F32)
    return WD_EINVAL;
  if (family == WD_VK_GEMM_AUTO)
    family = wd_vk_gemm_auto(wd_vk_device_info(dev), bfmt, false);
  if (wd_vk_gemm_family_f16(family) && wd_vk_device_info(dev)->matrix_ext == WD_VK_CM_NONE)
    return WD_EUNSUP;
  wd_vk_gemm_t *g = calloc(1, sizeof *g);
  if (!g)
    return WD_ENOMEM;
  g->dev = dev;
  g->family = family;
  g->bdef = bfmt == WD_VK_GEMM_B_F32 ? WD_VK_W_F32 : WD_VK_W_F16;
  if (!family_known(family)) {
    free(g);
    return WD_EINVAL;
  }
  g->tile_m = families[family].tile_m;
  g->tile_n = families[family].tile_n;
  int rc = wd_gemm_make(g, g->bdef);
  if (rc < 0) {
    free(g);
    return rc;
  }
  *ret_gemm = g;
  return 0;
}

void wd_vk_gemm_free(wd_vk_gemm_t *g) {
  if (!g)
    return;
  /* Variants before the base pipelines they derive from. */
  for (int t = 0; t < WD_VK_W_COUNT; t++)
    for (int i = 1; i < 8; i++)
      wd_vk_pipeline_free(g->epi[t][i]);
  for (int t = 0; t < WD_VK_W_COUNT; t++)
    wd_vk_pipeline_free(g->epi[t][0]);
  free(g);
}

wd_vk_gemm_family_t wd_vk_gemm_family(const wd_vk_gemm_t *g) { return g->family; }

int wd_vk_gemm_bind(wd_vk_gemm_t *g, const wd_vk_arg_t *a, const wd_vk_arg_t *b,
                    const wd_vk_arg_t *bias, const wd_vk_arg_t *c, wd_vk_dset_t **ret_set) {
  const wd_vk_arg_t args[4] = { *a, *b, *bias, *c };
  const wd_vk_wtype_t wt = b->wtype == WD_VK_W_DEFAULT ? g->bdef : b->wtype;
  if (wt >= WD_VK_W_COUNT)
    return WD_EINVAL;
  if (!g->epi[wt][0]) {
    int rc = wd_gemm_make(g, wt);
    if (rc < 0)
      return rc;
  }
  return wd_vk_dset_new(g->epi[wt][0], args, 4, ret_set);
}

int wd_vk_gemm_record(wd_vk_gemm_t *g, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_gemm_t *pc, uint32_t n_batch) {
  /* Both families read A and B four elements at a time. */
  if (pc->M == 0 || pc->N == 0 || pc->K == 0 || n_batch == 0 || pc->K % 4 || pc->lda % 4 ||
      pc->ldb % 4 || pc->a_off % 4 || pc->b_off % 4 || pc->a_bz % 4 || pc->b_bz % 4 ||
      pc->lda < pc->K || pc->ldb < pc->K || pc->ldc < pc->N || pc->flags > 7u || !set)
    return WD_EINVAL;
  int wt = -1;
  for (int t = 0; t < WD_VK_W_COUNT && wt < 0; t++)
    if (g->epi[t][0] && g->epi[t][0] == set->pipe)
      wt = t;
  if (wt < 0)
    return WD_EINVAL;
  /* Quantized B rows are whole 32-element blocks. */
  if (wd_vk_wtype_is_quant((wd_vk_wtype_t)wt) &&
      (pc->K % 32 || pc->ldb % 32 || pc->b_off % 32 || pc->b_bz % 32))
    return WD_EINVAL;
  wd_vk_pipeline_t **v = &g->epi[wt][pc->flags];
  if (!*v) {
    const uint32_t spec = pc->flags;
    int rc = wd_vk_pipeline_variant(g->epi[wt][0], &spec, 1, v);
    if (rc < 0)
      return rc;
  }
  wd_vk_cmd_dispatch_pipe(cmd, *v, set, pc, sizeof *pc, WD_CEIL_DIV(pc->N, g->tile_n),
                          WD_CEIL_DIV(pc->M, g->tile_m), n_batch);
  return 0;
}
