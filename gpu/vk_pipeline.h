/*
 * vk_pipeline.h - compute pipelines from embedded SPIR-V, and the descriptor
 * sets that bind buffers to them.
 *
 * A pipeline is described declaratively (shader variant, the kind of each
 * binding, push-constant size, specialization constants, workgroup size) and
 * created once at model load. A descriptor set binds concrete buffer ranges
 * to one pipeline's bindings; the engine creates its sets once at load time
 * too, so recording a dispatch touches no allocator.
 */
#ifndef WD_VK_PIPELINE_H
#define WD_VK_PIPELINE_H

#include <stdint.h>

#include "vk_buffer.h"
#include "vk_device.h"

#define WD_VK_MAX_ARGS 12
#define WD_VK_MAX_SPEC 16

typedef enum {
  WD_VK_ARG_STORAGE = 0,   /* std430 buffer (binding i) */
  WD_VK_ARG_TEXEL_F32 = 1, /* samplerBuffer over RGBA32F texels */
  WD_VK_ARG_TEXEL_F16 = 2, /* samplerBuffer over RGBA16F texels (f16 weights) */
  WD_VK_ARG_UNIFORM = 3,   /* uniform block */
  WD_VK_ARG_TEXEL_U32 = 4, /* usamplerBuffer over R32UI texels (quantized weight words) */
  WD_VK_ARG_TEXEL_U32X4 = 5, /* usamplerBuffer over RGBA32UI texels (4 words per fetch) */
} wd_vk_arg_kind_t;

/* The element type of a weight operand (GEMM B, GEMV W, the embedding's
 * token table), carried by its wd_vk_arg_t so that the kernel family picks
 * the matching pipeline variant. DEFAULT (0, what a zero-initialised arg
 * has) means the operand's usual format: f16 for weights. Quantized types
 * are in the repacked device layout of shaders/wquant.glsl (vk_wquant.h). */
typedef enum {
  WD_VK_W_DEFAULT = 0,
  WD_VK_W_F16,
  WD_VK_W_F32,
  WD_VK_W_Q4_0,
  WD_VK_W_Q4_1,
  WD_VK_W_Q5_0,
  WD_VK_W_Q5_1,
  WD_VK_W_Q8_0,
  WD_VK_W_COUNT,
} wd_vk_wtype_t;

typedef struct {
  const char *shader;                    /* variant name in the SPIR-V table */
  uint32_t n_args;                       /* bindings 0..n_args-1 of set 0 */
  wd_vk_arg_kind_t args[WD_VK_MAX_ARGS];
  uint32_t push_size;                    /* bytes of push constants (<= 128) */
  uint32_t n_spec;                       /* constant_id 0..n_spec-1, all uint */
  uint32_t spec[WD_VK_MAX_SPEC];
  uint32_t local_size[3];                /* the shader's workgroup size, for checks */
} wd_vk_pipeline_desc_t;

typedef struct wd_vk_pipeline wd_vk_pipeline_t;
typedef struct wd_vk_dset wd_vk_dset_t;

int wd_vk_pipeline_new(wd_vk_device_t *dev, const wd_vk_pipeline_desc_t *desc,
                       wd_vk_pipeline_t **ret_pipe);
void wd_vk_pipeline_free(wd_vk_pipeline_t *pipe); /* accepts NULL */
const wd_vk_pipeline_desc_t *wd_vk_pipeline_desc(const wd_vk_pipeline_t *pipe);

/* The same shader and bindings with other specialization constants (an
 * epilogue compiled in or out, say). The variant shares base's layouts, so a
 * descriptor set made for base binds to it too (wd_vk_cmd_dispatch_pipe);
 * base must outlive it. */
int wd_vk_pipeline_variant(const wd_vk_pipeline_t *base, const uint32_t *spec, uint32_t n_spec,
                           wd_vk_pipeline_t **ret_pipe);
/* Another shader with base's bindings, push constants and workgroup size
 * (its declarations must match them): shares base's layouts like a
 * variant, so base's sets bind to it; base must outlive it. */
int wd_vk_pipeline_sibling(const wd_vk_pipeline_t *base, const char *shader,
                           wd_vk_pipeline_t **ret_pipe);

/* One binding: a byte range of a buffer. range 0 means "to the end".
 * Texel bindings need offset and range aligned to the texel size (4 bytes
 * for u32, 8 for f16, 16 for f32 and u32x4) and the offset to
 * minTexelBufferOffsetAlignment; storage bindings need
 * minStorageBufferOffsetAlignment and at most maxStorageBufferRange bytes.
 * wtype matters only for weight operands (see wd_vk_wtype_t); pipelines
 * ignore it. */
typedef struct {
  wd_vk_buffer_t *buf;
  uint64_t offset;
  uint64_t range;
  wd_vk_wtype_t wtype;
} wd_vk_arg_t;

/* Allocates a set for pipe and writes args[0..n_args-1] into it, creating
 * the buffer views texel bindings need (owned by the set). */
int wd_vk_dset_new(wd_vk_pipeline_t *pipe, const wd_vk_arg_t *args, uint32_t n_args,
                   wd_vk_dset_t **ret_set);
void wd_vk_dset_free(wd_vk_dset_t *set); /* accepts NULL */

#endif
