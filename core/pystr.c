/*
 * pystr.c - Python's string rules (see pystr.h).
 */
#include "pystr.h"

long wd_utf8_seq(const unsigned char *s, size_t n) {
  const unsigned c = s[0];
  if (c < 0x80)
    return 1;
  size_t need;
  unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
  if (c >= 0xc2 && c <= 0xdf)
    need = 1;
  else if (c >= 0xe0 && c <= 0xef) {
    need = 2;
    if (c == 0xe0)
      lo = 0xa0; /* overlong below U+0800 */
    else if (c == 0xed)
      hi = 0x9f; /* surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 3;
    if (c == 0xf0)
      lo = 0x90; /* overlong below U+10000 */
    else if (c == 0xf4)
      hi = 0x8f; /* above U+10FFFF */
  } else
    return -1; /* continuation byte, C0/C1 overlong lead, F5..FF */
  for (size_t i = 1; i <= need; i++) {
    if (i >= n || s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
      return -(long)i;
  }
  return (long)need + 1;
}

size_t wd_utf8_decode(const unsigned char *s, size_t n, uint32_t *out) {
  size_t i = 0, o = 0;
  while (i < n) {
    const long l = wd_utf8_seq(s + i, n - i);
    if (l < 0) {
      out[o++] = WD_PY_REPLACEMENT;
      i += (size_t)-l;
      continue;
    }
    const unsigned c = s[i];
    uint32_t cp = l == 1 ? c : l == 2 ? (c & 0x1f) : l == 3 ? (c & 0x0f) : (c & 0x07);
    for (long k = 1; k < l; k++)
      cp = (cp << 6) | (s[i + (size_t)k] & 0x3fu);
    out[o++] = cp;
    i += (size_t)l;
  }
  return o;
}

size_t wd_utf8_put(uint32_t cp, char *buf) {
  unsigned char *b = (unsigned char *)buf;
  if (cp < 0x80) {
    b[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    b[0] = (unsigned char)(0xc0 | (cp >> 6));
    b[1] = (unsigned char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    b[0] = (unsigned char)(0xe0 | (cp >> 12));
    b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    b[2] = (unsigned char)(0x80 | (cp & 0x3f));
    return 3;
  }
  b[0] = (unsigned char)(0xf0 | (cp >> 18));
  b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
  b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
  b[3] = (unsigned char)(0x80 | (cp & 0x3f));
  return 4;
}

int wd_py_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The code point of the valid character at s[0..l), l = its length. */
static uint32_t code_point(const unsigned char *s, long l) {
  uint32_t cp;
  wd_utf8_decode(s, (size_t)l, &cp);
  return cp;
}

const char *wd_py_strip(const char *str, size_t n, size_t *ret_n) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < n) {
    const long l = wd_utf8_seq(s + i, n - i);
    if (l < 0 || !wd_py_isspace(code_point(s + i, l)))
      break;
    i += (size_t)l;
  }
  size_t j = n;
  while (j > i) {
    size_t k = j - 1; /* back to the lead byte of the last character */
    while (k > i && j - k < 4 && (s[k] & 0xc0) == 0x80)
      k--;
    const long l = wd_utf8_seq(s + k, j - k);
    if (l != (long)(j - k) || !wd_py_isspace(code_point(s + k, l)))
      break;
    j = k;
  }
  *ret_n = j - i;
  return str + i;
}
