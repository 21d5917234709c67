/*
 * gpu_util.h - shared helpers of the kernel tests in tests/gpu: the one
 * device of a test binary, buffers with sentinel guard regions, f16
 * rounding, a fixed-seed generator and the tolerance checks.
 *
 * Every helper is static: each test binary includes this once. Data lies in
 * [guard | n elements | guard]; the guards hold a NaN bit pattern that no
 * kernel produces, and tg_guards_ok() checks they are bit-for-bit untouched.
 */
#ifndef WD_TESTS_GPU_UTIL_H
#define WD_TESTS_GPU_UTIL_H

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "vk_buffer.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "wd_test.h"

#define TG_GUARD 64u                 /* elements each side: 256 B for f32 */
#define TG_SENTINEL 0x7fa5a5a5u      /* a NaN no kernel writes */
#define TG_SENTINEL16 0x7e5au        /* f16 NaN for the weight guards */

static wd_vk_device_t *tg_dev_;
static int tg_dev_rc_ = 1;

/* The binary's device: NULL and *rc = WD_ENODEVICE when there is none. */
static inline wd_vk_device_t *tg_dev(int *rc) {
  if (tg_dev_rc_ == 1) {
    /* Keep lavapipe mapped after the loader unloads it, so that LeakSanitizer
     * can name the module of the driver's own exit-time leaks and
     * tests/lsan.supp can suppress them (an unloaded module shows up as
     * "<unknown module>"). A no-op where the file does not exist. */
    (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
    const wd_vk_device_opts_t opts = { .index = -1 };
    tg_dev_rc_ = wd_vk_device_new(&opts, &tg_dev_);
  }
  *rc = tg_dev_rc_;
  return tg_dev_rc_ == 0 ? tg_dev_ : NULL;
}

/* Use at the top of a test: skips without a device, fails on other errors. */
#define TG_DEVICE(d)                                                             \
  int d##_rc_;                                                                   \
  wd_vk_device_t *d = tg_dev(&d##_rc_);                                          \
  if (d##_rc_ == WD_ENODEVICE)                                                   \
    wd_test_skip("no Vulkan device");                                            \
  WD_CHECK_EQ_INT(d##_rc_, 0);                                                   \
  if (!d)                                                                        \
    return

static inline void tg_dev_free(void) {
  wd_vk_device_free(tg_dev_);
  tg_dev_ = NULL;
  tg_dev_rc_ = 1;
}

/* Fixed-seed xorshift64*: uniform in [-1, 1). */
static uint64_t tg_seed_ = 0x9e3779b97f4a7c15ull;
static inline void tg_srand(uint64_t s) { tg_seed_ = s ? s : 1; }
static inline float tg_rand(void) {
  tg_seed_ ^= tg_seed_ >> 12;
  tg_seed_ ^= tg_seed_ << 25;
  tg_seed_ ^= tg_seed_ >> 27;
  const uint64_t r = tg_seed_ * 2685821657736338717ull;
  return (float)((double)(r >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}
static inline void tg_fill(float *x, size_t n, float scale) {
  for (size_t i = 0; i < n; i++)
    x[i] = scale * tg_rand();
}

/* IEEE half <-> float, round to nearest even. */
static inline uint16_t tg_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  const int exp = (int)((x >> 23) & 0xffu);
  if (exp == 255)
    return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = exp - 127 + 15;
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10)
      return (uint16_t)sign;
    const uint32_t m = mant | 0x800000u;
    const uint32_t shift = (uint32_t)(14 - e);
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u)))
      h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    h++;
  return (uint16_t)(sign | h);
}
static inline float tg_h2f(uint16_t h) {
  const uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = ldexpf((float)m, -24);
    return s ? -v : v;
  }
  const uint32_t x = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));
  float f;
  memcpy(&f, &x, 4);
  return f;
}
/* Rounds x to f16 values in place (the reference then uses what the GPU sees). */
static inline void tg_round_f16(float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] = tg_h2f(tg_f2h(x[i]));
}

/* A guarded buffer of n f32 (or f16) elements, usable as storage and texels. */
typedef struct {
  wd_vk_buffer_t *buf;
  size_t n;
  int f16;
} tg_buf_t;

static inline size_t tg_esize(const tg_buf_t *b) { return b->f16 ? 2 : 4; }
/* Elements allocated for n: guards, slack, rounded so that the whole buffer
 * is a valid f32 or f16 texel range. */
static inline size_t tg_total(size_t n) { return (n + 2 * TG_GUARD + 8 + 7) / 8 * 8; }

/* Creates the buffer: data from init (NULL: sentinels), guards sentinels. */
static inline int tg_buf_new(wd_vk_device_t *dev, size_t n, const float *init, int f16, tg_buf_t *ret) {
  *ret = (tg_buf_t){ .buf = NULL, .n = n, .f16 = f16 };
  const size_t total = tg_total(n);
  const size_t es = f16 ? 2 : 4;
  unsigned char *host = malloc(total * es);
  if (!host)
    return WD_ENOMEM;
  for (size_t i = 0; i < total; i++) {
    const int data = init && i >= TG_GUARD && i < TG_GUARD + n;
    if (f16) {
      const uint16_t v = data ? tg_f2h(init[i - TG_GUARD]) : (uint16_t)TG_SENTINEL16;
      memcpy(host + 2 * i, &v, 2);
    } else {
      uint32_t v = TG_SENTINEL;
      if (data)
        memcpy(&v, &init[i - TG_GUARD], 4);
      memcpy(host + 4 * i, &v, 4);
    }
  }
  int rc = wd_vk_buffer_new(dev, total * es, WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL, WD_VK_MEM_DEVICE,
                            &ret->buf);
  if (rc == 0)
    rc = wd_vk_buffer_write(ret->buf, 0, host, total * es);
  free(host);
  return rc;
}
static inline void tg_buf_free(tg_buf_t *b) {
  wd_vk_buffer_free(b->buf);
  b->buf = NULL;
}
/* The whole buffer (element offsets TG_GUARD go in the push constants). */
static inline wd_vk_arg_t tg_all(const tg_buf_t *b) { return (wd_vk_arg_t){ .buf = b->buf }; }
/* Just the data (rounded up to 16 bytes for texel views). */
static inline wd_vk_arg_t tg_data(const tg_buf_t *b) {
  const uint64_t bytes = ((b->n * tg_esize(b) + 15) / 16) * 16;
  return (wd_vk_arg_t){ .buf = b->buf, .offset = TG_GUARD * tg_esize(b), .range = bytes };
}
/* Reads the n data elements (f32 buffers). */
static inline int tg_buf_read(const tg_buf_t *b, float *out) {
  return wd_vk_buffer_read(b->buf, TG_GUARD * 4, out, b->n * 4);
}
/* 1 when both guards are bit-for-bit untouched. */
static inline int tg_guards_ok(const tg_buf_t *b) {
  const size_t total = tg_total(b->n);
  uint32_t *h = malloc(total * 4);
  if (!h || wd_vk_buffer_read(b->buf, 0, h, total * 4) < 0) {
    free(h);
    return 0;
  }
  int ok = 1;
  for (size_t i = 0; i < TG_GUARD && ok; i++)
    ok = h[i] == TG_SENTINEL;
  for (size_t i = TG_GUARD + b->n; i < total && ok; i++)
    ok = h[i] == TG_SENTINEL;
  if (!ok)
    fprintf(stderr, "guard region overwritten\n");
  free(h);
  return ok;
}

/* got vs ref: max |got - ref| <= tol_abs and NMSE (sum sq err / sum sq ref)
 * <= tol_nmse. NaN or Inf in got never passes. Prints the figures. */
static inline int tg_compare(const char *what, const float *got, const double *ref, size_t n,
                      double tol_abs, double tol_nmse) {
  double max_err = 0.0, se = 0.0, sr = 0.0;
  size_t worst = 0;
  int finite = 1;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(got[i]) && isfinite(ref[i]))
      finite = 0;
    const double e = fabs((double)got[i] - ref[i]);
    if (!(e <= max_err)) {
      max_err = e;
      worst = i;
    }
    se += e * e;
    sr += ref[i] * ref[i];
  }
  const double nmse = sr > 0.0 ? se / sr : se;
  const int ok = finite && max_err <= tol_abs && nmse <= tol_nmse;
  fprintf(stderr, "  %-40s n=%-8zu max_err=%.3g nmse=%.3g%s\n", what, n, max_err, nmse,
          ok ? "" : "  <-- FAIL");
  if (!ok && n)
    fprintf(stderr, "    worst at %zu: got %.9g ref %.9g\n", worst, (double)got[worst], ref[worst]);
  return ok;
}

/* Exact (erf) GELU as torch.nn.GELU(). */
static inline double tg_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

#endif
