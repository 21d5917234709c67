/*
 * test_api_error.c - the error body shape and the mapping of internal codes
 * to statuses at the API boundary: a client never sees WD_ENOENT's 404 or
 * WD_EINVAL's 400 for what is our failure.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api_error.h"
#include "error.h"
#include "wd_test.h"

/* Parses e's JSON body and checks the four keys. */
static void check_body(const wd_api_error_t *e, const char *type, const char *param,
                       const char *code) {
  char *s = wd_api_error_json(e);
  WD_CHECK(s != NULL);
  json_error_t je;
  json_t *j = s ? json_loads(s, 0, &je) : NULL;
  WD_CHECK(j != NULL);
  json_t *err = json_object_get(j, "error");
  WD_CHECK(json_is_object(err));
  WD_CHECK_EQ_INT(json_object_size(err), 4);
  WD_CHECK(json_is_string(json_object_get(err, "message")));
  WD_CHECK_EQ_STR(json_string_value(json_object_get(err, "type")), type);
  if (param)
    WD_CHECK_EQ_STR(json_string_value(json_object_get(err, "param")), param);
  else
    WD_CHECK(json_is_null(json_object_get(err, "param")));
  if (code)
    WD_CHECK_EQ_STR(json_string_value(json_object_get(err, "code")), code);
  else
    WD_CHECK(json_is_null(json_object_get(err, "code")));
  json_decref(j);
  free(s);
}

WD_TEST(body_shape) {
  wd_api_error_t e;
  WD_CHECK_EQ_INT(wd_api_error_set(&e, 404, NULL, "model_not_found", "The model `%s` x", "m"), 404);
  WD_CHECK_EQ_STR(e.message, "The model `m` x");
  check_body(&e, "invalid_request_error", NULL, "model_not_found");
  wd_api_error_set(&e, 400, "file", NULL, "bad");
  check_body(&e, "invalid_request_error", "file", NULL);
  wd_api_error_set(&e, 429, NULL, NULL, "busy");
  check_body(&e, "rate_limit_error", NULL, NULL);
  wd_api_error_set(&e, 503, NULL, NULL, "down");
  check_body(&e, "server_error", NULL, NULL);
  /* User input that is not UTF-8 still gives a JSON body. */
  wd_api_error_set(&e, 404, NULL, "model_not_found", "The model `%s`", "\xff\xfe");
  check_body(&e, "invalid_request_error", NULL, "model_not_found");
}

WD_TEST(audio_failures) {
  wd_api_error_t e;
  wd_api_error_from_audio(&e, WD_EAUDIO, "audio is truncated: x", 600);
  WD_CHECK_EQ_INT(e.status, 400);
  WD_CHECK(strncmp(e.message, "Invalid file format. Supported formats: ['flac',", 48) == 0);
  WD_CHECK(strstr(e.message, "audio is truncated: x") != NULL);
  WD_CHECK_EQ_STR(e.param, "file");
  wd_api_error_from_audio(&e, WD_ETOOBIG, NULL, 600);
  WD_CHECK_EQ_INT(e.status, 400);
  WD_CHECK(strstr(e.message, "600 seconds") != NULL);
  wd_api_error_from_audio(&e, WD_ENOMEM, NULL, 600);
  WD_CHECK_EQ_INT(e.status, 500);
  /* Codes that mean "our fault" are never the client's. */
  wd_api_error_from_audio(&e, WD_ENOENT, NULL, 600);
  WD_CHECK_EQ_INT(e.status, 500);
  wd_api_error_from_audio(&e, WD_EIO, NULL, 600);
  WD_CHECK_EQ_INT(e.status, 500);
}

WD_TEST(job_failures) {
  static const struct { int rc, submitting, status, retry; } cases[] = {
    { WD_EBUSY, 1, 429, 1 },     { WD_ESHUTDOWN, 1, 503, 1 }, { WD_ESHUTDOWN, 0, 503, 1 },
    { WD_ETIMEDOUT, 0, 504, 0 }, { WD_ECANCELED, 0, 499, 0 }, { WD_EDEVLOST, 0, 503, 1 },
    { WD_EVULKAN, 0, 500, 0 },   { WD_ENOMEM, 1, 500, 0 },    { WD_ENOMEM, 0, 500, 0 },
    { WD_EINVAL, 1, 400, 0 },    { WD_EINVAL, 0, 500, 0 },    { WD_ENOENT, 0, 500, 0 },
    { WD_ENOENT, 1, 500, 0 },    { WD_EUNSUP, 1, 400, 0 },    { WD_EINTERNAL, 0, 500, 0 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    wd_api_error_t e;
    wd_api_error_from_job(&e, cases[i].rc, cases[i].submitting, 30, 0);
    if (e.status != cases[i].status)
      fprintf(stderr, "case %zu (%s): %d\n", i, wd_err_name(cases[i].rc), e.status);
    WD_CHECK_EQ_INT(e.status, cases[i].status);
    WD_CHECK_EQ_INT(e.retry_after_s > 0, cases[i].retry);
    WD_CHECK(e.message[0] != '\0');
  }
  wd_api_error_t e;
  wd_api_error_from_job(&e, WD_EBUSY, 1, 0, 7);
  WD_CHECK_EQ_INT(e.retry_after_s, 7);
  WD_CHECK_EQ_STR(e.code, "rate_limit_exceeded");
  check_body(&e, "rate_limit_error", NULL, "rate_limit_exceeded");
  wd_api_error_from_job(&e, WD_ETIMEDOUT, 0, 30, 0);
  WD_CHECK(strstr(e.message, "30 seconds") != NULL);
}

int main(void) { return wd_test_main(); }
