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
   * times (filters, sampling); BAR memory is read uncached.
  * READBACK takes cached memory even when it is not coherent (the reader
   * invalidates), coherent cached memory first. */
  enum {
    HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
    HC = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
  };
  static const VkMemoryPropertyFlags want[4][3] = {
    [WD_VK_MEM_DEVICE] = { VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, 0 },
    [WD_VK_MEM_HOST] = { HV | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, HV, HV },
    [WD_VK_MEM_READBACK] = { HV | HC, HC, HV },
    [WD_VK_MEM_STAGING] = { HV, HV, HV },
  };
  if ((unsigned)mem > WD_VK_MEM_STAGING) {
    rc = WD_EINVAL;
    goto fail;
  }
  int type = -1;
  /* STAGING: coherent host memory that is not device-local, when there is. */
  for (uint32_t i = 0; mem == WD_VK_MEM_STAGING && type < 0 && i < d->mem_props.memoryTypeCount;
       i++) {
    const VkMemoryPropertyFlags f = d->mem_props.memoryTypes[i].propertyFlags;
    if ((req.memoryTypeBits & (1u << i)) && (f & HV) == HV &&
        !(f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
      type = (int)i;
  }
  for (int k = 0; k < 3 && type < 0; k++)
    type = wd__vk_memory_type(d, req.memoryTypeBits, want[mem][k]);
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
  b->alloc_size = req.size;

  /* Map whenever the memory allows. Non-coherent memory (only READBACK
   * takes it) is flushed after host writes and invalidated before host
   * reads. force_staging leaves device-local memory unmapped, so the staged
   * paths a discrete GPU takes run here too. */
  const VkMemoryPropertyFlags pf = d->mem_props.memoryTypes[type].propertyFlags;
  b->coherent = (pf & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  if ((pf & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && !(mem == WD_VK_MEM_DEVICE && d->force_staging))
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
  /* Earlier submits' shader writes (the source of a read-back) are done
   * and visible to the copy; the copy's writes are visible to the host
   * once the fence is seen (a staged read), and to later submits. */
  const VkMemoryBarrier before = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
  };
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                       1, &before, 0, NULL, 0, NULL);
  const VkBufferCopy region = { .srcOffset = src_off, .dstOffset = dst_off, .size = n };
  vkCmdCopyBuffer(cb, src, dst, 1, &region);
  const VkMemoryBarrier after = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
  };
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &after, 0, NULL, 0, NULL);
  WD_VK_TRY(vkEndCommandBuffer(cb));
  const VkSubmitInfo si = {
    .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
    .commandBufferCount = 1,
    .pCommandBuffers = &cb,
  };
  WD_VK_TRY(vkQueueSubmit(d->queue, 1, &si, fence));
  /* A timeout is a hung GPU: the caller rebuilds the device, so the copy is
   * reported as lost rather than waited for forever. */
  VkResult wr = vkWaitForFences(d->dev, 1, &fence, VK_TRUE, d->timeout_ns);
  if (wr == VK_TIMEOUT) {
    wd_log_warning("%s: copy of %llu bytes not done after %.1f s: device taken for lost",
                   __func__, (unsigned long long)n, (double)d->timeout_ns * 1e-9);
    return WD_EDEVLOST; /* fence and command buffer may still be in use: leaked */
  }
  WD_VK_TRY(wr);
fail:
  if (fence != VK_NULL_HANDLE)
    vkDestroyFence(d->dev, fence, NULL);
  if (cb != VK_NULL_HANDLE)
    vkFreeCommandBuffers(d->dev, d->cmd_pool, 1, &cb);
  return rc;
}

/* Flushes (after host writes) or invalidates (before host reads) a range
 * of non-coherent mapped memory, widened to nonCoherentAtomSize. */
static int wd_vk_buffer_sync(wd_vk_buffer_t *b, uint64_t offset, uint64_t n, int flush) {
  int rc = 0;
  if (b->coherent || !b->map || n == 0)
    return 0;
  const uint64_t atom = b->dev->limits.nonCoherentAtomSize ? b->dev->limits.nonCoherentAtomSize
                                                            : 1;
  const uint64_t lo = offset / atom * atom;
  uint64_t hi = (offset + n + atom - 1) / atom * atom;
  const VkMappedMemoryRange r = {
    .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
    .memory = b->mem,
    .offset = lo,
    .size = hi >= b->alloc_size ? VK_WHOLE_SIZE : hi - lo,
  };
  if (flush)
    WD_VK_TRY(vkFlushMappedMemoryRanges(b->dev->dev, 1, &r));
  else
    WD_VK_TRY(vkInvalidateMappedMemoryRanges(b->dev->dev, 1, &r));
  return 0;
fail:
  return rc;
}

int wd_vk_buffer_invalidate(wd_vk_buffer_t *b, uint64_t offset, uint64_t n) {
  if (offset > b->size || n > b->size - offset)
    return WD_ERANGE;
  return wd_vk_buffer_sync(b, offset, n, 0);
}

/* Host <-> buffer transfer; to_device selects the direction. */
static int wd_vk_transfer(wd_vk_buffer_t *b, uint64_t offset, void *host, uint64_t n,
                          int to_device) {
  if (offset > b->size || n > b->size - offset)
    return WD_ERANGE;
  if (n == 0)
    return 0;
  if (b->map) {
    int rc = 0;
    if (to_device) {
      memcpy((char *)b->map + offset, host, n);
      rc = wd_vk_buffer_sync(b, offset, n, 1);
    } else if ((rc = wd_vk_buffer_sync(b, offset, n, 0)) == 0) {
      memcpy(host, (const char *)b->map + offset, n);
    }
    return rc;
  }
  const uint64_t chunk = n < WD_VK_STAGING_CHUNK ? n : WD_VK_STAGING_CHUNK;
  wd_vk_buffer_t *st = NULL;
  int rc = wd_vk_buffer_new(b->dev, chunk, 0, WD_VK_MEM_STAGING, &st);
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
