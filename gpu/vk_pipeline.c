/*
 * vk_pipeline.c - pipelines from the embedded SPIR-V table, descriptor sets.
 */
#include "vk_pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "vk_buffer_internal.h"
#include "vk_fault.h"
#include "vk_internal.h"
#include "vk_pipeline_internal.h"
#include "vk_shaders.h"

const wd_spirv_t *wd_spirv_find(const char *name) {
  for (const wd_spirv_t *s = wd_spirv_table; s->name; s++)
    if (strcmp(s->name, name) == 0)
      return s;
  return NULL;
}

static VkDescriptorType wd_vk_desc_type(wd_vk_arg_kind_t k) {
  switch (k) {
  case WD_VK_ARG_TEXEL_F32:
  case WD_VK_ARG_TEXEL_F16:
  case WD_VK_ARG_TEXEL_U32:
  case WD_VK_ARG_TEXEL_U32X4:
    return VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
  case WD_VK_ARG_UNIFORM:
    return VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
  default:
    return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  }
}

void wd_vk_pipeline_free(wd_vk_pipeline_t *p) {
  if (!p)
    return;
  VkDevice dev = p->dev->dev;
  if (p->pipeline != VK_NULL_HANDLE)
    vkDestroyPipeline(dev, p->pipeline, NULL);
  if (p->base) { /* a variant owns nothing else, a sibling its module too */
    if (p->own_module && p->module != VK_NULL_HANDLE)
      vkDestroyShaderModule(dev, p->module, NULL);
    free(p);
    return;
  }
  if (p->layout != VK_NULL_HANDLE)
    vkDestroyPipelineLayout(dev, p->layout, NULL);
  if (p->set_layout != VK_NULL_HANDLE)
    vkDestroyDescriptorSetLayout(dev, p->set_layout, NULL);
  if (p->module != VK_NULL_HANDLE)
    vkDestroyShaderModule(dev, p->module, NULL);
  free(p);
}

/* Creates p->pipeline from p->module, p->layout and p->desc.spec. */
static VkResult create_compute(struct wd_vk_pipeline *p) {
  const wd_vk_pipeline_desc_t *desc = &p->desc;
  VkSpecializationMapEntry entries[WD_VK_MAX_SPEC];
  for (uint32_t i = 0; i < desc->n_spec; i++)
    entries[i] = (VkSpecializationMapEntry){
      .constantID = i,
      .offset = i * (uint32_t)sizeof(uint32_t),
      .size = sizeof(uint32_t),
    };
  const VkSpecializationInfo si = {
    .mapEntryCount = desc->n_spec,
    .pMapEntries = entries,
    .dataSize = desc->n_spec * sizeof(uint32_t),
    .pData = p->desc.spec,
  };
  const VkComputePipelineCreateInfo cpci = {
    .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
    .stage = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_COMPUTE_BIT,
      .module = p->module,
      .pName = "main",
      .pSpecializationInfo = desc->n_spec ? &si : NULL,
    },
    .layout = p->layout,
  };
  return vkCreateComputePipelines(p->dev->dev, VK_NULL_HANDLE, 1, &cpci, NULL, &p->pipeline);
}

int wd_vk_pipeline_new(wd_vk_device_t *d, const wd_vk_pipeline_desc_t *desc,
                       wd_vk_pipeline_t **ret_pipe) {
  int rc = 0;
  if (!desc || !desc->shader || desc->n_args > WD_VK_MAX_ARGS || desc->n_spec > WD_VK_MAX_SPEC ||
      desc->push_size > 128 || desc->push_size % 4 != 0)
    return WD_EINVAL;
  const uint32_t inv = desc->local_size[0] * (desc->local_size[1] ? desc->local_size[1] : 1) *
                       (desc->local_size[2] ? desc->local_size[2] : 1);
  if (inv == 0 || inv > d->limits.maxComputeWorkGroupInvocations) {
    wd_log_debug("%s: '%s': workgroup of %u invocations, device allows %u", __func__,
                 desc->shader, inv, d->limits.maxComputeWorkGroupInvocations);
    return WD_EUNSUP;
  }
  /* The matrix kernels come in one build per extension (shaders.cmake:
   * NAME for NV, NAME_khr, NAME_khr8); every other shader has one variant
   * for all devices. */
  const wd_spirv_t *spv = NULL;
  if (wd_vk_cm_shader(desc->shader)) {
    /* Only the build for the device's extension: another extension's
     * SPIR-V is not to be given to this driver. */
    char name[96];
    snprintf(name, sizeof name, "%s%s", desc->shader, wd_vk_cm_suffix(d->info.matrix_ext));
    spv = wd_spirv_find(name);
    if (!spv) {
      wd_log_debug("%s: no '%s' for this device's matrix units (%s)", __func__, name,
                   wd_vk_cm_ext_name(d->info.matrix_ext));
      return WD_EUNSUP;
    }
  } else {
    spv = wd_spirv_find(desc->shader);
  }
  if (!spv) {
    wd_log_debug("%s: no shader variant '%s' is embedded", __func__, desc->shader);
    return WD_ENOENT;
  }
  wd_vk_pipeline_t *p = calloc(1, sizeof *p);
  if (!p)
    return WD_ENOMEM;
  *p = (wd_vk_pipeline_t){ .dev = d, .desc = *desc };

  const VkShaderModuleCreateInfo smci = {
    .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
    .codeSize = *spv->n_words * sizeof(uint32_t),
    .pCode = spv->words,
  };
  WD_VK_TRY(vkCreateShaderModule(d->dev, &smci, NULL, &p->module));

  VkDescriptorSetLayoutBinding binds[WD_VK_MAX_ARGS];
  for (uint32_t i = 0; i < desc->n_args; i++)
    binds[i] = (VkDescriptorSetLayoutBinding){
      .binding = i,
      .descriptorType = wd_vk_desc_type(desc->args[i]),
      .descriptorCount = 1,
      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
    };
  const VkDescriptorSetLayoutCreateInfo dslci = {
    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
    .bindingCount = desc->n_args,
    .pBindings = binds,
  };
  WD_VK_TRY(vkCreateDescriptorSetLayout(d->dev, &dslci, NULL, &p->set_layout));

  const VkPushConstantRange pcr = {
    .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
    .offset = 0,
    .size = desc->push_size,
  };
  const VkPipelineLayoutCreateInfo plci = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
    .setLayoutCount = 1,
    .pSetLayouts = &p->set_layout,
    .pushConstantRangeCount = desc->push_size ? 1u : 0u,
    .pPushConstantRanges = desc->push_size ? &pcr : NULL,
  };
  WD_VK_TRY(vkCreatePipelineLayout(d->dev, &plci, NULL, &p->layout));

  WD_VK_TRY(create_compute(p));
  *ret_pipe = p;
  return 0;
fail:
  wd_log_debug("%s: pipeline '%s' failed: %s", __func__, desc->shader, wd_strerror(rc));
  wd_vk_pipeline_free(p);
  return rc;
}

const wd_vk_pipeline_desc_t *wd_vk_pipeline_desc(const wd_vk_pipeline_t *p) { return &p->desc; }

void wd_vk_dset_free(wd_vk_dset_t *s) {
  if (!s)
    return;
  VkDevice dev = s->pipe->dev->dev;
  for (uint32_t i = 0; i < WD_VK_MAX_ARGS; i++)
    if (s->views[i] != VK_NULL_HANDLE)
      vkDestroyBufferView(dev, s->views[i], NULL);
  if (s->set != VK_NULL_HANDLE)
    (void)vkFreeDescriptorSets(dev, s->pool, 1, &s->set);
  free(s);
}

int wd_vk_dset_new(wd_vk_pipeline_t *p, const wd_vk_arg_t *args, uint32_t n_args,
                   wd_vk_dset_t **ret_set) {
  int rc = 0;
  wd_vk_device_t *d = p->dev;
  if (n_args != p->desc.n_args) {
    wd_log_debug("%s: '%s' takes %u bindings, got %u", __func__, p->desc.shader,
                 p->desc.n_args, n_args);
    return WD_EINVAL;
  }
  wd_vk_dset_t *s = calloc(1, sizeof *s);
  if (!s)
    return WD_ENOMEM;
  *s = (wd_vk_dset_t){ .pipe = p, .set = VK_NULL_HANDLE };

  /* From the newest pool; a full one (out of sets, or of descriptors of
   * one type, or fragmented by frees) gets a new pool chained once. */
  for (int attempt = 0;; attempt++) {
    const VkDescriptorSetAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
      .descriptorPool = d->desc_pools[d->n_desc_pools - 1],
      .descriptorSetCount = 1,
      .pSetLayouts = &p->set_layout,
    };
    const VkResult r = wd__vk_fault_pool_full() ? VK_ERROR_OUT_OF_POOL_MEMORY
                                                : vkAllocateDescriptorSets(d->dev, &ai, &s->set);
    if (r == VK_SUCCESS) {
      s->pool = ai.descriptorPool;
      break;
    }
    s->set = VK_NULL_HANDLE;
    if (attempt == 0 && (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL)) {
      if ((rc = wd__vk_desc_pool_add(d)) < 0)
        goto fail;
      continue;
    }
    rc = wd__vk_err(r, "vkAllocateDescriptorSets", __func__);
    goto fail;
  }

  VkWriteDescriptorSet w[WD_VK_MAX_ARGS];
  VkDescriptorBufferInfo bi[WD_VK_MAX_ARGS];
  for (uint32_t i = 0; i < n_args; i++) {
    const wd_vk_arg_t *a = &args[i];
    if (!a->buf || a->offset >= a->buf->size ||
        (a->range && a->range > a->buf->size - a->offset)) {
      wd_log_debug("%s: '%s' binding %u: range outside its buffer", __func__, p->desc.shader, i);
      rc = WD_ERANGE;
      goto fail;
    }
    const uint64_t range = a->range ? a->range : a->buf->size - a->offset;
    w[i] = (VkWriteDescriptorSet){
      .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
      .dstSet = s->set,
      .dstBinding = i,
      .descriptorCount = 1,
      .descriptorType = wd_vk_desc_type(p->desc.args[i]),
    };
    if (p->desc.args[i] == WD_VK_ARG_TEXEL_F32 || p->desc.args[i] == WD_VK_ARG_TEXEL_F16 ||
        p->desc.args[i] == WD_VK_ARG_TEXEL_U32 || p->desc.args[i] == WD_VK_ARG_TEXEL_U32X4) {
      const int f16 = p->desc.args[i] == WD_VK_ARG_TEXEL_F16;
      const int u32 = p->desc.args[i] == WD_VK_ARG_TEXEL_U32;
      const int u32x4 = p->desc.args[i] == WD_VK_ARG_TEXEL_U32X4;
      const uint64_t texel = u32 ? 4 : f16 ? 8 : 16;
      /* The view's offset obeys the device's alignment (and the format's
       * element size, which the shaders' texel indexing assumes). */
      const uint64_t talign = d->limits.minTexelBufferOffsetAlignment;
      if (a->offset % texel || (talign && a->offset % talign) || range % texel ||
          range / texel > d->limits.maxTexelBufferElements) {
        wd_log_debug("%s: '%s' binding %u: texel range %llu+%llu not aligned or too long",
                     __func__, p->desc.shader, i, (unsigned long long)a->offset,
                     (unsigned long long)range);
        rc = WD_ERANGE;
        goto fail;
      }
      const VkBufferViewCreateInfo vci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
        .buffer = a->buf->buf,
        .format = u32     ? VK_FORMAT_R32_UINT
                  : u32x4 ? VK_FORMAT_R32G32B32A32_UINT
                  : f16   ? VK_FORMAT_R16G16B16A16_SFLOAT
                          : VK_FORMAT_R32G32B32A32_SFLOAT,
        .offset = a->offset,
        .range = range,
      };
      WD_VK_TRY(vkCreateBufferView(d->dev, &vci, NULL, &s->views[i]));
      w[i].pTexelBufferView = &s->views[i];
    } else {
      const uint64_t align = p->desc.args[i] == WD_VK_ARG_STORAGE
                                 ? d->limits.minStorageBufferOffsetAlignment
                                 : d->limits.minUniformBufferOffsetAlignment;
      if (align && a->offset % align) {
        wd_log_debug("%s: '%s' binding %u: offset %llu not a multiple of %llu", __func__,
                     p->desc.shader, i, (unsigned long long)a->offset, (unsigned long long)align);
        rc = WD_ERANGE;
        goto fail;
      }
      if (p->desc.args[i] == WD_VK_ARG_STORAGE && range > d->limits.maxStorageBufferRange) {
        wd_log_debug("%s: '%s' binding %u: %llu bytes exceed maxStorageBufferRange", __func__,
                     p->desc.shader, i, (unsigned long long)range);
        rc = WD_ERANGE;
        goto fail;
      }
      bi[i] = (VkDescriptorBufferInfo){ .buffer = a->buf->buf, .offset = a->offset, .range = range };
      w[i].pBufferInfo = &bi[i];
    }
  }
  vkUpdateDescriptorSets(d->dev, n_args, w, 0, NULL);
  *ret_set = s;
  return 0;
fail:
  wd_vk_dset_free(s);
  return rc;
}

int wd_vk_pipeline_sibling(const wd_vk_pipeline_t *base, const char *shader,
                           wd_vk_pipeline_t **ret_pipe) {
  int rc = 0;
  if (!base || base->base || !shader)
    return WD_EINVAL;
  const wd_spirv_t *spv = wd_spirv_find(shader);
  if (!spv) {
    wd_log_debug("%s: no shader variant '%s' is embedded", __func__, shader);
    return WD_ENOENT;
  }
  wd_vk_pipeline_t *p = calloc(1, sizeof *p);
  if (!p)
    return WD_ENOMEM;
  *p = (wd_vk_pipeline_t){ .dev = base->dev, .desc = base->desc, .set_layout = base->set_layout,
                           .layout = base->layout, .base = base, .own_module = true };
  p->desc.shader = shader;
  const VkShaderModuleCreateInfo smci = {
    .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
    .codeSize = *spv->n_words * sizeof(uint32_t),
    .pCode = spv->words,
  };
  WD_VK_TRY(vkCreateShaderModule(base->dev->dev, &smci, NULL, &p->module));
  WD_VK_TRY(create_compute(p));
  *ret_pipe = p;
  return 0;
fail:
  wd_log_debug("%s: sibling '%s' of '%s' failed: %s", __func__, shader, base->desc.shader,
               wd_strerror(rc));
  wd_vk_pipeline_free(p);
  return rc;
}

int wd_vk_pipeline_variant(const wd_vk_pipeline_t *base, const uint32_t *spec, uint32_t n_spec,
                           wd_vk_pipeline_t **ret_pipe) {
  int rc = 0;
  if (!base || base->base || n_spec > WD_VK_MAX_SPEC || (n_spec && !spec))
    return WD_EINVAL;
  wd_vk_pipeline_t *p = calloc(1, sizeof *p);
  if (!p)
    return WD_ENOMEM;
  *p = (wd_vk_pipeline_t){ .dev = base->dev, .desc = base->desc, .module = base->module,
                           .set_layout = base->set_layout, .layout = base->layout, .base = base };
  p->desc.n_spec = n_spec;
  memset(p->desc.spec, 0, sizeof p->desc.spec);
  if (n_spec)
    memcpy(p->desc.spec, spec, n_spec * sizeof *spec);
  WD_VK_TRY(create_compute(p));
  *ret_pipe = p;
  return 0;
fail:
  wd_log_debug("%s: variant of '%s' failed: %s", __func__, base->desc.shader, wd_strerror(rc));
  free(p);
  return rc;
}
