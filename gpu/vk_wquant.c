/*
 * vk_wquant.c - weight types on the device (see vk_wquant.h).
 */
#include "vk_wquant.h"

#include <string.h>

#include "error.h"
#include "quant.h"

wd_vk_wtype_t wd_vk_wtype_of(wd_dtype_t t) {
  switch (t) {
  case WD_DTYPE_F16: return WD_VK_W_F16;
  case WD_DTYPE_F32: return WD_VK_W_F32;
  case WD_DTYPE_Q4_0: return WD_VK_W_Q4_0;
  case WD_DTYPE_Q4_1: return WD_VK_W_Q4_1;
  case WD_DTYPE_Q5_0: return WD_VK_W_Q5_0;
  case WD_DTYPE_Q5_1: return WD_VK_W_Q5_1;
  case WD_DTYPE_Q8_0: return WD_VK_W_Q8_0;
  default: return WD_VK_W_DEFAULT;
  }
}

int wd_vk_wtype_is_quant(wd_vk_wtype_t w) { return w >= WD_VK_W_Q4_0 && w < WD_VK_W_COUNT; }

const char *wd_vk_wtype_suffix(wd_vk_wtype_t w) {
  switch (w) {
  case WD_VK_W_Q4_0: return "q4_0";
  case WD_VK_W_Q4_1: return "q4_1";
  case WD_VK_W_Q5_0: return "q5_0";
  case WD_VK_W_Q5_1: return "q5_1";
  case WD_VK_W_Q8_0: return "q8_0";
  default: return NULL;
  }
}

/* ggml block bytes and the two padding bytes the device block adds (after
 * the f16 scale) for types whose block is not word-aligned. */
static int wd_wq_block(wd_dtype_t t, size_t *ret_bytes, size_t *ret_pad) {
  switch (t) {
  case WD_DTYPE_Q4_0: *ret_bytes = 18; *ret_pad = 2; return 0;
  case WD_DTYPE_Q4_1: *ret_bytes = 20; *ret_pad = 0; return 0;
  case WD_DTYPE_Q5_0: *ret_bytes = 22; *ret_pad = 2; return 0;
  case WD_DTYPE_Q5_1: *ret_bytes = 24; *ret_pad = 0; return 0;
  case WD_DTYPE_Q8_0: *ret_bytes = 34; *ret_pad = 2; return 0;
  default: return WD_EINVAL;
  }
}

size_t wd_vk_wquant_bytes(wd_dtype_t t, int64_t n) {
  size_t bb, pad;
  if (wd_wq_block(t, &bb, &pad) < 0)
    return wd_dtype_row_bytes(t, n);
  if (n < 0 || n % WD_QK)
    return 0;
  return (size_t)(n / WD_QK) * (bb + pad);
}

int wd_vk_wquant_pack(wd_dtype_t t, const void *src, int64_t n, void *dst) {
  size_t bb, pad;
  if (wd_wq_block(t, &bb, &pad) < 0) {
    const size_t bytes = wd_dtype_row_bytes(t, n);
    if (bytes == 0 && n != 0)
      return WD_EINVAL;
    memcpy(dst, src, bytes);
    return 0;
  }
  if (n < 0 || n % WD_QK)
    return WD_EINVAL;
  const uint8_t *s = src;
  uint8_t *d = dst;
  for (int64_t b = 0; b < n / WD_QK; b++, s += bb, d += bb + pad) {
    if (pad == 0) {
      memcpy(d, s, bb);
      continue;
    }
    /* f16 scale, two zero bytes (the minimum's slot), then the rest. */
    memcpy(d, s, 2);
    d[2] = d[3] = 0;
    memcpy(d + 4, s + 2, bb - 2);
  }
  return 0;
}
