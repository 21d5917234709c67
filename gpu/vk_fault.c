/*
 * vk_fault.c - the fault-injection switch (see vk_fault.h).
 */
#include "vk_fault.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Submits left before the failing one; 0 = disarmed. */
static atomic_long wd_fault_submit_left;
static atomic_long wd_fault_pool_left; /* the same for descriptor-set allocations */
static atomic_int wd_fault_no_ts;

int wd_vk_fault_arm(const char *spec) {
  long submit = 0, pool = 0;
  int no_ts = 0;
  const char *p = spec ? spec : "";
  while (*p) {
    const size_t len = strcspn(p, ",");
    if (len > 7 && strncmp(p, "submit:", 7) == 0) {
      char *end = NULL;
      submit = strtol(p + 7, &end, 10);
      if (end != p + len || submit < 1)
        return WD_EINVAL;
    } else if (len > 10 && strncmp(p, "pool_full:", 10) == 0) {
      char *end = NULL;
      pool = strtol(p + 10, &end, 10);
      if (end != p + len || pool < 1)
        return WD_EINVAL;
    } else if (len == 14 && strncmp(p, "timestamps:off", 14) == 0) {
      no_ts = 1;
    } else if (len > 0) {
      return WD_EINVAL;
    }
    p += len + (p[len] == ',');
  }
  atomic_store(&wd_fault_submit_left, submit);
  atomic_store(&wd_fault_pool_left, pool);
  atomic_store(&wd_fault_no_ts, no_ts);
  return 0;
}

/* Counts *left down to 1 and fires there, once: the count then rests at 0. */
static int count_down(atomic_long *left_p) {
  long left = atomic_load_explicit(left_p, memory_order_relaxed);
  while (left > 0) {
    if (atomic_compare_exchange_weak(left_p, &left, left - 1))
      return left == 1;
  }
  return 0;
}

int wd__vk_fault_submit(void) { return count_down(&wd_fault_submit_left); }

int wd__vk_fault_pool_full(void) { return count_down(&wd_fault_pool_left); }

int wd__vk_fault_no_timestamps(void) { return atomic_load(&wd_fault_no_ts); }
