/*
 * vk_layers.h - a per-layer cache on the device, laid out by a
 * wd_vk_layout_t (vk_plan.h): n_layers equal blocks, each at an aligned
 * offset of one of a few buffers, so that every binding covers one layer
 * and no allocation exceeds the device's limit.
 *
 * Threading: the GPU worker's thread only. Owned by the engine.
 */
#ifndef WD_VK_LAYERS_H
#define WD_VK_LAYERS_H

#include "vk_buffer.h"
#include "vk_pipeline.h"
#include "vk_plan.h"

typedef struct wd_vk_layers wd_vk_layers_t;

/* Allocates lay->n_bufs device-local buffers (storage + texel). */
int wd_vk_layers_new(wd_vk_device_t *dev, const wd_vk_layout_t *lay, wd_vk_layers_t **ret);
void wd_vk_layers_free(wd_vk_layers_t *ly); /* accepts NULL */

/* Bytes [off, off + n) of layer l (n = 0: to the end of the layer). */
wd_vk_arg_t wd_vk_layers_arg(const wd_vk_layers_t *ly, uint32_t l, uint64_t off, uint64_t n);

/* Bytes [0, n) of the first buffer, across layer boundaries (seq_copy's
 * scratch; the plan sized buffer 0 for it). */
wd_vk_arg_t wd_vk_layers_head(const wd_vk_layers_t *ly, uint64_t n);

/* Bytes allocated. */
uint64_t wd_vk_layers_bytes(const wd_vk_layers_t *ly);

#endif
