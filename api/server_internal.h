/*
 * server_internal.h - the server's state, shared by server.c (daemon,
 * routing, small routes) and transcription.c (the audio routes). Not for
 * use outside api/.
 *
 * Locking: `mu` guards the counts and the list of transcriptions with a job
 * in flight; it is a leaf lock (nothing else is taken while holding it).
 * The served models have their own table and lock (served.h), also a
 * leaf: `mu` and the table's lock are never held together.
 * A transcription's own mutex may be held when taking `mu`, never the
 * other way round.
 */
#ifndef WD_SERVER_INTERNAL_H
#define WD_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <microhttpd.h>

#include "conn_guard.h"
#include "metrics.h"
#include "served.h"
#include "server.h"
#include "taskq.h"
#include "watcher.h"

typedef struct wd_transcription wd_transcription_t;

struct wd_server {
  wd_server_opts_t o;        /* host and api_key point at the copies below */
  char *host, *api_key;
  struct MHD_Daemon *mhd;
  int port;
  time_t created;            /* `created` of the /v1/models entries (set by the first attach) */
  wd_metrics_t *metrics;
  wd_watcher_t *watcher;
  wd_conn_guard_t *guard;    /* header deadlines (slow-loris) */
  wd_taskq_t *decoders;      /* audio decoding, off the HTTP threads */
  wd_taskq_t *diarizers;     /* diarizations, off the decode threads */
  atomic_int n_decoding;     /* uploads pushed there and not yet submitted */

  /* The served models and the requests waiting for one (served.h), under
   * the table's own lock: wd_server_attach appends, wd_server_replace swaps
   * one, wd_server_quiesce closes it. */
  wd_served_table_t served;
  atomic_ullong next_serial;  /* transcriptions' watch tokens */
  atomic_int ready;
  atomic_int quiescing;
  atomic_int n_suspended;    /* connections waiting on the worker */
  /* Diarizations (transcription.c's diar_task) ended by result, for
   * /metrics (n_diarizing, running, is under mu); the drain's deadline in
   * wd_now_s() microseconds (0: none yet), past which they stop. */
  atomic_ullong n_diar_done, n_diar_canceled, n_diar_failed;
  atomic_llong diar_held_ms; /* audio of diarizations outliving their jobs */
  atomic_llong drain_deadline_us;
  struct wd_realtime *realtime; /* /v1/realtime sessions (realtime.h) */

  pthread_mutex_t mu;
  pthread_cond_t cv;         /* signalled when n_active, n_jobs or n_diarizing drops */
  int n_active;              /* requests between their headers and completion */
  int n_jobs;                /* submitted jobs whose on_done has not returned */
  int n_diarizing;           /* diarizations started and not ended */
  int n_diar_running;        /* of those, taken up by a diarization thread */
  wd_transcription_t *live;  /* transcriptions with a job in flight */
};

/* Seconds a client refused with 429 should wait, from the pace of m's
 * workers (NULL: before any model is attached). */
int wd__server_retry_after(const wd_server_model_t *m);

/* The client of the in-flight transcription watched under token (its
 * serial) hung up: marks it so (its diarization stops) and gives its job
 * (perhaps ended: cancelling that is harmless; 0 for none, a diarized
 * upload without speech) and its model's record, referenced; 0 when none
 * is in flight (transcription.c). */
int wd__transcription_hung_up(wd_server_t *s, uint64_t serial, uint64_t *ret_job,
                              wd_served_t **ret_rec);

/* The drain's deadline (wd_server_drain_by, or wd_server_free's end of
 * waiting) has passed: diarizations still running stop, answered as the
 * drain answers the jobs it cancels (WD_ESHUTDOWN). Any thread. */
int wd__server_draining_past(wd_server_t *s);

/* A diarization ended with rc (0, WD_ECANCELED, WD_ESHUTDOWN, ...): the
 * /metrics counters. Any thread. */
void wd__server_diar_ended(wd_server_t *s, int rc);

/* A diarization started, queued for a diarization thread
 * (wd__server_diar_ended ends it), and begun: taken up by one. */
void wd__server_diar_started(wd_server_t *s);
void wd__server_diar_begun(wd_server_t *s);

/* Audio seconds held in the budget by diarizations whose job has ended:
 * audio_s more (negative: released). Any thread. */
void wd__server_diar_hold(wd_server_t *s, double audio_s);
double wd__server_diar_held_s(wd_server_t *s);

#endif
