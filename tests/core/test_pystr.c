/*
 * test_pystr.c - core/pystr against CPython 3.11: the expected values below
 * were printed by Python itself (str.isspace over every code point,
 * bytes.decode("utf-8", errors="replace"), str.strip()).
 */
#include <stdint.h>
#include <string.h>

#include "pystr.h"
#include "wd_test.h"

/* [c for c in range(0x110000) if chr(c).isspace()] */
static const uint32_t py_spaces[] = { 0x9,    0xa,    0xb,    0xc,    0xd,    0x1c,   0x1d,   0x1e,
                                      0x1f,   0x20,   0x85,   0xa0,   0x1680, 0x2000, 0x2001, 0x2002,
                                      0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
                                      0x2028, 0x2029, 0x202f, 0x205f, 0x3000 };

WD_TEST(isspace_is_pythons_for_every_code_point) {
  const size_t n = sizeof py_spaces / sizeof py_spaces[0];
  int wrong = 0;
  for (uint32_t c = 0; c <= 0x10ffff; c++) {
    int want = 0;
    for (size_t i = 0; i < n; i++)
      want |= py_spaces[i] == c;
    wrong += wd_py_isspace(c) != want;
  }
  WD_CHECK_EQ_INT(wrong, 0);
}

/* bytes.decode("utf-8", errors="replace") */
WD_TEST(decode_replaces_maximal_subparts) {
  static const struct {
    const char *in;
    uint32_t want[6];
    size_t n;
  } cases[] = {
    { "a\xe0\x80"
      "b",
      { 0x61, 0xfffd, 0xfffd, 0x62 },
      4 },
    { "\xf0\x9f\x98", { 0xfffd }, 1 },
    { "\xed\xa0\x80", { 0xfffd, 0xfffd, 0xfffd }, 3 },
    { "\xc0\xaf", { 0xfffd, 0xfffd }, 2 },
    { "\xf4\x90\x80\x80", { 0xfffd, 0xfffd, 0xfffd, 0xfffd }, 4 },
    { "ok\xe2\x82\xac", { 0x6f, 0x6b, 0x20ac }, 3 },
    { "\xf0\x9f\x98\x80!", { 0x1f600, 0x21 }, 2 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint32_t out[16];
    const size_t n = wd_utf8_decode((const unsigned char *)cases[i].in, strlen(cases[i].in), out);
    WD_CHECK_EQ_INT((int)n, (int)cases[i].n);
    WD_CHECK(n == cases[i].n && memcmp(out, cases[i].want, n * sizeof *out) == 0);
    /* Every code point goes back to UTF-8 that decodes to itself. */
    char buf[4];
    for (size_t k = 0; k < n; k++) {
      uint32_t back;
      const size_t l = wd_utf8_put(out[k], buf);
      WD_CHECK(wd_utf8_decode((const unsigned char *)buf, l, &back) == 1 && back == out[k]);
      WD_CHECK_EQ_INT((int)wd_utf8_seq((const unsigned char *)buf, l), (int)l);
    }
  }
}

static void check_strip(const char *in, const char *want) {
  size_t n;
  const char *s = wd_py_strip(in, strlen(in), &n);
  WD_CHECK(n == strlen(want) && memcmp(s, want, n) == 0);
}

/* s.strip() */
WD_TEST(strip_is_pythons) {
  check_strip("\xe3\x80\x80 hi \xc2\xa0", "hi");                /* U+3000 ... U+00A0 */
  check_strip("\x1c\x1d x \xc2\x85", "x");                      /* separators, NEL */
  check_strip(" \t\n\v\f\r", "");
  check_strip("\xe2\x80\xa8" "a\xe2\x80\x8b", "a\xe2\x80\x8b"); /* U+200B is not space */
  check_strip("x\xe2\x80\xaf", "x");                            /* U+202F */
  check_strip("\xe1\x9a\x80\xe1\xa0\x8e y", "\xe1\xa0\x8e y");  /* U+180E is not space */
  check_strip("", "");
  check_strip("plain", "plain");
  /* Invalid bytes are not white space (Python would have replaced them). */
  check_strip(" \xff ", "\xff");
  check_strip(" \xe3\x80", "\xe3\x80");
  check_strip("\x80 ", "\x80");
}

int main(void) { return wd_test_main(); }
