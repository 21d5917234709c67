/*
 * realtime_internal.h - what realtime.c (the hub, the session thread, the
 * socket) and realtime_turn.c (a session's turns: held, submitted,
 * partial, and the worker's callbacks) share: the session, the hub and a
 * turn. Not for other files.
 *
 * Locking: under se->mu the outgoing queue, the turn list, partial_item,
 * partial_busy, dead, close_queued and refs; the fields after "the session thread only"
 * are that thread's. Worker callbacks only queue events.
 */
#ifndef WD_REALTIME_INTERNAL_H
#define WD_REALTIME_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "live_audio.h"
#include "realtime.h"
#include "realtime_event.h"
#include "served.h"
#include "server_internal.h"
#include "vad.h"
#include "ws.h"

#define RT_RATE 16000
#define RT_MIN_COMMIT (RT_RATE / 10) /* OpenAI: at least 100 ms of audio */

typedef wd_rt_session_t session_t; /* realtime.h's opaque name */

typedef struct turn {
  session_t *se;
  char item[40];
  uint64_t job;
  wd_served_t *rec;            /* referenced until the turn ends */
  double t_stop;               /* speech_stopped or the commit */
  int logprobs;                /* the session's include, when committed */
  int partial;                 /* a partial transcript of the open turn (--realtime-partials-ms) */
  int cancelled;               /* its cancel was asked for (under se->mu) */
  struct turn *next;
} turn_t;

struct wd_rt_session {
  wd_realtime_t *hub;
  MHD_socket fd;
  struct MHD_UpgradeResponseHandle *urh;
  int wake;                    /* eventfd: something was queued */
  pthread_t thread;
  pthread_mutex_t mu;
  int refs;                    /* the handshake (until MHD completes its request), the
                                * thread, and each turn in flight */
  int dead;                    /* no more writes (client gone or cut off) */
  int close_queued;            /* a Close frame is queued: no frame after it */
  unsigned char *out;          /* frames queued for the client */
  size_t out_len, out_off, out_cap;
  turn_t *turns;
  char partial_item[40];       /* the open turn whose partials are still wanted; "" none */
  int partial_busy;            /* a partial transcript in flight */
  /* the rest: the session thread only */
  uint64_t partial_end;        /* the open turn's audio its last partial covered, to here */
  struct held *held;           /* committed turns waiting for their model's load, in order */
  int n_held;
  /* While the first held turn's model loads, the session is parked in the
   * served-model table (wd_served_wait, served.h) instead of looking every
   * few ms: the table's callback sets fired, wakes the thread and drops the
   * reference the waiter holds on the session. parked: session thread. */
  wd_model_waiter_t waiter;
  int parked;
  atomic_int fired;
  wd_ws_parser_t parser;
  /* Bytes the client sent behind its handshake, in the same packet
   * (MHD's extra_in): the session thread feeds them first, after
   * session.created, as it feeds what it reads. */
  unsigned char *early;
  size_t n_early;
  wd_rt_config_t cfg;
  wd_live_audio_t *res;
  int res_rate;
  int16_t *a16;                /* uncommitted audio at 16 kHz: samples [base, base + n) */
  size_t n16, cap16;
  uint64_t base;
  wd_vad_stream_t vst;
  float *probs;
  size_t probs_cap;
  int in_speech;
  uint64_t turn_start, silence;
  char speech_item[40];
  char prev_item[40];
  unsigned item_seq;
  unsigned long long event_seq;
  int closing;                 /* a close frame was sent: read until the client's */
  double last_rx;
  session_t *next;
};

struct wd_realtime {
  struct wd_server *s;
  int max_sessions;
  uint64_t partial_every;      /* samples of new speech between partials; 0: none */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n_live;                  /* sessions not yet freed, from their handshake on: the cap */
  int n_open;                  /* sessions whose thread runs */
  session_t *list;             /* sessions whose thread runs */
  atomic_int stopping, forced;
  atomic_ullong sessions_total, turns_total, turns_failed, lat_us;
};

#define RT_MODEL_WAIT_S 60 /* as an upload waits (transcription.c) */
/* Committed turns a session may hold while its model loads: each holds a
 * copy of its audio (up to the session's uncommitted maximum), so a
 * client committing in a loop meanwhile gets failed turns, not memory. */
#define RT_MAX_HELD 8
/* A session's buffers (output queue, audio, the message being received)
 * give back memory past this once they are empty or mostly so: a burst
 * may grow them to megabytes, an idle session keeps little. */
#define RT_KEEP_BYTES (256u * 1024u)
/* A committed turn not yet submitted: its model is being loaded on demand
 * (the session thread retries it until the load ends, at most
 * RT_MODEL_WAIT_S), or another turn before it waits so. What the session
 * said at the commit goes with it. Session thread only. */
typedef struct held {
  char item[40], model[64], language[16];
  char *prompt;
  int logprobs;
  int16_t *pcm;
  size_t n;
  double t_stop, deadline;
  struct held *next;
} held_t;

/* realtime.c: wakes the session thread (its eventfd). */
void wd__rt_wake(session_t *se);
/* realtime.c: drops a reference; the last one frees the session. */
void wd__rt_session_unref(session_t *se);
/* realtime.c: queues a server event (ev consumed; it gets its event_id);
 * partial_of: only while that turn's partials are wanted (NULL: always). */
void wd__rt_send_event_if(session_t *se, json_t *ev, const char *partial_of);
void wd__rt_send_event(session_t *se, json_t *ev);

/* realtime_turn.c, the session thread: samples [from, to) of the session's
 * timeline become turn `item` (the committed event, then its job or a wait
 * for its model). */
void wd__rt_commit(session_t *se, uint64_t from, uint64_t to, const char *item);
/* Held turns whose model is loaded go to the workers, in order. */
void wd__rt_retry_held(session_t *se);
/* --realtime-partials-ms: a partial of the open turn, when it is due and
 * the workers idle. */
void wd__rt_maybe_partial(session_t *se);
/* The open turn ends (committed or cleared): no more partials of it. */
void wd__rt_end_partials(session_t *se);
void wd__rt_held_free(held_t *hd);
/* Milliseconds until the first held turn's wait ends; -1: none held. */
double wd__rt_held_wait_ms(const session_t *se);
/* Unlinks the session's model waiter if parked (its reference dropped). */
void wd__rt_unpark(session_t *se);

#endif
