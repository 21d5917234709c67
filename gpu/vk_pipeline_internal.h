/*
 * vk_pipeline_internal.h - pipeline and descriptor-set structs for gpu/.
 */
#ifndef WD_VK_PIPELINE_INTERNAL_H
#define WD_VK_PIPELINE_INTERNAL_H

#include <vulkan/vulkan.h>

#include "vk_pipeline.h"

struct wd_vk_pipeline {
  struct wd_vk_device *dev;
  wd_vk_pipeline_desc_t desc;
  VkShaderModule module;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  /* A variant (wd_vk_pipeline_variant) borrows module and layouts from its
   * base, which must outlive it; only the pipeline is its own. */
  const struct wd_vk_pipeline *base;
  bool own_module; /* a sibling (wd_vk_pipeline_sibling): its module is its own */
};

struct wd_vk_dset {
  struct wd_vk_pipeline *pipe;
  VkDescriptorSet set;
  VkDescriptorPool pool; /* the pool of the device's chain it came from */
  VkBufferView views[WD_VK_MAX_ARGS]; /* VK_NULL_HANDLE for non-texel bindings */
};

#endif
