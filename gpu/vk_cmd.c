/*
 * vk_cmd.c - command buffers, fences and timestamp queries (see vk_cmd.h).
 */
#include "vk_cmd.h"

#include <stdlib.h>

#include "vk_buffer_internal.h"
#include "vk_fault.h"
#include "vk_internal.h"
#include "vk_pipeline_internal.h"

struct wd_vk_cmd {
  struct wd_vk_device *dev;
  VkCommandBuffer cb;
  VkFence fence;
  VkQueryPool queries;     /* VK_NULL_HANDLE: none asked for, or the queue has none */
  uint32_t n_timestamps;   /* slots asked for (recorded as no-ops without a pool) */
  int recording;           /* between begin and end */
  int pending;             /* submitted, fence not yet seen signalled */
  int err;                 /* first recording error, returned by end() */
  uint32_t n_dispatches;
  const struct wd_vk_pipeline *bound; /* last bound pipeline, to skip rebinds */
};

int wd_vk_cmd_new(wd_vk_device_t *d, uint32_t n_timestamps, wd_vk_cmd_t **ret_cmd) {
  int rc = 0;
  wd_vk_cmd_t *c = calloc(1, sizeof *c);
  if (!c)
    return WD_ENOMEM;
  *c = (wd_vk_cmd_t){ .dev = d, .cb = VK_NULL_HANDLE, .fence = VK_NULL_HANDLE,
                      .queries = VK_NULL_HANDLE };
  const VkCommandBufferAllocateInfo ai = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
    .commandPool = d->cmd_pool,
    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
    .commandBufferCount = 1,
  };
  WD_VK_TRY(vkAllocateCommandBuffers(d->dev, &ai, &c->cb));
  const VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
  WD_VK_TRY(vkCreateFence(d->dev, &fci, NULL, &c->fence));
  c->n_timestamps = n_timestamps;
  /* A queue with timestampValidBits = 0 cannot write timestamps: the slots
   * then exist for range checks only, and timing reports nothing. */
  if (n_timestamps && d->info.timestamp_valid_bits > 0 && d->info.timestamp_period_ns > 0.0f) {
    const VkQueryPoolCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
      .queryType = VK_QUERY_TYPE_TIMESTAMP,
      .queryCount = n_timestamps,
    };
    WD_VK_TRY(vkCreateQueryPool(d->dev, &qci, NULL, &c->queries));
  }
  *ret_cmd = c;
  return 0;
fail:
  wd_vk_cmd_free(c);
  return rc;
}

void wd_vk_cmd_free(wd_vk_cmd_t *c) {
  if (!c)
    return;
  VkDevice dev = c->dev->dev;
  /* Bounded: after a hang the device is destroyed next anyway. */
  if (c->pending)
    (void)vkWaitForFences(dev, 1, &c->fence, VK_TRUE, c->dev->timeout_ns);
  if (c->queries != VK_NULL_HANDLE)
    vkDestroyQueryPool(dev, c->queries, NULL);
  if (c->fence != VK_NULL_HANDLE)
    vkDestroyFence(dev, c->fence, NULL);
  if (c->cb != VK_NULL_HANDLE)
    vkFreeCommandBuffers(dev, c->dev->cmd_pool, 1, &c->cb);
  free(c);
}

int wd_vk_cmd_begin(wd_vk_cmd_t *c) {
  int rc = 0;
  if (c->pending || c->recording)
    return WD_EINVAL;
  WD_VK_TRY(vkResetCommandBuffer(c->cb, 0));
  const VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO };
  WD_VK_TRY(vkBeginCommandBuffer(c->cb, &bi));
  if (c->queries != VK_NULL_HANDLE)
    vkCmdResetQueryPool(c->cb, c->queries, 0, c->n_timestamps);
  c->recording = 1;
  c->err = 0;
  c->n_dispatches = 0;
  c->bound = NULL;
  return 0;
fail:
  return rc;
}

/* Keeps the first recording error; later calls become no-ops. */
static void wd_vk_cmd_fail(wd_vk_cmd_t *c, int err, const char *what) {
  if (!c->err) {
    wd_log_debug("wd_vk_cmd: recording failed: %s", what);
    c->err = err;
  }
}

void wd_vk_cmd_dispatch(wd_vk_cmd_t *c, const wd_vk_dset_t *set, const void *push,
                        uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz) {
  wd_vk_cmd_dispatch_pipe(c, set ? set->pipe : NULL, set, push, push_size, gx, gy, gz);
}

void wd_vk_cmd_dispatch_pipe(wd_vk_cmd_t *c, const wd_vk_pipeline_t *p, const wd_vk_dset_t *set,
                             const void *push, uint32_t push_size, uint32_t gx, uint32_t gy,
                             uint32_t gz) {
  if (c->err)
    return;
  if (!c->recording || !set || !p)
    return wd_vk_cmd_fail(c, WD_EINVAL, "dispatch outside begin/end or without a set");
  if (p->layout != set->pipe->layout)
    return wd_vk_cmd_fail(c, WD_EINVAL, "pipeline is not a variant of the set's pipeline");
  if (push_size != p->desc.push_size || (push_size && !push))
    return wd_vk_cmd_fail(c, WD_EINVAL, "push-constant size differs from the pipeline's");
  const uint32_t *max = c->dev->limits.maxComputeWorkGroupCount;
  if (gx == 0 || gy == 0 || gz == 0 || gx > max[0] || gy > max[1] || gz > max[2])
    return wd_vk_cmd_fail(c, WD_ERANGE, "workgroup count zero or above the device limit");
  if (c->bound != p) {
    vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    c->bound = p;
  }
  vkCmdBindDescriptorSets(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set->set, 0,
                          NULL);
  if (push_size)
    vkCmdPushConstants(c->cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
  vkCmdDispatch(c->cb, gx, gy, gz);
  c->n_dispatches++;
}

void wd_vk_cmd_barrier(wd_vk_cmd_t *c) {
  if (c->err || !c->recording)
    return;
  /* A global memory barrier is enough: all work is on one compute queue and
   * every hazard is shader-write -> shader-read/write (or a host write made
   * before the submit, which the submit itself makes visible). */
  const VkMemoryBarrier mb = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
  };
  vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

int wd_vk_cmd_copy(wd_vk_cmd_t *c, const wd_vk_arg_t *src, const wd_vk_arg_t *dst, uint64_t n) {
  if (c->err)
    return c->err;
  if (!src || !dst || !src->buf || !dst->buf) {
    wd_vk_cmd_fail(c, WD_ERANGE, "copy outside its buffers");
    return c->err;
  }
  const wd_vk_copy_region_t r = { .src = src->offset, .dst = dst->offset, .n = n };
  return wd_vk_cmd_copy_regions(c, src->buf, dst->buf, 1, &r);
}

int wd_vk_cmd_copy_regions(wd_vk_cmd_t *c, const wd_vk_buffer_t *src, const wd_vk_buffer_t *dst,
                           uint32_t n, const wd_vk_copy_region_t *regions) {
  enum { CHUNK = 64 };
  if (c->err)
    return c->err;
  int bad = !c->recording || !src || !dst || n == 0 || !regions;
  for (uint32_t i = 0; !bad && i < n; i++) {
    const wd_vk_copy_region_t *r = &regions[i];
    bad = r->n == 0 || r->src > src->size || r->n > src->size - r->src || r->dst > dst->size ||
          r->n > dst->size - r->dst;
  }
  if (bad) {
    wd_vk_cmd_fail(c, WD_ERANGE, "copy outside its buffers");
    return c->err;
  }
  /* Earlier shader writes to src (or reads of dst) finish before the copy. */
  const VkMemoryBarrier before = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
    .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
  };
  vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       0, 1, &before, 0, NULL, 0, NULL);
  /* Regions go over in batches from the stack: no allocation while recording. */
  for (uint32_t i0 = 0; i0 < n; i0 += CHUNK) {
    VkBufferCopy vr[CHUNK];
    const uint32_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
    for (uint32_t i = 0; i < m; i++)
      vr[i] = (VkBufferCopy){ .srcOffset = regions[i0 + i].src,
                              .dstOffset = regions[i0 + i].dst,
                              .size = regions[i0 + i].n };
    vkCmdCopyBuffer(c->cb, src->buf, dst->buf, m, vr);
  }
  /* The copied bytes are read (or overwritten) by the shaders that follow,
   * and the shaders that follow may overwrite what the copy read. */
  const VkMemoryBarrier after = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
  };
  vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       0, 1, &after, 0, NULL, 0, NULL);
  return 0;
}

void wd_vk_cmd_timestamp(wd_vk_cmd_t *c, uint32_t i) {
  if (c->err || !c->recording)
    return;
  if (i >= c->n_timestamps)
    return wd_vk_cmd_fail(c, WD_ERANGE, "timestamp slot out of range");
  if (c->queries == VK_NULL_HANDLE)
    return; /* the queue has no timestamps */
  vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, i);
}

int wd_vk_cmd_readback(wd_vk_cmd_t *c, const wd_vk_buffer_t *src, const wd_vk_buffer_t *dst,
                       uint32_t n, const wd_vk_copy_region_t *regions) {
  enum { CHUNK = 16 };
  if (c->err)
    return c->err;
  int bad = !c->recording || !src || !dst || n == 0 || !regions;
  for (uint32_t i = 0; !bad && i < n; i++) {
    const wd_vk_copy_region_t *r = &regions[i];
    bad = r->n == 0 || r->src > src->size || r->n > src->size - r->src || r->dst > dst->size ||
          r->n > dst->size - r->dst;
  }
  if (bad) {
    wd_vk_cmd_fail(c, WD_ERANGE, "readback outside its buffers");
    return c->err;
  }
  /* The results the shaders wrote are complete before the copy reads them,
   * and the host's last read of dst (before this submit) is long done. */
  const VkMemoryBarrier before = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
  };
  vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
  for (uint32_t i0 = 0; i0 < n; i0 += CHUNK) {
    VkBufferCopy vr[CHUNK];
    const uint32_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
    for (uint32_t i = 0; i < m; i++)
      vr[i] = (VkBufferCopy){ .srcOffset = regions[i0 + i].src,
                              .dstOffset = regions[i0 + i].dst,
                              .size = regions[i0 + i].n };
    vkCmdCopyBuffer(c->cb, src->buf, dst->buf, m, vr);
  }
  /* A later copy of the same recording may overwrite src only after this
   * one has read it; the host side is wd_vk_cmd_end's barrier. */
  const VkMemoryBarrier after = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
    .dstAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
  };
  vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                       1, &after, 0, NULL, 0, NULL);
  return 0;
}

int wd_vk_cmd_has_timestamps(const wd_vk_cmd_t *c) { return c->queries != VK_NULL_HANDLE; }

int wd_vk_cmd_end(wd_vk_cmd_t *c) {
  int rc = 0;
  if (!c->recording)
    return WD_EINVAL;
  c->recording = 0;
  /* Every recording ends with a device -> host barrier: whatever the
   * shaders and copies wrote is visible to host reads once the fence is
   * seen (a fence alone makes writes available, not visible, to the host). */
  if (!c->err) {
    const VkMemoryBarrier host = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    vkCmdPipelineBarrier(c->cb,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host, 0, NULL, 0, NULL);
  }
  /* End even after an error so the buffer leaves the recording state. */
  VkResult r = vkEndCommandBuffer(c->cb);
  if (c->err)
    return c->err;
  if (r != VK_SUCCESS)
    rc = wd__vk_err(r, "vkEndCommandBuffer", __func__);
  return rc;
}

int wd_vk_cmd_submit(wd_vk_cmd_t *c, uint64_t timeout_ns) {
  int rc = 0;
  if (c->recording)
    return WD_EINVAL;
  if (!c->pending) {
    if (wd__vk_fault_submit()) {
      wd_log_warning("wd_vk_cmd: fault injection: this submit fails as a lost device");
      return WD_EDEVLOST;
    }
    WD_VK_TRY(vkResetFences(c->dev->dev, 1, &c->fence));
    const VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &c->cb,
    };
    WD_VK_TRY(vkQueueSubmit(c->dev->queue, 1, &si, c->fence));
    c->pending = 1;
  }
  VkResult r = vkWaitForFences(c->dev->dev, 1, &c->fence, VK_TRUE, timeout_ns);
  if (r == VK_TIMEOUT)
    return WD_ETIMEDOUT;
  c->pending = 0;
  if (r != VK_SUCCESS)
    return wd__vk_err(r, "vkWaitForFences", __func__);
  return 0;
fail:
  return rc;
}

int wd_vk_cmd_elapsed_ns(wd_vk_cmd_t *c, uint32_t a, uint32_t b, double *ret_ns) {
  int rc = 0;
  if (a >= c->n_timestamps || b >= c->n_timestamps || c->pending)
    return WD_EINVAL;
  if (c->queries == VK_NULL_HANDLE)
    return WD_EUNSUP;
  uint64_t t[2];
  WD_VK_TRY(vkGetQueryPoolResults(c->dev->dev, c->queries, a, 1, sizeof t[0], &t[0],
                                  sizeof t[0], VK_QUERY_RESULT_64_BIT));
  WD_VK_TRY(vkGetQueryPoolResults(c->dev->dev, c->queries, b, 1, sizeof t[1], &t[1],
                                  sizeof t[1], VK_QUERY_RESULT_64_BIT));
  /* Only the low timestampValidBits bits count; the difference wraps there. */
  const uint32_t bits = c->dev->info.timestamp_valid_bits;
  const uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
  *ret_ns = (double)((t[1] - t[0]) & mask) * (double)c->dev->info.timestamp_period_ns;
  return 0;
fail:
  return rc;
}

uint32_t wd_vk_cmd_n_dispatches(const wd_vk_cmd_t *c) { return c->n_dispatches; }
