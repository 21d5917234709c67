/*
 * error.c - lookups over the WD_ERRNO_MAP table (see error.h).
 * Stateless and thread-safe.
 */
#include "error.h"

#include <stddef.h>

typedef struct {
  int code;
  int http_status;
  const char *name;
  const char *openai_type;
  const char *message;
} wd_err_row_t;

static const wd_err_row_t wd_err_rows[] = {
  { WD_OK, 200, "WD_OK", "", "success" },
#define WD__ERR_ROW(name, val, http, type, msg) { val, http, "WD_" #name, type, msg },
  WD_ERRNO_MAP(WD__ERR_ROW)
#undef WD__ERR_ROW
};

static const wd_err_row_t *wd_err_find(int err) {
  for (size_t i = 0; i < sizeof(wd_err_rows) / sizeof(wd_err_rows[0]); i++)
    if (wd_err_rows[i].code == err)
      return &wd_err_rows[i];
  return NULL;
}

const char *wd_strerror(int err) {
  const wd_err_row_t *r = wd_err_find(err);
  return r ? r->message : "unknown error";
}

const char *wd_err_name(int err) {
  const wd_err_row_t *r = wd_err_find(err);
  return r ? r->name : "WD_EUNKNOWN";
}

int wd_err_http_status(int err) {
  const wd_err_row_t *r = wd_err_find(err);
  return r ? r->http_status : 500;
}

const char *wd_err_openai_type(int err) {
  const wd_err_row_t *r = wd_err_find(err);
  return r ? r->openai_type : "server_error";
}
