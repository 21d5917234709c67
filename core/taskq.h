/*
 * taskq.h - a fixed set of threads running submitted tasks in FIFO order,
 * with a bound on the tasks queued or running at once.
 *
 * For CPU work that must stay off threads which have to answer quickly (the
 * HTTP threads hand audio decoding to one): a full queue refuses at once
 * (WD_EBUSY) rather than letting work pile up without limit.
 *
 * Thread-safe: any thread may push. wd_taskq_free runs every task already
 * accepted, then joins the threads.
 */
#ifndef WD_TASKQ_H
#define WD_TASKQ_H

typedef struct wd_taskq wd_taskq_t;
typedef void (*wd_taskq_fn)(void *arg);

/* n_threads >= 1 threads named name (at most 15 bytes shown), at most
 * max_tasks >= 1 tasks queued plus running. WD_EINVAL, WD_ENOMEM, or the
 * thread start's failure. */
int wd_taskq_new(int n_threads, int max_tasks, const char *name, wd_taskq_t **ret);

/* Queues fn(arg); WD_EBUSY (fn never runs) when max_tasks are queued or
 * running, WD_ESHUTDOWN once wd_taskq_free has begun or when q is NULL
 * (already freed). */
int wd_taskq_push(wd_taskq_t *q, wd_taskq_fn fn, void *arg);

/* Runs what was accepted, joins the threads, frees q. Accepts NULL. */
void wd_taskq_free(wd_taskq_t *q);

#endif
