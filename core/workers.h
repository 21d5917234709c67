/*
 * workers.h - several workers (one per device) behind the operations of one
 * (core/worker.h): submit, cancel, stats, heartbeat, drain.
 *
 * `--device cpu,0` runs one engine and one worker per device; the HTTP
 * layer and the commands talk to the group only. A single device is a group
 * of one, whose job ids and figures are exactly its worker's.
 *
 * Choice: a job goes to the least-loaded worker, load being its queued and
 * running jobs plus the submits to it still computing their log-mel, over
 * its max_batch times its speed (so a worker that batches 8 rows takes
 * about 8 times the jobs of one that batches 1, and a device twice as fast
 * twice the jobs). Speed is the worker's seconds of audio decoded (counted
 * window by window, finished jobs or not) per busy second, known after 2
 * busy seconds and a first window; until then a worker counts as fast as
 * the fastest known. Ties go to the faster worker, then the lowest index. A
 * worker whose queue is full, or whose device is lost and rebuilding, is
 * chosen only when every worker is so.
 *
 * Job ids: id = worker_id * n + index, where worker_id is the worker's own
 * id (never 0) and index its place in the group; cancel finds the worker
 * back from the id alone. With n == 1 the ids are the worker's.
 *
 * Threading: _submit, _cancel, _stats, _stats_at, _heartbeat and _drain are
 * safe from any thread; _new and _free from one controlling thread.
 * Ownership: the group borrows its workers (they must outlive it and are
 * freed by their owner, after the group or after a drain).
 */
#ifndef WD_WORKERS_H
#define WD_WORKERS_H

#include <stddef.h>
#include <stdint.h>

#include "worker.h"

#define WD_WORKERS_MAX 16 /* devices in one group */
#define WD_WORKERS_LABEL_MAX 32

typedef struct wd_workers wd_workers_t;

/* Groups workers[0..n), 1 <= n <= WD_WORKERS_MAX. labels[i] names worker
 * i's device for logs and /metrics (e.g. "cpu", "vulkan:0"); copied,
 * truncated to WD_WORKERS_LABEL_MAX - 1 bytes. labels may be NULL ("0",
 * "1", ...). Returns 0, WD_EINVAL or WD_ENOMEM. */
int wd_workers_new(wd_worker_t *const *workers, const char *const *labels, int n,
                   wd_workers_t **ret);

/* Frees the group, not its workers. NULL is allowed. */
void wd_workers_free(wd_workers_t *g);

int wd_workers_count(const wd_workers_t *g);
wd_worker_t *wd_workers_at(wd_workers_t *g, int i);
const char *wd_workers_label(const wd_workers_t *g, int i);

/* wd_worker_submit on the least-loaded worker (see above), with the same
 * contract: takes ownership of samples in every case; on success *ret_id
 * (when ret_id is not NULL) is the group's id of the job. WD_ESHUTDOWN once
 * the group drains. */
int wd_workers_submit(wd_workers_t *g, int16_t *samples, size_t n_samples,
                      const wd_job_params_t *p, uint64_t *ret_id);

/* Whether some worker that is not lost could take audio_s more seconds of
 * audio now (wd_worker_has_room). */
int wd_workers_has_room(wd_workers_t *g, double audio_s);

/* Whether the group's model is multilingual (its workers share one model:
 * the first one's answer). */
int wd_workers_multilingual(const wd_workers_t *g);

/* Cancels the job with the group's id id on the worker that runs it;
 * unknown and finished ids are ignored. */
void wd_workers_cancel(wd_workers_t *g, uint64_t id);

/* The figures of every worker summed (queue_max and max_batch too: the
 * group's capacity), except device_lost: 1 only when every worker's device
 * is lost (the group can run nothing until one comes back). */
void wd_workers_stats(wd_workers_t *g, wd_worker_stats_t *ret);
/* Adds st's counts and gauges into sum; device_lost becomes the number of
 * added figures (workers.c) with a lost device. */
void wd_worker_stats_add(wd_worker_stats_t *sum, const wd_worker_stats_t *st);

/* Worker i's own figures (wd_worker_stats). */
void wd_workers_stats_at(wd_workers_t *g, int i, wd_worker_stats_t *ret);

/* The oldest heartbeat of the workers: one stuck worker is enough to stop
 * the watchdog. */
double wd_workers_heartbeat(wd_workers_t *g);

/* Stops accepting, then drains every worker at once (wd_worker_drain with
 * grace_s each, side by side: the whole drain takes grace_s, not n times
 * it). Returns when no job is left anywhere. */
void wd_workers_drain(wd_workers_t *g, double grace_s);
/* The same over several groups at once (serve's models): every worker of
 * every group drains side by side. */
void wd_workers_drain_many(wd_workers_t *const *groups, int n_groups, double grace_s);

#endif
