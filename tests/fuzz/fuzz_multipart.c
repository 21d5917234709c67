/*
 * fuzz_multipart.c - the upload path of POST /v1/audio/transcriptions and
 * /v1/audio/translations: the multipart parser (api/multipart.c) and the
 * OpenAI form-field validation (api/request.c) on what it produced.
 *
 * Input: the Content-Type header value up to the first '\n', then the body.
 * Byte 0 of the body picks the model validation sees (English-only,
 * multilingual, large-v3, turbo) and the task; it stays part of the body too.
 */
#include <stdint.h>
#include <string.h>

#include "api_error.h"
#include "fuzz_common.h"
#include "multipart.h"
#include "request.h"

static const char *const k_names[] = { "whisper-1", "tiny.en", "base" };
static const wd_request_model_t k_models[4] = {
  { k_names, 3, 0, 0, 0 },   /* English-only */
  { k_names, 3, 1, 99, 0 },  /* multilingual */
  { k_names, 3, 1, 100, 0 }, /* large-v3 */
  { k_names, 3, 1, 100, 1 }, /* large-v3-turbo: no translation */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nl = memchr(data, '\n', size);
  if (!nl)
    return 0;
  /* The header value is a C string in the server (libmicrohttpd's). */
  const size_t ct_len = (size_t)(nl - data);
  char *ct = malloc(ct_len + 1);
  if (!ct)
    abort();
  memcpy(ct, data, ct_len);
  ct[ct_len] = '\0';
  const uint8_t *body = nl + 1;
  const size_t body_len = size - ct_len - 1;

  char boundary[WD_MULTIPART_MAX_BOUNDARY + 1];
  (void)wd_multipart_boundary(ct, boundary, sizeof boundary);

  wd_multipart_t *m = NULL;
  char err[256];
  int rc = wd_multipart_parse(ct, body, body_len, &m, err, sizeof err);
  if (rc < 0) {
    FUZZ_CHECK(m == NULL);
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
  } else {
    /* Every part must lie inside the body, with NUL-terminated strings. */
    const int n = wd_multipart_count(m);
    FUZZ_CHECK(n >= 0 && n <= WD_MULTIPART_MAX_PARTS);
    for (int i = 0; i < n; i++) {
      const wd_multipart_part_t *p = wd_multipart_part(m, i);
      FUZZ_CHECK(p != NULL && p->name != NULL);
      FUZZ_CHECK(p->data >= body && p->len <= body_len &&
                 (size_t)(p->data - body) <= body_len - p->len);
      volatile size_t sink = strlen(p->name);
      if (p->filename)
        sink += strlen(p->filename);
      if (p->content_type)
        sink += strlen(p->content_type);
      (void)sink;
    }
    FUZZ_CHECK(wd_multipart_part(m, n) == NULL && wd_multipart_part(m, -1) == NULL);

    const uint8_t pick = body_len > 0 ? body[0] : 0;
    const wd_request_task_t task = (pick & 4) ? WD_REQUEST_TRANSLATE : WD_REQUEST_TRANSCRIBE;
    wd_request_t r;
    wd_api_error_t e = { 0 };
    int st = wd_request_parse(m, task, &k_models[pick & 3], &r, &e);
    if (st == 0) {
      FUZZ_CHECK(r.file == NULL || (r.file >= body && r.file_len <= body_len));
      FUZZ_CHECK(!r.has_temperature || (r.temperature >= 0.0 && r.temperature <= 1.0));
      wd_request_clear(&r);
    } else {
      FUZZ_CHECK(st >= 400 && st < 600);
      /* The message may quote the client's values: it must still make JSON. */
      FUZZ_CHECK(memchr(e.message, '\0', sizeof e.message) != NULL);
      char *json = wd_api_error_json(&e);
      FUZZ_CHECK(json != NULL);
      free(json);
    }
    wd_multipart_free(m);
  }
  free(ct);
  return 0;
}
