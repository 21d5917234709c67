/*
 * base64.h - RFC 4648 base64 decoding, the one decoder for every caller:
 * known speakers' data URLs (api/request.c), Realtime audio appends
 * (api/realtime_event.c) and the tests' .tiktoken vocabularies
 * (tests/wd_tiktoken.h).
 *
 * The callers differ only in what they accept, so that is a flag, not a
 * copy: data URLs come padded or not and, from some clients, in the
 * URL-safe alphabet (RFC 4648 section 5); OpenAI's Realtime events are
 * standard base64 with its padding, and anything else is refused there.
 * Leftover bits of a final partial group are ignored (section 3.5 lets a
 * decoder do so), as Python's base64.b64decode does.
 *
 * Threading: no state.
 */
#ifndef WD_BASE64_H
#define WD_BASE64_H

#include <stddef.h>

enum {
  WD_BASE64_URLSAFE = 1u << 0, /* '-' and '_' accepted for '+' and '/' too */
  WD_BASE64_PADDED = 1u << 1,  /* the length a multiple of 4, '=' only as the last one or two */
};

/* A bound on the bytes n characters decode to: the room out needs. */
#define WD_BASE64_DECODED_MAX(n) ((n) / 4 * 3 + 3)

/*
 * Decodes s[0..n) into out (room for WD_BASE64_DECODED_MAX(n) bytes) and
 * sets *ret_len. Without WD_BASE64_PADDED, trailing '=' are optional (any
 * number is dropped); a length that leaves one character over a group of
 * four encodes no byte and is refused. 0, or WD_EFORMAT for a character
 * outside the alphabet, '=' before the end, or a bad length.
 */
int wd_base64_decode(const char *s, size_t n, unsigned flags, unsigned char *out,
                     size_t *ret_len);

#endif
