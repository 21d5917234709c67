/*
 * pool.c - one parallel loop at a time over a fixed set of threads (see
 * pool.h).
 *
 * A loop is a generation: wd_pool_run publishes (fn, arg, n), bumps the
 * generation and wakes the threads; every thread, the caller included,
 * claims indices from an atomic counter until they run out. A thread counts
 * itself busy (under the mutex) before it touches a loop and idle after; the
 * caller publishes a loop only when no thread is busy and returns only when
 * every index is done and no thread is busy. So (fn, arg, n) never change
 * under a thread that is reading them, and a thread that wakes late simply
 * joins whatever loop is current.
 *
 * Between loops a thread first watches the generation for about 30 us
 * (WD_POOL_SPIN pauses), then sleeps on a condition variable: the CPU
 * engine's decoder step publishes some forty short loops back to back
 * (GEMVs and attention between a few microseconds of LayerNorm on the
 * caller), and a futex wake-up per loop cost as much as the loops' own
 * work at tiny.en's size. The caller likewise watches the count of
 * unfinished indices before it sleeps. An idle pool still costs nothing
 * after the first 30 us.
 */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "error.h"

/* Pauses a thread watches for the next loop before it sleeps: about 30 us
 * (a pause is some 40 to 140 cycles on current x86 cores). */
#define WD_POOL_SPIN 2000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

struct wd_pool {
  pthread_mutex_t mu;
  pthread_cond_t start, done;
  pthread_t *threads;
  int n_threads;
  atomic_int stop;
  int busy;               /* threads inside drain() */
  atomic_ulong gen;       /* loops published so far (written under mu, watched without it) */
  void (*fn)(void *arg, int i);
  void *arg;
  int n;
  atomic_int next;        /* next index to claim */
  atomic_int left;        /* indices not finished yet */
};

/* Claims and runs indices of the current loop until none is left. */
static void drain(wd_pool_t *p) {
  for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) {
    p->fn(p->arg, i);
    if (atomic_fetch_sub(&p->left, 1) == 1) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

static void *pool_main(void *arg) {
  wd_pool_t *p = arg;
  unsigned long seen = 0;
  for (;;) {
    for (int s = 0; s < WD_POOL_SPIN && atomic_load(&p->gen) == seen && !atomic_load(&p->stop);
         s++)
      cpu_relax();
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop) && atomic_load(&p->gen) == seen)
      pthread_cond_wait(&p->start, &p->mu);
    if (atomic_load(&p->stop))
      break;
    seen = atomic_load(&p->gen);
    p->busy++;
    pthread_mutex_unlock(&p->mu);
    drain(p);
    pthread_mutex_lock(&p->mu);
    if (--p->busy == 0)
      pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int wd_pool_new(int n_threads, wd_pool_t **ret) {
  *ret = NULL;
  if (n_threads < 0)
    return WD_EINVAL;
  wd_pool_t *p = calloc(1, sizeof *p);
  if (!p)
    return WD_ENOMEM;
  if (pthread_mutex_init(&p->mu, NULL) != 0 || pthread_cond_init(&p->start, NULL) != 0 ||
      pthread_cond_init(&p->done, NULL) != 0) {
    free(p);
    return WD_ENOMEM;
  }
  p->threads = calloc((size_t)n_threads + 1, sizeof *p->threads);
  if (!p->threads) {
    wd_pool_free(p);
    return WD_ENOMEM;
  }
  for (; p->n_threads < n_threads; p->n_threads++)
    if (pthread_create(&p->threads[p->n_threads], NULL, pool_main, p) != 0) {
      wd_pool_free(p);
      return WD_ENOMEM;
    }
  *ret = p;
  return 0;
}

void wd_pool_free(wd_pool_t *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_threads; i++)
    pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->start);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p->threads);
  free(p);
}

void wd_pool_run(wd_pool_t *p, int n, void (*fn)(void *arg, int i), void *arg) {
  if (n <= 0)
    return;
  if (!p || p->n_threads == 0 || n == 1) {
    for (int i = 0; i < n; i++)
      fn(arg, i);
    return;
  }
  pthread_mutex_lock(&p->mu);
  /* A thread that woke late for the last loop may still be inside drain():
   * publishing now would let it read the new (fn, arg, n) half way through
   * a claim and run an index twice. */
  while (p->busy > 0)
    pthread_cond_wait(&p->done, &p->mu);
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  atomic_store(&p->next, 0);
  atomic_store(&p->left, n);
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->mu);
  drain(p);
  /* Every index done is all the caller needs (fn's writes happen before
   * the decrements it reads); a thread still leaving drain() touches only
   * the pool, and the next loop waits for it under the mutex. */
  for (int s = 0; s < WD_POOL_SPIN && atomic_load(&p->left) > 0; s++)
    cpu_relax();
  if (atomic_load(&p->left) == 0)
    return;
  pthread_mutex_lock(&p->mu);
  while (atomic_load(&p->left) > 0)
    pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}
