/*
 * wd_test.h - a tiny test harness: one binary per module, one process per
 * binary under CTest.
 *
 *   WD_TEST(name) { WD_CHECK(x == 1); WD_CHECK_EQ_INT(a, b); ... }
 *   int main(void) { return wd_test_main(); }
 *
 * Tests register themselves through a constructor, run in file order, and a
 * failing check records the failure and continues. wd_test_skip() marks the
 * whole binary skipped (exit 77, CTest's SKIP_RETURN_CODE) when a resource
 * such as a Vulkan device or a model file is missing. The last line printed is
 * "N passed, N failed" (", N skipped" when a test skipped).
 */
#ifndef WD_TEST_H
#define WD_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*wd_test_fn)(void);

#define WD_TEST_MAX 256
static struct {
  const char *name;
  wd_test_fn fn;
} wd_tests_[WD_TEST_MAX];
static int wd_n_tests_;
static int wd_test_failed_; /* checks failed in the current test */
static int wd_test_skipped_;
static const char *wd_test_skip_why_;

#define WD_TEST(tname)                                                           \
  static void wd_test_##tname(void);                                             \
  __attribute__((constructor)) static void wd_test_reg_##tname(void) {           \
    if (wd_n_tests_ < WD_TEST_MAX) {                                             \
      wd_tests_[wd_n_tests_].name = #tname;                                      \
      wd_tests_[wd_n_tests_].fn = wd_test_##tname;                               \
      wd_n_tests_++;                                                             \
    }                                                                            \
  }                                                                              \
  static void wd_test_##tname(void)

#define WD_CHECK(cond)                                                           \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      wd_test_failed_++;                                                         \
    }                                                                            \
  } while (0)

#define WD_CHECK_EQ_INT(a, b)                                                    \
  do {                                                                           \
    long long wd_a_ = (long long)(a), wd_b_ = (long long)(b);                    \
    if (wd_a_ != wd_b_) {                                                        \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__,        \
              __LINE__, #a, #b, wd_a_, wd_b_);                                   \
      wd_test_failed_++;                                                         \
    }                                                                            \
  } while (0)

#define WD_CHECK_EQ_STR(a, b)                                                    \
  do {                                                                           \
    const char *wd_a_ = (a), *wd_b_ = (b);                                       \
    if (!wd_a_ || !wd_b_ || strcmp(wd_a_, wd_b_) != 0) {                         \
      fprintf(stderr, "%s:%d: %s == %s failed: '%s' != '%s'\n", __FILE__,        \
              __LINE__, #a, #b, wd_a_ ? wd_a_ : "(null)",                        \
              wd_b_ ? wd_b_ : "(null)");                                         \
      wd_test_failed_++;                                                         \
    }                                                                            \
  } while (0)

/* |a - b| <= tol; NaN never passes. */
#define WD_CHECK_NEAR(a, b, tol)                                                 \
  do {                                                                           \
    double wd_a_ = (double)(a), wd_b_ = (double)(b);                             \
    if (!(fabs(wd_a_ - wd_b_) <= (tol))) {                                       \
      fprintf(stderr, "%s:%d: |%s - %s| <= %g failed: %.9g vs %.9g\n",          \
              __FILE__, __LINE__, #a, #b, (double)(tol), wd_a_, wd_b_);          \
      wd_test_failed_++;                                                         \
    }                                                                            \
  } while (0)

/* Skips the rest of the binary: the current test returns, later ones do not run. */
#define wd_test_skip(why)                                                        \
  do {                                                                           \
    wd_test_skipped_ = 1;                                                        \
    wd_test_skip_why_ = (why);                                                   \
    return;                                                                      \
  } while (0)

/* Returns from the current test, which passes, saying why it checked
 * nothing (a capability this device lacks, such as matrix units), and,
 * unlike wd_test_skip, lets the tests after it run. */
#define wd_test_nothing_to_check(why)                                            \
  do {                                                                           \
    fprintf(stderr, "  nothing to check here: %s\n", (why));                     \
    return;                                                                      \
  } while (0)

/* Whether WD_TEST_ONLY (a comma-separated list of test names; unset or
 * empty: every test) selects the test called name. The sanitizer trees use
 * it to run a slow binary's threading tests without its long decodes. */
static inline int wd_test_selected(const char *name) {
  const char *only = getenv("WD_TEST_ONLY");
  if (!only || !only[0])
    return 1;
  const size_t n = strlen(name);
  for (const char *c = only; *c;) {
    const char *end = strchr(c, ',');
    const size_t len = end ? (size_t)(end - c) : strlen(c);
    if (len == n && strncmp(c, name, n) == 0)
      return 1;
    c += len + (end ? 1 : 0);
  }
  return 0;
}

static inline int wd_test_main(void) {
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < wd_n_tests_; i++) {
    if (!wd_test_selected(wd_tests_[i].name)) {
      fprintf(stderr, "--   %s (not in WD_TEST_ONLY)\n", wd_tests_[i].name);
      continue;
    }
    if (wd_test_skipped_) {
      skipped++;
      continue;
    }
    wd_test_failed_ = 0;
    wd_tests_[i].fn();
    if (wd_test_skipped_) {
      fprintf(stderr, "SKIP %s: %s\n", wd_tests_[i].name, wd_test_skip_why_);
      skipped++;
    } else if (wd_test_failed_) {
      fprintf(stderr, "FAIL %s\n", wd_tests_[i].name);
      failed++;
    } else {
      fprintf(stderr, "ok   %s\n", wd_tests_[i].name);
      passed++;
    }
  }
  if (skipped)
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else
    printf("%d passed, %d failed\n", passed, failed);
  if (failed)
    return 1;
  return (skipped && passed == 0) ? 77 : 0;
}

/* Uniform in [-1, 1) from a xorshift64 state (never 0): random test data
 * that is the same on every run and every host. */
static inline float wd_test_uniform(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return (float)((double)(x >> 11) / 4503599627370496.0 - 1.0);
}

/* Path of a file under tests/data, in a static buffer. */
static inline const char *wd_test_data(const char *name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", WD_TEST_DATA_DIR, name);
  return path;
}

#endif
