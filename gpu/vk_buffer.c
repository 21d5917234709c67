/*
 * vk_buffer.c - buffers, memory, and host transfers (see vk_buffer.h).
 */
#include "vk_buffer.h"

#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"
#include "vk_buffer_internal.h"

/* Staging copies move at most this many bytes per submit. */
#define WD_VK_STAGING_CHUNK (64ull << 20)

int wd_vk_buffer_new(wd_vk_device_t *d, uint64_t size, unsigned usage, wd_vk_mem_t mem,
                     wd_vk_buffer_t **ret_buf) {
  int rc = 0;
  if (size == 0)
    return WD_EINVAL;
  wd_vk_buffer_t *b = calloc(1, sizeof *b);
  if (!b)
    return WD_ENOMEM;
  *b = (wd_vk_buffer_t){ .dev = d, .buf = VK_NULL_HANDLE, .mem = VK_NULL_HANDLE, .size = size };

  VkBufferUsageFlags vu = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (usage & WD_VK_BUF_STORAGE)
    vu |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  if (usage & WD_VK_BUF_TEXEL)
    vu |= VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
  if (usage & WD_VK_BUF_UNIFORM)
    vu |= VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT;
  const VkBufferCreateInfo bci = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
    .size = size,
    .usage = vu,
    .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  WD_VK_TRY(vkCreateBuffer(d->dev, &bci, NULL, &b->buf));

  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
  /* Each kind's preferred memory properties, then what it settles for.
   * HOST prefers memory that is also device-local (BAR / unified): the GPU
   * reads it every step. READBACK prefers system memory the CPU caches: the
   * GPU writes it once per step over PCIe, the host then scans it several
   * times (filters, sampling); BAR memory is read uncached. */
  enum { HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT };
  static const VkMemoryPropertyFlags want[3][2] = {
    [WD_VK_MEM_DEVICE] = { VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0 },
    [WD_VK_MEM_HOST] = { HV | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, HV },
    [WD_VK_MEM_READBACK] = { HV | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, HV },
  };
  if ((unsigned)mem > WD_VK_MEM_READBACK) {
    rc = WD_EINVAL;
    goto fail;
  }
  int type = wd__vk_memory_type(d, req.memoryTypeBits, want[mem][0]);
  if (type < 0)
    type = wd__vk_memory_type(d, req.memoryTypeBits, want[mem][1]);
  if (type < 0) {
    wd_log_debug("%s: no memory type for %llu bytes (bits 0x%x)", __func__,
                 (unsigned long long)size, req.memoryTypeBits);
    rc = WD_ENOMEM;
    goto fail;
  }
  const VkMemoryAllocateInfo mai = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
    .allocationSize = req.size,
    .memoryTypeIndex = (uint32_t)type,
  };
  WD_VK_TRY(vkAllocateMemory(d->dev, &mai, NULL, &b->mem));
  WD_VK_TRY(vkBindBufferMemory(d->dev, b->buf, b->mem, 0));

  /* Map whenever the memory allows: coherent host-visible memory needs no
   * flushes, so writes through the mapping are seen by the next submit. */
  const VkMemoryPropertyFlags pf = d->mem_props.memoryTypes[type].propertyFlags;
  if ((pf & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (pf & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
    WD_VK_TRY(vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map));
  *ret_buf = b;
  return 0;
fail:
  wd_vk_buffer_free(b);
  return rc;
}

void wd_vk_buffer_free(wd_vk_buffer_t *b) {
  if (!b)
    return;
  VkDevice dev = b->dev->dev;
  if (b->map)
    vkUnmapMemory(dev, b->mem);
  if (b->buf != VK_NULL_HANDLE)
    vkDestroyBuffer(dev, b->buf, NULL);
  if (b->mem != VK_NULL_HANDLE)
    vkFreeMemory(dev, b->mem, NULL);
  free(b);
}

uint64_t wd_vk_buffer_size(const wd_vk_buffer_t *b) { return b->size; }

void *wd_vk_buffer_map(const wd_vk_buffer_t *b) { return b->map; }

/* Copies n bytes between two buffers with a one-shot command buffer and waits. */
static int wd_vk_copy_sync(wd_vk_device_t *d, VkBuffer src, uint64_t src_off, VkBuffer dst,
                           uint64_t dst_off, uint64_t n) {
  int rc = 0;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  const VkCommandBufferAllocateInfo cbai = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
    .commandPool = d->cmd_pool,
    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
    .commandBufferCount = 1,
  };
  WD_VK_TRY(vkAllocateCommandBuffers(d->dev, &cbai, &cb));
  const VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
  WD_VK_TRY(vkCreateFence(d->dev, &fci, NULL, &fence));
  const VkCommandBufferBeginInfo bi = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
  };
  WD_VK_TRY(vkBeginCommandBuffer(cb, &bi));
  const VkBufferCopy region = { .srcOffset = src_off, .dstOffset = dst_off, .size = n };
  vkCmdCopyBuffer(cb, src, dst, 1, &region);
  WD_VK_TRY(vkEndCommandBuffer(cb));
  const VkSubmitInfo si = {
    .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
    .commandBufferCount = 1,
    .pCommandBuffers = &cb,
  };
  WD_VK_TRY(vkQueueSubmit(d->queue, 1, &si, fence));
  WD_VK_TRY(vkWaitForFences(d->dev, 1, &fence, VK_TRUE, UINT64_MAX));
fail:
  if (fence != VK_NULL_HANDLE)
    vkDestroyFence(d->dev, fence, NULL);
  if (cb != VK_NULL_HANDLE)
    vkFreeCommandBuffers(d->dev, d->cmd_pool, 1, &cb);
  return rc;
}

/* Host <-> buffer transfer; to_device selects the direction. */
static int wd_vk_transfer(wd_vk_buffer_t *b, uint64_t offset, void *host, uint64_t n,
                          int to_device) {
  if (offset > b->size || n > b->size - offset)
    return WD_ERANGE;
  if (n == 0)
    return 0;
  if (b->map) {
    if (to_device)
      memcpy((char *)b->map + offset, host, n);
    else
      memcpy(host, (const char *)b->map + offset, n);
    return 0;
  }
  const uint64_t chunk = n < WD_VK_STAGING_CHUNK ? n : WD_VK_STAGING_CHUNK;
  wd_vk_buffer_t *st = NULL;
  int rc = wd_vk_buffer_new(b->dev, chunk, 0, WD_VK_MEM_HOST, &st);
  if (rc < 0)
    return rc;
  for (uint64_t done = 0; done < n && rc == 0; done += chunk) {
    const uint64_t m = n - done < chunk ? n - done : chunk;
    if (to_device) {
      memcpy(st->map, (const char *)host + done, m);
      rc = wd_vk_copy_sync(b->dev, st->buf, 0, b->buf, offset + done, m);
    } else {
      rc = wd_vk_copy_sync(b->dev, b->buf, offset + done, st->buf, 0, m);
      if (rc == 0)
        memcpy((char *)host + done, st->map, m);
    }
  }
  wd_vk_buffer_free(st);
  return rc;
}

int wd_vk_buffer_write(wd_vk_buffer_t *b, uint64_t offset, const void *src, uint64_t n) {
  /* The cast drops const for the shared helper, which only reads src here. */
  return wd_vk_transfer(b, offset, (void *)(uintptr_t)src, n, 1);
}

int wd_vk_buffer_read(wd_vk_buffer_t *b, uint64_t offset, void *dst, uint64_t n) {
  return wd_vk_transfer(b, offset, dst, n, 0);
}
