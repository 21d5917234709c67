/*
 * vk_internal.h - struct bodies and helpers shared by the files of gpu/.
 *
 * Nothing outside gpu/ includes this header: the public headers expose opaque
 * types. Threading: every object here belongs to the one GPU worker thread
 * (or to a test's main thread); none of them is internally locked.
 */
#ifndef WD_VK_INTERNAL_H
#define WD_VK_INTERNAL_H

#include <vulkan/vulkan.h>

#include "error.h"
#include "log.h"
#include "vk_device.h"

#define WD_CEIL_DIV(n, d) (((n) + (d) - 1) / (d))
#define WD_VK_MAX_DESC_POOLS 64
#define WD_VK_DESC_POOL_SETS 16384

struct wd_vk_device {
  VkInstance instance;
  VkPhysicalDevice phys;
  VkDevice dev;
  VkQueue queue;
  uint32_t queue_family;
  VkCommandPool cmd_pool;        /* resettable command buffers */
  /* Descriptor sets come from a chain of pools: when the newest is full
   * (VK_ERROR_OUT_OF_POOL_MEMORY), wd__vk_desc_pool_add makes another, so
   * no model size or batch plan can outgrow a fixed pool. All are freed
   * with the device. */
  VkDescriptorPool desc_pools[WD_VK_MAX_DESC_POOLS];
  uint32_t n_desc_pools;
  uint32_t desc_pool_sets;       /* maxSets of each pool */
  VkPhysicalDeviceMemoryProperties mem_props;
  VkPhysicalDeviceLimits limits;
  wd_vk_device_info_t info;
  uint64_t timeout_ns;           /* fence waits (wd_vk_device_set_timeout) */
  int force_staging;             /* --vk-force-staging: device-local memory is
                                  * never mapped, as on a discrete GPU without BAR */
};

/* Maps a VkResult to a WD_E* code and logs the failing call at DEBUG. */
int wd__vk_err(VkResult r, const char *call, const char *func);

/* Evaluates a Vulkan call; on failure sets rc and jumps to the local fail label. */
#define WD_VK_TRY(call)                                   \
  do {                                                    \
    VkResult wd_vk_r_ = (call);                           \
    if (wd_vk_r_ != VK_SUCCESS) {                         \
      rc = wd__vk_err(wd_vk_r_, #call, __func__);         \
      goto fail;                                          \
    }                                                     \
  } while (0)

/* Appends a descriptor pool of desc_pool_sets sets to d's chain. WD_ENOMEM
 * when the chain is full, WD_EVULKAN when the driver refuses. */
int wd__vk_desc_pool_add(struct wd_vk_device *d);

/* Finds a memory type allowed by type_bits with all of `want`; -1 if none. */
int wd__vk_memory_type(const struct wd_vk_device *d, uint32_t type_bits,
                       VkMemoryPropertyFlags want);

#endif
