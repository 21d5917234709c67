/*
 * test_watcher.c - the hang-up watcher on socket pairs: a peer that closes
 * is reported once with its job id; a removed watch is never reported, even
 * when its fd number is reused by another socket whose peer closes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "watcher.h"
#include "wd_test.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_seen[64];
static int g_n_seen;

static void on_hangup(void *ctx, uint64_t job_id) {
  (void)ctx;
  pthread_mutex_lock(&g_mu);
  if (g_n_seen < 64)
    g_seen[g_n_seen++] = job_id;
  pthread_mutex_unlock(&g_mu);
}

static int n_seen(void) {
  pthread_mutex_lock(&g_mu);
  const int n = g_n_seen;
  pthread_mutex_unlock(&g_mu);
  return n;
}

static void reset(void) {
  pthread_mutex_lock(&g_mu);
  g_n_seen = 0;
  pthread_mutex_unlock(&g_mu);
}

static void sleep_ms(int ms) {
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

/* Waits up to 2 s for at least n reports. */
static int wait_seen(int n) {
  for (int i = 0; i < 200; i++) {
    if (n_seen() >= n)
      return 1;
    sleep_ms(10);
  }
  return 0;
}

WD_TEST(peer_close_is_reported_once) {
  reset();
  wd_watcher_t *w = NULL;
  WD_CHECK_EQ_INT(wd_watcher_new(on_hangup, NULL, &w), 0);
  int sv[2];
  WD_CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const uint64_t tok = wd_watcher_add(w, sv[0], 42);
  WD_CHECK(tok != 0);
  WD_CHECK_EQ_INT(wd_watcher_count(w), 1);
  /* Data from the peer is not a hang-up (a pipelined request). */
  WD_CHECK_EQ_INT(write(sv[1], "GET", 3), 3);
  sleep_ms(100);
  WD_CHECK_EQ_INT(n_seen(), 0);
  close(sv[1]);
  WD_CHECK(wait_seen(1));
  sleep_ms(100);
  WD_CHECK_EQ_INT(n_seen(), 1); /* not again while the watch stays */
  WD_CHECK_EQ_INT(g_seen[0], 42);
  wd_watcher_remove(w, tok);
  WD_CHECK_EQ_INT(wd_watcher_count(w), 0);
  wd_watcher_remove(w, tok); /* twice, and 0, are ignored */
  wd_watcher_remove(w, 0);
  close(sv[0]);
  wd_watcher_free(w);
}

WD_TEST(removed_watch_is_never_reported_even_if_fd_reused) {
  reset();
  wd_watcher_t *w = NULL;
  WD_CHECK_EQ_INT(wd_watcher_new(on_hangup, NULL, &w), 0);
  for (int round = 0; round < 50; round++) {
    int a[2], b[2];
    WD_CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    const uint64_t tok = wd_watcher_add(w, a[0], 1000 + (uint64_t)round);
    /* Remove (as before a resume), then the connection closes and its fd
     * number goes to a new socket whose peer hangs up at once. */
    wd_watcher_remove(w, tok);
    const int old_fd = a[0];
    close(a[0]);
    close(a[1]);
    WD_CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    WD_CHECK(b[0] == old_fd || b[1] == old_fd);
    close(b[1]);
    sleep_ms(5);
    close(b[0]);
  }
  sleep_ms(100);
  WD_CHECK_EQ_INT(n_seen(), 0);
  wd_watcher_free(w);
}

WD_TEST(many_watches_one_hangup) {
  reset();
  wd_watcher_t *w = NULL;
  WD_CHECK_EQ_INT(wd_watcher_new(on_hangup, NULL, &w), 0);
  enum { N = 40 };
  int sv[N][2];
  uint64_t tok[N];
  for (int i = 0; i < N; i++) {
    WD_CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
    tok[i] = wd_watcher_add(w, sv[i][0], (uint64_t)i + 1);
  }
  WD_CHECK_EQ_INT(wd_watcher_count(w), N);
  close(sv[17][1]);
  WD_CHECK(wait_seen(1));
  sleep_ms(50);
  WD_CHECK_EQ_INT(n_seen(), 1);
  WD_CHECK_EQ_INT(g_seen[0], 18);
  for (int i = 0; i < N; i++) {
    wd_watcher_remove(w, tok[i]);
    close(sv[i][0]);
    if (i != 17)
      close(sv[i][1]);
  }
  WD_CHECK_EQ_INT(wd_watcher_count(w), 0);
  /* Freeing with watches left is fine too. */
  int p[2];
  WD_CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
  wd_watcher_add(w, p[0], 7);
  wd_watcher_free(w);
  close(p[0]);
  close(p[1]);
  wd_watcher_free(NULL);
}

int main(void) { return wd_test_main(); }
