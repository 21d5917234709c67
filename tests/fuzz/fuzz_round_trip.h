/*
 * fuzz_round_trip.h - the tokenizer harnesses' oracle: encoding any bytes
 * and decoding the ids gives the same bytes back (tokenizer.h promises
 * decode(encode(x)) == x), with the count-then-fill calling convention.
 */
#ifndef WD_FUZZ_ROUND_TRIP_H
#define WD_FUZZ_ROUND_TRIP_H

#include <string.h>

#include "error.h"
#include "fuzz_common.h"
#include "tokenizer.h"

/* Encodes text and checks that decoding gives it back. */
static inline void round_trip(const wd_tokenizer_t *t, const char *text, size_t len) {
  int n = 0;
  int rc = wd_tokenizer_encode(t, text, len, NULL, 0, &n);
  if (rc < 0 && rc != WD_ERANGE)
    return; /* WD_ENOMEM, WD_ETOOBIG: nothing to check */
  FUZZ_CHECK(n >= 0 && (n > 0 || len == 0) && (size_t)n <= len);
  int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
  if (!ids)
    abort();
  int n2 = -1;
  FUZZ_CHECK(wd_tokenizer_encode(t, text, len, ids, n, &n2) == 0 && n2 == n);
  size_t out_len = 0;
  rc = wd_tokenizer_decode(t, ids, n, NULL, 0, &out_len);
  FUZZ_CHECK(rc == 0 || rc == WD_ERANGE);
  FUZZ_CHECK(out_len == len);
  char *out = malloc(out_len + 1);
  if (!out)
    abort();
  size_t got = 0;
  FUZZ_CHECK(wd_tokenizer_decode(t, ids, n, out, out_len + 1, &got) == 0 && got == len);
  FUZZ_CHECK(memcmp(out, text, len) == 0 && out[len] == '\0');
  free(out);
  free(ids);
}

#endif
