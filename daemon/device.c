/*
 * device.c - --device auto|all|vulkan|cpu|N[,...] to engines (see device.h).
 */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "error.h"
#include "vk_device.h"

/* A GPU: ranked above the CPU class (wd_vk_class_rank puts lavapipe at 1
 * and unknown kinds at 0). */
static bool is_gpu(const wd_vk_device_info_t *d) {
  return d->usable && wd_vk_class_rank(d->device_class) > 1;
}

static void choose_vk(wd_device_choice_t *out, const wd_vk_device_info_t *d, const char *how) {
  out->cpu = false;
  out->vk_index = (int)d->index;
  snprintf(out->label, sizeof out->label, "vulkan:%d", out->vk_index);
  snprintf(out->why, sizeof out->why, "device %s: Vulkan device %d, %.160s (%s GPU)", how,
           out->vk_index, d->name, wd_vk_class_name(d->device_class));
}

static void choose_cpu(wd_device_choice_t *out, const char *how, int list_rc, uint32_t n_listed) {
  out->cpu = true;
  out->vk_index = -1;
  snprintf(out->label, sizeof out->label, "cpu");
  snprintf(out->why, sizeof out->why,
           "device %s: %s, so the native CPU engine (--device vulkan runs lavapipe instead)", how,
           list_rc < 0 ? "no Vulkan loader or driver"
           : n_listed  ? "Vulkan lists no GPU, only CPU drivers"
                       : "Vulkan lists no device");
}

/* auto: the best-ranked usable device that is a GPU. */
static void wd_device_auto(wd_device_choice_t *out) {
  wd_vk_device_info_t *infos = NULL;
  uint32_t n = 0;
  const int rc = wd_vk_device_list(NULL, &infos, &n);
  int best = -1, best_rank = 1;
  for (uint32_t i = 0; rc == 0 && i < n; i++) {
    const int rank = wd_vk_class_rank(infos[i].device_class);
    if (is_gpu(&infos[i]) && rank > best_rank) {
      best = (int)i;
      best_rank = rank;
    }
  }
  if (best >= 0)
    choose_vk(out, &infos[best], "auto");
  else
    choose_cpu(out, "auto", rc, n);
  free(infos);
}

/* all: every GPU in Vulkan's order, or the CPU engine alone; returns the
 * number of choices written (<= max). */
static int wd_device_all(wd_device_choice_t *out, int max) {
  wd_vk_device_info_t *infos = NULL;
  uint32_t n = 0;
  const int rc = wd_vk_device_list(NULL, &infos, &n);
  int k = 0;
  for (uint32_t i = 0; rc == 0 && i < n && k < max; i++)
    if (is_gpu(&infos[i]))
      choose_vk(&out[k++], &infos[i], "all");
  if (k == 0)
    choose_cpu(&out[k++], "all", rc, n);
  free(infos);
  return k;
}

void wd_device_choose(int device, wd_device_choice_t *out) {
  *out = (wd_device_choice_t){ .cpu = false, .vk_index = -1 };
  switch (device) {
  case WD_DEVICE_AUTO:
    wd_device_auto(out);
    break;
  case WD_DEVICE_ALL:
    wd_device_all(out, 1);
    break;
  case WD_DEVICE_CPU:
    out->cpu = true;
    snprintf(out->label, sizeof out->label, "cpu");
    snprintf(out->why, sizeof out->why, "device cpu: the native CPU engine");
    break;
  case WD_DEVICE_VULKAN:
    snprintf(out->label, sizeof out->label, "vulkan");
    snprintf(out->why, sizeof out->why, "device vulkan: the best Vulkan device");
    break;
  default:
    out->vk_index = device;
    snprintf(out->label, sizeof out->label, "vulkan:%d", device);
    snprintf(out->why, sizeof out->why, "device %d: Vulkan device %d", device, device);
    break;
  }
}

int wd_device_choose_list(const int *devices, int n, wd_device_choice_t *out, int max,
                          char *summary, size_t summary_len) {
  int k = 0;
  for (int i = 0; i < n && k < max; i++) {
    if (devices[i] == WD_DEVICE_ALL)
      k += wd_device_all(&out[k], max - k);
    else
      wd_device_choose(devices[i], &out[k++]);
  }
  /* "2 engines: cpu, vulkan:0" */
  size_t len = 0;
  int w = snprintf(summary, summary_len, "devices: %d engine%s:", k, k == 1 ? "" : "s");
  for (int i = 0; i < k && w > 0 && (len += (size_t)w) < summary_len; i++)
    w = snprintf(summary + len, summary_len - len, "%s %s", i ? "," : "", out[i].label);
  return k;
}

int wd_device_vk_limits(const char *spec, wd_vk_limits_t *ret, char *err, size_t err_len) {
  *ret = (wd_vk_limits_t){ 0 };
  if (!spec || !spec[0] || wd_vk_limits_parse(spec, ret) == 0)
    return 0;
  snprintf(err, err_len,
           "vk-limits: '%s' is not a limits override (key=size,... with texels, storage, "
           "texel_align, storage_align, alloc, heap, sets; or a preset such as nvidia)",
           spec);
  return WD_ECONFIG;
}
