/*
 * bench_util.h - the clock and the median helper the benchmarks share.
 */
#ifndef WD_BENCH_UTIL_H
#define WD_BENCH_UTIL_H

#include "clock.h"

/* Monotonic wall time in seconds. */
static inline double bench_now_s(void) { return wd_now_s(); }

/* qsort comparator for doubles, ascending (medians of timings). */
static inline int bench_cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
