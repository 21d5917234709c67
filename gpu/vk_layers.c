/*
 * vk_layers.c - per-layer caches split over aligned buffers (vk_layers.h).
 */
#include "vk_layers.h"

#include <stdlib.h>

#include "error.h"

struct wd_vk_layers {
  wd_vk_layout_t lay;
  wd_vk_buffer_t **bufs; /* lay.n_bufs */
};

int wd_vk_layers_new(wd_vk_device_t *dev, const wd_vk_layout_t *lay, wd_vk_layers_t **ret) {
  if (!lay->n_bufs || !lay->per_buf || !lay->layer_bytes)
    return WD_EINVAL;
  wd_vk_layers_t *ly = calloc(1, sizeof *ly);
  if (!ly)
    return WD_ENOMEM;
  ly->lay = *lay;
  ly->bufs = calloc(lay->n_bufs, sizeof *ly->bufs);
  int rc = ly->bufs ? 0 : WD_ENOMEM;
  for (uint32_t i = 0; i < lay->n_bufs && !rc; i++) {
    const uint64_t size = i + 1 == lay->n_bufs ? lay->last_bytes : lay->buf_bytes;
    rc = wd_vk_buffer_new(dev, size, WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL, WD_VK_MEM_DEVICE,
                          &ly->bufs[i]);
  }
  if (rc < 0) {
    wd_vk_layers_free(ly);
    return rc;
  }
  *ret = ly;
  return 0;
}

void wd_vk_layers_free(wd_vk_layers_t *ly) {
  if (!ly)
    return;
  for (uint32_t i = 0; ly->bufs && i < ly->lay.n_bufs; i++)
    wd_vk_buffer_free(ly->bufs[i]);
  free(ly->bufs);
  free(ly);
}

wd_vk_arg_t wd_vk_layers_arg(const wd_vk_layers_t *ly, uint32_t l, uint64_t off, uint64_t n) {
  const wd_vk_layout_t *y = &ly->lay;
  if (l >= y->n_layers || off >= y->layer_bytes || n > y->layer_bytes - off)
    return (wd_vk_arg_t){ 0 }; /* a NULL buffer: the bind refuses it */
  if (n == 0)
    n = y->layer_bytes - off;
  return (wd_vk_arg_t){ .buf = ly->bufs[l / y->per_buf],
                        .offset = (uint64_t)(l % y->per_buf) * y->stride + off,
                        .range = n };
}

wd_vk_arg_t wd_vk_layers_head(const wd_vk_layers_t *ly, uint64_t n) {
  return (wd_vk_arg_t){ .buf = ly->bufs[0], .offset = 0, .range = n };
}

uint64_t wd_vk_layers_bytes(const wd_vk_layers_t *ly) { return ly->lay.total; }
