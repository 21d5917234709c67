/*
 * ws.c - WebSocket handshake key, frame parser and frame header (see ws.h).
 */
#include "ws.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"

/* ---- SHA-1 (FIPS 180-4), for Sec-WebSocket-Accept ------------------- */

static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void sha1_block(uint32_t h[5], const unsigned char *b) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 |
           b[4 * i + 3];
  for (int i = 16; i < 80; i++)
    w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20)
      f = (bb & c) | (~bb & d), k = 0x5a827999u;
    else if (i < 40)
      f = bb ^ c ^ d, k = 0x6ed9eba1u;
    else if (i < 60)
      f = (bb & c) | (bb & d) | (c & d), k = 0x8f1bbcdcu;
    else
      f = bb ^ c ^ d, k = 0xca62c1d6u;
    const uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d, d = c, c = rol(bb, 30), bb = a, a = t;
  }
  h[0] += a, h[1] += bb, h[2] += c, h[3] += d, h[4] += e;
}

void wd_ws_sha1(const void *data, size_t n, unsigned char out[20]) {
  uint32_t h[5] = { 0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u };
  const unsigned char *p = data;
  size_t i = 0;
  for (; i + 64 <= n; i += 64)
    sha1_block(h, p + i);
  /* the tail, 0x80, zeros and the length in bits: one or two blocks */
  unsigned char last[128] = { 0 };
  const size_t r = n - i, blocks = r + 9 <= 64 ? 1 : 2;
  memcpy(last, p + i, r);
  last[r] = 0x80;
  const uint64_t bits = (uint64_t)n * 8;
  for (int k = 0; k < 8; k++)
    last[blocks * 64 - 1 - (size_t)k] = (unsigned char)(bits >> (8 * k));
  for (size_t b = 0; b < blocks; b++)
    sha1_block(h, last + 64 * b);
  for (int k = 0; k < 20; k++)
    out[k] = (unsigned char)(h[k / 4] >> (24 - 8 * (k % 4)));
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int wd_ws_accept_key(const char *key, char out[29]) {
  static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  /* the client's key is 16 random bytes in base64: 24 characters */
  if (!key || strlen(key) != 24 || key[22] != '=' || key[23] != '=')
    return WD_EINVAL;
  for (int i = 0; i < 22; i++)
    if (!strchr(B64, key[i]) || !key[i])
      return WD_EINVAL;
  char buf[24 + sizeof guid];
  memcpy(buf, key, 24);
  memcpy(buf + 24, guid, sizeof guid - 1);
  unsigned char d[21] = { 0 }; /* 20 bytes, and a zero to round up to 7 groups of 3 */
  wd_ws_sha1(buf, 24 + sizeof guid - 1, d);
  for (int g = 0; g < 7; g++) {
    const uint32_t v = (uint32_t)d[3 * g] << 16 | (uint32_t)d[3 * g + 1] << 8 | d[3 * g + 2];
    for (int k = 0; k < 4; k++)
      out[4 * g + k] = B64[(v >> (18 - 6 * k)) & 63];
  }
  out[27] = '='; /* 20 bytes: the last group has two */
  out[28] = '\0';
  return 0;
}

/* ---- header tokens ----------------------------------------------------- */

/* The next token of a comma-separated value at *v (spaces around it
 * skipped): its start, its length in *ret_n, and *v past it; NULL at the
 * end. */
static const char *next_token(const char **v, size_t *ret_n) {
  const char *p = *v;
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == ',')
      p++;
    if (!*p)
      return NULL;
    const char *e = p;
    while (*e && *e != ',')
      e++;
    const char *t = e;
    while (t > p && (t[-1] == ' ' || t[-1] == '\t'))
      t--;
    *v = e;
    if (t > p) {
      *ret_n = (size_t)(t - p);
      return p;
    }
    p = e;
  }
}

int wd_ws_has_token(const char *value, const char *token, int nocase) {
  const size_t k = strlen(token);
  size_t n;
  const char *t;
  while (value && (t = next_token(&value, &n)) != NULL)
    if (n == k && (nocase ? strncasecmp(t, token, k) : strncmp(t, token, k)) == 0)
      return 1;
  return 0;
}

const char *wd_ws_token_after(const char *value, const char *prefix, size_t *ret_len) {
  const size_t k = strlen(prefix);
  size_t n;
  const char *t;
  while (value && (t = next_token(&value, &n)) != NULL)
    if (n >= k && strncmp(t, prefix, k) == 0) {
      *ret_len = n - k;
      return t + k;
    }
  return NULL;
}

/* ---- frames ------------------------------------------------------------ */

void wd_ws_parser_init(wd_ws_parser_t *p, size_t max_message) {
  memset(p, 0, sizeof *p);
  p->max_message = max_message;
  p->hdr_need = 2;
}

void wd_ws_parser_free(wd_ws_parser_t *p) {
  free(p->msg);
  p->msg = NULL;
  p->msg_len = p->msg_cap = 0;
}

static int fail(int *ret_close, int code, int rc) {
  *ret_close = code;
  return rc;
}

/* The frame header is complete in p->hdr: check it and set up its payload. */
static int begin_payload(wd_ws_parser_t *p, int *ret_close) {
  const unsigned char b0 = p->hdr[0], b1 = p->hdr[1];
  p->fin = b0 >> 7;
  p->opcode = b0 & 0x0f;
  if (b0 & 0x70 || !(b1 & 0x80)) /* RSV bits; a client frame must be masked */
    return fail(ret_close, WD_WS_CLOSE_PROTOCOL, WD_EFORMAT);
  const int control = p->opcode >= 0x8;
  if ((p->opcode > WD_WS_BINARY && p->opcode < WD_WS_CLOSE) || p->opcode > WD_WS_PONG)
    return fail(ret_close, WD_WS_CLOSE_PROTOCOL, WD_EFORMAT);
  const int l7 = b1 & 0x7f;
  const unsigned char *m = p->hdr + 2;
  if (l7 < 126) {
    p->len = (uint64_t)l7;
  } else if (l7 == 126) {
    p->len = (uint64_t)p->hdr[2] << 8 | p->hdr[3];
    m = p->hdr + 4;
  } else {
    p->len = 0;
    for (int i = 0; i < 8; i++)
      p->len = p->len << 8 | p->hdr[2 + i];
    m = p->hdr + 10;
    if (p->len >> 63)
      return fail(ret_close, WD_WS_CLOSE_PROTOCOL, WD_EFORMAT);
  }
  memcpy(p->mask, m, 4);
  p->got = 0;
  if (control) {
    if (!p->fin || p->len > 125)
      return fail(ret_close, WD_WS_CLOSE_PROTOCOL, WD_EFORMAT);
    return 0;
  }
  /* data frames: a continuation only inside a message, a new one only outside */
  if ((p->opcode == WD_WS_CONT) != (p->msg_opcode != 0))
    return fail(ret_close, WD_WS_CLOSE_PROTOCOL, WD_EFORMAT);
  if (p->opcode != WD_WS_CONT) { /* a new message: nothing of it yet */
    p->msg_opcode = p->opcode;
    p->msg_len = 0;
  }
  if (p->len > p->max_message - p->msg_len) /* the message so far and this frame */
    return fail(ret_close, WD_WS_CLOSE_TOO_BIG, WD_ETOOBIG);
  const size_t need = p->msg_len + (size_t)p->len;
  if (need > p->msg_cap) {
    size_t cap = p->msg_cap ? p->msg_cap : 4096;
    while (cap < need)
      cap *= 2;
    unsigned char *g = realloc(p->msg, cap);
    if (!g)
      return fail(ret_close, WD_WS_CLOSE_ERROR, WD_ENOMEM);
    p->msg = g;
    p->msg_cap = cap;
  }
  return 0;
}

/* Whether s[0..n) is UTF-8 as RFC 3629 has it: no overlong forms, no
 * surrogates, nothing past U+10FFFF. */
static int utf8_valid(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    /* the sequence's length, and the range of its second byte (which
     * rules out overlongs, surrogates and values over U+10FFFF) */
    size_t k;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
      k = 2;
    else if (c >= 0xe0 && c <= 0xef)
      k = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
      k = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else
      return 0;
    if (n - i < k || s[i + 1] < lo || s[i + 1] > hi)
      return 0;
    for (size_t j = 2; j < k; j++)
      if ((s[i + j] & 0xc0) != 0x80)
        return 0;
    i += k;
  }
  return 1;
}

/* A close frame's payload (RFC 6455 5.5.1, 7.4): empty, or a status code
 * an endpoint may send (1000-1003, 1007-1014 and 3000-4999; never 1004,
 * 1005, 1006 or 1015, which are reserved or only reported locally)
 * followed by a UTF-8 reason. 0, or the close code to fail with. */
static int check_close(const unsigned char *d, size_t n) {
  if (n == 0)
    return 0;
  if (n == 1)
    return WD_WS_CLOSE_PROTOCOL;
  const int code = d[0] << 8 | d[1];
  if (!((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
        (code >= 3000 && code <= 4999)))
    return WD_WS_CLOSE_PROTOCOL;
  return utf8_valid(d + 2, n - 2) ? 0 : WD_WS_CLOSE_BAD_DATA;
}

/* The frame's payload is all in: a control frame or a final fragment is
 * a message. */
static int end_frame(wd_ws_parser_t *p, wd_ws_on_message_t on_message, void *ud,
                     int *ret_close) {
  p->hdr_have = 0;
  p->hdr_need = 2;
  if (p->opcode >= 0x8) {
    const int bad = p->opcode == WD_WS_CLOSE ? check_close(p->ctl, (size_t)p->len) : 0;
    if (bad)
      return fail(ret_close, bad, WD_EFORMAT);
    return on_message(ud, p->opcode, p->ctl, (size_t)p->len);
  }
  if (!p->fin)
    return 0;
  const int op = p->msg_opcode;
  const size_t n = p->msg_len;
  p->msg_opcode = 0;
  p->msg_len = 0; /* the next message starts empty (its size is checked alone) */
  const int rc = on_message(ud, op, p->msg, n);
  /* A large message (up to max_message) leaves no large buffer behind. */
  if (p->msg_cap > WD_WS_KEEP_BYTES) {
    free(p->msg);
    p->msg = NULL;
    p->msg_cap = 0;
  }
  return rc;
}

int wd_ws_feed(wd_ws_parser_t *p, const void *data, size_t n, wd_ws_on_message_t on_message,
               void *ud, int *ret_close) {
  const unsigned char *b = data;
  size_t i = 0;
  *ret_close = 0;
  while (i < n) {
    if (p->hdr_have < p->hdr_need) {
      p->hdr[p->hdr_have++] = b[i++];
      if (p->hdr_have == 2) {
        if (!(p->hdr[1] & 0x80)) /* unmasked: not even the header's length is known */
          return fail(ret_close, WD_WS_CLOSE_PROTOCOL, WD_EFORMAT);
        const int l7 = p->hdr[1] & 0x7f;
        p->hdr_need = 2 + (l7 == 126 ? 2 : l7 == 127 ? 8 : 0) + 4;
      }
      if (p->hdr_have < p->hdr_need)
        continue;
      const int rc = begin_payload(p, ret_close);
      if (rc)
        return rc;
    } else {
      /* payload bytes, unmasked as they come */
      const uint64_t left = p->len - p->got;
      const size_t take = n - i < left ? n - i : (size_t)left;
      unsigned char *dst = p->opcode >= 0x8 ? p->ctl + p->got : p->msg + p->msg_len;
      for (size_t k = 0; k < take; k++)
        dst[k] = b[i + k] ^ p->mask[(p->got + k) & 3];
      p->got += take;
      if (p->opcode < 0x8)
        p->msg_len += take;
      i += take;
    }
    if (p->hdr_have == p->hdr_need && p->got == p->len) {
      const int rc = end_frame(p, on_message, ud, ret_close);
      if (rc)
        return rc;
    }
  }
  return 0;
}

size_t wd_ws_frame_header(int opcode, uint64_t len, unsigned char hdr[10]) {
  hdr[0] = (unsigned char)(0x80 | (opcode & 0x0f));
  if (len < 126) {
    hdr[1] = (unsigned char)len;
    return 2;
  }
  if (len <= 0xffff) {
    hdr[1] = 126;
    hdr[2] = (unsigned char)(len >> 8);
    hdr[3] = (unsigned char)len;
    return 4;
  }
  hdr[1] = 127;
  for (int k = 0; k < 8; k++)
    hdr[2 + k] = (unsigned char)(len >> (56 - 8 * k));
  return 10;
}
