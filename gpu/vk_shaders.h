/*
 * vk_shaders.h - the SPIR-V embedded at build time (see shaders/CMakeLists.txt).
 *
 * Each row is one shader variant: a .comp file compiled with one set of -D
 * defines. The table ends with a row whose name is NULL.
 */
#ifndef WD_VK_SHADERS_H
#define WD_VK_SHADERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const char *name;       /* variant name, e.g. "gemm_tex" */
  const uint32_t *words;  /* SPIR-V words */
  const size_t *n_words;  /* number of words (a pointer: the size lives in another TU) */
} wd_spirv_t;

extern const wd_spirv_t wd_spirv_table[];

/* Returns the variant called name, or NULL. */
const wd_spirv_t *wd_spirv_find(const char *name);

#endif
