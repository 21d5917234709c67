/*
 * test_ws.c - the WebSocket pieces (api/ws.c): SHA-1 against FIPS 180's
 * examples, the handshake key against RFC 6455's, and the frame parser on
 * the RFC's frames, fed whole and one byte at a time: masked text, a
 * fragmented message with a ping between its fragments, empty frames, the
 * 16- and 64-bit lengths, each message held to the size limit alone, close
 * payloads, each rule a client can break with the close code it earns, and
 * the handshake's header tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "wd_test.h"
#include "ws.h"

typedef struct {
  int n;
  int op[8];
  size_t len[8];
  unsigned char data[8][70000];
} got_t;

static int on_msg(void *ud, int op, const unsigned char *d, size_t n) {
  got_t *g = ud;
  if (g->n < 8) {
    g->op[g->n] = op;
    g->len[g->n] = n;
    memcpy(g->data[g->n], d, n < sizeof g->data[0] ? n : sizeof g->data[0]);
  }
  g->n++;
  return 0;
}

/* Feeds buf whole (bytewise = 0) or a byte at a time; the feed's result. */
static int feed(const unsigned char *buf, size_t n, int bytewise, size_t max, got_t *g,
                int *close) {
  static wd_ws_parser_t p;
  wd_ws_parser_init(&p, max);
  memset(g, 0, sizeof *g);
  int rc = 0;
  if (bytewise)
    for (size_t i = 0; i < n && rc == 0; i++)
      rc = wd_ws_feed(&p, buf + i, 1, on_msg, g, close);
  else
    rc = wd_ws_feed(&p, buf, n, on_msg, g, close);
  wd_ws_parser_free(&p);
  return rc;
}

/* A masked client frame of payload d into out; its size. */
static size_t client_frame(int b0, const void *d, size_t n, unsigned char *out) {
  static const unsigned char mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
  size_t h = 0;
  out[h++] = (unsigned char)b0;
  if (n < 126) {
    out[h++] = (unsigned char)(0x80 | n);
  } else if (n <= 0xffff) {
    out[h++] = 0x80 | 126;
    out[h++] = (unsigned char)(n >> 8);
    out[h++] = (unsigned char)n;
  } else {
    out[h++] = 0x80 | 127;
    for (int k = 0; k < 8; k++)
      out[h++] = (unsigned char)((uint64_t)n >> (56 - 8 * k));
  }
  memcpy(out + h, mask, 4);
  h += 4;
  for (size_t i = 0; i < n; i++)
    out[h + i] = ((const unsigned char *)d)[i] ^ mask[i & 3];
  return h + n;
}

WD_TEST(sha1_and_accept_key) {
  unsigned char d[20];
  wd_ws_sha1("abc", 3, d);
  static const unsigned char abc[20] = { 0xa9, 0x99, 0x3e, 0x36, 0x47, 0x06, 0x81, 0x6a, 0xba, 0x3e,
                                         0x25, 0x71, 0x78, 0x50, 0xc2, 0x6c, 0x9c, 0xd0, 0xd8, 0x9d };
  WD_CHECK(memcmp(d, abc, 20) == 0);
  static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  wd_ws_sha1(two, strlen(two), d); /* 56 bytes: the padding takes a second block */
  static const unsigned char two_d[20] = { 0x84, 0x98, 0x3e, 0x44, 0x1c, 0x3b, 0xd2, 0x6e, 0xba, 0xae,
                                           0x4a, 0xa1, 0xf9, 0x51, 0x29, 0xe5, 0xe5, 0x46, 0x70, 0xf1 };
  WD_CHECK(memcmp(d, two_d, 20) == 0);
  char out[29];
  WD_CHECK_EQ_INT(wd_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
  WD_CHECK_EQ_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="); /* RFC 6455 1.3 */
  WD_CHECK_EQ_INT(wd_ws_accept_key("short==", out), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ!=", out), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_ws_accept_key(NULL, out), WD_EINVAL);
}

WD_TEST(frames_whole_and_byte_by_byte) {
  static unsigned char buf[200000];
  static got_t g;
  int close = 0;
  for (int bytewise = 0; bytewise < 2; bytewise++) {
    /* RFC 6455 5.7: a masked "Hello" */
    static const unsigned char hello[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f,
                                           0x9f, 0x4d, 0x51, 0x58 };
    WD_CHECK_EQ_INT(feed(hello, sizeof hello, bytewise, 1 << 20, &g, &close), 0);
    WD_CHECK(g.n == 1 && g.op[0] == WD_WS_TEXT && g.len[0] == 5 && !memcmp(g.data[0], "Hello", 5));
    /* "Hel", a ping, "lo"; then an empty text and a close with its code */
    size_t n = client_frame(0x01, "Hel", 3, buf);
    n += client_frame(0x89, "p", 1, buf + n);
    n += client_frame(0x80, "lo", 2, buf + n);
    n += client_frame(0x81, "", 0, buf + n);
    n += client_frame(0x88, "\x03\xe8", 2, buf + n);
    WD_CHECK_EQ_INT(feed(buf, n, bytewise, 1 << 20, &g, &close), 0);
    WD_CHECK_EQ_INT(g.n, 4);
    WD_CHECK(g.op[0] == WD_WS_PING && g.len[0] == 1);
    WD_CHECK(g.op[1] == WD_WS_TEXT && g.len[1] == 5 && !memcmp(g.data[1], "Hello", 5));
    WD_CHECK(g.op[2] == WD_WS_TEXT && g.len[2] == 0);
    WD_CHECK(g.op[3] == WD_WS_CLOSE && g.len[3] == 2 && g.data[3][0] == 0x03);
    /* 16- and 64-bit lengths */
    static unsigned char big[70000];
    for (size_t i = 0; i < sizeof big; i++)
      big[i] = (unsigned char)(i * 7);
    n = client_frame(0x82, big, 300, buf);
    n += client_frame(0x82, big, sizeof big, buf + n);
    WD_CHECK_EQ_INT(feed(buf, n, bytewise, 1 << 20, &g, &close), 0);
    WD_CHECK(g.n == 2 && g.len[0] == 300 && g.len[1] == sizeof big);
    WD_CHECK(g.op[1] == WD_WS_BINARY && !memcmp(g.data[1], big, sizeof big));
  }
}

WD_TEST(broken_rules_get_their_close_codes) {
  static unsigned char buf[4096];
  static got_t g;
  int close = 0;
  static const unsigned char unmasked[] = { 0x81, 0x02, 'h', 'i' };
  WD_CHECK_EQ_INT(feed(unmasked, sizeof unmasked, 0, 1024, &g, &close), WD_EFORMAT);
  WD_CHECK_EQ_INT(close, WD_WS_CLOSE_PROTOCOL);
  size_t n = client_frame(0xC1, "hi", 2, buf); /* RSV1 */
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), WD_EFORMAT);
  n = client_frame(0x83, "hi", 2, buf); /* opcode 3 */
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), WD_EFORMAT);
  static char p126[126];
  memset(p126, 'x', sizeof p126);
  n = client_frame(0x89, p126, sizeof p126, buf); /* a ping over 125 bytes */
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), WD_EFORMAT);
  n = client_frame(0x09, "p", 1, buf); /* a fragmented ping */
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), WD_EFORMAT);
  n = client_frame(0x80, "lo", 2, buf); /* a continuation of nothing */
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), WD_EFORMAT);
  n = client_frame(0x01, "He", 2, buf); /* a new message inside one */
  n += client_frame(0x81, "x", 1, buf + n);
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), WD_EFORMAT);
  WD_CHECK_EQ_INT(close, WD_WS_CLOSE_PROTOCOL);
  n = client_frame(0x01, p126, 100, buf); /* fragments past the message limit */
  n += client_frame(0x80, p126, 100, buf + n);
  WD_CHECK_EQ_INT(feed(buf, n, 1, 150, &g, &close), WD_ETOOBIG);
  WD_CHECK_EQ_INT(close, WD_WS_CLOSE_TOO_BIG);
  WD_CHECK_EQ_INT(g.n, 0);
}

/* A close frame's payload: empty or a code an endpoint may send, and a
 * UTF-8 reason (RFC 6455 5.5.1, 7.4); anything else fails the connection
 * and is never given (so never echoed). */
WD_TEST(close_payloads) {
  static unsigned char buf[256];
  static got_t g;
  int close = 0;
  static const int ok[] = { 1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1014,
                            3000, 3999, 4000, 4999 };
  static const int bad[] = { 0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535 };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    const unsigned char p[2] = { (unsigned char)(ok[i] >> 8), (unsigned char)ok[i] };
    const size_t n = client_frame(0x88, p, 2, buf);
    WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), 0);
    WD_CHECK(g.n == 1 && g.op[0] == WD_WS_CLOSE && g.len[0] == 2);
  }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const unsigned char p[2] = { (unsigned char)(bad[i] >> 8), (unsigned char)bad[i] };
    const size_t n = client_frame(0x88, p, 2, buf);
    close = 0;
    WD_CHECK_EQ_INT(feed(buf, n, 1, 1024, &g, &close), WD_EFORMAT);
    WD_CHECK_EQ_INT(close, WD_WS_CLOSE_PROTOCOL);
    WD_CHECK_EQ_INT(g.n, 0);
  }
  size_t n = client_frame(0x88, "\x03", 1, buf); /* half a code */
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), WD_EFORMAT);
  WD_CHECK_EQ_INT(close, WD_WS_CLOSE_PROTOCOL);
  n = client_frame(0x88, "", 0, buf); /* no code at all: fine */
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), 0);
  WD_CHECK(g.n == 1 && g.len[0] == 0);
  n = client_frame(0x88, "\x03\xe8" "bye \xc3\xa9 \xf0\x9f\x98\x80", 13, buf); /* UTF-8 reason */
  WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), 0);
  WD_CHECK(g.n == 1 && g.len[0] == 13);
  static const char *const bad_utf8[] = { "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                          "\xff", "a\x80" };
  for (size_t i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++) {
    unsigned char p[16] = { 0x03, 0xe8 };
    const size_t k = strlen(bad_utf8[i]);
    memcpy(p + 2, bad_utf8[i], k);
    n = client_frame(0x88, p, 2 + k, buf);
    WD_CHECK_EQ_INT(feed(buf, n, 0, 1024, &g, &close), WD_EFORMAT);
    WD_CHECK_EQ_INT(close, WD_WS_CLOSE_BAD_DATA);
  }
}

/* Each message is held to the limit alone: two messages of 100 bytes
 * against a limit of 150 (the second, a fragment at a time too) pass;
 * the sizes of messages before do not add up. */
WD_TEST(each_message_counted_alone) {
  static unsigned char buf[4096], p100[100];
  static got_t g;
  int close = 0;
  memset(p100, 'x', sizeof p100);
  for (int bytewise = 0; bytewise < 2; bytewise++) {
    size_t n = client_frame(0x81, p100, 100, buf);
    n += client_frame(0x81, p100, 100, buf + n);
    n += client_frame(0x01, p100, 60, buf + n);
    n += client_frame(0x80, p100, 60, buf + n);
    WD_CHECK_EQ_INT(feed(buf, n, bytewise, 150, &g, &close), 0);
    WD_CHECK_EQ_INT(g.n, 3);
    WD_CHECK(g.len[0] == 100 && g.len[1] == 100 && g.len[2] == 120);
  }
}

/* A message past WD_WS_KEEP_BYTES leaves no buffer behind once delivered
 * (an idle session keeps little); a small one keeps its buffer for the
 * next. Both arrive whole. */
WD_TEST(large_message_buffer_given_back) {
  const size_t big_n = WD_WS_KEEP_BYTES + 4096;
  unsigned char *big = malloc(big_n), *buf = malloc(big_n + 64);
  static got_t g;
  WD_CHECK(big && buf);
  if (!big || !buf) {
    free(big), free(buf);
    return;
  }
  for (size_t i = 0; i < big_n; i++)
    big[i] = (unsigned char)(i * 13);
  wd_ws_parser_t p;
  wd_ws_parser_init(&p, 16u << 20);
  memset(&g, 0, sizeof g);
  int close = 0;
  size_t n = client_frame(0x82, big, 300, buf);
  WD_CHECK_EQ_INT(wd_ws_feed(&p, buf, n, on_msg, &g, &close), 0);
  WD_CHECK(p.msg_cap >= 300); /* small: kept */
  n = client_frame(0x82, big, big_n, buf);
  WD_CHECK_EQ_INT(wd_ws_feed(&p, buf, n, on_msg, &g, &close), 0);
  WD_CHECK(g.n == 2 && g.len[1] == big_n && !memcmp(g.data[1], big, sizeof g.data[1]));
  WD_CHECK(p.msg_cap == 0 && p.msg == NULL); /* large: given back */
  n = client_frame(0x81, "{}", 2, buf);
  WD_CHECK_EQ_INT(wd_ws_feed(&p, buf, n, on_msg, &g, &close), 0);
  WD_CHECK(g.n == 3 && g.len[2] == 2 && !memcmp(g.data[2], "{}", 2));
  wd_ws_parser_free(&p);
  free(big), free(buf);
}

WD_TEST(header_tokens) {
  WD_CHECK(wd_ws_has_token("keep-alive, Upgrade", "upgrade", 1));
  WD_CHECK(!wd_ws_has_token("keep-alive, Upgrade", "upgrade", 0));
  WD_CHECK(wd_ws_has_token(" a ,, realtime ", "realtime", 0));
  WD_CHECK(!wd_ws_has_token("realtimes, xrealtime", "realtime", 0));
  WD_CHECK(!wd_ws_has_token(NULL, "realtime", 0));
  size_t n = 0;
  const char *k = wd_ws_token_after("realtime, openai-insecure-api-key.sk-1 ,x",
                                    "openai-insecure-api-key.", &n);
  WD_CHECK(k && n == 4 && !strncmp(k, "sk-1", 4));
  WD_CHECK(!wd_ws_token_after("xopenai-insecure-api-key.sk", "openai-insecure-api-key.", &n));
  WD_CHECK(!wd_ws_token_after(" , ", "", &n));
  WD_CHECK(wd_ws_token_after(" , b", "", &n) && n == 1);
}

WD_TEST(server_frame_headers) {
  unsigned char h[10];
  WD_CHECK_EQ_INT((int)wd_ws_frame_header(WD_WS_TEXT, 5, h), 2);
  WD_CHECK(h[0] == 0x81 && h[1] == 5);
  WD_CHECK_EQ_INT((int)wd_ws_frame_header(WD_WS_TEXT, 126, h), 4);
  WD_CHECK(h[1] == 126 && h[2] == 0 && h[3] == 126);
  WD_CHECK_EQ_INT((int)wd_ws_frame_header(WD_WS_CLOSE, 65536, h), 10);
  WD_CHECK(h[0] == 0x88 && h[1] == 127 && h[7] == 1 && h[8] == 0 && h[9] == 0);
}

int main(void) { return wd_test_main(); }
