/*
 * transcription.h - one request to an audio route, from its headers to its
 * last byte: collect the body under the size and time caps, parse and
 * validate the form, decode the audio, submit the job, wait for the worker
 * with the connection suspended, then answer (a rendered transcript, an
 * error, or an SSE stream fed by the worker's callbacks).
 *
 * Lifetime: reference-counted. The connection holds one reference from
 * wd_transcription_new until wd_transcription_completed; a submitted job
 * holds one until its on_done returns. Either may be last.
 *
 * Threading: _new, _handle and _completed on the connection's MHD thread;
 * the job callbacks on the worker thread; hang-ups from the watcher thread.
 */
#ifndef WD_TRANSCRIPTION_H
#define WD_TRANSCRIPTION_H

#include <stddef.h>

#include <microhttpd.h>

#include "request.h"
#include "server_internal.h"

/* Starts the state of one request; NULL when out of memory. */
wd_transcription_t *wd_transcription_new(wd_server_t *s, struct MHD_Connection *c,
                                         wd_request_task_t task, double t_start);

/*
 * The access handler for this request. first is set on the call that
 * delivers the headers; later calls bring body data (*size > 0, consumed by
 * setting it to 0), the end of the body (*size == 0), or follow a resume.
 */
enum MHD_Result wd_transcription_handle(wd_transcription_t *t, const char *data, size_t *size,
                                        int first);

/*
 * The connection is done with the request (answered, failed or closed):
 * cancels the job if it is still in flight and drops the connection's
 * reference. Returns the HTTP status sent, or 0 when none was; *ret_audio_s
 * gets the seconds of decoded audio (0 when not decoded).
 */
int wd_transcription_completed(wd_transcription_t *t, double *ret_audio_s);

/* Cancels every job in flight (server shutdown). Any thread. */
void wd_transcription_cancel_all(wd_server_t *s);

#endif
