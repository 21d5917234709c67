/*
 * conn_guard.c - the header-phase deadline (see conn_guard.h for why the
 * cross-thread shutdown is safe).
 *
 * State: a doubly linked list of entries under one mutex, each with the
 * CLOCK_MONOTONIC second past which its connection is cut (0: busy, no
 * deadline). The thread wakes every WD_GUARD_TICK_S, or at once when asked
 * to stop, and walks the list: guarded connections number at most
 * --max-connections, so a walk is cheap.
 */
#include "conn_guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "error.h"
#include "log.h"

#define WD_GUARD_TICK_S 0.5

struct wd_conn_entry {
  wd_conn_entry_t *prev, *next;
  int fd;
  int cut;          /* already shut down: do not count it twice */
  double deadline;  /* monotonic seconds; 0 = a request is in progress */
};

struct wd_conn_guard {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled on stop */
  wd_conn_entry_t *head;
  int count;
  uint64_t n_cut;
  int stop;
  pthread_t thread;
  double header_s, idle_s;
};

static void *guard_main(void *arg) {
  wd_conn_guard_t *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->stop) {
    const double now = wd_now_s();
    int cut = 0;
    for (wd_conn_entry_t *e = g->head; e; e = e->next) {
      if (e->cut || e->deadline <= 0 || now < e->deadline)
        continue;
      /* MHD sees end-of-file on its next read and closes the connection;
       * an error here means the socket is already going away. */
      (void)shutdown(e->fd, SHUT_RDWR);
      e->cut = 1;
      cut++;
    }
    g->n_cut += (uint64_t)cut;
    if (cut) {
      pthread_mutex_unlock(&g->mu);
      wd_log_notice("api: closed %d connection%s that sent no complete request headers within "
                    "%.0f s (--header-timeout)", cut, cut == 1 ? "" : "s", g->header_s);
      pthread_mutex_lock(&g->mu);
      continue;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)(WD_GUARD_TICK_S * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    const int rc = pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    if (rc != 0 && rc != ETIMEDOUT)
      wd_log_error("api: connection guard wait failed (%d)", rc);
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

int wd_conn_guard_new(double header_timeout_s, double idle_s, wd_conn_guard_t **ret) {
  if (!ret || !(header_timeout_s > 0))
    return WD_EINVAL;
  wd_conn_guard_t *g = calloc(1, sizeof *g);
  if (!g)
    return WD_ENOMEM;
  g->header_s = header_timeout_s;
  g->idle_s = idle_s > 0 ? idle_s : 0;
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc == 0) {
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
      rc = pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
  }
  if (rc != 0) {
    free(g);
    return WD_ENOMEM;
  }
  if ((rc = pthread_mutex_init(&g->mu, NULL)) != 0) {
    pthread_cond_destroy(&g->cv);
    free(g);
    return WD_ENOMEM;
  }
  if ((rc = pthread_create(&g->thread, NULL, guard_main, g)) != 0) {
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
    return rc == EAGAIN ? WD_ENOMEM : WD_EIO;
  }
  *ret = g;
  return 0;
}

void wd_conn_guard_free(wd_conn_guard_t *g) {
  if (!g)
    return;
  pthread_mutex_lock(&g->mu);
  g->stop = 1;
  pthread_cond_signal(&g->cv);
  pthread_mutex_unlock(&g->mu);
  pthread_join(g->thread, NULL);
  while (g->head) {
    wd_conn_entry_t *e = g->head;
    g->head = e->next;
    free(e);
  }
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
}

wd_conn_entry_t *wd_conn_guard_open(wd_conn_guard_t *g, int fd) {
  wd_conn_entry_t *e = calloc(1, sizeof *e);
  if (!e) {
    wd_log_warning("api: out of memory: a connection goes without a header deadline");
    return NULL;
  }
  e->fd = fd;
  e->deadline = wd_now_s() + g->header_s;
  pthread_mutex_lock(&g->mu);
  e->next = g->head;
  if (g->head)
    g->head->prev = e;
  g->head = e;
  g->count++;
  pthread_mutex_unlock(&g->mu);
  return e;
}

void wd_conn_guard_busy(wd_conn_guard_t *g, wd_conn_entry_t *e) {
  if (!e)
    return;
  pthread_mutex_lock(&g->mu);
  e->deadline = 0;
  pthread_mutex_unlock(&g->mu);
}

void wd_conn_guard_idle(wd_conn_guard_t *g, wd_conn_entry_t *e) {
  if (!e)
    return;
  const double wait = g->header_s > g->idle_s ? g->header_s : g->idle_s;
  pthread_mutex_lock(&g->mu);
  e->deadline = wd_now_s() + wait;
  pthread_mutex_unlock(&g->mu);
}

void wd_conn_guard_close(wd_conn_guard_t *g, wd_conn_entry_t *e) {
  if (!e)
    return;
  pthread_mutex_lock(&g->mu);
  if (e->prev)
    e->prev->next = e->next;
  else
    g->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  g->count--;
  pthread_mutex_unlock(&g->mu);
  free(e);
}

uint64_t wd_conn_guard_cut(wd_conn_guard_t *g) {
  pthread_mutex_lock(&g->mu);
  const uint64_t n = g->n_cut;
  pthread_mutex_unlock(&g->mu);
  return n;
}

int wd_conn_guard_count(wd_conn_guard_t *g) {
  pthread_mutex_lock(&g->mu);
  const int n = g->count;
  pthread_mutex_unlock(&g->mu);
  return n;
}
