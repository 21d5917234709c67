/*
 * vk_upload.h - many host -> device copies through one staging ring.
 *
 * Loading a model copies about a thousand tensors (large-v3: ~1,000, 3 GiB)
 * into device memory. One staging buffer, command buffer and fence wait per
 * tensor costs a round trip each; here the bytes are packed into a ring of
 * two host-visible segments (WD_VK_UPLOAD_RING bytes together), each
 * segment's copies are recorded into its own command buffer (consecutive
 * copies to one buffer as one vkCmdCopyBuffer of many regions) and
 * submitted once when the segment is full, and the host fills the other
 * segment while the GPU copies out of this one. A write larger than a
 * segment is split. A destination that is host-mapped (lavapipe, integrated
 * GPUs, resizable BAR) is written directly instead: no staging, no submit.
 *
 * The copies are complete, and visible to every later submit's shaders,
 * when wd_vk_upload_finish() returns 0. Fence waits use the device's
 * timeout; a timeout is WD_EDEVLOST. Source bytes are copied into the ring
 * before wd_vk_upload_write() returns: the caller may reuse them.
 *
 * Threading: one thread uses an uploader.
 */
#ifndef WD_VK_UPLOAD_H
#define WD_VK_UPLOAD_H

#include <stdint.h>

#include "vk_buffer.h"
#include "vk_device.h"

#define WD_VK_UPLOAD_RING (32ull << 20)

typedef struct wd_vk_upload wd_vk_upload_t;

/* ring_bytes: both segments together (0 = WD_VK_UPLOAD_RING). */
int wd_vk_upload_new(wd_vk_device_t *dev, uint64_t ring_bytes, wd_vk_upload_t **ret);
/* Queues n bytes of src for [offset, offset + n) of dst. */
int wd_vk_upload_write(wd_vk_upload_t *u, wd_vk_buffer_t *dst, uint64_t offset, const void *src,
                       uint64_t n);
/* Submits what is staged and waits for every copy; returns the first error
 * of any write or submit. */
int wd_vk_upload_finish(wd_vk_upload_t *u);
/* Waits (bounded) for pending copies and frees. Accepts NULL. */
void wd_vk_upload_free(wd_vk_upload_t *u);

/* Submits made so far (for the load-time log line). */
unsigned wd_vk_upload_submits(const wd_vk_upload_t *u);

#endif
