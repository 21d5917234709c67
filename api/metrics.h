/*
 * metrics.h - the server's counters and their Prometheus text exposition
 * (format 0.0.4) for GET /metrics.
 *
 * HTTP threads record one observation per finished request (route, status,
 * seconds from the request's headers to its end); the worker's own figures
 * come from wd_worker_stats() at render time. All functions are thread-safe:
 * one mutex guards the counters, held only to add or to copy them.
 */
#ifndef WD_METRICS_H
#define WD_METRICS_H

#include "route.h"
#include "worker.h"

typedef struct wd_metrics wd_metrics_t;

int wd_metrics_new(wd_metrics_t **ret);
void wd_metrics_free(wd_metrics_t *m); /* NULL is allowed */

/* One finished request. status outside 100..599 is counted as 0 (a
 * connection that ended without any response). */
void wd_metrics_request(wd_metrics_t *m, wd_route_t route, int status, double seconds);

/* Server state shown beside the counters. */
typedef struct {
  int ready;             /* /ready answers 200 */
  int model_loaded;      /* wd_server_attach() was called */
  int requests_active;   /* requests between headers and completion */
  int connections_suspended; /* waiting on the worker */
  int connections_open;  /* accepted and not yet closed */
  double connections_cut; /* closed for sending no complete headers in time */
  /* realtime sessions (GET /v1/realtime) */
  int rt_sessions_open;
  double rt_sessions_total, rt_turns_total, rt_turns_failed, rt_turn_latency_s_sum;
  /* speaker diarizations of transcription requests: running now, ended by
   * result (canceled: the client left, the transcription failed or the
   * drain stopped it) */
  int diar_running, diar_queued; /* queued: waiting for a diarization thread */
  double diar_done, diar_canceled, diar_failed;
  double diar_held_s; /* their audio in the budget once their job has ended */
} wd_metrics_state_t;

/* One worker of the group (core/workers.h) for the per-worker series. */
typedef struct {
  const char *device;        /* its label: "cpu", "vulkan", "vulkan:0" */
  const char *model;         /* the name of the model it runs, or NULL */
  wd_worker_stats_t stats;
} wd_metrics_worker_t;
#define WD_METRICS_MAX_WORKERS 64 /* per-worker series rendered, at most */

/*
 * Renders the exposition into a malloc'd string. ws (every worker's figures
 * summed) may be NULL before the workers are attached: the worker series
 * are then left out. per[0..n_per) add the per-worker series, labelled
 * worker="i", device="<label>" and, where set, model="<name>" (n_per 0:
 * none). Returns 0 or WD_ENOMEM.
 */
int wd_metrics_render(wd_metrics_t *m, const wd_metrics_state_t *st, const wd_worker_stats_t *ws,
                      const wd_metrics_worker_t *per, int n_per, char **ret);

#endif
