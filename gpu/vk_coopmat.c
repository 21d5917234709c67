/*
 * vk_coopmat.c - the matrix-unit probe (see vk_coopmat.h).
 */
#include "vk_coopmat.h"

#include <stdlib.h>
#include <string.h>

#include "vk_shaders.h"

/* VK_KHR_cooperative_matrix, by the specification (absent from 1.3.239). */
#define WD_VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef struct {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
  VkBool32 saturatingAccumulation;
  uint32_t scope; /* VkScopeKHR */
} wd_vk_cm_props_khr_t;
typedef VkResult(VKAPI_PTR *wd_vk_cm_query_khr_fn)(VkPhysicalDevice, uint32_t *,
                                                   wd_vk_cm_props_khr_t *);

#define CM_F16 0u
#define CM_F32 1u
#define CM_SCOPE_SUBGROUP 3u

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(e[i].extensionName, name) == 0)
      return true;
  return false;
}

/* Our kernels' entry: 16 x 16 x 16, f16 * f16 + f32 -> f32, subgroup scope. */
static bool fits(const wd_vk_cm_shape_t *s) {
  return s->m == 16 && s->n == 16 && s->k == 16 && s->a == CM_F16 && s->b == CM_F16 &&
         s->c == CM_F32 && s->r == CM_F32 && s->scope == CM_SCOPE_SUBGROUP;
}

static void add(wd_vk_coopmat_info_t *cm, wd_vk_cm_shape_t s) {
  if (s.khr && s.m == 8 && s.n == 8 && s.k == 8 && s.a == CM_F16 && s.b == CM_F16 &&
      s.c == CM_F32 && s.r == CM_F32 && s.scope == CM_SCOPE_SUBGROUP)
    cm->khr8_fit = true;
  if (fits(&s)) {
    if (s.khr)
      cm->khr_fit = true;
    else
      cm->nv_fit = true;
  }
  if (cm->n_shapes < WD_VK_CM_MAX_SHAPES)
    cm->shapes[cm->n_shapes++] = s;
}

static void query_nv(VkInstance inst, VkPhysicalDevice pd, wd_vk_coopmat_info_t *cm) {
  PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV q =
      (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
          inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
  uint32_t n = 0;
  if (!q || q(pd, &n, NULL) != VK_SUCCESS || n == 0)
    return;
  VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
  if (!p)
    return;
  for (uint32_t i = 0; i < n; i++)
    p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  VkResult r = q(pd, &n, p);
  if (r == VK_SUCCESS || r == VK_INCOMPLETE)
    for (uint32_t i = 0; i < n; i++)
      add(cm, (wd_vk_cm_shape_t){ p[i].MSize, p[i].NSize, p[i].KSize, (uint32_t)p[i].AType,
                                  (uint32_t)p[i].BType, (uint32_t)p[i].CType, (uint32_t)p[i].DType,
                                  (uint32_t)p[i].scope, false });
  free(p);
}

static void query_khr(VkInstance inst, VkPhysicalDevice pd, wd_vk_coopmat_info_t *cm) {
  wd_vk_cm_query_khr_fn q = (wd_vk_cm_query_khr_fn)vkGetInstanceProcAddr(
      inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  uint32_t n = 0;
  if (!q || q(pd, &n, NULL) != VK_SUCCESS || n == 0)
    return;
  wd_vk_cm_props_khr_t *p = calloc(n, sizeof *p);
  if (!p)
    return;
  for (uint32_t i = 0; i < n; i++)
    p[i].sType = WD_VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
  VkResult r = q(pd, &n, p);
  if (r == VK_SUCCESS || r == VK_INCOMPLETE)
    for (uint32_t i = 0; i < n; i++)
      add(cm, (wd_vk_cm_shape_t){ p[i].MSize, p[i].NSize, p[i].KSize, p[i].AType, p[i].BType,
                                  p[i].CType, p[i].ResultType, p[i].scope, true });
  free(p);
}

void wd_vk_coopmat_probe(VkInstance inst, VkPhysicalDevice pd, wd_vk_coopmat_info_t *ret) {
  memset(ret, 0, sizeof *ret);
  uint32_t n = 0;
  if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
    return;
  VkExtensionProperties *e = calloc(n, sizeof *e);
  if (!e)
    return;
  if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS) {
    ret->nv_ext = has_ext(e, n, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    ret->khr_ext = has_ext(e, n, "VK_KHR_cooperative_matrix");
  }
  free(e);
  /* The queries are instance-level entry points that exist only when a
   * driver provides them: ask only devices that list the extension. */
  if (ret->nv_ext)
    query_nv(inst, pd, ret);
  if (ret->khr_ext)
    query_khr(inst, pd, ret);
}

wd_vk_cm_ext_t wd_vk_coopmat_pick(const wd_vk_coopmat_info_t *cm, bool float16, bool memory_model,
                                  uint32_t subgroup_size, wd_vk_cm_want_t want) {
  if (!float16 || !memory_model || want == WD_VK_CM_WANT_NONE)
    return WD_VK_CM_NONE;
  /* AUTO: NV, the extension the kernels were verified and measured
   * through (an H200, which lists both). The KHR kernels (built where the
   * build has a glslang >= 13: shaders/CMakeLists.txt) have not run on a
   * GPU yet, so only a caller that asks for them gets them, until a GPU
   * run of test_gemm's gemm_cm_khr makes them AUTO's second choice. */
  const bool sg32 = subgroup_size == 32;
  const bool nv = sg32 && cm->nv_fit;
  const bool khr = sg32 && cm->khr_fit && wd_spirv_find("gemm_cm128_khr");
  const bool khr8 = subgroup_size == 8 && cm->khr8_fit && wd_spirv_find("gemm_cm64_khr8");
  if (want == WD_VK_CM_WANT_KHR)
    return khr ? WD_VK_CM_KHR : khr8 ? WD_VK_CM_KHR8 : WD_VK_CM_NONE;
  return nv ? WD_VK_CM_NV : WD_VK_CM_NONE;
}

const char *wd_vk_cm_suffix(wd_vk_cm_ext_t e) {
  return e == WD_VK_CM_KHR ? "_khr" : e == WD_VK_CM_KHR8 ? "_khr8" : "";
}

bool wd_vk_cm_shader(const char *name) {
  return strncmp(name, "gemm_cm", 7) == 0 || strncmp(name, "attn_cm", 7) == 0;
}

const char *wd_vk_cm_ext_name(wd_vk_cm_ext_t e) {
  switch (e) {
  case WD_VK_CM_NV: return "VK_NV_cooperative_matrix";
  case WD_VK_CM_KHR:
  case WD_VK_CM_KHR8: return "VK_KHR_cooperative_matrix";
  default: return "none";
  }
}

const char *wd_vk_cm_type_name(uint32_t t) {
  static const char *const names[] = { "f16", "f32", "f64", "s8", "s16", "s32", "s64",
                                       "u8",  "u16", "u32", "u64" };
  if (t < sizeof names / sizeof names[0])
    return names[t];
  switch (t) {
  case 1000141000u: return "bf16";
  case 1000491000u: return "s8-packed";
  case 1000491001u: return "u8-packed";
  case 1000491002u: return "e4m3";
  case 1000491003u: return "e5m2";
  default: return "?";
  }
}

void wd_vk_coopmat_print(FILE *out, const char *prefix, const wd_vk_coopmat_info_t *cm) {
  for (uint32_t i = 0; i < cm->n_shapes; i++) {
    const wd_vk_cm_shape_t *s = &cm->shapes[i];
    fprintf(out, "%s%ux%ux%u %s*%s+%s->%s %s(%s)\n", prefix, s->m, s->n, s->k,
            wd_vk_cm_type_name(s->a), wd_vk_cm_type_name(s->b), wd_vk_cm_type_name(s->c),
            wd_vk_cm_type_name(s->r),
            s->scope == CM_SCOPE_SUBGROUP ? "" : s->scope == 2 ? "workgroup " : "other scope ",
            s->khr ? "KHR" : "NV");
  }
}
