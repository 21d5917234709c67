/*
 * response.c - libmicrohttpd responses (see response.h).
 */
#include "response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void wd_response_common_headers(struct MHD_Response *r) {
  MHD_add_response_header(r, "Cache-Control", "no-store");
  MHD_add_response_header(r, "Server", "whisperd");
}

enum MHD_Result wd_response_body(struct MHD_Connection *c, int status, const char *content_type,
                                 char *body, size_t len) {
  if (!body)
    return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  wd_response_common_headers(r);
  MHD_add_response_header(r, "Content-Type", content_type);
  const enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

enum MHD_Result wd_response_error(struct MHD_Connection *c, const wd_api_error_t *e,
                                  const char *allow) {
  char *body = wd_api_error_json(e);
  if (!body)
    return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body,
                                                           MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  wd_response_common_headers(r);
  MHD_add_response_header(r, "Content-Type", "application/json");
  if (e->retry_after_s > 0) {
    char v[16];
    snprintf(v, sizeof v, "%d", e->retry_after_s);
    MHD_add_response_header(r, "Retry-After", v);
  }
  if (allow)
    MHD_add_response_header(r, "Allow", allow);
  if (e->status == 401)
    MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
  const enum MHD_Result ret = MHD_queue_response(c, (unsigned)e->status, r);
  MHD_destroy_response(r);
  return ret;
}
