/*
 * test_quant.c - the host block quantizers and dequantizers (core/quant.c):
 * hand-packed blocks decode to the values ggml's layout defines, every type
 * round-trips within half a quantization step, and ggml's reference rounding
 * rules (the signed absmax scale, the 8.5 / 16.5 offsets, the clamp) hold.
 */
#include <math.h>
#include <string.h>

#include "f16.h"
#include "quant.h"
#include "wd_test.h"

static const wd_dtype_t QT[] = { WD_DTYPE_Q4_0, WD_DTYPE_Q4_1, WD_DTYPE_Q5_0, WD_DTYPE_Q5_1,
                                 WD_DTYPE_Q8_0 };

WD_TEST(block_sizes_and_names) {
  WD_CHECK_EQ_INT((int)wd_dtype_row_bytes(WD_DTYPE_Q4_0, 64), 36);
  WD_CHECK_EQ_INT((int)wd_dtype_row_bytes(WD_DTYPE_Q5_1, 32), 24);
  WD_CHECK_EQ_INT((int)wd_dtype_row_bytes(WD_DTYPE_Q8_0, 96), 102);
  wd_dtype_t t;
  WD_CHECK_EQ_INT(wd_dtype_parse("q5_0", &t), 0);
  WD_CHECK_EQ_INT((int)t, WD_DTYPE_Q5_0);
  WD_CHECK(wd_dtype_parse("q4_k", &t) < 0);
  WD_CHECK(wd_dtype_is_quant(WD_DTYPE_Q8_0) && !wd_dtype_is_quant(WD_DTYPE_F16));
}

WD_TEST(hand_packed_blocks) {
  uint8_t b[34] = { 0 };
  float y[32];
  const uint16_t half = wd_f32_to_f16(0.5f), one = wd_f32_to_f16(1.0f);
  /* q8_0: d = 0.5, q = j - 16 */
  memcpy(b, &half, 2);
  for (int j = 0; j < 32; j++)
    b[2 + j] = (uint8_t)(int8_t)(j - 16);
  WD_CHECK_EQ_INT(wd_dequantize_row(WD_DTYPE_Q8_0, b, y, 32), 0);
  WD_CHECK_NEAR(y[0], -8.0, 0);
  WD_CHECK_NEAR(y[31], 7.5, 0);
  /* q4_0: d = 0.5, qs[j] = low 3, high 12 -> y[j] = -2.5, y[j+16] = 2.0 */
  memset(b, 0, sizeof b);
  memcpy(b, &half, 2);
  memset(b + 2, 3 | (12 << 4), 16);
  WD_CHECK_EQ_INT(wd_dequantize_row(WD_DTYPE_Q4_0, b, y, 32), 0);
  WD_CHECK_NEAR(y[5], -2.5, 0);
  WD_CHECK_NEAR(y[21], 2.0, 0);
  /* q5_1: d = 1, m = 0.5, qh bit 1 and bit 17 set -> y[1] = 16 + q + 0.5 */
  memset(b, 0, sizeof b);
  memcpy(b, &one, 2);
  memcpy(b + 2, &half, 2);
  b[4] = 0x02;
  b[6] = 0x02;
  b[8 + 1] = 0x21; /* low nibble 1, high nibble 2 */
  WD_CHECK_EQ_INT(wd_dequantize_row(WD_DTYPE_Q5_1, b, y, 32), 0);
  WD_CHECK_NEAR(y[1], 17.5, 0);
  WD_CHECK_NEAR(y[17], 18.5, 0);
  WD_CHECK_NEAR(y[0], 0.5, 0);
}

WD_TEST(round_trip_within_half_a_step) {
  float x[128], y[128];
  uint8_t q[4 * 128];
  for (int i = 0; i < 128; i++)
    x[i] = sinf(0.37f * (float)i) * (1.0f + (float)(i % 7));
  for (size_t k = 0; k < sizeof QT / sizeof QT[0]; k++) {
    const wd_dtype_t t = QT[k];
    WD_CHECK_EQ_INT(wd_quantize_row(t, x, q, 128), 0);
    WD_CHECK_EQ_INT(wd_dequantize_row(t, q, y, 128), 0);
    const float levels = t == WD_DTYPE_Q8_0 ? 254.0f : (t == WD_DTYPE_Q5_0 || t == WD_DTYPE_Q5_1) ? 31.0f : 15.0f;
    for (int b = 0; b < 4; b++) {
      float mn = x[b * 32], mx = x[b * 32];
      for (int j = 0; j < 32; j++) {
        mn = fminf(mn, x[b * 32 + j]);
        mx = fmaxf(mx, x[b * 32 + j]);
      }
      /* the _0 types span [-amax, amax]; one step, plus f16 scale rounding */
      const float span = (t == WD_DTYPE_Q4_1 || t == WD_DTYPE_Q5_1) ? mx - mn
                                                                      : 2.0f * fmaxf(-mn, mx);
      const float step = span / levels;
      for (int j = 0; j < 32; j++)
        WD_CHECK(fabsf(x[b * 32 + j] - y[b * 32 + j]) <= step * 1.01f);
    }
  }
}

WD_TEST(reference_rounding) {
  /* q4_0: the signed value of largest magnitude maps to -8 exactly. */
  float x[32] = { 0 }, y[32];
  uint8_t q[34];
  x[3] = -4.0f;
  x[4] = 1.0f;
  WD_CHECK_EQ_INT(wd_quantize_row(WD_DTYPE_Q4_0, x, q, 32), 0);
  WD_CHECK_EQ_INT(q[2 + 3] & 0x0f, 0); /* -4 / d with d = 0.5 -> -8, stored 0 */
  WD_CHECK_EQ_INT(wd_dequantize_row(WD_DTYPE_Q4_0, q, y, 32), 0);
  WD_CHECK_NEAR(y[3], -4.0, 0);
  WD_CHECK_NEAR(y[4], 1.0, 0);
  /* an all-zero block has scale 0 and decodes to zeros */
  memset(x, 0, sizeof x);
  for (size_t k = 0; k < sizeof QT / sizeof QT[0]; k++) {
    WD_CHECK_EQ_INT(wd_quantize_row(QT[k], x, q, 32), 0);
    WD_CHECK_EQ_INT(wd_dequantize_row(QT[k], q, y, 32), 0);
    WD_CHECK_NEAR(y[0], 0.0, 0);
    WD_CHECK_NEAR(y[31], 0.0, 0);
  }
  /* q8_0: amax 127 gives d = 1 and exact integers */
  for (int j = 0; j < 32; j++)
    x[j] = (float)(j * 4 - 64);
  x[0] = 127.0f;
  WD_CHECK_EQ_INT(wd_quantize_row(WD_DTYPE_Q8_0, x, q, 32), 0);
  WD_CHECK_EQ_INT(wd_dequantize_row(WD_DTYPE_Q8_0, q, y, 32), 0);
  for (int j = 0; j < 32; j++)
    WD_CHECK_NEAR(y[j], x[j], 0);
  WD_CHECK(wd_quantize_row(WD_DTYPE_Q8_0, x, q, 31) < 0);
}

int main(void) { return wd_test_main(); }
