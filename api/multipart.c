/*
 * multipart.c - multipart/form-data parsing (see multipart.h).
 *
 * Shape of a body (RFC 2046 5.1.1, with B the boundary):
 *
 *   preamble CRLF? "--B" padding CRLF          first delimiter
 *   header-line CRLF ... CRLF                   part headers, blank line
 *   content CRLF "--B" padding CRLF             next part
 *   ...
 *   content CRLF "--B--" epilogue               close delimiter
 *
 * A delimiter is only recognised at the start of a line: "--B" at offset 0
 * or right after a LF. The line break before it belongs to the delimiter, not
 * to the content. "--B" followed by anything but "--", padding and a line
 * break is content (a boundary that happens to prefix a longer line).
 *
 * Pure functions on a caller's buffer; part data is never copied.
 */
#include "multipart.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"

/* A part as stored: the public view plus the strings it owns. */
typedef struct {
  wd_multipart_part_t pub;
  char *name, *filename, *content_type;
} wd_mp_part_t;

struct wd_multipart {
  wd_mp_part_t *parts;
  int n, cap;
};

/* The parser's cursor over one body. */
typedef struct {
  const uint8_t *b;
  size_t len;
  char delim[WD_MULTIPART_MAX_BOUNDARY + 3]; /* "--" boundary */
  size_t dlen;
  char *err;
  size_t err_len;
} wd_mp_ctx_t;

/* Result of a delimiter search. */
typedef struct {
  int found;          /* a delimiter line was found */
  int close;          /* it is the close delimiter "--B--" */
  size_t content_end; /* end of the content before it (line break excluded) */
  size_t next;        /* first byte after the delimiter line */
} wd_mp_delim_t;

static int mp_fail(wd_mp_ctx_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats the client message and returns rc: `return mp_fail(c, WD_E..., ...)`. */
static int mp_fail(wd_mp_ctx_t *c, int rc, const char *fmt, ...) {
  if (c->err && c->err_len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->err_len, fmt, ap);
    va_end(ap);
  }
  return rc;
}

static int is_ws(int ch) { return ch == ' ' || ch == '\t'; }

/* [s, s+n) equals the NUL-terminated lit, ignoring ASCII case. */
static int span_ieq(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

/* Trims spaces and tabs from both ends of [*s, *s + *n). */
static void span_trim(const char **s, size_t *n) {
  while (*n > 0 && is_ws((unsigned char)(*s)[0])) {
    (*s)++;
    (*n)--;
  }
  while (*n > 0 && is_ws((unsigned char)(*s)[*n - 1]))
    (*n)--;
}

/*
 * Reads the next `; key=value` parameter of a header value from *pp up to
 * end. Returns 1 with the key span and the raw value span (quotes included
 * when quoted), 0 when no parameter is left, WD_EFORMAT for an unterminated
 * quoted string. A parameter without '=' has an empty value. Stray text
 * between parameters is skipped, as browsers and libraries do.
 */
static int next_param(const char **pp, const char *end, const char **key, size_t *klen,
                      const char **val, size_t *vlen) {
  const char *p = *pp;
  while (p < end && *p != ';')
    p++;
  if (p >= end)
    return 0;
  p++;
  while (p < end && is_ws((unsigned char)*p))
    p++;
  *key = p;
  while (p < end && *p != '=' && *p != ';')
    p++;
  *klen = (size_t)(p - *key);
  span_trim(key, klen);
  *val = p;
  *vlen = 0;
  if (p < end && *p == '=') {
    p++;
    while (p < end && is_ws((unsigned char)*p))
      p++;
    *val = p;
    if (p < end && *p == '"') {
      for (p++; p < end && *p != '"'; p++)
        if (*p == '\\' && p + 1 < end)
          p++;
      if (p >= end)
        return WD_EFORMAT;
      p++; /* the closing quote */
      *vlen = (size_t)(p - *val);
    } else {
      while (p < end && *p != ';')
        p++;
      *vlen = (size_t)(p - *val);
      span_trim(val, vlen);
    }
  }
  *pp = p;
  return 1;
}

/* A malloc'd copy of a raw parameter value: quotes removed, backslash
 * escapes resolved inside quotes. NULL on allocation failure. */
static char *param_dup(const char *v, size_t n) {
  char *out = malloc(n + 1);
  if (!out)
    return NULL;
  size_t k = 0;
  if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
    for (size_t i = 1; i + 1 < n; i++) {
      if (v[i] == '\\' && i + 2 < n)
        i++;
      out[k++] = v[i];
    }
  } else {
    memcpy(out, v, n);
    k = n;
  }
  out[k] = '\0';
  return out;
}

static int hexval(int ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* RFC 5987 ext-value `charset'language'pct-encoded` decoded to bytes (the
 * charset is not converted: UTF-8 is what every client sends). NULL when
 * malformed or on allocation failure. */
static char *ext_value_dup(const char *v, size_t n) {
  const char *q1 = memchr(v, '\'', n);
  const char *q2 = q1 ? memchr(q1 + 1, '\'', n - (size_t)(q1 + 1 - v)) : NULL;
  if (!q2)
    return NULL;
  const char *p = q2 + 1, *end = v + n;
  char *out = malloc((size_t)(end - p) + 1);
  if (!out)
    return NULL;
  size_t k = 0;
  while (p < end) {
    if (*p == '%') {
      const int hi = end - p >= 3 ? hexval((unsigned char)p[1]) : -1;
      const int lo = end - p >= 3 ? hexval((unsigned char)p[2]) : -1;
      if (hi < 0 || lo < 0) {
        free(out);
        return NULL;
      }
      out[k++] = (char)(hi * 16 + lo);
      p += 3;
    } else {
      out[k++] = *p++;
    }
  }
  out[k] = '\0';
  return out;
}

int wd_multipart_boundary(const char *content_type, char *out, size_t out_len) {
  if (!content_type || !out || out_len == 0)
    return WD_EINVAL;
  out[0] = '\0';
  const char *p = content_type, *end = content_type + strlen(content_type);
  while (p < end && is_ws((unsigned char)*p))
    p++;
  const char *mt = p;
  while (p < end && *p != ';')
    p++;
  size_t mtlen = (size_t)(p - mt);
  span_trim(&mt, &mtlen);
  if (!span_ieq(mt, mtlen, "multipart/form-data"))
    return WD_EUNSUP;
  const char *key, *val;
  size_t klen, vlen;
  int r;
  while ((r = next_param(&p, end, &key, &klen, &val, &vlen)) > 0) {
    if (!span_ieq(key, klen, "boundary"))
      continue;
    char *b = param_dup(val, vlen);
    if (!b)
      return WD_ENOMEM;
    const size_t blen = strlen(b);
    /* A boundary with a line break could never be matched at a line start. */
    const int bad = blen == 0 || blen > WD_MULTIPART_MAX_BOUNDARY || blen + 1 > out_len ||
                    strpbrk(b, "\r\n") != NULL;
    if (!bad)
      memcpy(out, b, blen + 1);
    free(b);
    return bad ? WD_EFORMAT : 0;
  }
  return WD_EFORMAT; /* no boundary parameter (or a broken quoted value) */
}

/*
 * Finds the first delimiter line that starts at or after `from` (at `from`
 * itself only when from == 0 or the byte before it is a LF). Sets *trunc
 * when the body ends inside what may be a delimiter.
 */
static wd_mp_delim_t find_delim(const wd_mp_ctx_t *c, size_t from, int *trunc) {
  wd_mp_delim_t d = { 0 };
  *trunc = 0;
  size_t i = from;
  /* The first candidate is `from` itself when a line starts there. */
  int at_line_start = from == 0 || c->b[from - 1] == '\n';
  for (;;) {
    if (!at_line_start) {
      const uint8_t *nl = i < c->len ? memchr(c->b + i, '\n', c->len - i) : NULL;
      if (!nl)
        return d;
      i = (size_t)(nl - c->b) + 1;
    }
    at_line_start = 0;
    const size_t avail = c->len - i;
    if (avail < c->dlen) {
      if (memcmp(c->b + i, c->delim, avail) == 0)
        *trunc = 1;
      continue;
    }
    if (memcmp(c->b + i, c->delim, c->dlen) != 0)
      continue;
    size_t j = i + c->dlen;
    if (j + 2 <= c->len && c->b[j] == '-' && c->b[j + 1] == '-') {
      d.close = 1;
      d.next = j + 2;
    } else {
      if (j + 1 == c->len && c->b[j] == '-') {
        *trunc = 1;
        continue;
      }
      while (j < c->len && is_ws(c->b[j]))
        j++;
      if (j == c->len || (c->b[j] == '\r' && j + 1 == c->len)) {
        *trunc = 1;
        continue;
      }
      if (c->b[j] == '\r' && c->b[j + 1] == '\n')
        d.next = j + 2;
      else if (c->b[j] == '\n')
        d.next = j + 1;
      else
        continue; /* "--B" then other text: content, not a delimiter */
    }
    /* The line break before the delimiter is part of it. */
    size_t end = i;
    if (end > from && c->b[end - 1] == '\n')
      end--;
    if (end > from && c->b[end - 1] == '\r')
      end--;
    d.found = 1;
    d.content_end = end;
    return d;
  }
}

/* Parses one Content-Disposition value into the part. */
static int parse_disposition(wd_mp_ctx_t *c, int idx, const char *v, const char *end,
                             wd_mp_part_t *part) {
  const char *p = v;
  while (p < end && *p != ';')
    p++;
  const char *type = v;
  size_t tlen = (size_t)(p - v);
  span_trim(&type, &tlen);
  if (!span_ieq(type, tlen, "form-data"))
    return mp_fail(c, WD_EFORMAT, "multipart part %d: Content-Disposition is '%.*s', not form-data",
                   idx + 1, (int)(tlen > 64 ? 64 : tlen), type);
  const char *key, *val;
  size_t klen, vlen;
  int r;
  char *ext_filename = NULL;
  while ((r = next_param(&p, end, &key, &klen, &val, &vlen)) > 0) {
    char **dst = NULL;
    if (span_ieq(key, klen, "name"))
      dst = &part->name;
    else if (span_ieq(key, klen, "filename"))
      dst = &part->filename;
    if (dst) {
      free(*dst);
      if (!(*dst = param_dup(val, vlen)))
        return mp_fail(c, WD_ENOMEM, "out of memory");
    } else if (span_ieq(key, klen, "filename*")) {
      free(ext_filename);
      ext_filename = ext_value_dup(val, vlen); /* ignored when malformed */
    }
  }
  if (r < 0) {
    free(ext_filename);
    return mp_fail(c, WD_EFORMAT,
                   "multipart part %d: unterminated quoted string in Content-Disposition",
                   idx + 1);
  }
  /* RFC 6266: filename* wins over filename when both are given. */
  if (ext_filename) {
    free(part->filename);
    part->filename = ext_filename;
  }
  return 0;
}

/*
 * Parses the header block of part idx starting at *pos, up to and including
 * the blank line; *pos then points at the content.
 */
static int parse_headers(wd_mp_ctx_t *c, int idx, size_t *pos, wd_mp_part_t *part) {
  size_t p = *pos;
  const size_t limit = p + WD_MULTIPART_MAX_HEADER < c->len ? p + WD_MULTIPART_MAX_HEADER : c->len;
  for (;;) {
    const uint8_t *nl = p < limit ? memchr(c->b + p, '\n', limit - p) : NULL;
    if (!nl) {
      if (limit < c->len)
        return mp_fail(c, WD_ERANGE, "multipart part %d: header block over %d bytes", idx + 1,
                       WD_MULTIPART_MAX_HEADER);
      return mp_fail(c, WD_ETRUNC, "multipart body ends inside the headers of part %d "
                     "(truncated upload?)", idx + 1);
    }
    const size_t eol = (size_t)(nl - c->b);
    size_t n = eol - p;
    const char *line = (const char *)c->b + p;
    if (n > 0 && line[n - 1] == '\r')
      n--;
    p = eol + 1;
    if (n == 0)
      break;
    if (is_ws((unsigned char)line[0]))
      continue; /* obsolete line folding: not used by form-data clients */
    const char *colon = memchr(line, ':', n);
    if (!colon)
      return mp_fail(c, WD_EFORMAT, "multipart part %d: malformed header line '%.*s'", idx + 1,
                     (int)(n > 64 ? 64 : n), line);
    const char *hname = line;
    size_t hlen = (size_t)(colon - line);
    span_trim(&hname, &hlen);
    const char *val = colon + 1, *vend = line + n;
    size_t vlen = (size_t)(vend - val);
    span_trim(&val, &vlen);
    if (span_ieq(hname, hlen, "Content-Disposition")) {
      int rc = parse_disposition(c, idx, val, val + vlen, part);
      if (rc < 0)
        return rc;
    } else if (span_ieq(hname, hlen, "Content-Type")) {
      free(part->content_type);
      part->content_type = param_dup(val, vlen);
      if (!part->content_type)
        return mp_fail(c, WD_ENOMEM, "out of memory");
    }
  }
  if (!part->name)
    return mp_fail(c, WD_EFORMAT, "multipart part %d has no Content-Disposition name", idx + 1);
  *pos = p;
  return 0;
}

static void part_clear(wd_mp_part_t *p) {
  free(p->name);
  free(p->filename);
  free(p->content_type);
  memset(p, 0, sizeof *p);
}

void wd_multipart_free(wd_multipart_t *m) {
  if (!m)
    return;
  for (int i = 0; i < m->n; i++)
    part_clear(&m->parts[i]);
  free(m->parts);
  free(m);
}

int wd_multipart_count(const wd_multipart_t *m) { return m ? m->n : 0; }

const wd_multipart_part_t *wd_multipart_part(const wd_multipart_t *m, int i) {
  return (m && i >= 0 && i < m->n) ? &m->parts[i].pub : NULL;
}

/* Appends a zeroed part; NULL on allocation failure. */
static wd_mp_part_t *parts_push(wd_multipart_t *m) {
  if (m->n == m->cap) {
    const int cap = m->cap ? m->cap * 2 : 8;
    wd_mp_part_t *p = realloc(m->parts, (size_t)cap * sizeof *p);
    if (!p)
      return NULL;
    m->parts = p;
    m->cap = cap;
  }
  wd_mp_part_t *p = &m->parts[m->n++];
  memset(p, 0, sizeof *p);
  return p;
}

int wd_multipart_parse(const char *content_type, const void *body, size_t len,
                       wd_multipart_t **ret, char *err, size_t err_len) {
  if (err && err_len)
    err[0] = '\0';
  if (ret)
    *ret = NULL;
  if (!content_type || (!body && len) || !ret)
    return WD_EINVAL;
  wd_mp_ctx_t c = { .b = body, .len = len, .err = err, .err_len = err_len };
  char boundary[WD_MULTIPART_MAX_BOUNDARY + 1];
  int rc = wd_multipart_boundary(content_type, boundary, sizeof boundary);
  if (rc == WD_EUNSUP)
    return mp_fail(&c, rc, "Content-Type must be multipart/form-data");
  if (rc < 0)
    return mp_fail(&c, rc, "Content-Type multipart/form-data needs a boundary parameter of "
                   "1 to %d characters", WD_MULTIPART_MAX_BOUNDARY);
  c.dlen = (size_t)snprintf(c.delim, sizeof c.delim, "--%s", boundary);

  wd_multipart_t *m = calloc(1, sizeof *m);
  if (!m)
    return mp_fail(&c, WD_ENOMEM, "out of memory");
  int trunc;
  wd_mp_delim_t d = find_delim(&c, 0, &trunc);
  if (!d.found) {
    rc = len == 0 || trunc ? mp_fail(&c, WD_ETRUNC, "multipart body is empty or truncated")
                           : mp_fail(&c, WD_EFORMAT, "multipart body has no boundary '%s'",
                                     c.delim);
    goto fail;
  }
  /* The preamble [0, d.content_end) is ignored, as the epilogue will be. */
  while (!d.close) {
    if (m->n >= WD_MULTIPART_MAX_PARTS) {
      rc = mp_fail(&c, WD_ERANGE, "multipart body has more than %d parts",
                   WD_MULTIPART_MAX_PARTS);
      goto fail;
    }
    wd_mp_part_t *part = parts_push(m);
    if (!part) {
      rc = mp_fail(&c, WD_ENOMEM, "out of memory");
      goto fail;
    }
    const int idx = m->n - 1;
    size_t pos = d.next;
    if ((rc = parse_headers(&c, idx, &pos, part)) < 0)
      goto fail;
    d = find_delim(&c, pos, &trunc);
    if (!d.found) {
      rc = mp_fail(&c, WD_ETRUNC, "multipart body ends inside part %d ('%.64s') without a "
                   "closing boundary (truncated upload?)", idx + 1, part->name);
      goto fail;
    }
    part->pub.name = part->name;
    part->pub.filename = part->filename;
    part->pub.content_type = part->content_type;
    part->pub.data = c.b + pos;
    part->pub.len = d.content_end - pos;
  }
  *ret = m;
  return 0;
fail:
  wd_multipart_free(m);
  return rc;
}
