/*
 * api_helpers.h - what the API tests share: a raw-socket HTTP/1.1 client
 * (no libcurl: the tests need byte control over bodies, chunking, slow and
 * vanishing clients), a multipart body builder, a WAV generator and a toy
 * tokenizer. Header-only, static functions; include once per test binary.
 */
#ifndef WD_API_HELPERS_H
#define WD_API_HELPERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "tokenizer.h"

/* ---- time ---------------------------------------------------------------- */

static inline double th_now(void) { return wd_now_s(); }

static inline void th_sleep_ms(int ms) {
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

/* ---- a growable byte buffer ---------------------------------------------- */

typedef struct {
  char *p;
  size_t len, cap;
} th_buf_t;

static inline void th_buf_add(th_buf_t *b, const void *data, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
      cap *= 2;
    b->p = realloc(b->p, cap);
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static inline void th_buf_str(th_buf_t *b, const char *s) { th_buf_add(b, s, strlen(s)); }

static inline void th_buf_free(th_buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* ---- sockets --------------------------------------------------------------- */

static inline int th_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static inline int th_send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads what arrives within timeout_ms into b; returns bytes read, 0 on
 * EOF, -1 on timeout or error. */
static inline ssize_t th_recv_some(int fd, th_buf_t *b, int timeout_ms) {
  struct pollfd p = { .fd = fd, .events = POLLIN };
  if (poll(&p, 1, timeout_ms) <= 0)
    return -1;
  char tmp[65536];
  ssize_t r = recv(fd, tmp, sizeof tmp, 0);
  if (r > 0)
    th_buf_add(b, tmp, (size_t)r);
  return r;
}

/* ---- responses --------------------------------------------------------------- */

typedef struct {
  int status;           /* 0: no response (closed, timed out, garbage) */
  char *headers;        /* the header block, lines joined with "\r\n" */
  char *body;           /* de-chunked, NUL-terminated */
  size_t body_len;
  int closed;           /* the server closed the connection after it */
} th_resp_t;

static inline void th_resp_free(th_resp_t *r) {
  free(r->headers);
  free(r->body);
  memset(r, 0, sizeof *r);
}

/* The value of header name (a per-thread buffer), or NULL. */
static inline const char *th_header(const th_resp_t *r, const char *name) {
  static _Thread_local char v[1024];
  if (!r->headers)
    return NULL;
  const size_t n = strlen(name);
  for (const char *line = r->headers; line && *line;) {
    const char *eol = strstr(line, "\r\n");
    if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
      const char *s = line + n + 1;
      while (*s == ' ')
        s++;
      const size_t len = eol ? (size_t)(eol - s) : strlen(s);
      snprintf(v, sizeof v, "%.*s", (int)len, s);
      return v;
    }
    line = eol ? eol + 2 : NULL;
  }
  return NULL;
}

/* Decodes a chunked body in-place from raw[0..n); returns 1 when complete. */
static inline int th_dechunk(const char *raw, size_t n, th_buf_t *out) {
  size_t i = 0;
  out->len = 0;
  for (;;) {
    const char *eol = memchr(raw + i, '\n', n - i);
    if (!eol)
      return 0;
    const size_t size = strtoul(raw + i, NULL, 16);
    i = (size_t)(eol - raw) + 1;
    if (size == 0)
      return n - i >= 2; /* the final CRLF */
    if (n - i < size + 2)
      return 0;
    th_buf_add(out, raw + i, size);
    i += size + 2;
  }
}

/*
 * Reads one response from fd within timeout_ms (whole). For HEAD requests
 * pass head = 1 (no body follows). Stops after a complete response; keeps
 * the connection open. status is 0 when the connection closed (closed = 1)
 * or the time ran out before a complete response.
 */
static inline th_resp_t th_read_response(int fd, int head, int timeout_ms) {
  th_resp_t r = { 0 };
  th_buf_t raw = { 0 };
  const double deadline = th_now() + timeout_ms / 1000.0;
  size_t hdr_end = 0;
  for (;;) {
    if (!hdr_end && raw.p) {
      char *e = strstr(raw.p, "\r\n\r\n");
      if (e)
        hdr_end = (size_t)(e - raw.p) + 4;
    }
    if (hdr_end) {
      const size_t blen = raw.len - hdr_end;
      char *hdrs = strndup(raw.p, hdr_end - 4);
      const char *eol = strstr(hdrs, "\r\n");
      r.status = atoi(hdrs + 9);
      r.headers = strdup(eol ? eol + 2 : "");
      free(hdrs);
      const char *cl = th_header(&r, "Content-Length");
      const char *te = th_header(&r, "Transfer-Encoding");
      const int no_body = head || r.status == 204 || r.status == 304 || r.status < 200;
      if (no_body || (cl && blen >= strtoul(cl, NULL, 10))) {
        const size_t n = no_body ? 0 : strtoul(cl, NULL, 10);
        r.body = malloc(n + 1);
        memcpy(r.body, raw.p + hdr_end, n);
        r.body[n] = '\0';
        r.body_len = n;
        break;
      }
      if (te && strcasecmp(te, "chunked") == 0) {
        th_buf_t out = { 0 };
        if (th_dechunk(raw.p + hdr_end, blen, &out)) {
          r.body = out.p ? out.p : calloc(1, 1);
          r.body_len = out.len;
          break;
        }
        th_buf_free(&out);
      }
      free(r.headers);
      r.headers = NULL;
    }
    const int left = (int)((deadline - th_now()) * 1000);
    const ssize_t got = left > 0 ? th_recv_some(fd, &raw, left) : -1;
    if (got <= 0) {
      /* Closed or timed out before a complete response. */
      r.closed = got == 0;
      r.status = 0;
      break;
    }
  }
  th_buf_free(&raw);
  return r;
}

/* One request on a fresh connection: sends head + body, reads the answer. */
static inline th_resp_t th_request(int port, const char *method, const char *path,
                                   const char *extra_headers, const void *body, size_t len) {
  th_resp_t r = { 0 };
  int fd = th_connect(port);
  if (fd < 0)
    return r;
  char head[4096];
  int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s", method, path,
                   extra_headers ? extra_headers : "");
  if (body)
    n += snprintf(head + n, sizeof head - (size_t)n, "Content-Length: %zu\r\n", len);
  n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
  if (th_send_all(fd, head, (size_t)n) == 0 && (!body || th_send_all(fd, body, len) == 0))
    /* A bound for a hung server, not a speed check: four parallel model
     * requests on lavapipe take over 20 s on a busy 2-core machine. */
    r = th_read_response(fd, strcmp(method, "HEAD") == 0, 180000);
  close(fd);
  return r;
}

/* ---- request bodies -------------------------------------------------------- */

#define TH_BOUNDARY "th-boundary-1234"
#define TH_MULTIPART "Content-Type: multipart/form-data; boundary=" TH_BOUNDARY "\r\n"

static inline void th_form_field(th_buf_t *b, const char *name, const char *value) {
  char h[512];
  snprintf(h, sizeof h, "--" TH_BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n",
           name);
  th_buf_str(b, h);
  th_buf_str(b, value);
  th_buf_str(b, "\r\n");
}

static inline void th_form_file(th_buf_t *b, const char *name, const void *data, size_t n) {
  char h[512];
  snprintf(h, sizeof h,
           "--" TH_BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"a.wav\""
           "\r\nContent-Type: audio/wav\r\n\r\n", name);
  th_buf_str(b, h);
  th_buf_add(b, data, n);
  th_buf_str(b, "\r\n");
}

static inline void th_form_end(th_buf_t *b) { th_buf_str(b, "--" TH_BOUNDARY "--\r\n"); }

/* A 16 kHz mono 16-bit PCM WAV of a 440 Hz tone. */
/* The 44-byte header of a 16 kHz mono s16 WAV with n samples. */
static inline void th_wav_header(th_buf_t *b, uint32_t n) {
  const uint32_t data = n * 2;
  unsigned char h[44];
  memcpy(h, "RIFF", 4);
  const uint32_t riff = 36 + data, fmt_len = 16, rate = 16000, byte_rate = 32000;
  const uint16_t pcm = 1, ch = 1, align = 2, bits = 16;
  memcpy(h + 4, &riff, 4);
  memcpy(h + 8, "WAVEfmt ", 8);
  memcpy(h + 16, &fmt_len, 4);
  memcpy(h + 20, &pcm, 2);
  memcpy(h + 22, &ch, 2);
  memcpy(h + 24, &rate, 4);
  memcpy(h + 28, &byte_rate, 4);
  memcpy(h + 32, &align, 2);
  memcpy(h + 34, &bits, 2);
  memcpy(h + 36, "data", 4);
  memcpy(h + 40, &data, 4);
  th_buf_add(b, h, sizeof h);
}

static inline void th_wav(th_buf_t *b, double seconds) {
  const uint32_t n = (uint32_t)(seconds * 16000);
  th_wav_header(b, n);
  for (uint32_t i = 0; i < n; i++) {
    const int16_t v = (int16_t)(8000 * sin(2 * 3.14159265358979 * 440 * i / 16000.0));
    th_buf_add(b, &v, 2);
  }
}

/* ---- a toy tokenizer ----------------------------------------------------- */

/* Token i < 256 is byte i (ids of ASCII text are its bytes); the other
 * 50000 text tokens are 3-byte strings of high bytes. n_vocab picks
 * English-only (51864) or multilingual (51865). */
static inline wd_tokenizer_t *th_tokenizer(int n_vocab) {
  enum { N = 50257 };
  static char blob[N * 3];
  static const char *toks[N];
  static size_t lens[N];
  for (int i = 0; i < N; i++) {
    char *c = &blob[i * 3];
    if (i < 256) {
      c[0] = (char)i;
      lens[i] = 1;
    } else {
      const int k = i - 256;
      c[0] = (char)(0x80 + k % 128);
      c[1] = (char)(0x80 + k / 128 % 128);
      c[2] = (char)(0x80 + k / 16384);
      lens[i] = 3;
    }
    toks[i] = c;
  }
  wd_tokenizer_t *t = NULL;
  return wd_tokenizer_new(toks, lens, N, n_vocab, &t) == 0 ? t : NULL;
}

#endif
