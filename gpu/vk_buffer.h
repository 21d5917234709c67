/*
 * vk_buffer.h - device buffers and their memory.
 *
 * Buffers are created at model load (weights, activations, KV caches sized
 * for the configured maxima) and live until the engine is freed; a job never
 * allocates one. Each buffer owns one VkDeviceMemory allocation: there are a
 * few hundred of them at most, far below maxMemoryAllocationCount.
 *
 * Host access: when the memory is host-visible (lavapipe, integrated GPUs,
 * resizable BAR) the buffer is persistently mapped and reads/writes are
 * memcpy; otherwise they go through a staging buffer and a one-shot copy.
 */
#ifndef WD_VK_BUFFER_H
#define WD_VK_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "vk_device.h"

typedef struct wd_vk_buffer wd_vk_buffer_t;

/* Usage flags (transfer src/dst are always added). */
enum {
  WD_VK_BUF_STORAGE = 1u << 0, /* std430 storage buffer */
  WD_VK_BUF_TEXEL = 1u << 1,   /* uniform texel buffer (samplerBuffer) */
  WD_VK_BUF_UNIFORM = 1u << 2,
};

typedef enum {
  WD_VK_MEM_DEVICE = 0, /* device-local: what kernels read fastest */
  WD_VK_MEM_HOST = 1,   /* host-visible + coherent, always mapped: per-step params the GPU reads */
  WD_VK_MEM_READBACK = 2, /* host-visible, cached when the device offers it (then possibly
                           * not coherent: read it after wd_vk_buffer_invalidate): the
                           * destination of the copies that end a recording whose results
                           * the host reads (logits). Shaders never write it: on a discrete
                           * GPU WD_VK_MEM_HOST is BAR memory, read uncached over PCIe. */
  WD_VK_MEM_STAGING = 3,  /* host-visible + coherent system memory (not device-local where
                           * the device offers that: BAR space is scarce): the source of
                           * uploads, written once by the host, read once by a copy. */
} wd_vk_mem_t;

int wd_vk_buffer_new(wd_vk_device_t *dev, uint64_t size, unsigned usage, wd_vk_mem_t mem,
                     wd_vk_buffer_t **ret_buf);
/* Accepts NULL. The buffer must not be in use by pending GPU work. */
void wd_vk_buffer_free(wd_vk_buffer_t *buf);

uint64_t wd_vk_buffer_size(const wd_vk_buffer_t *buf);
/* The persistent mapping, or NULL when the memory is not host-visible. */
void *wd_vk_buffer_map(const wd_vk_buffer_t *buf);

/* Copy between host memory and [offset, offset + n) of the buffer; staged
 * through a temporary buffer when the memory is not mapped. Synchronous. */
int wd_vk_buffer_write(wd_vk_buffer_t *buf, uint64_t offset, const void *src, uint64_t n);
int wd_vk_buffer_read(wd_vk_buffer_t *buf, uint64_t offset, void *dst, uint64_t n);

/* Makes the GPU's writes to [offset, offset + n) of a mapped buffer visible
 * to host reads through the mapping, after the fence of the submit that
 * wrote them (and the recording's device->host barrier): a no-op on
 * coherent memory, vkInvalidateMappedMemoryRanges otherwise. */
int wd_vk_buffer_invalidate(wd_vk_buffer_t *buf, uint64_t offset, uint64_t n);

#endif
