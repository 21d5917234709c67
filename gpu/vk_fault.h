/*
 * vk_fault.h - fault injection for tests of the device-loss path.
 *
 * A real GPU loses its device (VK_ERROR_DEVICE_LOST) after a hang, a driver
 * reset or an unplug; lavapipe never does. This switch makes it happen on
 * demand so the recovery (engine rebuild, 503 for the running jobs, queued
 * jobs served afterwards) is tested on any machine. The spec is a
 * comma-separated list:
 *
 *   submit:N       the Nth wd_vk_cmd_submit() from the arming on (1 = the
 *                  next) fails with WD_EDEVLOST before reaching the queue,
 *                  once; later submits run normally
 *   timestamps:off devices created from now on report no timestamp support
 *                  (as a queue with timestampValidBits = 0 does)
 *   pool_full:N    the Nth descriptor-set allocation from the arming on
 *                  finds its pool full (VK_ERROR_OUT_OF_POOL_MEMORY, which
 *                  lavapipe never reports: it ignores maxSets), once
 *
 * `whisperd serve` arms it from --fault-inject (WHISPERD_FAULT_INJECT) once it is ready (its
 * warm-up is not counted); tests call wd_vk_fault_arm() directly. Disarmed
 * unless armed: production never pays more than one atomic load per submit.
 *
 * Threading: the state is process-wide and atomic; arm from any thread.
 */
#ifndef WD_VK_FAULT_H
#define WD_VK_FAULT_H

/* Arms spec (NULL or "" disarms everything). WD_EINVAL for a spec it cannot
 * parse, which leaves the previous state. */
int wd_vk_fault_arm(const char *spec);

/* For gpu/: 1 when this submit must fail as a lost device (consumes it). */
int wd__vk_fault_submit(void);
/* For gpu/: 1 when this descriptor-set allocation must find its pool full
 * (consumes it). */
int wd__vk_fault_pool_full(void);
/* For gpu/: 1 when new devices must report no timestamps. */
int wd__vk_fault_no_timestamps(void);

#endif
