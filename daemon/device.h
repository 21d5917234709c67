/*
 * device.h - which engine --device names, resolved once at start.
 *
 *   auto    (the default) a GPU when Vulkan shows one (discrete > integrated
 *           > virtual), else the native CPU engine: lavapipe runs the same
 *           shaders several times slower than cpu/ on the same cores;
 *   vulkan  the best Vulkan device whatever its kind, lavapipe included;
 *   cpu     the native CPU engine (cpu/);
 *   N       Vulkan device N of `whisperd devices`.
 */
#ifndef WD_DEVICE_H
#define WD_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
  bool cpu;      /* the native CPU engine */
  int vk_index;  /* otherwise the Vulkan device index; -1: the engine's best */
  char why[256]; /* one line for the log: what was picked and why */
} wd_device_choice_t;

/* device: a config value (WD_DEVICE_AUTO, WD_DEVICE_VULKAN, WD_DEVICE_CPU
 * or an index). Never fails: auto falls back to the CPU engine when the
 * Vulkan loader is missing or lists no GPU. */
void wd_device_choose(int device, wd_device_choice_t *out);

#endif
