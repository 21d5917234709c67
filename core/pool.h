/*
 * pool.h - a fixed set of threads that run one parallel loop at a time.
 *
 * The worker uses it after each decoder step: every job's row of logits is
 * filtered and sampled independently (about 1 ms of exp() per row for a
 * 52k vocabulary), so with 16 rows the host, not the GPU, would set the
 * pace. wd_pool_run() runs fn(arg, i) for every i in [0, n) on the pool's
 * threads and the calling thread, and returns when all are done. Which
 * thread runs which i is not fixed; fn must not depend on it.
 *
 * Threading: one caller at a time (the worker thread).
 */
#ifndef WD_POOL_H
#define WD_POOL_H

typedef struct wd_pool wd_pool_t;

/* n_threads extra threads (0 is allowed: wd_pool_run then loops inline). */
int wd_pool_new(int n_threads, wd_pool_t **ret);
void wd_pool_free(wd_pool_t *p); /* accepts NULL */

void wd_pool_run(wd_pool_t *p, int n, void (*fn)(void *arg, int i), void *arg);

#endif
