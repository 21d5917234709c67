/*
 * safetensors.c - see safetensors.h.
 */
#include "safetensors.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define MAX_HEADER (1u << 20)

struct wd_st {
  char *path;
  unsigned char *buf;
  size_t len;
  json_t *hdr;
  const unsigned char *data; /* the tensors' bytes: buf + 8 + header length */
  size_t data_len;
};

static int fail(char *err, size_t err_len, const char *path, const char *what) {
  snprintf(err, err_len, "%s: %s", path, what);
  return WD_EMODEL;
}

static int read_file(const char *path, size_t max_bytes, unsigned char **ret, size_t *ret_len,
                     char *err, size_t err_len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, err_len, "%s: cannot open", path);
    return WD_ENOENT;
  }
  size_t cap = 1u << 20, n = 0;
  unsigned char *buf = malloc(cap);
  int rc = buf ? 0 : WD_ENOMEM;
  while (!rc) {
    if (n == cap) {
      if (cap > max_bytes) {
        char msg[96];
        snprintf(msg, sizeof msg, "larger than any such file (%zu bytes)", max_bytes);
        rc = fail(err, err_len, path, msg);
        break;
      }
      unsigned char *nb = realloc(buf, cap * 2);
      if (!nb) {
        rc = WD_ENOMEM;
        break;
      }
      buf = nb, cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  fclose(f);
  if (!rc && n > max_bytes) {
    char msg[96];
    snprintf(msg, sizeof msg, "larger than any such file (%zu bytes)", max_bytes);
    rc = fail(err, err_len, path, msg);
  }
  if (rc) {
    free(buf);
    return rc;
  }
  *ret = buf;
  *ret_len = n;
  return 0;
}

void wd_st_close(wd_st_t *st) {
  if (!st)
    return;
  json_decref(st->hdr);
  free(st->buf);
  free(st->path);
  free(st);
}

int wd_st_open(const char *path, size_t max_bytes, const char *format, const char *version,
               const char *hint, wd_st_t **ret, char *err, size_t err_len) {
  *ret = NULL;
  wd_st_t *st = calloc(1, sizeof *st);
  if (!st || !(st->path = strdup(path))) {
    free(st);
    return WD_ENOMEM;
  }
  int rc = read_file(path, max_bytes, &st->buf, &st->len, err, err_len);
  if (rc)
    goto out;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0 && st->len >= 8; i--)
    hlen = hlen << 8 | st->buf[i];
  if (st->len < 8 || hlen == 0 || hlen > MAX_HEADER || hlen > st->len - 8) {
    rc = fail(err, err_len, path, "not a safetensors file");
    goto out;
  }
  json_error_t jerr;
  st->hdr = json_loadb((const char *)st->buf + 8, (size_t)hlen, 0, &jerr);
  const json_t *meta = json_object_get(st->hdr, "__metadata__");
  const char *fmt = json_string_value(json_object_get(meta, "format"));
  const char *ver = json_string_value(json_object_get(meta, "version"));
  if (!json_is_object(st->hdr) || !fmt || strcmp(fmt, format) != 0 || !ver ||
      strcmp(ver, version) != 0) {
    char msg[256];
    snprintf(msg, sizeof msg, "not a %s file of version %s%s%s", format, version,
             hint ? ": " : "", hint ? hint : "");
    rc = fail(err, err_len, path, msg);
    goto out;
  }
  if ((8 + hlen) % 4) {
    rc = fail(err, err_len, path, "tensor data not 4-byte aligned");
    goto out;
  }
  st->data = st->buf + 8 + hlen;
  st->data_len = st->len - 8 - (size_t)hlen;
out:
  if (rc) {
    wd_st_close(st);
    return rc;
  }
  *ret = st;
  return 0;
}

const char *wd_st_meta(const wd_st_t *st, const char *key) {
  return json_string_value(json_object_get(json_object_get(st->hdr, "__metadata__"), key));
}

/* "[a, b, c]" into buf. */
static void shape_str(char *buf, size_t len, size_t n_dims, const size_t *shape) {
  size_t at = (size_t)snprintf(buf, len, "[");
  for (size_t d = 0; d < n_dims && at < len; d++)
    at += (size_t)snprintf(buf + at, len - at, d ? ", %zu" : "%zu", shape[d]);
  if (at < len)
    snprintf(buf + at, len - at, "]");
}

int wd_st_f32(const wd_st_t *st, const char *name, size_t n_dims, const size_t *shape,
              const float **ret, char *err, size_t err_len) {
  char msg[320], want[96];
  shape_str(want, sizeof want, n_dims, shape);
  const json_t *t = json_object_get(st->hdr, name);
  const json_t *jshape = json_object_get(t, "shape"), *offs = json_object_get(t, "data_offsets");
  const char *dtype = json_string_value(json_object_get(t, "dtype"));
  if (!t || !dtype || strcmp(dtype, "F32") != 0 || !json_is_array(jshape) ||
      !json_is_array(offs) || json_array_size(offs) != 2) {
    snprintf(msg, sizeof msg, "tensor %s missing or not F32 (expected F32 %s)", name, want);
    return fail(err, err_len, st->path, msg);
  }
  int same = json_array_size(jshape) == n_dims;
  size_t n = 1;
  for (size_t d = 0; d < n_dims && same; d++) {
    const json_t *v = json_array_get(jshape, d);
    same = json_is_integer(v) && json_integer_value(v) >= 0 &&
           (size_t)json_integer_value(v) == shape[d];
    n *= shape[d];
  }
  if (!same) {
    snprintf(msg, sizeof msg, "tensor %s has another shape than the expected %s", name, want);
    return fail(err, err_len, st->path, msg);
  }
  const json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
  if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
      json_integer_value(e) < json_integer_value(b) ||
      (uint64_t)json_integer_value(e) > st->data_len ||
      (uint64_t)(json_integer_value(e) - json_integer_value(b)) != (uint64_t)n * 4 ||
      json_integer_value(b) % 4) {
    snprintf(msg, sizeof msg, "tensor %s: data offsets out of the file or of the wrong size",
             name);
    return fail(err, err_len, st->path, msg);
  }
  *ret = (const float *)(const void *)(st->data + json_integer_value(b));
  return 0;
}
