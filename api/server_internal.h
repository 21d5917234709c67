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

  /* models[i] and n_langs[i] are written once by wd_server_attach before
   * n_models covers i (release); read only below the n_models seen
   * (acquire). attached: n_models > 0. */
  wd_server_model_t models[WD_SERVER_MAX_MODELS];
  int n_langs[WD_SERVER_MAX_MODELS]; /* language tokens of each model */
  atomic_int n_models;
  atomic_int attached;
  atomic_int ready;
  atomic_int quiescing;
  atomic_int n_suspended;    /* connections waiting on the worker */

  pthread_mutex_t mu;
  pthread_cond_t cv;         /* signalled when n_active or n_jobs drops */
  int n_active;              /* requests between their headers and completion */
  int n_jobs;                /* submitted jobs whose on_done has not returned */
  wd_transcription_t *live;  /* transcriptions with a job in flight */
};

/* Seconds a client refused with 429 should wait, from the pace of model
 * mi's workers. */
int wd__server_retry_after(wd_server_t *s, int mi);

/* The watcher's token for job id of model mi, and back: the model's index
 * in bits 56..61 (worker ids count up from 1; chunk ids set bit 63 only). */
#define WD_SERVER_MODEL_SHIFT 56
static inline uint64_t wd__server_watch_id(int mi, uint64_t id) {
  return id | ((uint64_t)mi << WD_SERVER_MODEL_SHIFT);
}
static inline int wd__server_watch_model(uint64_t token) {
  return (int)((token >> WD_SERVER_MODEL_SHIFT) & 0x3f);
}
static inline uint64_t wd__server_watch_job(uint64_t token) {
  return token & ~(0x3full << WD_SERVER_MODEL_SHIFT);
}

#endif
