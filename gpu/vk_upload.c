/*
 * vk_upload.c - the staging ring (see vk_upload.h).
 *
 * Shapes: the ring is one WD_VK_MEM_STAGING buffer of 2 x seg bytes;
 * segment s is bytes [s * seg, (s + 1) * seg). A segment is idle (nothing
 * staged), filling (bytes staged, its command buffer recording) or in
 * flight (submitted, fence not yet seen). Filling copies accumulate as
 * regions for one destination buffer; a different destination, a full
 * region table or a full segment records them as one vkCmdCopyBuffer.
 */
#include "vk_upload.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "vk_cmd.h"

#define WD_UP_SEGS 2
#define WD_UP_REGIONS 256 /* regions recorded per vkCmdCopyBuffer at most */
#define WD_UP_ALIGN 16ull /* staging offsets: vkCmdCopyBuffer needs none; keeps memcpy aligned */

typedef struct {
  wd_vk_cmd_t *cmd;
  uint64_t used;        /* bytes staged in this segment */
  int recording;        /* filling: cmd is between begin and end */
  int in_flight;        /* submitted, not yet waited for */
} wd_up_seg_t;

struct wd_vk_upload {
  wd_vk_device_t *dev;
  wd_vk_buffer_t *ring;
  uint8_t *map;
  uint64_t seg;         /* bytes per segment */
  wd_up_seg_t s[WD_UP_SEGS];
  int cur;              /* the segment being filled */
  wd_vk_buffer_t *dst;  /* destination of the regions not yet recorded */
  wd_vk_copy_region_t regions[WD_UP_REGIONS];
  uint32_t n_regions;
  unsigned submits;
  int err;              /* first error; later calls return it */
};

int wd_vk_upload_new(wd_vk_device_t *dev, uint64_t ring_bytes, wd_vk_upload_t **ret) {
  *ret = NULL;
  if (ring_bytes == 0)
    ring_bytes = WD_VK_UPLOAD_RING;
  if (ring_bytes < WD_UP_SEGS * 4096ull)
    return WD_EINVAL;
  wd_vk_upload_t *u = calloc(1, sizeof *u);
  if (!u)
    return WD_ENOMEM;
  u->dev = dev;
  u->seg = ring_bytes / WD_UP_SEGS / WD_UP_ALIGN * WD_UP_ALIGN;
  int rc = wd_vk_buffer_new(dev, u->seg * WD_UP_SEGS, 0, WD_VK_MEM_STAGING, &u->ring);
  if (rc == 0 && !(u->map = wd_vk_buffer_map(u->ring)))
    rc = WD_EINTERNAL; /* staging memory is host-visible by construction */
  for (int i = 0; i < WD_UP_SEGS && rc == 0; i++)
    rc = wd_vk_cmd_new(dev, 0, &u->s[i].cmd);
  if (rc < 0) {
    wd_vk_upload_free(u);
    return rc;
  }
  *ret = u;
  return 0;
}

/* Records the pending regions of the current segment as one copy. */
static int flush_regions(wd_vk_upload_t *u) {
  if (u->n_regions == 0)
    return 0;
  const int rc = wd_vk_cmd_copy_regions(u->s[u->cur].cmd, u->ring, u->dst, u->n_regions,
                                        u->regions);
  u->n_regions = 0;
  return rc;
}

/* Waits for segment i's copies, leaving it idle. */
static int wait_seg(wd_vk_upload_t *u, int i) {
  wd_up_seg_t *s = &u->s[i];
  if (!s->in_flight)
    return 0;
  /* Not pending any more: submit() waits for the fence it already holds. */
  int rc = wd_vk_cmd_submit(s->cmd, wd_vk_device_timeout_ns(u->dev));
  if (rc == WD_ETIMEDOUT) {
    wd_log_error("vk_upload: a staging copy did not finish in %.1f s: device taken for lost",
                 (double)wd_vk_device_timeout_ns(u->dev) * 1e-9);
    rc = WD_EDEVLOST;
  }
  if (rc < 0)
    return rc;
  s->in_flight = 0;
  s->used = 0;
  return 0;
}

/* Submits the current segment (without waiting) and moves to the next,
 * waiting for the copies that were last staged there. */
static int submit_seg(wd_vk_upload_t *u) {
  wd_up_seg_t *s = &u->s[u->cur];
  int rc = flush_regions(u);
  if (!s->recording)
    return rc;
  s->recording = 0;
  const int rc2 = wd_vk_cmd_end(s->cmd);
  if (rc == 0)
    rc = rc2;
  if (rc == 0) {
    /* Timeout 0: submit and return. WD_ETIMEDOUT means "in flight" (waited
     * for before the segment is filled again); 0 means already done. */
    rc = wd_vk_cmd_submit(s->cmd, 0);
    if (rc == 0 || rc == WD_ETIMEDOUT) {
      u->submits++;
      s->in_flight = rc == WD_ETIMEDOUT;
      if (rc == 0)
        s->used = 0;
      rc = 0;
    }
  }
  u->cur = (u->cur + 1) % WD_UP_SEGS;
  if (rc == 0)
    rc = wait_seg(u, u->cur);
  return rc;
}

int wd_vk_upload_write(wd_vk_upload_t *u, wd_vk_buffer_t *dst, uint64_t offset, const void *src,
                       uint64_t n) {
  if (u->err)
    return u->err;
  if (!dst || (n > 0 && !src) || offset > wd_vk_buffer_size(dst) ||
      n > wd_vk_buffer_size(dst) - offset)
    return WD_ERANGE;
  /* Host-mapped memory: no staging. */
  if (wd_vk_buffer_map(dst))
    return u->err = wd_vk_buffer_write(dst, offset, src, n);
  const uint8_t *p = src;
  int rc = 0;
  while (n > 0 && rc == 0) {
    wd_up_seg_t *s = &u->s[u->cur];
    if (s->used + WD_UP_ALIGN > u->seg) { /* no room left: on to the next segment */
      rc = submit_seg(u);
      continue;
    }
    if (!s->recording) {
      if ((rc = wd_vk_cmd_begin(s->cmd)) < 0)
        break;
      s->recording = 1;
    }
    if (u->dst != dst || u->n_regions == WD_UP_REGIONS) {
      if ((rc = flush_regions(u)) < 0)
        break;
      u->dst = dst;
    }
    const uint64_t m = n < u->seg - s->used ? n : u->seg - s->used;
    const uint64_t at = (uint64_t)u->cur * u->seg + s->used;
    memcpy(u->map + at, p, m);
    u->regions[u->n_regions++] = (wd_vk_copy_region_t){ .src = at, .dst = offset, .n = m };
    s->used = (s->used + m + WD_UP_ALIGN - 1) / WD_UP_ALIGN * WD_UP_ALIGN;
    p += m;
    offset += m;
    n -= m;
  }
  if (rc < 0)
    u->err = rc;
  return rc;
}

int wd_vk_upload_finish(wd_vk_upload_t *u) {
  if (u->err)
    return u->err;
  int rc = u->s[u->cur].recording ? submit_seg(u) : 0;
  for (int i = 0; i < WD_UP_SEGS && rc == 0; i++)
    rc = wait_seg(u, i);
  if (rc < 0)
    u->err = rc;
  return rc;
}

void wd_vk_upload_free(wd_vk_upload_t *u) {
  if (!u)
    return;
  for (int i = 0; i < WD_UP_SEGS; i++) {
    if (u->s[i].recording)
      (void)wd_vk_cmd_end(u->s[i].cmd);
    wd_vk_cmd_free(u->s[i].cmd); /* waits for a pending submit, bounded */
  }
  wd_vk_buffer_free(u->ring);
  free(u);
}

unsigned wd_vk_upload_submits(const wd_vk_upload_t *u) { return u->submits; }
