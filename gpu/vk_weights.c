/*
 * vk_weights.c - packing and uploading the model's tensors (see vk_weights.h).
 *
 * Layout: tensors are placed in model order; a new chunk starts when the
 * next tensor would cross the chunk size. The model's host memory is only
 * read during the upload. f32 and f16 tensors are copied as they are;
 * quantized ones are repacked on the way (vk_wquant.h: word-aligned blocks),
 * one tensor at a time through a host buffer of its device size.
 */
#include "vk_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "vk_buffer.h"
#include "vk_upload.h"
#include "vk_wquant.h"

#define WD_W_ALIGN 256ull
#define WD_W_CHUNK (1ull << 30)
#define WD_W_MAX_CHUNKS 16

typedef struct {
  const wd_tensor_t *t;
  int chunk;
  uint64_t offset;
  uint64_t bytes; /* on the device: the repacked size for quantized types */
} wd_w_slot_t;

struct wd_vk_weights {
  wd_vk_buffer_t *chunks[WD_W_MAX_CHUNKS];
  int n_chunks;
  wd_w_slot_t *slots; /* one per model tensor, in model order */
  size_t n_slots;
  uint64_t bytes;
};

void wd_vk_weights_free(wd_vk_weights_t *w) {
  if (!w)
    return;
  for (int i = 0; i < w->n_chunks; i++)
    wd_vk_buffer_free(w->chunks[i]);
  free(w->slots);
  free(w);
}

int wd_vk_weights_upload(wd_vk_device_t *dev, const wd_model_t *m, wd_vk_weights_t **ret_w,
                         char *err, size_t err_len) {
  int rc = 0;
  wd_vk_weights_t *w = calloc(1, sizeof *w);
  if (!w)
    return WD_ENOMEM;
  w->n_slots = wd_model_n_tensors(m);
  w->slots = calloc(w->n_slots ? w->n_slots : 1, sizeof *w->slots);
  if (!w->slots) {
    rc = WD_ENOMEM;
    goto fail;
  }
  /* Plan: offsets within chunks, and each chunk's size. */
  uint64_t chunk_size[WD_W_MAX_CHUNKS] = { 0 };
  int chunk = 0;
  for (size_t i = 0; i < w->n_slots; i++) {
    const wd_tensor_t *t = wd_model_tensor_at(m, i);
    const uint64_t dev_bytes = wd_vk_wquant_bytes(t->type, wd_tensor_n_elements(t));
    if (dev_bytes == 0) {
      snprintf(err, err_len, "tensor '%s': type %s cannot be uploaded", t->name,
               wd_dtype_name(t->type));
      rc = WD_EUNSUP;
      goto fail;
    }
    const uint64_t nb = (dev_bytes + WD_W_ALIGN - 1) & ~(WD_W_ALIGN - 1);
    if (nb > WD_W_CHUNK) {
      snprintf(err, err_len, "tensor '%s': %llu bytes exceed the %llu-byte upload chunk",
               t->name, (unsigned long long)dev_bytes, (unsigned long long)WD_W_CHUNK);
      rc = WD_ENOMEM;
      goto fail;
    }
    if (chunk_size[chunk] + nb > WD_W_CHUNK && ++chunk == WD_W_MAX_CHUNKS) {
      snprintf(err, err_len, "model needs more than %d GiB of weights", WD_W_MAX_CHUNKS);
      rc = WD_ENOMEM;
      goto fail;
    }
    w->slots[i] = (wd_w_slot_t){ .t = t, .chunk = chunk, .offset = chunk_size[chunk],
                                 .bytes = dev_bytes };
    chunk_size[chunk] += nb;
  }
  w->n_chunks = w->n_slots ? chunk + 1 : 0;
  for (int c = 0; c < w->n_chunks; c++) {
    rc = wd_vk_buffer_new(dev, chunk_size[c], WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL,
                          WD_VK_MEM_DEVICE, &w->chunks[c]);
    if (rc < 0) {
      snprintf(err, err_len, "cannot allocate %llu bytes of device memory for weights: %s",
               (unsigned long long)chunk_size[c], wd_strerror(rc));
      goto fail;
    }
    w->bytes += chunk_size[c];
  }
  /* Every tensor through one staging ring: a submit per ring segment, not
   * per tensor (vk_upload.h). */
  wd_vk_upload_t *up = NULL;
  if ((rc = wd_vk_upload_new(dev, 0, &up)) < 0) {
    snprintf(err, err_len, "cannot create the upload staging ring: %s", wd_strerror(rc));
    goto fail;
  }
  /* Quantized blocks are repacked word-aligned (vk_wquant.h) on the way;
   * the ring copies the bytes before upload_write returns. */
  for (size_t i = 0; i < w->n_slots && rc == 0; i++) {
    const wd_w_slot_t *s = &w->slots[i];
    void *packed = NULL;
    const void *src = s->t->data;
    if (wd_vk_wtype_is_quant(wd_vk_wtype_of(s->t->type))) {
      packed = malloc(s->bytes);
      if (!packed) {
        rc = WD_ENOMEM;
        snprintf(err, err_len, "tensor '%s': no host memory to repack it", s->t->name);
        break;
      }
      rc = wd_vk_wquant_pack(s->t->type, s->t->data, wd_tensor_n_elements(s->t), packed);
      src = packed;
    }
    if (rc == 0)
      rc = wd_vk_upload_write(up, w->chunks[s->chunk], s->offset, src, s->bytes);
    free(packed);
    /* The ring holds its own copy now; the mapping's pages can go (a
     * rebuild after a device loss faults them back in). */
    if (rc == 0)
      (void)wd_model_release(m, s->t);
    if (rc < 0)
      snprintf(err, err_len, "tensor '%s': upload failed: %s", s->t->name, wd_strerror(rc));
  }
  if (rc == 0 && (rc = wd_vk_upload_finish(up)) < 0)
    snprintf(err, err_len, "weight upload failed: %s", wd_strerror(rc));
  wd_vk_upload_free(up);
  if (rc < 0)
    goto fail;
  *ret_w = w;
  return 0;
fail:
  wd_vk_weights_free(w);
  return rc;
}

int wd_vk_weights_arg(const wd_vk_weights_t *w, const char *name, wd_vk_arg_t *ret_arg) {
  for (size_t i = 0; i < w->n_slots; i++)
    if (strcmp(w->slots[i].t->name, name) == 0) {
      *ret_arg = (wd_vk_arg_t){
        .buf = w->chunks[w->slots[i].chunk],
        .offset = w->slots[i].offset,
        .range = w->slots[i].bytes,
        .wtype = wd_vk_wtype_of(w->slots[i].t->type),
      };
      /* Quantized weights may be read as 16-byte texels (gemv.comp): the
       * view covers whole ones, the slot's 256-byte alignment has room. */
      if (wd_vk_wtype_is_quant(ret_arg->wtype))
        ret_arg->range = (ret_arg->range + 15) & ~15ull;
      return 0;
    }
  return WD_ENOENT;
}

uint64_t wd_vk_weights_bytes(const wd_vk_weights_t *w) { return w->bytes; }
