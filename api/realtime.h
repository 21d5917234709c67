/*
 * realtime.h - OpenAI's Realtime transcription sessions: GET /v1/realtime
 * upgraded to a WebSocket (libmicrohttpd's connection upgrade, ws.h's
 * frames), the session protocol of realtime_event.h, and every committed
 * turn a job of the same workers that run the uploads.
 *
 * A session: a thread of its own that reads the client's frames (poll on
 * the socket and on an eventfd) and writes what is queued for it; events
 * from the worker's callbacks (deltas, completed, failed) are queued, never
 * written from the worker thread, so a client that stops reading stalls
 * nobody but itself (past WD_RT_MAX_QUEUED bytes queued it is cut off).
 * Appended audio goes to 16 kHz as it arrives (core/live_audio.h); with
 * server_vad the Silero VAD runs over each complete 32 ms chunk
 * (wd_vad_stream_probs): speech starts at a chunk at or over the threshold
 * (the turn begins prefix_padding_ms earlier), ends after
 * silence_duration_ms under it, and a turn is cut at 30 s; without it the
 * client commits. A turn is transcribed with openai's defaults (the
 * model's decoding options), its language and prompt from the session.
 *
 * Limits: sessions at most wd_server_opts_t.realtime_sessions (503 before
 * the upgrade past it), a message at most WD_RT_MAX_MESSAGE bytes (close
 * 1009), WD_RT_MAX_BUFFER_S of uncommitted audio (an error event, the
 * append dropped), WD_RT_IDLE_S without a message (close 1000), and a
 * close handshake (begun by either side) WD_RT_CLOSE_S at most: past it the
 * socket is cut whatever is still queued for a client that does not read.
 * A client gone cancels its turns. On shutdown a session stops taking audio,
 * finishes its running turns and closes with 1001.
 */
#ifndef WD_REALTIME_H
#define WD_REALTIME_H

#include <stdint.h>

#include <microhttpd.h>

#define WD_RT_MAX_MESSAGE (16u << 20)  /* a 12 MB append in base64 */
#define WD_RT_MAX_BUFFER_S 300
#define WD_RT_IDLE_S 600
#define WD_RT_MAX_QUEUED (8u << 20)
#define WD_RT_TURN_MAX_S 30
#define WD_RT_CLOSE_S 3                /* a close handshake's time, whatever is queued */

struct wd_server;
typedef struct wd_realtime wd_realtime_t;
typedef struct wd_rt_session wd_rt_session_t;

typedef struct {
  uint64_t sessions_total, turns_total, turns_failed;
  double turn_latency_s_sum;    /* speech_stopped or commit -> completed */
  int sessions_open;
} wd_realtime_stats_t;

wd_realtime_t *wd_realtime_new(struct wd_server *s, int max_sessions);

/* GET /v1/realtime on an MHD thread: the handshake checked, the key (the
 * Authorization header, or the openai-insecure-api-key.KEY subprotocol of
 * browsers) already accepted by the caller; queues the 101 and starts the
 * session when MHD hands over the socket, or queues an HTTP error.
 * *ret_status: the status queued. A 101 takes one of the sessions at once
 * (the cap counts handshakes, not only sessions already upgraded): the
 * caller keeps *ret_session (NULL otherwise) and hands it to
 * wd_realtime_request_done when MHD completes the request. */
enum MHD_Result wd_realtime_upgrade(wd_realtime_t *h, struct MHD_Connection *c, int *ret_status,
                                    wd_rt_session_t **ret_session);

/* MHD completed the request of a 101 (se NULL: nothing to do): the
 * handshake's hold on the session ends; one never upgraded (the client
 * left first) gives its slot back. Any thread. */
void wd_realtime_request_done(wd_rt_session_t *se);

/* The key a browser passes as a subprotocol, or NULL. */
const char *wd_realtime_subprotocol_key(struct MHD_Connection *c, size_t *ret_len);

/* Shutdown, first step: sessions take no more audio and close once their
 * running turns have ended. */
void wd_realtime_stop(wd_realtime_t *h);
/* Then: waits up to wait_s for them, cancels what is left, and waits for
 * every session to be gone (their sockets handed back to MHD). */
void wd_realtime_drain(wd_realtime_t *h, double wait_s);
/* Last, once MHD is stopped (no handshake or upgrade can reach h any
 * more): drains what is left and frees h. */
void wd_realtime_free(wd_realtime_t *h);

void wd_realtime_stats(wd_realtime_t *h, wd_realtime_stats_t *ret);

#endif
