/*
 * vk_device.h - the Vulkan instance, physical-device choice, logical device
 * and its one compute queue.
 *
 * A wd_vk_device_t is created once per process by the GPU worker and owns
 * every other Vulkan object (buffers, pipelines, command buffers are created
 * from it and must be freed before it). Not thread-safe: one thread uses it.
 */
#ifndef WD_VK_DEVICE_H
#define WD_VK_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "vk_coopmat.h"
#include "vk_limits.h"

typedef struct wd_vk_device wd_vk_device_t;

typedef enum {
  WD_VK_CLASS_CPU = 0,        /* lavapipe / llvmpipe and other software */
  WD_VK_CLASS_VIRTUAL = 1,
  WD_VK_CLASS_INTEGRATED = 2,
  WD_VK_CLASS_DISCRETE = 3,
  WD_VK_CLASS_OTHER = 4,
} wd_vk_class_t;

typedef struct {
  uint32_t index;               /* position in vkEnumeratePhysicalDevices */
  char name[256];
  char driver_name[256];
  char driver_info[256];
  wd_vk_class_t device_class;
  uint32_t api_version;         /* VK_MAKE_API_VERSION encoded */
  uint32_t vendor_id, device_id;
  uint64_t device_local_bytes;  /* sum of DEVICE_LOCAL heaps */
  uint32_t subgroup_size;
  bool subgroup_arithmetic;     /* subgroupAdd etc. in compute */
  bool shader_float16;          /* f16 arithmetic in shaders */
  bool storage_16bit;           /* 16-bit types in storage buffers */
  bool memory_model;            /* the Vulkan memory model (the matrix kernels' SPIR-V) */
  /* The matrix units: what the device lists (vk_coopmat.h), and the
   * extension the matrix GEMM (gemm_cm) runs through, NONE where it
   * cannot; a device is created with that extension enabled. */
  wd_vk_coopmat_info_t coopmat;
  wd_vk_cm_ext_t matrix_ext;
  bool usable;                  /* Vulkan >= 1.2 with a compute queue */
  float timestamp_period_ns;    /* 0 if timestamps unsupported on the queue */
  uint32_t timestamp_valid_bits; /* of the compute queue's timestamps, 0 for none */
  uint32_t max_workgroup_invocations;
  uint32_t max_shared_bytes;
  uint64_t max_storage_range;
  uint32_t max_texel_elements;
  /* Everything the engine plans against (vk_limits.h), after any override
   * (wd_vk_device_opts_t.limits, --vk-limits): max_storage_range and
   * max_texel_elements above are copies of its first two fields. */
  wd_vk_limits_t limits;
} wd_vk_device_info_t;

typedef struct {
  int index;         /* -1: choose discrete > integrated > virtual > CPU */
  bool validation;   /* enable VK_LAYER_KHRONOS_validation when installed */
  /* Pretend the device is smaller (tests, --vk-limits): see vk_limits.h.
   * NULL for none. */
  const wd_vk_limits_t *limits;
  /* Weights up and results back through the staging ring even where
   * device-local memory is mapped (tests: the path a discrete GPU takes). */
  bool force_staging;
  /* The matrix units' extension (vk_coopmat.h): AUTO, or one forced
   * (tests: the KHR kernels on a device that lists both). */
  wd_vk_cm_want_t matrix;
} wd_vk_device_opts_t;

/* Lists the physical devices, their limits lowered by override (NULL: the
 * devices' own). *ret_infos is malloc'd; the caller frees it. */
int wd_vk_device_list(const wd_vk_limits_t *override, wd_vk_device_info_t **ret_infos,
                      uint32_t *ret_n);

/* Creates the device. Returns WD_ENODEVICE when nothing usable exists (or
 * opts->index names no usable device), WD_EVULKAN for other failures. */
int wd_vk_device_new(const wd_vk_device_opts_t *opts, wd_vk_device_t **ret_dev);

/* Waits for the queue to drain, then destroys the device. Accepts NULL. */
void wd_vk_device_free(wd_vk_device_t *dev);

const wd_vk_device_info_t *wd_vk_device_info(const wd_vk_device_t *dev);
/* Descriptor pools in the device's chain (vk_internal.h). */
unsigned wd_vk_device_desc_pools(const wd_vk_device_t *dev);

/* How long any wait on the GPU may take before the work is taken for hung
 * (a fence timeout is handled as a lost device). Default
 * WD_VK_TIMEOUT_DEFAULT_NS, or WD_VK_TIMEOUT_CPU_NS on a CPU driver
 * (lavapipe): there a submit is host threads sharing the cores with
 * everything else, and a large model's encoder on a busy 2-core host takes
 * tens of seconds without anything being hung. 0 restores the default. */
#define WD_VK_TIMEOUT_DEFAULT_NS (20ull * 1000000000ull)
#define WD_VK_TIMEOUT_CPU_NS (300ull * 1000000000ull)
void wd_vk_device_set_timeout(wd_vk_device_t *dev, uint64_t timeout_ns);
uint64_t wd_vk_device_timeout_ns(const wd_vk_device_t *dev);

/* "cpu", "virtual-gpu", "integrated-gpu", "discrete-gpu" or "other". */
const char *wd_vk_class_name(wd_vk_class_t c);
/* Rank of the automatic choice, higher wins: discrete 4 > integrated 3 >
 * virtual 2 > CPU (lavapipe) 1 > other 0. */
int wd_vk_class_rank(wd_vk_class_t c);

#endif
