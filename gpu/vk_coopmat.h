/*
 * vk_coopmat.h - what a device's matrix units offer (cooperative matrices),
 * and which extension the GEMM family gemm_cm runs through.
 *
 * Two Vulkan extensions expose the same hardware: VK_KHR_cooperative_matrix
 * (NVIDIA Turing and newer, AMD RDNA3, Intel Arc) and the older
 * VK_NV_cooperative_matrix (NVIDIA only). Each lists the shapes and
 * component types the device multiplies (M x K times K x N into M x N).
 * whisperd's kernels need one entry: 16 x 16 x 16, f16 A and B, f32 C and
 * result, subgroup scope, on a device whose subgroups are 32 wide (the
 * kernels split a workgroup into subgroups of 32) with f16 arithmetic and
 * the Vulkan memory model (the SPIR-V uses both).
 *
 * Debian 12's headers (1.3.239) lack the KHR extension's types, so its
 * handful of structs is declared here by the specification's values.
 */
#ifndef WD_VK_COOPMAT_H
#define WD_VK_COOPMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <vulkan/vulkan.h>

#define WD_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR \
  ((VkStructureType)1000506000)

/* The extension gemm_cm runs through on a device, if any. */
typedef enum {
  WD_VK_CM_NONE = 0,
  WD_VK_CM_NV = 1,  /* VK_NV_cooperative_matrix */
  WD_VK_CM_KHR = 2, /* VK_KHR_cooperative_matrix (kernels NAME_khr, built with glslang >= 13) */
  /* The KHR extension at 8x8x8 on 8-wide subgroups (kernels NAME_khr8):
   * Mesa's lavapipe, so that the kernels can be tested on a CPU; only the
   * 64 x 64 GEMM tiles and the fused attention are built for it. */
  WD_VK_CM_KHR8 = 3,
} wd_vk_cm_ext_t;

/* What a caller asks for (wd_vk_device_opts_t.matrix; tests): AUTO is
 * wd_vk_coopmat_pick's choice; NONE the f32 kernels; NV or KHR that
 * extension where the device and the build allow it, else NONE. */
typedef enum {
  WD_VK_CM_WANT_AUTO = 0,
  WD_VK_CM_WANT_NONE = 1,
  WD_VK_CM_WANT_NV = 2,
  WD_VK_CM_WANT_KHR = 3,
} wd_vk_cm_want_t;

/* One listed shape: M x N x K and the component types (VkComponentTypeKHR
 * values, which include the NV ones) of A, B, C and the result. */
typedef struct {
  uint32_t m, n, k;
  uint32_t a, b, c, r;
  uint32_t scope; /* VkScopeKHR: 3 = subgroup */
  bool khr;       /* listed by the KHR query (else the NV one) */
} wd_vk_cm_shape_t;

#define WD_VK_CM_MAX_SHAPES 48

typedef struct {
  bool nv_ext, khr_ext;     /* the device lists the extension */
  bool nv_fit, khr_fit;     /* ... and its query lists our 16x16x16 f16 -> f32 entry */
  bool khr8_fit;            /* the KHR query lists 8x8x8 f16 -> f32 (lavapipe) */
  uint32_t n_shapes;        /* both queries' entries, NV first */
  wd_vk_cm_shape_t shapes[WD_VK_CM_MAX_SHAPES];
} wd_vk_coopmat_info_t;

/* Fills *ret for physical device pd (instance inst): extensions and both
 * queries. Never fails: a device without the extensions gets zeros. */
void wd_vk_coopmat_probe(VkInstance inst, VkPhysicalDevice pd, wd_vk_coopmat_info_t *ret);

/* The extension the matrix kernels use on a device with these properties,
 * which needs f16 arithmetic, the memory model and 32-wide subgroups: for
 * AUTO (and NV), NV when its query lists our entry; for KHR, KHR when its
 * query does and this build has the KHR kernels (not yet AUTO's: they have
 * not run on a GPU), or KHR8 on 8-wide subgroups listing 8x8x8 where the
 * build has those; else NONE. */
wd_vk_cm_ext_t wd_vk_coopmat_pick(const wd_vk_coopmat_info_t *cm, bool float16, bool memory_model,
                                  uint32_t subgroup_size, wd_vk_cm_want_t want);

/* The extension's name ("none", "VK_NV_cooperative_matrix", ...; KHR8 is
 * "VK_KHR_cooperative_matrix"), and the kernels' suffix ("", "_khr",
 * "_khr8"). */
const char *wd_vk_cm_ext_name(wd_vk_cm_ext_t e);
const char *wd_vk_cm_suffix(wd_vk_cm_ext_t e);
/* Whether a shader variant is a matrix kernel (gemm_cm*, attn_cm*), which
 * must be taken in the device's extension's build or not at all. */
bool wd_vk_cm_shader(const char *name);
/* "f16", "f32", "bf16", "s8", ... for a component type value. */
const char *wd_vk_cm_type_name(uint32_t t);

/* Prints each listed shape as "  <prefix>16x16x16 f16*f16+f32->f32 (NV)". */
void wd_vk_coopmat_print(FILE *out, const char *prefix, const wd_vk_coopmat_info_t *cm);

#endif
