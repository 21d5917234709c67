/*
 * quant.c - block quantization on the host (see quant.h).
 *
 * ref: ggml/src/ggml-quants.c quantize_row_q{4_0,4_1,5_0,5_1,8_0}_ref and
 * dequantize_row_*: the same arithmetic, written for whisperd. The casts to
 * int8_t before MIN() are ggml's and matter for byte-identical output.
 */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "error.h"
#include "f16.h"

int wd_dtype_is_quant(wd_dtype_t type) {
  switch (type) {
  case WD_DTYPE_Q4_0: case WD_DTYPE_Q4_1: case WD_DTYPE_Q5_0: case WD_DTYPE_Q5_1:
  case WD_DTYPE_Q8_0:
    return 1;
  default:
    return 0;
  }
}

int wd_dtype_parse(const char *name, wd_dtype_t *ret) {
  static const wd_dtype_t all[] = { WD_DTYPE_F32,  WD_DTYPE_F16,  WD_DTYPE_Q4_0, WD_DTYPE_Q4_1,
                                    WD_DTYPE_Q5_0, WD_DTYPE_Q5_1, WD_DTYPE_Q8_0 };
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(name, wd_dtype_name(all[i])) == 0) {
      *ret = all[i];
      return 0;
    }
  return WD_EINVAL;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static void wr16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* One 32-element block of each type. */
static void deq_block(wd_dtype_t t, const uint8_t *b, float *y) {
  const float d = wd_f16_to_f32(rd16(b));
  switch (t) {
  case WD_DTYPE_Q8_0:
    for (int j = 0; j < WD_QK; j++)
      y[j] = (float)(int8_t)b[2 + j] * d;
    return;
  case WD_DTYPE_Q4_0:
    for (int j = 0; j < WD_QK / 2; j++) {
      y[j] = (float)((b[2 + j] & 0x0f) - 8) * d;
      y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
    return;
  case WD_DTYPE_Q4_1: {
    const float m = wd_f16_to_f32(rd16(b + 2));
    for (int j = 0; j < WD_QK / 2; j++) {
      y[j] = (float)(b[4 + j] & 0x0f) * d + m;
      y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
    return;
  }
  case WD_DTYPE_Q5_0: {
    const uint32_t qh = rd32(b + 2);
    for (int j = 0; j < WD_QK / 2; j++) {
      const int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
      y[j] = (float)(((b[6 + j] & 0x0f) | h0) - 16) * d;
      y[j + 16] = (float)(((b[6 + j] >> 4) | h1) - 16) * d;
    }
    return;
  }
  case WD_DTYPE_Q5_1: {
    const float m = wd_f16_to_f32(rd16(b + 2));
    const uint32_t qh = rd32(b + 4);
    for (int j = 0; j < WD_QK / 2; j++) {
      const int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
      y[j] = (float)((b[8 + j] & 0x0f) | h0) * d + m;
      y[j + 16] = (float)((b[8 + j] >> 4) | h1) * d + m;
    }
    return;
  }
  default:
    return;
  }
}

/* Signed value of largest magnitude (q4_0, q5_0) or min and max (_1 types). */
static float absmax_signed(const float *x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < WD_QK; j++)
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  return max;
}
static void min_max(const float *x, float *ret_min, float *ret_max) {
  float mn = FLT_MAX, mx = -FLT_MAX;
  for (int j = 0; j < WD_QK; j++) {
    if (x[j] < mn)
      mn = x[j];
    if (x[j] > mx)
      mx = x[j];
  }
  *ret_min = mn;
  *ret_max = mx;
}
static int imin(int a, int b) { return a < b ? a : b; }

static void q_block(wd_dtype_t t, const float *x, uint8_t *b) {
  switch (t) {
  case WD_DTYPE_Q8_0: {
    float amax = 0.0f;
    for (int j = 0; j < WD_QK; j++)
      amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    wr16(b, wd_f32_to_f16(d));
    for (int j = 0; j < WD_QK; j++)
      b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    return;
  }
  case WD_DTYPE_Q4_0: {
    const float d = absmax_signed(x) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    wr16(b, wd_f32_to_f16(d));
    for (int j = 0; j < WD_QK / 2; j++) {
      const int q0 = imin(15, (int8_t)(x[j] * id + 8.5f));
      const int q1 = imin(15, (int8_t)(x[j + 16] * id + 8.5f));
      b[2 + j] = (uint8_t)(q0 | (q1 << 4));
    }
    return;
  }
  case WD_DTYPE_Q4_1: {
    float mn, mx;
    min_max(x, &mn, &mx);
    const float d = (mx - mn) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    wr16(b, wd_f32_to_f16(d));
    wr16(b + 2, wd_f32_to_f16(mn));
    for (int j = 0; j < WD_QK / 2; j++) {
      const int q0 = imin(15, (int8_t)((x[j] - mn) * id + 0.5f));
      const int q1 = imin(15, (int8_t)((x[j + 16] - mn) * id + 0.5f));
      b[4 + j] = (uint8_t)(q0 | (q1 << 4));
    }
    return;
  }
  case WD_DTYPE_Q5_0: {
    const float d = absmax_signed(x) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    wr16(b, wd_f32_to_f16(d));
    uint32_t qh = 0;
    for (int j = 0; j < WD_QK / 2; j++) {
      const int q0 = imin(31, (int8_t)(x[j] * id + 16.5f));
      const int q1 = imin(31, (int8_t)(x[j + 16] * id + 16.5f));
      b[6 + j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= ((uint32_t)(q0 & 0x10) >> 4) << j;
      qh |= ((uint32_t)(q1 & 0x10) >> 4) << (j + 16);
    }
    wr32(b + 2, qh);
    return;
  }
  case WD_DTYPE_Q5_1: {
    float mn, mx;
    min_max(x, &mn, &mx);
    const float d = (mx - mn) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    wr16(b, wd_f32_to_f16(d));
    wr16(b + 2, wd_f32_to_f16(mn));
    uint32_t qh = 0;
    for (int j = 0; j < WD_QK / 2; j++) {
      const int q0 = (uint8_t)((x[j] - mn) * id + 0.5f);
      const int q1 = (uint8_t)((x[j + 16] - mn) * id + 0.5f);
      b[8 + j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= ((uint32_t)(q0 & 0x10) >> 4) << j;
      qh |= ((uint32_t)(q1 & 0x10) >> 4) << (j + 16);
    }
    wr32(b + 4, qh);
    return;
  }
  default:
    return;
  }
}

int wd_dequantize_row(wd_dtype_t t, const void *src, float *dst, int64_t n) {
  const uint8_t *s = src;
  if (n < 0)
    return WD_EINVAL;
  if (t == WD_DTYPE_F32) {
    memcpy(dst, s, (size_t)n * sizeof(float));
    return 0;
  }
  if (t == WD_DTYPE_F16) {
    for (int64_t i = 0; i < n; i++)
      dst[i] = wd_f16_to_f32(rd16(s + 2 * i));
    return 0;
  }
  const size_t bb = wd_dtype_row_bytes(t, WD_QK);
  if (!wd_dtype_is_quant(t) || n % WD_QK != 0)
    return WD_EINVAL;
  for (int64_t i = 0; i < n / WD_QK; i++)
    deq_block(t, s + (size_t)i * bb, dst + i * WD_QK);
  return 0;
}

int wd_quantize_row(wd_dtype_t t, const float *src, void *dst, int64_t n) {
  uint8_t *d = dst;
  if (n < 0)
    return WD_EINVAL;
  if (t == WD_DTYPE_F32) {
    memcpy(d, src, (size_t)n * sizeof(float));
    return 0;
  }
  if (t == WD_DTYPE_F16) {
    for (int64_t i = 0; i < n; i++)
      wr16(d + 2 * i, wd_f32_to_f16(src[i]));
    return 0;
  }
  const size_t bb = wd_dtype_row_bytes(t, WD_QK);
  if (!wd_dtype_is_quant(t) || n % WD_QK != 0)
    return WD_EINVAL;
  for (int64_t i = 0; i < n / WD_QK; i++)
    q_block(t, src + i * WD_QK, d + (size_t)i * bb);
  return 0;
}
