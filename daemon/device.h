/*
 * device.h - which engines --device names, resolved once at start.
 *
 *   auto    (the default) a GPU when Vulkan shows one (discrete > integrated
 *           > virtual), else the native CPU engine: lavapipe runs the same
 *           shaders several times slower than cpu/ on the same cores;
 *   all     one engine per GPU Vulkan shows (lavapipe and other CPU drivers
 *           are not GPUs), and no CPU engine beside them; the CPU engine
 *           alone when Vulkan shows no GPU;
 *   vulkan  the best Vulkan device whatever its kind, lavapipe included;
 *   cpu     the native CPU engine (cpu/);
 *   N       Vulkan device N of `whisperd devices`;
 *   a,b,... one engine per entry (cpu, vulkan or N; config.h keeps auto and
 *           all out of lists), in that order.
 */
#ifndef WD_DEVICE_H
#define WD_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "vk_limits.h"

typedef struct {
  bool cpu;      /* the native CPU engine */
  int vk_index;  /* otherwise the Vulkan device index; -1: the engine's best */
  char label[16]; /* short name for logs and /metrics: "cpu", "vulkan", "vulkan:N" */
  char why[256]; /* one line for the log: what was picked and why */
} wd_device_choice_t;

/* device: a config value (WD_DEVICE_AUTO, WD_DEVICE_VULKAN, WD_DEVICE_CPU,
 * WD_DEVICE_ALL or an index). Never fails: auto falls back to the CPU engine
 * when the Vulkan loader is missing or lists no GPU. For all, the first
 * device all resolves to (the plan `whisperd info` shows). */
void wd_device_choose(int device, wd_device_choice_t *out);

/* devices[0..n): the config's --device list (config.h). Fills out[] with
 * one choice per engine to build, at most max, and returns how many (>= 1
 * when n >= 1). all expands here; every other entry is wd_device_choose's.
 * summary gets one line for the log naming every engine. */
int wd_device_choose_list(const int *devices, int n, wd_device_choice_t *out, int max,
                          char *summary, size_t summary_len);

/* --vk-limits (gpu/vk_limits.h): *ret is zeroed for an empty spec (no
 * override). WD_ECONFIG with a message in err for a malformed one. */
int wd_device_vk_limits(const char *spec, wd_vk_limits_t *ret, char *err, size_t err_len);

#endif
