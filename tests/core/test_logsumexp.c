/*
 * test_logsumexp.c - core/logsumexp.c: the AVX2 path (where the host has
 * it) and the scalar path both within a few ulp of a long double sum, on
 * rows shaped like the decoder's: a vocabulary of logits, a suppressed
 * range at -inf (timestamp rules), a lone finite value, odd lengths (the
 * tail), values far under the maximum (terms that underflow).
 */
#include <math.h>
#include <stdlib.h>

#include "filters.h"
#include "wd_test.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static double ref_lse(const float *x, int n) {
  float mx = -INFINITY;
  for (int i = 0; i < n; i++)
    mx = x[i] > mx ? x[i] : mx;
  if (mx == -INFINITY)
    return -INFINITY;
  long double s = 0.0L;
  for (int i = 0; i < n; i++)
    s += expl((long double)x[i] - (long double)mx);
  return (double)((long double)mx + logl(s));
}

/* Both paths against the reference: equal at -inf, else within 1e-14
 * relative to the magnitudes involved. */
static void check_row(const float *x, int n) {
  const double want = ref_lse(x, n);
  for (int portable = 0; portable <= 1; portable++) {
    wd_logsumexp_force_portable(portable);
    const double got = wd_logsumexp(x, n);
    if (want == -INFINITY) {
      WD_CHECK(got == -INFINITY);
      continue;
    }
    const double tol = 1e-14 * (fabs(want) + 1.0);
    if (!(fabs(got - want) <= tol))
      fprintf(stderr, "  n %d portable %d: got %.17g want %.17g\n", n, portable, got, want);
    WD_CHECK(fabs(got - want) <= tol);
  }
  wd_logsumexp_force_portable(0);
}

WD_TEST(logsumexp_matches_long_double) {
  enum { NV = 51865 };
  float *x = malloc(NV * sizeof *x);
  WD_CHECK(x != NULL);
  if (!x)
    return;
  static const int lens[] = { 1, 3, 7, 8, 9, 15, 16, 17, 99, 1501, NV };
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (int shape = 0; shape < 4; shape++) {
      const int n = lens[li];
      for (int i = 0; i < n; i++) {
        const float u = wd_test_uniform(&g_rng);
        x[i] = shape == 0   ? 20.0f * u - 10.0f          /* logits */
               : shape == 1 ? 3000.0f * u - 2000.0f      /* most terms underflow */
               : shape == 2 ? (i % 3 ? -INFINITY : u)    /* suppressed entries */
                            : -INFINITY;                 /* all suppressed ... */
      }
      if (shape == 3 && n > 2)
        x[n / 2] = 7.25f; /* ... but one */
      check_row(x, n);
    }
  for (int i = 0; i < 16; i++)
    x[i] = -INFINITY;
  check_row(x, 16); /* all -inf: -inf */
  free(x);
}

int main(void) { return wd_test_main(); }
