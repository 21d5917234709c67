/*
 * multipart.h - a multipart/form-data body (RFC 7578, RFC 2046 section 5.1)
 * split into its parts.
 *
 * The parser works on a whole body held in memory (the HTTP server caps and
 * collects it first). It is pure: no I/O, no global state, any number of
 * threads may parse at once. A part's data points into the body it was
 * parsed from, so the body must outlive the wd_multipart_t; names, file
 * names and content types are copied and NUL-terminated.
 *
 * Accepted, because real clients send it: a preamble before the first
 * boundary and an epilogue after the last, transport padding (spaces, tabs)
 * after a boundary, bare LF instead of CRLF, a quoted or unquoted boundary
 * parameter, quoted or token parameter values, `filename*=UTF-8''...`
 * (RFC 5987), parts in any order. Refused with a message: a Content-Type
 * that is not multipart/form-data or has no boundary, no boundary in the
 * body, a body that ends before the closing boundary (truncated), a part
 * without a Content-Disposition name, oversized header blocks, more than
 * WD_MULTIPART_MAX_PARTS parts.
 */
#ifndef WD_MULTIPART_H
#define WD_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

/* RFC 2046 allows 70 characters; some clients go further, so do we. */
#define WD_MULTIPART_MAX_BOUNDARY 200
/* A form for the audio API has about ten fields; this only bounds work. */
#define WD_MULTIPART_MAX_PARTS 1000
/* Bytes of header lines in one part. */
#define WD_MULTIPART_MAX_HEADER 16384

typedef struct {
  const char *name;          /* Content-Disposition name, NUL-terminated */
  const char *filename;      /* NULL when the part has no filename */
  const char *content_type;  /* the part's Content-Type, or NULL */
  const uint8_t *data;       /* the part's content, inside the parsed body */
  size_t len;
} wd_multipart_part_t;

typedef struct wd_multipart wd_multipart_t;

/*
 * Extracts the boundary from a Content-Type header value such as
 * `multipart/form-data; boundary="abc"`. Writes it NUL-terminated to out
 * (out_len >= WD_MULTIPART_MAX_BOUNDARY + 1 always suffices). Returns 0,
 * WD_EUNSUP when the media type is not multipart/form-data, WD_EFORMAT when
 * the boundary is missing, empty or too long, WD_EINVAL for NULL arguments.
 */
int wd_multipart_boundary(const char *content_type, char *out, size_t out_len);

/*
 * Parses body[0..len) sent with the given Content-Type header value. On
 * success *ret holds the parts (zero parts is possible: a body that is only
 * a closing boundary). On failure *ret is NULL, the result is WD_EUNSUP,
 * WD_EFORMAT (malformed), WD_ETRUNC (the body ends early), WD_ERANGE (too
 * many parts, header block too big), WD_ENOMEM or WD_EINVAL, and err (if
 * not NULL) holds a one-line message for the client.
 */
int wd_multipart_parse(const char *content_type, const void *body, size_t len,
                       wd_multipart_t **ret, char *err, size_t err_len);

int wd_multipart_count(const wd_multipart_t *m);
/* Part i in body order, or NULL when i is out of range. */
const wd_multipart_part_t *wd_multipart_part(const wd_multipart_t *m, int i);

/* Frees m (not the body); NULL is allowed. */
void wd_multipart_free(wd_multipart_t *m);

#endif
