/*
 * f16.h - IEEE 754 binary16 <-> binary32 conversion on the host.
 *
 * Weights live on the device as f16; the host converts when it uploads f32
 * data, builds test inputs, or reads f16 tensors for a reference. Round to
 * nearest even, with subnormals, infinities and NaN preserved.
 */
#ifndef WD_F16_H
#define WD_F16_H

#include <stdint.h>
#include <string.h>

static inline float wd_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13); /* inf / NaN */
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign; /* signed zero */
  } else {
    /* Subnormal: shift the mantissa up until its leading 1 is implicit. */
    uint32_t e = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      e--;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t wd_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf or NaN (keep NaN quiet and non-zero) */
    return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
    return (uint16_t)(sign | 0x7c00u);
  if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
    if (ax < 0x33000000u) /* below half the smallest subnormal */
      return sign;
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e; /* 14..24 */
    uint32_t hm = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (hm & 1u)))
      hm++;
    return (uint16_t)(sign | hm);
  }
  /* Normal: rebias the exponent and round the 13 dropped mantissa bits. */
  uint32_t h = ((ax >> 13) - (112u << 10));
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    h++;
  return (uint16_t)(sign | h);
}

#endif
