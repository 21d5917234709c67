/*
 * watcher.h - notices clients that hang up while their connection is
 * suspended, so that their job can be cancelled.
 *
 * libmicrohttpd does not poll a suspended connection, so it cannot see the
 * peer close it. The watcher is one thread that poll()s the sockets of the
 * suspended connections for POLLRDHUP | POLLHUP | POLLERR and calls
 * on_hangup with the job id registered beside the socket. An eventfd wakes
 * it when the set changes.
 *
 * Why a job id and a token, not the fd: once a watch is removed, its
 * connection may be resumed, closed, and the fd number reused by a new
 * connection. The watcher acts only for watches still registered after poll
 * returns; a watch registered since the poll began covers a socket that
 * could not have been closed in between (its connection stays suspended
 * until the watch is removed), so the event is that client's. on_hangup is
 * given the job id captured at wd_watcher_add time, never looked up by fd,
 * and cancelling a job that has just finished is harmless
 * (wd_worker_cancel ignores finished ids). So a removed watch can never
 * cancel another job, and wd_watcher_remove need not wait for a callback.
 *
 * A client that half-closes (shutdown(SHUT_WR)) while waiting looks the same
 * as one that left; HTTP clients do not do that.
 *
 * Threading: _add and _remove from any thread; on_hangup runs on the
 * watcher thread with no lock held, at most once per watch.
 */
#ifndef WD_WATCHER_H
#define WD_WATCHER_H

#include <stdint.h>

typedef struct wd_watcher wd_watcher_t;

typedef void (*wd_watcher_hangup_fn)(void *ctx, uint64_t job_id);

/* Starts the thread. */
int wd_watcher_new(wd_watcher_hangup_fn on_hangup, void *ctx, wd_watcher_t **ret);

/* Stops and joins the thread; pending watches are dropped. NULL is allowed. */
void wd_watcher_free(wd_watcher_t *w);

/* Watches fd on behalf of job_id. Returns a token (never 0) for
 * wd_watcher_remove, or 0 when out of memory (the hang-up then goes
 * unnoticed until the job ends). */
uint64_t wd_watcher_add(wd_watcher_t *w, int fd, uint64_t job_id);

/* Stops the watch; unknown and 0 tokens are ignored. After it returns,
 * on_hangup is not called for this watch unless it already was. */
void wd_watcher_remove(wd_watcher_t *w, uint64_t token);

/* Watches registered now (for /metrics and tests). */
int wd_watcher_count(wd_watcher_t *w);

#endif
