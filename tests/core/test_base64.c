/*
 * test_base64.c - core/base64 against Python's base64 module: every
 * expected byte string below was printed by base64.b64decode (and
 * urlsafe_b64decode for the URL-safe alphabet), and every refusal is one
 * that b64decode(s, validate=True) refuses too.
 */
#include <string.h>

#include "base64.h"
#include "error.h"
#include "wd_test.h"

/* s decoded with flags: 0 and the bytes in out (room 64), or the code. */
static int dec(const char *s, unsigned flags, unsigned char *out, size_t *n) {
  memset(out, 0xa5, 64); /* a sentinel past what is written */
  return wd_base64_decode(s, strlen(s), flags, out, n);
}

WD_TEST(standard_padded_and_not) {
  static const struct {
    const char *in;
    const char *want;
    size_t n;
  } cases[] = {
    { "", "", 0 },
    { "UklGRg==", "RIFF", 4 },
    { "UklGRg", "RIFF", 4 },         /* padding dropped, as data URLs come */
    { "UklGRiQ=", "RIFF$", 5 },
    { "UklGRiQA", "RIFF$\0", 6 },
    { "AAEC/w", "\x00\x01\x02\xff", 4 },
    { "+/+/", "\xfb\xff\xbf", 3 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned char out[64];
    size_t n = 99;
    WD_CHECK_EQ_INT(dec(cases[i].in, 0, out, &n), 0);
    WD_CHECK_EQ_INT((int)n, (int)cases[i].n);
    WD_CHECK(memcmp(out, cases[i].want, cases[i].n) == 0);
    WD_CHECK_EQ_INT(out[n], 0xa5); /* nothing written past the bytes */
  }
}

WD_TEST(urlsafe_alphabet_only_when_asked) {
  unsigned char out[64];
  size_t n = 0;
  /* urlsafe_b64decode("-_-_") == b"\xfb\xff\xbf" */
  WD_CHECK_EQ_INT(dec("-_-_", WD_BASE64_URLSAFE, out, &n), 0);
  WD_CHECK_EQ_INT((int)n, 3);
  WD_CHECK(memcmp(out, "\xfb\xff\xbf", 3) == 0);
  WD_CHECK_EQ_INT(dec("-_-_", 0, out, &n), WD_EFORMAT);
  WD_CHECK_EQ_INT(dec("-_-_", WD_BASE64_PADDED, out, &n), WD_EFORMAT);
}

WD_TEST(padded_mode_wants_whole_groups) {
  unsigned char out[64];
  size_t n = 0;
  WD_CHECK_EQ_INT(dec("UklGRg==", WD_BASE64_PADDED, out, &n), 0);
  WD_CHECK_EQ_INT((int)n, 4);
  WD_CHECK(memcmp(out, "RIFF", 4) == 0);
  static const char *const bad[] = {
    "UklGRg",   /* no padding */
    "UklGRg=",  /* too little */
    "UklG===",  /* three '=' */
    "UklGRg===", /* not a whole group */
    "Uk=GRg==", /* '=' before the end */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    WD_CHECK_EQ_INT(dec(bad[i], WD_BASE64_PADDED, out, &n), WD_EFORMAT);
}

WD_TEST(refusals) {
  unsigned char out[64];
  size_t n = 7;
  static const char *const bad[] = {
    "U",        /* one character: no whole byte */
    "UklGR",    /* five: the same */
    "U$lG",     /* outside the alphabet */
    "Uk lG",    /* white space too */
    "Uk=lGRg",  /* '=' in the middle */
    "UklG\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    WD_CHECK_EQ_INT(dec(bad[i], 0, out, &n), WD_EFORMAT);
    WD_CHECK_EQ_INT((int)n, 0);
  }
}

WD_TEST(bound_holds_for_every_length) {
  /* "QUJD" repeated decodes to "ABC" repeated; every prefix length that is
   * valid stays within WD_BASE64_DECODED_MAX. */
  char s[41];
  for (int i = 0; i < 40; i++)
    s[i] = "QUJD"[i % 4];
  s[40] = '\0';
  for (size_t len = 0; len <= 40; len++) {
    unsigned char out[64];
    size_t n = 0;
    memset(out, 0xa5, sizeof out);
    const int rc = wd_base64_decode(s, len, 0, out, &n);
    WD_CHECK_EQ_INT(rc, len % 4 == 1 ? WD_EFORMAT : 0);
    WD_CHECK(n <= WD_BASE64_DECODED_MAX(len));
    WD_CHECK_EQ_INT((int)n, rc == 0 ? (int)(len * 6 / 8) : 0);
    for (size_t k = 0; k < n; k++)
      WD_CHECK_EQ_INT(out[k], "ABC"[k % 3]);
  }
}

int main(void) { return wd_test_main(); }
