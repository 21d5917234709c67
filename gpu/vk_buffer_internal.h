/*
 * vk_buffer_internal.h - the buffer struct, for the other files of gpu/.
 */
#ifndef WD_VK_BUFFER_INTERNAL_H
#define WD_VK_BUFFER_INTERNAL_H

#include <vulkan/vulkan.h>

#include "vk_buffer.h"

struct wd_vk_buffer {
  struct wd_vk_device *dev;
  VkBuffer buf;
  VkDeviceMemory mem;
  uint64_t size;
  void *map; /* persistent mapping, NULL if not host-visible */
  uint64_t alloc_size; /* of mem, for flush/invalidate ranges */
  int coherent;        /* host-coherent: no flush/invalidate needed */
};

#endif
