/*
 * vk_limits.c - parsing and applying a limits override (see vk_limits.h).
 */
#include "vk_limits.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* NVIDIA/Intel-like values: the texel count both report, the storage range
 * Vulkan guarantees (and Intel reports), the texel alignment of some Intel
 * and older NVIDIA parts, the 1 GiB allocation Vulkan guarantees. */
static const wd_vk_limits_t wd_vk_limits_nvidia = {
  .max_storage_range = 1ull << 27,
  .max_texel_elements = 1ull << 27,
  .texel_align = 64,
  .storage_align = 64,
  .max_alloc = 1ull << 30,
};

/* "123", "128M", "2G": 0 and the value, or WD_EINVAL. */
static int parse_size(const char *s, size_t n, uint64_t *ret) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    if (v > (UINT64_MAX - 9) / 10)
      return WD_EINVAL;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (i == 0)
    return WD_EINVAL;
  unsigned shift = 0;
  if (i + 1 == n) {
    switch (s[i]) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    default: return WD_EINVAL;
    }
  } else if (i != n) {
    return WD_EINVAL;
  }
  if (shift && v > (UINT64_MAX >> shift))
    return WD_EINVAL;
  *ret = v << shift;
  return 0;
}

int wd_vk_limits_parse(const char *s, wd_vk_limits_t *ret) {
  static const struct {
    const char *key;
    size_t off;
  } keys[] = {
    { "storage", offsetof(wd_vk_limits_t, max_storage_range) },
    { "texels", offsetof(wd_vk_limits_t, max_texel_elements) },
    { "texel_align", offsetof(wd_vk_limits_t, texel_align) },
    { "storage_align", offsetof(wd_vk_limits_t, storage_align) },
    { "alloc", offsetof(wd_vk_limits_t, max_alloc) },
    { "heap", offsetof(wd_vk_limits_t, heap_bytes) },
    { "sets", offsetof(wd_vk_limits_t, desc_sets) },
  };
  wd_vk_limits_t l = { 0 };
  if (!s)
    return WD_EINVAL;
  while (*s) {
    const char *end = strchr(s, ',');
    const size_t n = end ? (size_t)(end - s) : strlen(s);
    const char *eq = memchr(s, '=', n);
    if (n == 6 && strncmp(s, "nvidia", 6) == 0) {
      wd_vk_limits_lower(&l, &wd_vk_limits_nvidia);
    } else {
      if (!eq)
        return WD_EINVAL;
      const size_t kn = (size_t)(eq - s);
      size_t k = 0;
      while (k < sizeof keys / sizeof keys[0] &&
             !(strlen(keys[k].key) == kn && strncmp(keys[k].key, s, kn) == 0))
        k++;
      uint64_t v = 0;
      if (k == sizeof keys / sizeof keys[0] || parse_size(eq + 1, n - kn - 1, &v) < 0 || v == 0)
        return WD_EINVAL;
      /* Vulkan's alignments are powers of two; planning rounds up to them. */
      const int is_align = strstr(keys[k].key, "align") != NULL;
      if (is_align && ((v & (v - 1)) != 0 || v > 256)) /* 256: Vulkan's largest */
        return WD_EINVAL;
      memcpy((char *)&l + keys[k].off, &v, sizeof v);
    }
    s += n;
    if (*s == ',')
      s++;
  }
  *ret = l;
  return 0;
}

static void lower(uint64_t *v, uint64_t o) {
  if (o && (*v == 0 || o < *v))
    *v = o;
}

static void raise(uint64_t *v, uint64_t o) {
  if (o > *v)
    *v = o;
}

void wd_vk_limits_lower(wd_vk_limits_t *lim, const wd_vk_limits_t *o) {
  if (!lim || !o)
    return;
  lower(&lim->max_storage_range, o->max_storage_range);
  lower(&lim->max_texel_elements, o->max_texel_elements);
  raise(&lim->texel_align, o->texel_align);
  raise(&lim->storage_align, o->storage_align);
  lower(&lim->max_alloc, o->max_alloc);
  lower(&lim->heap_bytes, o->heap_bytes);
  lower(&lim->desc_sets, o->desc_sets);
}
