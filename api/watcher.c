/*
 * watcher.c - the hang-up watcher thread (see watcher.h for the reasoning
 * about fd reuse).
 *
 * State: a vector of watches {token, job id, fd, fired} under one mutex.
 * The thread copies the unfired watches into a pollfd array (slot 0 is the
 * eventfd), polls without the lock, then re-checks each reported token
 * under the lock before acting. Linux-specific: POLLRDHUP and eventfd.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "watcher.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "error.h"

typedef struct {
  uint64_t token, job_id;
  int fd;
  int fired; /* on_hangup was called (or is being called): do not poll again */
} wd_watch_t;

struct wd_watcher {
  pthread_mutex_t mu;
  wd_watch_t *v; /* registered watches, unordered */
  int n, cap;
  uint64_t next_token;
  int efd;       /* eventfd: the set changed or stop was asked */
  int stop;
  int started;
  pthread_t thread;
  wd_watcher_hangup_fn on_hangup;
  void *ctx;
};

static void wake(wd_watcher_t *w) {
  const uint64_t one = 1;
  /* EAGAIN means the counter is already non-zero: the thread wakes anyway. */
  ssize_t r = write(w->efd, &one, sizeof one);
  (void)r;
}

static void *watcher_main(void *arg) {
  wd_watcher_t *w = arg;
  struct pollfd *pfd = NULL;
  uint64_t *tok = NULL;
  int cap = 0;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    if (w->stop) {
      pthread_mutex_unlock(&w->mu);
      break;
    }
    if (w->n + 1 > cap) {
      const int ncap = (w->n + 1) * 2;
      struct pollfd *p2 = realloc(pfd, (size_t)ncap * sizeof *p2);
      if (p2)
        pfd = p2;
      uint64_t *t2 = p2 ? realloc(tok, (size_t)ncap * sizeof *t2) : NULL;
      if (t2)
        tok = t2;
      if (p2 && t2)
        cap = ncap;
    }
    int k = 0;
    if (cap > 0) {
      pfd[k++] = (struct pollfd){ .fd = w->efd, .events = POLLIN };
      for (int i = 0; i < w->n && k < cap; i++) {
        if (w->v[i].fired)
          continue;
        pfd[k] = (struct pollfd){ .fd = w->v[i].fd, .events = POLLRDHUP };
        tok[k++] = w->v[i].token;
      }
    }
    pthread_mutex_unlock(&w->mu);
    if (k == 0) {
      /* Out of memory for the poll set: retry in a moment. */
      struct pollfd one = { .fd = w->efd, .events = POLLIN };
      (void)poll(&one, 1, 100);
      continue;
    }
    if (poll(pfd, (nfds_t)k, -1) < 0) {
      if (errno != EINTR) {
        struct pollfd one = { .fd = w->efd, .events = POLLIN };
        (void)poll(&one, 1, 100);
      }
      continue;
    }
    if (pfd[0].revents & POLLIN) {
      uint64_t v;
      ssize_t r = read(w->efd, &v, sizeof v);
      (void)r;
    }
    for (int i = 1; i < k; i++) {
      if (!(pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))
        continue; /* POLLNVAL: the watch was removed and its fd closed */
      uint64_t job = 0;
      pthread_mutex_lock(&w->mu);
      for (int j = 0; j < w->n; j++)
        if (w->v[j].token == tok[i] && !w->v[j].fired) {
          w->v[j].fired = 1;
          job = w->v[j].job_id;
          break;
        }
      pthread_mutex_unlock(&w->mu);
      if (job)
        w->on_hangup(w->ctx, job);
    }
  }
  free(pfd);
  free(tok);
  return NULL;
}

int wd_watcher_new(wd_watcher_hangup_fn on_hangup, void *ctx, wd_watcher_t **ret) {
  wd_watcher_t *w = calloc(1, sizeof *w);
  if (!w)
    return WD_ENOMEM;
  pthread_mutex_init(&w->mu, NULL);
  w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  w->on_hangup = on_hangup;
  w->ctx = ctx;
  w->next_token = 1;
  if (w->efd < 0) {
    wd_watcher_free(w);
    return WD_EIO;
  }
  /* The thread starts with every signal blocked: signals go to the daemon's
   * main thread (CONVENTIONS 8). */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = pthread_create(&w->thread, NULL, watcher_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    wd_watcher_free(w);
    return WD_ENOMEM;
  }
  w->started = 1;
  *ret = w;
  return 0;
}

void wd_watcher_free(wd_watcher_t *w) {
  if (!w)
    return;
  if (w->started) {
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_mutex_unlock(&w->mu);
    wake(w);
    pthread_join(w->thread, NULL);
  }
  if (w->efd >= 0)
    close(w->efd);
  pthread_mutex_destroy(&w->mu);
  free(w->v);
  free(w);
}

uint64_t wd_watcher_add(wd_watcher_t *w, int fd, uint64_t job_id) {
  uint64_t token = 0;
  pthread_mutex_lock(&w->mu);
  if (w->n == w->cap) {
    const int cap = w->cap ? w->cap * 2 : 16;
    wd_watch_t *v = realloc(w->v, (size_t)cap * sizeof *v);
    if (v) {
      w->v = v;
      w->cap = cap;
    }
  }
  if (w->n < w->cap) {
    token = w->next_token++;
    w->v[w->n++] = (wd_watch_t){ .token = token, .job_id = job_id, .fd = fd };
  }
  pthread_mutex_unlock(&w->mu);
  if (token)
    wake(w);
  return token;
}

void wd_watcher_remove(wd_watcher_t *w, uint64_t token) {
  if (!token)
    return;
  int found = 0;
  pthread_mutex_lock(&w->mu);
  for (int i = 0; i < w->n; i++)
    if (w->v[i].token == token) {
      w->v[i] = w->v[--w->n];
      found = 1;
      break;
    }
  pthread_mutex_unlock(&w->mu);
  /* Rebuild the poll set now: the fd may be closed (POLLNVAL) or reused. */
  if (found)
    wake(w);
}

int wd_watcher_count(wd_watcher_t *w) {
  pthread_mutex_lock(&w->mu);
  const int n = w->n;
  pthread_mutex_unlock(&w->mu);
  return n;
}
