/*
 * fault.c - the core fault-injection switch (see fault.h).
 */
#include "fault.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Segment stores left before the failing one; 0 = disarmed. */
static atomic_long wd_fault_oom_left;

int wd_fault_arm(const char *spec) {
  long n = 0;
  if (spec && spec[0]) {
    char *end = NULL;
    if (strncmp(spec, "oom:", 4) != 0)
      return WD_EINVAL;
    n = strtol(spec + 4, &end, 10);
    if (end == spec + 4 || *end || n < 0)
      return WD_EINVAL;
  }
  atomic_store(&wd_fault_oom_left, n);
  return 0;
}

int wd__fault_oom(void) {
  long left = atomic_load_explicit(&wd_fault_oom_left, memory_order_relaxed);
  /* Counts down to 1 and fires there, once: the count then rests at 0. */
  while (left > 0) {
    if (atomic_compare_exchange_weak(&wd_fault_oom_left, &left, left - 1))
      return left == 1;
  }
  return 0;
}
