/*
 * vk_limits.h - the device limits the engine plans against, and a way to
 * pretend a device is smaller than it is.
 *
 * Planning (gpu/vk_plan.c) needs six numbers: how many bytes one storage
 * binding and how many texels one texel view may span, the offset
 * alignment of each kind of binding, the largest single allocation and the
 * size of the device-local heap. lavapipe reports generous values for some
 * of them, NVIDIA and Intel tight ones (2^27 texels, 128 MiB of storage
 * range, 64-byte texel offsets on some parts), so an engine that plans only
 * on lavapipe can fail on real GPUs.
 *
 * An override makes the device look smaller (it never makes one larger): a
 * non-zero field lowers the matching size limit, or raises the matching
 * alignment, before anything is planned or bound. It is for tests (and for
 * "would this plan on an NVIDIA card?" questions); the engine takes it as
 * wd_vk_engine_opts_t.limits, which the daemon parses from --vk-limits
 * (WHISPERD_VK_LIMITS in the environment, as every option):
 *
 *   --vk-limits texels=134217728,storage=128M,texel_align=64,
 *               storage_align=64,alloc=1G,heap=8G,sets=256
 *   --vk-limits nvidia               (2^27 texels, 128 MiB storage range,
 *                                     64-byte alignments, 1 GiB allocations)
 *
 * Sizes take a K, M or G suffix (powers of 1024). Unknown keys are an error.
 */
#ifndef WD_VK_LIMITS_H
#define WD_VK_LIMITS_H

#include <stdint.h>

typedef struct {
  uint64_t max_storage_range; /* bytes one storage-buffer binding may span */
  uint64_t max_texel_elements; /* texels one texel-buffer view may span */
  uint64_t texel_align;       /* minTexelBufferOffsetAlignment, bytes */
  uint64_t storage_align;     /* minStorageBufferOffsetAlignment, bytes */
  uint64_t max_alloc;         /* maxMemoryAllocationSize, bytes */
  uint64_t heap_bytes;        /* the largest device-local heap, bytes */
  uint64_t desc_sets;         /* descriptor sets per pool (0: the engine's 16384); a
                                 model that needs more gets more pools, chained */
} wd_vk_limits_t;

/* Parses an override string (see above) into *ret (fields not named stay
 * 0). WD_EINVAL on a syntax error or unknown key. */
int wd_vk_limits_parse(const char *s, wd_vk_limits_t *ret);

/* Applies override o to lim: sizes become min(lim, o), alignments max(lim,
 * o), for every non-zero field of o. Either may be NULL (no-op). */
void wd_vk_limits_lower(wd_vk_limits_t *lim, const wd_vk_limits_t *o);

#endif
