/*
 * vk_device.c - Vulkan instance, device selection and the compute queue.
 *
 * Selection ranks usable devices discrete > integrated > virtual > CPU so a
 * machine with a real GPU uses it and one without falls back to lavapipe.
 * Features are enabled only when reported (f16 arithmetic, 16-bit storage);
 * kernels pick variants from wd_vk_device_info_t rather than assuming them.
 */
#include "vk_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_fault.h"
#include "vk_internal.h"

int wd__vk_err(VkResult r, const char *call, const char *func) {
  wd_log_debug("%s: %s failed: VkResult %d", func, call, (int)r);
  switch (r) {
  case VK_ERROR_OUT_OF_HOST_MEMORY:
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    return WD_ENOMEM;
  case VK_ERROR_DEVICE_LOST:
    return WD_EDEVLOST;
  case VK_ERROR_INITIALIZATION_FAILED:
  case VK_ERROR_INCOMPATIBLE_DRIVER:
    return WD_ENODEVICE;
  case VK_TIMEOUT:
    return WD_ETIMEDOUT;
  default:
    return WD_EVULKAN;
  }
}

int wd__vk_memory_type(const struct wd_vk_device *d, uint32_t type_bits,
                       VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < d->mem_props.memoryTypeCount; i++)
    if ((type_bits & (1u << i)) && (d->mem_props.memoryTypes[i].propertyFlags & want) == want)
      return (int)i;
  return -1;
}

const char *wd_vk_class_name(wd_vk_class_t c) {
  switch (c) {
  case WD_VK_CLASS_CPU: return "cpu";
  case WD_VK_CLASS_VIRTUAL: return "virtual-gpu";
  case WD_VK_CLASS_INTEGRATED: return "integrated-gpu";
  case WD_VK_CLASS_DISCRETE: return "discrete-gpu";
  default: return "other";
  }
}

static wd_vk_class_t wd_vk_class_of(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return WD_VK_CLASS_CPU;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return WD_VK_CLASS_VIRTUAL;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return WD_VK_CLASS_INTEGRATED;
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return WD_VK_CLASS_DISCRETE;
  default: return WD_VK_CLASS_OTHER;
  }
}

int wd_vk_class_rank(wd_vk_class_t c) {
  switch (c) {
  case WD_VK_CLASS_DISCRETE: return 4;
  case WD_VK_CLASS_INTEGRATED: return 3;
  case WD_VK_CLASS_VIRTUAL: return 2;
  case WD_VK_CLASS_CPU: return 1;
  default: return 0;
  }
}

static int wd_vk_layer_present(const char *name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
    return 0;
  VkLayerProperties *props = calloc(n, sizeof *props);
  if (!props)
    return 0;
  int found = 0;
  if (vkEnumerateInstanceLayerProperties(&n, props) == VK_SUCCESS)
    for (uint32_t i = 0; i < n; i++)
      if (strcmp(props[i].layerName, name) == 0)
        found = 1;
  free(props);
  return found;
}

static int wd_vk_instance_new(bool validation, VkInstance *ret) {
  int rc = 0;
  static const char *const layer = "VK_LAYER_KHRONOS_validation";
  const VkApplicationInfo app = {
    .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
    .pApplicationName = "whisperd",
    .applicationVersion = VK_MAKE_API_VERSION(0, 0, 1, 0),
    .pEngineName = "whisperd",
    .engineVersion = VK_MAKE_API_VERSION(0, 0, 1, 0),
    .apiVersion = VK_API_VERSION_1_2,
  };
  const int use_layer = validation && wd_vk_layer_present(layer);
  if (validation && !use_layer)
    wd_log_debug("%s: validation layer not installed, ignoring", __func__);
  const VkInstanceCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
    .pApplicationInfo = &app,
    .enabledLayerCount = use_layer ? 1u : 0u,
    .ppEnabledLayerNames = use_layer ? &layer : NULL,
  };
  WD_VK_TRY(vkCreateInstance(&ci, NULL, ret));
  return 0;
fail:
  return rc == WD_EVULKAN ? WD_ENODEVICE : rc;
}

/* Index of a queue family with compute, preferring compute-only families
 * (dedicated async-compute queues on discrete GPUs); -1 if none. */
static int wd_vk_compute_family(VkPhysicalDevice pd, float *ret_ts_period, uint32_t *ret_ts_bits,
                                float dev_period) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
  if (n == 0)
    return -1;
  VkQueueFamilyProperties *q = calloc(n, sizeof *q);
  if (!q)
    return -1;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
  int best = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
      continue;
    if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
      best = (int)i;
  }
  /* timestampValidBits 0: the queue writes no timestamps at all. */
  *ret_ts_bits = best >= 0 ? q[best].timestampValidBits : 0;
  *ret_ts_period = *ret_ts_bits > 0 ? dev_period : 0.0f;
  free(q);
  return best;
}

static void wd_vk_fill_info(VkInstance inst, VkPhysicalDevice pd, uint32_t index,
                            wd_vk_device_info_t *info, int *ret_family) {
  VkPhysicalDeviceVulkan11Properties p11 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES,
  };
  VkPhysicalDeviceDriverProperties drv = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
    .pNext = &p11,
  };
  VkPhysicalDeviceSubgroupProperties sub = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
    .pNext = &drv,
  };
  VkPhysicalDeviceProperties2 p2 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
    .pNext = &sub,
  };
  VkPhysicalDeviceProperties p1;
  vkGetPhysicalDeviceProperties(pd, &p1);
  const int is_12 = p1.apiVersion >= VK_API_VERSION_1_2;
  if (is_12)
    vkGetPhysicalDeviceProperties2(pd, &p2);
  else
    p2.properties = p1;
  const VkPhysicalDeviceProperties *p = &p2.properties;

  VkPhysicalDeviceVulkan12Features f12 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
  };
  VkPhysicalDeviceVulkan11Features f11 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
    .pNext = &f12,
  };
  VkPhysicalDeviceFeatures2 f2 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
    .pNext = &f11,
  };
  if (is_12)
    vkGetPhysicalDeviceFeatures2(pd, &f2);

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);

  memset(info, 0, sizeof *info);
  info->index = index;
  snprintf(info->name, sizeof info->name, "%s", p->deviceName);
  if (is_12) {
    snprintf(info->driver_name, sizeof info->driver_name, "%s", drv.driverName);
    snprintf(info->driver_info, sizeof info->driver_info, "%s", drv.driverInfo);
  }
  info->device_class = wd_vk_class_of(p->deviceType);
  info->api_version = p->apiVersion;
  info->vendor_id = p->vendorID;
  info->device_id = p->deviceID;
  uint64_t largest_heap = 0;
  for (uint32_t i = 0; i < mem.memoryHeapCount; i++)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      info->device_local_bytes += mem.memoryHeaps[i].size;
      if (mem.memoryHeaps[i].size > largest_heap)
        largest_heap = mem.memoryHeaps[i].size;
    }
  info->subgroup_size = is_12 ? sub.subgroupSize : 1;
  info->subgroup_arithmetic = is_12 && (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                              (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  info->shader_float16 = is_12 && f12.shaderFloat16;
  info->storage_16bit = is_12 && f11.storageBuffer16BitAccess;
  info->memory_model = is_12 && f12.vulkanMemoryModel;
  if (is_12)
    wd_vk_coopmat_probe(inst, pd, &info->coopmat);
  info->matrix_ext = wd_vk_coopmat_pick(&info->coopmat, info->shader_float16, info->memory_model,
                                        info->subgroup_size, WD_VK_CM_WANT_AUTO);
  info->max_workgroup_invocations = p->limits.maxComputeWorkGroupInvocations;
  info->max_shared_bytes = p->limits.maxComputeSharedMemorySize;
  info->limits = (wd_vk_limits_t){
    .max_storage_range = p->limits.maxStorageBufferRange,
    .max_texel_elements = p->limits.maxTexelBufferElements,
    .texel_align = p->limits.minTexelBufferOffsetAlignment,
    .storage_align = p->limits.minStorageBufferOffsetAlignment,
    /* Vulkan 1.1 guarantees at least 1 GiB. */
    .max_alloc = is_12 && p11.maxMemoryAllocationSize ? p11.maxMemoryAllocationSize : 1ull << 30,
    /* A CPU driver's "device-local heap" is host memory handed out on
     * demand (lavapipe reports 2 GiB here and allocates past it), so it is
     * no limit to plan against: 0 means unchecked. An override can set one. */
    .heap_bytes = info->device_class == WD_VK_CLASS_CPU ? 0 : largest_heap,
  };
  info->max_storage_range = info->limits.max_storage_range;
  info->max_texel_elements = (uint32_t)info->limits.max_texel_elements;
  float ts = 0.0f;
  uint32_t ts_bits = 0;
  int fam = wd_vk_compute_family(pd, &ts, &ts_bits, p->limits.timestampPeriod);
  if (wd__vk_fault_no_timestamps())
    ts = 0.0f, ts_bits = 0;
  info->timestamp_period_ns = ts_bits > 0 ? ts : 0.0f;
  info->timestamp_valid_bits = ts > 0.0f ? ts_bits : 0;
  info->usable = is_12 && fam >= 0;
  if (ret_family)
    *ret_family = fam;
}

/* Lowers info's limits by override o (NULL: none). */
static void wd_vk_apply_override(wd_vk_device_info_t *info, const wd_vk_limits_t *o) {
  wd_vk_limits_lower(&info->limits, o);
  info->max_storage_range = info->limits.max_storage_range;
  info->max_texel_elements = (uint32_t)info->limits.max_texel_elements;
}

static int wd_vk_enumerate(VkInstance inst, VkPhysicalDevice **ret_pds, uint32_t *ret_n) {
  int rc = 0;
  uint32_t n = 0;
  VkPhysicalDevice *pds = NULL;
  WD_VK_TRY(vkEnumeratePhysicalDevices(inst, &n, NULL));
  if (n == 0) {
    *ret_pds = NULL;
    *ret_n = 0;
    return 0;
  }
  pds = calloc(n, sizeof *pds);
  if (!pds)
    return WD_ENOMEM;
  VkResult r = vkEnumeratePhysicalDevices(inst, &n, pds);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    rc = wd__vk_err(r, "vkEnumeratePhysicalDevices", __func__);
    goto fail;
  }
  *ret_pds = pds;
  *ret_n = n;
  return 0;
fail:
  free(pds);
  return rc;
}

int wd_vk_device_list(const wd_vk_limits_t *override, wd_vk_device_info_t **ret_infos,
                      uint32_t *ret_n) {
  VkInstance inst = VK_NULL_HANDLE;
  VkPhysicalDevice *pds = NULL;
  uint32_t n = 0;
  int rc = wd_vk_instance_new(false, &inst);
  if (rc < 0)
    return rc;
  rc = wd_vk_enumerate(inst, &pds, &n);
  if (rc < 0)
    goto out;
  wd_vk_device_info_t *infos = calloc(n ? n : 1, sizeof *infos);
  if (!infos) {
    rc = WD_ENOMEM;
    goto out;
  }
  for (uint32_t i = 0; i < n; i++) {
    wd_vk_fill_info(inst, pds[i], i, &infos[i], NULL);
    wd_vk_apply_override(&infos[i], override);
  }
  *ret_infos = infos;
  *ret_n = n;
out:
  free(pds);
  vkDestroyInstance(inst, NULL);
  return rc;
}

int wd__vk_desc_pool_add(struct wd_vk_device *d) {
  if (d->n_desc_pools == WD_VK_MAX_DESC_POOLS) {
    wd_log_error("vulkan: %d descriptor pools of %u sets are full", WD_VK_MAX_DESC_POOLS,
                 d->desc_pool_sets);
    return WD_ENOMEM;
  }
  /* Up to 6 bindings a set, mostly storage and texel buffers: 4 of each
   * per set on average leaves room; uniforms are rare. */
  const uint32_t sets = d->desc_pool_sets;
  const VkDescriptorPoolSize sizes[] = {
    { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4 * sets },
    { VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, 4 * sets },
    { VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, sets / 16 > 16 ? sets / 16 : 16 },
  };
  const VkDescriptorPoolCreateInfo dpci = {
    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
    .flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
    .maxSets = sets,
    .poolSizeCount = sizeof sizes / sizeof sizes[0],
    .pPoolSizes = sizes,
  };
  VkDescriptorPool pool = VK_NULL_HANDLE;
  int rc = 0;
  WD_VK_TRY(vkCreateDescriptorPool(d->dev, &dpci, NULL, &pool));
  d->desc_pools[d->n_desc_pools++] = pool;
  if (d->n_desc_pools > 1)
    wd_log_debug("vulkan: descriptor pool %u of %u sets", d->n_desc_pools, sets);
  return 0;
fail:
  return rc;
}

void wd_vk_device_free(wd_vk_device_t *d) {
  if (!d)
    return;
  if (d->dev != VK_NULL_HANDLE) {
    /* Nothing may still run on the queue when its pools are destroyed. */
    (void)vkDeviceWaitIdle(d->dev);
    for (uint32_t i = 0; i < d->n_desc_pools; i++)
      vkDestroyDescriptorPool(d->dev, d->desc_pools[i], NULL);
    if (d->cmd_pool != VK_NULL_HANDLE)
      vkDestroyCommandPool(d->dev, d->cmd_pool, NULL);
    vkDestroyDevice(d->dev, NULL);
  }
  if (d->instance != VK_NULL_HANDLE)
    vkDestroyInstance(d->instance, NULL);
  free(d);
}

int wd_vk_device_new(const wd_vk_device_opts_t *opts, wd_vk_device_t **ret_dev) {
  int rc = 0;
  VkPhysicalDevice *pds = NULL;
  uint32_t n = 0;
  wd_vk_device_t *d = calloc(1, sizeof *d);
  if (!d)
    return WD_ENOMEM;
  *d = (wd_vk_device_t){ .instance = VK_NULL_HANDLE, .dev = VK_NULL_HANDLE };

  rc = wd_vk_instance_new(opts && opts->validation, &d->instance);
  if (rc < 0)
    goto fail;
  rc = wd_vk_enumerate(d->instance, &pds, &n);
  if (rc < 0)
    goto fail;

  /* Pick the device: the requested index, or the best-ranked usable one. */
  int chosen = -1, chosen_family = -1, best_rank = -1;
  for (uint32_t i = 0; i < n; i++) {
    wd_vk_device_info_t info;
    int fam = -1;
    wd_vk_fill_info(d->instance, pds[i], i, &info, &fam);
    if (!info.usable)
      continue;
    int rank = wd_vk_class_rank(info.device_class);
    if ((opts && opts->index >= 0) ? (int)i == opts->index : rank > best_rank) {
      chosen = (int)i;
      chosen_family = fam;
      best_rank = rank;
      d->info = info;
    }
  }
  if (chosen < 0) {
    wd_log_debug("%s: no usable Vulkan 1.2 device among %u (index %d requested)", __func__, n,
                 opts ? opts->index : -1);
    rc = WD_ENODEVICE;
    goto fail;
  }
  d->phys = pds[chosen];
  wd_vk_device_set_timeout(d, 0);
  d->force_staging = opts && opts->force_staging;
  d->queue_family = (uint32_t)chosen_family;
  vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem_props);
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(d->phys, &props);
  d->limits = props.limits;
  /* An override lowers what the binding checks (vk_pipeline.c) see too. */
  wd_vk_apply_override(&d->info, opts ? opts->limits : NULL);
  const wd_vk_limits_t *lim = &d->info.limits;
  d->limits.maxStorageBufferRange = (uint32_t)lim->max_storage_range;
  d->limits.maxTexelBufferElements = (uint32_t)lim->max_texel_elements;
  d->limits.minTexelBufferOffsetAlignment = lim->texel_align;
  d->limits.minStorageBufferOffsetAlignment = lim->storage_align;

  if (opts && opts->matrix != WD_VK_CM_WANT_AUTO)
    d->info.matrix_ext = wd_vk_coopmat_pick(&d->info.coopmat, d->info.shader_float16,
                                            d->info.memory_model, d->info.subgroup_size,
                                            opts->matrix);
  /* Enable only what the device reports; shaders choose variants by info.
   * The matrix units: the extension, its feature and the memory model the
   * gemm_cm SPIR-V declares, only where wd_vk_coopmat_pick chose them. */
  const bool cm = d->info.matrix_ext != WD_VK_CM_NONE;
  /* The NV and KHR feature structs have the same shape: sType, pNext,
   * cooperativeMatrix, cooperativeMatrixRobustBufferAccess. */
  VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
    .sType = d->info.matrix_ext == WD_VK_CM_NV
                 ? VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV
                 : WD_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
    .cooperativeMatrix = VK_TRUE,
  };
  VkPhysicalDeviceVulkan12Features f12 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
    .pNext = cm ? &fcm : NULL,
    .shaderFloat16 = d->info.shader_float16 ? VK_TRUE : VK_FALSE,
    .vulkanMemoryModel = cm ? VK_TRUE : VK_FALSE,
  };
  const char *const cm_exts[] = { wd_vk_cm_ext_name(d->info.matrix_ext) };
  VkPhysicalDeviceVulkan11Features f11 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
    .pNext = &f12,
    .storageBuffer16BitAccess = d->info.storage_16bit ? VK_TRUE : VK_FALSE,
  };
  const float prio = 1.0f;
  const VkDeviceQueueCreateInfo qci = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
    .queueFamilyIndex = d->queue_family,
    .queueCount = 1,
    .pQueuePriorities = &prio,
  };
  const VkDeviceCreateInfo dci = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
    .pNext = &f11,
    .queueCreateInfoCount = 1,
    .pQueueCreateInfos = &qci,
    .enabledExtensionCount = cm ? 1u : 0u,
    .ppEnabledExtensionNames = cm ? cm_exts : NULL,
  };
  WD_VK_TRY(vkCreateDevice(d->phys, &dci, NULL, &d->dev));
  vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);

  const VkCommandPoolCreateInfo cpci = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
    .queueFamilyIndex = d->queue_family,
  };
  WD_VK_TRY(vkCreateCommandPool(d->dev, &cpci, NULL, &d->cmd_pool));

  /* The first descriptor pool: a 32-layer model recorded for 16 batch
   * sizes needs about 8,000 sets, so one pool of 16,384 usually serves;
   * more are chained on demand (--vk-limits sets=N makes them small
   * to test that). */
  d->desc_pool_sets = WD_VK_DESC_POOL_SETS;
  if (d->info.limits.desc_sets && d->info.limits.desc_sets < d->desc_pool_sets)
    d->desc_pool_sets = (uint32_t)d->info.limits.desc_sets;
  if ((rc = wd__vk_desc_pool_add(d)) < 0)
    goto fail;

  free(pds);
  *ret_dev = d;
  return 0;
fail:
  free(pds);
  wd_vk_device_free(d);
  return rc;
}

const wd_vk_device_info_t *wd_vk_device_info(const wd_vk_device_t *dev) { return &dev->info; }

unsigned wd_vk_device_desc_pools(const wd_vk_device_t *dev) { return dev->n_desc_pools; }

void wd_vk_device_set_timeout(wd_vk_device_t *dev, uint64_t timeout_ns) {
  dev->timeout_ns = timeout_ns                                   ? timeout_ns
                    : dev->info.device_class == WD_VK_CLASS_CPU ? WD_VK_TIMEOUT_CPU_NS
                                                                : WD_VK_TIMEOUT_DEFAULT_NS;
}

uint64_t wd_vk_device_timeout_ns(const wd_vk_device_t *dev) { return dev->timeout_ns; }
