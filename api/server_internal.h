/*
 * server_internal.h - the server's state, shared by server.c (daemon,
 * routing, small routes) and transcription.c (the audio routes). Not for
 * use outside api/.
 *
 * Locking: `mu` guards the counts and the list of transcriptions with a job
 * in flight; it is a leaf lock (nothing else is taken while holding it).
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
#include "server.h"
#include "taskq.h"
#include "watcher.h"

typedef struct wd_transcription wd_transcription_t;

/* A request parked until its model's slot changes (wd__server_wait_model):
 * cb(ud) is called once, from the thread that changed it, outside every
 * server lock. The struct belongs to the caller; the server links it. */
typedef struct wd_model_waiter {
  void (*cb)(void *ud);
  void *ud;
  int slot;
  struct wd_model_waiter *next;
} wd_model_waiter_t;

/* One attached model as requests see it: what the daemon passed, and a
 * count of its users (the server's slot and every request that picked
 * it). The last release of a replaced record calls its on_retire. */
typedef struct {
  wd_server_model_t m;
  int n_langs;               /* language tokens of the model */
  atomic_int refs;
  int replaced;              /* its slot holds a newer one (set under the server's mu) */
} wd_served_t;

struct wd_server {
  wd_server_opts_t o;        /* host and api_key point at the copies below */
  char *host, *api_key;
  struct MHD_Daemon *mhd;
  int port;
  MHD_socket quiesced_fd;    /* the listening socket after quiesce, or -1 */
  time_t created;            /* `created` of the /v1/models entries */
  wd_metrics_t *metrics;
  wd_watcher_t *watcher;
  wd_conn_guard_t *guard;    /* header deadlines (slow-loris) */
  wd_taskq_t *decoders;      /* audio decoding, off the HTTP threads */
  atomic_int n_decoding;     /* uploads pushed there and not yet submitted */

  /* The served models' records, under mu: wd_server_attach appends,
   * wd_server_replace swaps one; users hold a reference (wd__server_models,
   * wd__served_release) for as long as they use it. attached: n_models > 0
   * (n_models only grows). */
  wd_served_t *models[WD_SERVER_MAX_MODELS];
  atomic_int n_models;
  atomic_int attached;
  /* Under mu: each slot's change count (replace, model_changed, quiesce)
   * and the requests parked until their slot's next change. */
  unsigned model_gen[WD_SERVER_MAX_MODELS];
  wd_model_waiter_t *model_waiters;
  atomic_ullong next_serial;  /* transcriptions' watch tokens */
  atomic_int ready;
  atomic_int quiescing;
  atomic_int n_suspended;    /* connections waiting on the worker */
  struct wd_realtime *realtime; /* /v1/realtime sessions (realtime.h) */

  pthread_mutex_t mu;
  pthread_cond_t cv;         /* signalled when n_active or n_jobs drops */
  int n_active;              /* requests between their headers and completion */
  int n_jobs;                /* submitted jobs whose on_done has not returned */
  wd_transcription_t *live;  /* transcriptions with a job in flight */
};

/* Seconds a client refused with 429 should wait, from the pace of m's
 * workers (NULL: before any model is attached). */
int wd__server_retry_after(const wd_server_model_t *m);

/* Every attached model's record, each with a reference taken; how many. */
int wd__server_models(wd_server_t *s, wd_served_t **out);
/* Drops a reference (NULL allowed); never touches the server. */
void wd__served_release(wd_served_t *r);

/* Slot's change count now: read it before looking at the slot's record
 * and asking its on_demand, then pass it to wd__server_wait_model. */
unsigned wd__server_model_gen(wd_server_t *s, int slot);
/* Parks w until slot's next change: 0. 1 when slot changed since gen or
 * no longer holds rec (look again now), WD_ESHUTDOWN when the server is
 * stopping; w is then not linked. */
int wd__server_wait_model(wd_server_t *s, int slot, unsigned gen, const wd_served_t *rec,
                          wd_model_waiter_t *w);
/* Unlinks w if still parked: 1 (its callback will not run), else 0 (it
 * has run or is running). */
int wd__server_unwait_model(wd_server_t *s, wd_model_waiter_t *w);

/* The in-flight transcription watched under token (its serial): its job
 * and its model's record, referenced; 0 when none is (transcription.c). */
int wd__transcription_by_serial(wd_server_t *s, uint64_t serial, uint64_t *ret_job,
                                wd_served_t **ret_rec);

#endif
