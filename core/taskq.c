/*
 * taskq.c - bounded FIFO task threads (see taskq.h).
 *
 * State under one mutex: a ring of (fn, arg) of capacity max_tasks, the
 * count queued, the count running and a stop flag. Workers sleep on
 * `more`; a push signals one. Because queued + running <= max_tasks, the
 * ring never overflows.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "taskq.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct {
  wd_taskq_fn fn;
  void *arg;
} wd_task_t;

struct wd_taskq {
  pthread_mutex_t mu;
  pthread_cond_t more;
  wd_task_t *ring; /* (max) slots; head is the oldest queued */
  int max, head, queued, running;
  int stop;
  int n_threads;
  pthread_t *threads;
  char name[16];
};

static void *wd_taskq_main(void *arg) {
  wd_taskq_t *q = arg;
  pthread_setname_np(pthread_self(), q->name);
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (q->queued == 0 && !q->stop)
      pthread_cond_wait(&q->more, &q->mu);
    if (q->queued == 0) /* stopping, and nothing left */
      break;
    const wd_task_t t = q->ring[q->head];
    q->head = (q->head + 1) % q->max;
    q->queued--;
    q->running++;
    pthread_mutex_unlock(&q->mu);
    t.fn(t.arg);
    pthread_mutex_lock(&q->mu);
    q->running--;
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

int wd_taskq_new(int n_threads, int max_tasks, const char *name, wd_taskq_t **ret) {
  *ret = NULL;
  if (n_threads < 1 || max_tasks < 1)
    return WD_EINVAL;
  wd_taskq_t *q = calloc(1, sizeof *q);
  if (!q)
    return WD_ENOMEM;
  q->ring = calloc((size_t)max_tasks, sizeof *q->ring);
  q->threads = calloc((size_t)n_threads, sizeof *q->threads);
  if (!q->ring || !q->threads) {
    free(q->ring);
    free(q->threads);
    free(q);
    return WD_ENOMEM;
  }
  q->max = max_tasks;
  snprintf(q->name, sizeof q->name, "%s", name ? name : "taskq");
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->more, NULL);
  for (int i = 0; i < n_threads; i++) {
    if (pthread_create(&q->threads[i], NULL, wd_taskq_main, q) != 0) {
      q->n_threads = i;
      wd_taskq_free(q);
      return WD_ENOMEM;
    }
  }
  q->n_threads = n_threads;
  *ret = q;
  return 0;
}

int wd_taskq_push(wd_taskq_t *q, wd_taskq_fn fn, void *arg) {
  if (!q)
    return WD_ESHUTDOWN;
  if (!fn)
    return WD_EINVAL;
  pthread_mutex_lock(&q->mu);
  int rc = 0;
  if (q->stop)
    rc = WD_ESHUTDOWN;
  else if (q->queued + q->running >= q->max)
    rc = WD_EBUSY;
  else {
    q->ring[(q->head + q->queued) % q->max] = (wd_task_t){ fn, arg };
    q->queued++;
    pthread_cond_signal(&q->more);
  }
  pthread_mutex_unlock(&q->mu);
  return rc;
}

void wd_taskq_free(wd_taskq_t *q) {
  if (!q)
    return;
  pthread_mutex_lock(&q->mu);
  q->stop = 1;
  pthread_cond_broadcast(&q->more);
  pthread_mutex_unlock(&q->mu);
  for (int i = 0; i < q->n_threads; i++)
    pthread_join(q->threads[i], NULL);
  pthread_cond_destroy(&q->more);
  pthread_mutex_destroy(&q->mu);
  free(q->ring);
  free(q->threads);
  free(q);
}
