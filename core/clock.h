/*
 * clock.h - the one clock for durations, deadlines and heartbeats:
 * CLOCK_MONOTONIC, which wall-clock steps (NTP, an operator's `date`) never
 * move. Header-only: each is one system call.
 */
#ifndef WD_CLOCK_H
#define WD_CLOCK_H

#include <time.h>

/* Monotonic seconds (an arbitrary origin; differences only). */
static inline double wd_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The same in milliseconds. */
static inline double wd_now_ms(void) { return wd_now_s() * 1e3; }

/* The same in nanoseconds, as an integer (atomic heartbeats). */
static inline long long wd_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
