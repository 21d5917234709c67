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
/* Diarization batches left before the failing one; 0 = disarmed. */
static atomic_long wd_fault_diar_left;
/* Milliseconds every diarization batch of windows waits first; 0 = disarmed. */
static atomic_long wd_fault_diar_ms;
/* Milliseconds every audio decode sleeps first; 0 = disarmed. */
static atomic_long wd_fault_decode_ms;
/* Milliseconds every model load of `serve` sleeps first; 0 = disarmed. */
static atomic_long wd_fault_load_ms;

/* "name:N" with N >= 0 into *n; 0 when item is not name. */
static int wd_fault_item(const char *item, size_t len, const char *name, long *n) {
  const size_t k = strlen(name);
  if (len <= k || strncmp(item, name, k) != 0)
    return 0;
  char buf[32];
  if (len - k >= sizeof buf)
    return -1;
  memcpy(buf, item + k, len - k);
  buf[len - k] = '\0';
  char *end = NULL;
  *n = strtol(buf, &end, 10);
  return end == buf || *end || *n < 0 ? -1 : 1;
}

int wd_fault_arm(const char *spec) {
  long oom = 0, delay = 0, load = 0, diar = 0, diar_ms = 0;
  for (const char *p = spec ? spec : ""; *p;) {
    const size_t len = strcspn(p, ",");
    int r = wd_fault_item(p, len, "oom:", &oom);
    if (r == 0)
      r = wd_fault_item(p, len, "decode_delay:", &delay);
    if (r == 0)
      r = wd_fault_item(p, len, "load_delay:", &load);
    if (r == 0)
      r = wd_fault_item(p, len, "diar_oom:", &diar);
    if (r == 0)
      r = wd_fault_item(p, len, "diar_delay:", &diar_ms);
    if (r <= 0)
      return WD_EINVAL;
    p += len + (p[len] == ',');
  }
  atomic_store(&wd_fault_oom_left, oom);
  atomic_store(&wd_fault_decode_ms, delay);
  atomic_store(&wd_fault_load_ms, load);
  atomic_store(&wd_fault_diar_left, diar);
  atomic_store(&wd_fault_diar_ms, diar_ms);
  return 0;
}

long wd__fault_decode_delay_ms(void) {
  return atomic_load_explicit(&wd_fault_decode_ms, memory_order_relaxed);
}

long wd__fault_diar_delay_ms(void) {
  return atomic_load_explicit(&wd_fault_diar_ms, memory_order_relaxed);
}

long wd__fault_load_delay_ms(void) {
  return atomic_load_explicit(&wd_fault_load_ms, memory_order_relaxed);
}

/* Counts *left down to 1 and fires there, once: the count then rests at 0. */
static int wd_fault_count_down(atomic_long *left_p) {
  long left = atomic_load_explicit(left_p, memory_order_relaxed);
  while (left > 0) {
    if (atomic_compare_exchange_weak(left_p, &left, left - 1))
      return left == 1;
  }
  return 0;
}

int wd__fault_oom(void) { return wd_fault_count_down(&wd_fault_oom_left); }

int wd__fault_diar_oom(void) { return wd_fault_count_down(&wd_fault_diar_left); }
