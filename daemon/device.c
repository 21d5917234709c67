/*
 * device.c - --device auto|vulkan|cpu|N to an engine (see device.h).
 */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "error.h"
#include "vk_device.h"

/* auto: the best-ranked usable device that is a GPU (rank above the CPU
 * class: wd_vk_class_rank puts lavapipe at 1 and unknown kinds at 0). */
static void wd_device_auto(wd_device_choice_t *out) {
  wd_vk_device_info_t *infos = NULL;
  uint32_t n = 0;
  const int rc = wd_vk_device_list(&infos, &n);
  int best = -1, best_rank = 1;
  for (uint32_t i = 0; rc == 0 && i < n; i++) {
    const int rank = wd_vk_class_rank(infos[i].device_class);
    if (infos[i].usable && rank > best_rank) {
      best = (int)i;
      best_rank = rank;
    }
  }
  if (best >= 0) {
    out->cpu = false;
    out->vk_index = (int)infos[best].index;
    snprintf(out->why, sizeof out->why, "device auto: Vulkan device %d, %.160s (%s GPU)",
             out->vk_index, infos[best].name, wd_vk_class_name(infos[best].device_class));
  } else {
    out->cpu = true;
    out->vk_index = -1;
    snprintf(out->why, sizeof out->why,
             "device auto: %s, so the native CPU engine (--device vulkan runs lavapipe instead)",
             rc < 0 ? "no Vulkan loader or driver" : n ? "Vulkan lists no GPU, only CPU drivers"
                                                       : "Vulkan lists no device");
  }
  free(infos);
}

void wd_device_choose(int device, wd_device_choice_t *out) {
  *out = (wd_device_choice_t){ .cpu = false, .vk_index = -1 };
  switch (device) {
  case WD_DEVICE_AUTO:
    wd_device_auto(out);
    break;
  case WD_DEVICE_CPU:
    out->cpu = true;
    snprintf(out->why, sizeof out->why, "device cpu: the native CPU engine");
    break;
  case WD_DEVICE_VULKAN:
    snprintf(out->why, sizeof out->why, "device vulkan: the best Vulkan device");
    break;
  default:
    out->vk_index = device;
    snprintf(out->why, sizeof out->why, "device %d: Vulkan device %d", device, device);
    break;
  }
}
