/*
 * base64.c - RFC 4648 base64 decoding (see base64.h).
 */
#include "base64.h"

#include <stdint.h>

#include "error.h"

/* One character's 6-bit value, or -1 outside the alphabet flags allow. */
static int digit(unsigned char c, unsigned flags) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+' || (c == '-' && (flags & WD_BASE64_URLSAFE)))
    return 62;
  if (c == '/' || (c == '_' && (flags & WD_BASE64_URLSAFE)))
    return 63;
  return -1;
}

int wd_base64_decode(const char *s, size_t n, unsigned flags, unsigned char *out,
                     size_t *ret_len) {
  *ret_len = 0;
  /* Padding: at most two '=' closing a whole group when it is required;
   * any trailing run of them otherwise. An '=' left after this is in the
   * middle and refused as a non-digit below. */
  if (flags & WD_BASE64_PADDED) {
    if (n % 4)
      return WD_EFORMAT;
    for (int k = 0; k < 2 && n > 0 && s[n - 1] == '='; k++)
      n--;
  } else {
    while (n > 0 && s[n - 1] == '=')
      n--;
  }
  if (n % 4 == 1) /* 6 bits: not one whole byte */
    return WD_EFORMAT;
  /* acc holds the bits not yet written: fewer than 8 after each step. */
  uint32_t acc = 0;
  int bits = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const int d = digit((unsigned char)s[i], flags);
    if (d < 0)
      return WD_EFORMAT;
    acc = (acc << 6) | (uint32_t)d;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[k++] = (unsigned char)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  *ret_len = k;
  return 0;
}
