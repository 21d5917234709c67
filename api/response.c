/*
 * response.c - libmicrohttpd responses (see response.h).
 */
#include "response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "error.h"

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

static enum MHD_Result queue_error(struct MHD_Connection *c, const wd_api_error_t *e,
                                   const char *allow, int close) {
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
  if (close) /* MHD 0.9.75 closes the connection after a response with this */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  if (e->status == 401)
    MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
  if (e->status == 426) { /* only /v1/realtime asks for one: RFC 7231 6.5.15, RFC 6455 4.4 */
    MHD_add_response_header(r, MHD_HTTP_HEADER_UPGRADE, "websocket");
    MHD_add_response_header(r, "Sec-WebSocket-Version", "13");
  }
  const enum MHD_Result ret = MHD_queue_response(c, (unsigned)e->status, r);
  MHD_destroy_response(r);
  return ret;
}

enum MHD_Result wd_response_error(struct MHD_Connection *c, const wd_api_error_t *e,
                                  const char *allow) {
  return queue_error(c, e, allow, 0);
}

enum MHD_Result wd_response_error_close(struct MHD_Connection *c, const wd_api_error_t *e) {
  return queue_error(c, e, NULL, 1);
}

int wd_response_error_early(struct MHD_Connection *c, const wd_api_error_t *e) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  char *body = wd_api_error_json(e);
  if (!ci || !body) {
    free(body);
    return WD_EIO;
  }
  const char *reason = MHD_get_reason_phrase_for((unsigned)e->status);
  char head[512];
  const int hn = snprintf(head, sizeof head,
                          "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\nCache-Control: no-store\r\nServer: whisperd\r\n\r\n",
                          e->status, reason && reason[0] ? reason : "Error", strlen(body));
  int rc = WD_EIO;
  if (hn > 0 && (size_t)hn < sizeof head) {
    /* One small write into an idle socket's send buffer: it does not
     * block, and a short write (a full buffer) counts as a failure. */
    const size_t bn = strlen(body), n = (size_t)hn + bn;
    char *msg = malloc(n);
    if (msg) {
      memcpy(msg, head, (size_t)hn);
      memcpy(msg + hn, body, bn);
      const ssize_t w = send(ci->connect_fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      rc = w == (ssize_t)n ? 0 : WD_EIO;
      free(msg);
    }
  }
  free(body);
  return rc;
}
