/*
 * vk_weights.h - the model's tensors on the device, uploaded once at load.
 *
 * Every tensor of a wd_model_t is copied into device memory, packed into a
 * few large buffers (chunks of at most 1 GiB, below every driver's
 * allocation limit), each tensor at a 256-byte aligned offset so it can be
 * bound directly as a storage range or an f16/f32/u32 texel view (quantized
 * tensors are repacked into word-aligned blocks, vk_wquant.h). Kernels find a
 * tensor by its ggml name. Immutable after upload; owned by the engine.
 */
#ifndef WD_VK_WEIGHTS_H
#define WD_VK_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "vk_device.h"
#include "vk_pipeline.h"

typedef struct wd_vk_weights wd_vk_weights_t;

/* Uploads all tensors. On failure err names the tensor that did not fit. */
int wd_vk_weights_upload(wd_vk_device_t *dev, const wd_model_t *m, wd_vk_weights_t **ret_w,
                         char *err, size_t err_len);
void wd_vk_weights_free(wd_vk_weights_t *w); /* accepts NULL */

/* The device range holding tensor `name` (offset/range in bytes), with its
 * element type in ret_arg->wtype: the kernels (gemm, gemv, embed) choose the
 * variant that reads it from that. Quantized tensors are in the repacked
 * layout of vk_wquant.h, so range is their device size, not t->nbytes. */
int wd_vk_weights_arg(const wd_vk_weights_t *w, const char *name, wd_vk_arg_t *ret_arg);

/* Bytes of device memory used, for the load-time log line. */
uint64_t wd_vk_weights_bytes(const wd_vk_weights_t *w);

#endif
