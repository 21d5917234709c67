/*
 * response.h - building and queueing libmicrohttpd responses: OpenAI error
 * bodies, JSON and text bodies with their content types.
 *
 * Call from the thread that runs the connection's access handler (MHD
 * refuses a response queued from elsewhere). Every function returns MHD's
 * result for the handler to return; on allocation failure it closes the
 * connection (MHD_NO), since no response can be built.
 */
#ifndef WD_RESPONSE_H
#define WD_RESPONSE_H

#include <stddef.h>

#include <microhttpd.h>

#include "api_error.h"

/* Queues e as {"error":{...}} with e->status, Retry-After when
 * e->retry_after_s > 0, and allow (if not NULL) as the Allow header. */
enum MHD_Result wd_response_error(struct MHD_Connection *c, const wd_api_error_t *e,
                                  const char *allow);

/* As wd_response_error, with `Connection: close`: the connection ends after
 * this answer, and nothing the client sent after the request's headers is
 * read as another request. */
enum MHD_Result wd_response_error_close(struct MHD_Connection *c, const wd_api_error_t *e);

/*
 * Writes e as a whole HTTP/1.1 response with `Connection: close` straight
 * to the connection's socket, for the one case MHD 0.9.75 cannot answer:
 * while the request body is still arriving (MHD_queue_response refuses
 * until it has all been read). The caller must then stop the connection
 * (return MHD_NO) without queueing anything, and should read on briefly
 * first so that the client is not reset before it reads the answer.
 * Non-blocking; returns 0 when all of it was written, else WD_EIO.
 */
int wd_response_error_early(struct MHD_Connection *c, const wd_api_error_t *e);

/* Queues body[0..len) with status and content type. Takes ownership of body
 * (malloc'd) in every case. */
enum MHD_Result wd_response_body(struct MHD_Connection *c, int status, const char *content_type,
                                 char *body, size_t len);

/* Adds the headers every response carries (no caching of API answers). */
void wd_response_common_headers(struct MHD_Response *r);

#endif
