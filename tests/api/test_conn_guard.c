/*
 * test_conn_guard.c - the header deadline on socket pairs: a connection
 * still in its header phase past the deadline is shut down (its peer reads
 * end-of-file) and counted once; a busy one is left alone however long it
 * lasts; an idle one gets a fresh deadline; a closed entry is forgotten.
 */
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn_guard.h"
#include "error.h"
#include "wd_test.h"

/* 1 when peer reads end-of-file within ms, 0 when nothing happens. */
static int peer_sees_eof(int peer, int ms) {
  struct pollfd p = { .fd = peer, .events = POLLIN };
  if (poll(&p, 1, ms) <= 0)
    return 0;
  char c;
  return read(peer, &c, 1) == 0;
}

WD_TEST(header_phase_past_the_deadline_is_cut_once) {
  wd_conn_guard_t *g = NULL;
  WD_CHECK_EQ_INT(wd_conn_guard_new(0.5, 0, &g), 0);
  int sv[2];
  WD_CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  wd_conn_entry_t *e = wd_conn_guard_open(g, sv[0]);
  WD_CHECK(e != NULL);
  WD_CHECK_EQ_INT(wd_conn_guard_count(g), 1);
  WD_CHECK_EQ_INT(peer_sees_eof(sv[1], 200), 0); /* not before the deadline */
  WD_CHECK(peer_sees_eof(sv[1], 3000));
  WD_CHECK_EQ_INT(wd_conn_guard_cut(g), 1);
  usleep(1200 * 1000); /* two more ticks: not counted again */
  WD_CHECK_EQ_INT(wd_conn_guard_cut(g), 1);
  wd_conn_guard_close(g, e);
  WD_CHECK_EQ_INT(wd_conn_guard_count(g), 0);
  close(sv[0]);
  close(sv[1]);
  wd_conn_guard_free(g);
}

WD_TEST(busy_connection_is_never_cut_and_idle_restarts_the_clock) {
  wd_conn_guard_t *g = NULL;
  WD_CHECK_EQ_INT(wd_conn_guard_new(0.5, 1.0, &g), 0);
  int sv[2];
  WD_CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  wd_conn_entry_t *e = wd_conn_guard_open(g, sv[0]);
  WD_CHECK(e != NULL);
  wd_conn_guard_busy(g, e);                       /* headers complete */
  WD_CHECK_EQ_INT(peer_sees_eof(sv[1], 1500), 0); /* a long request: left alone */
  wd_conn_guard_idle(g, e); /* keep-alive: max(header 0.5 s, idle 1 s) */
  WD_CHECK_EQ_INT(peer_sees_eof(sv[1], 600), 0);
  WD_CHECK(peer_sees_eof(sv[1], 3000));
  WD_CHECK_EQ_INT(wd_conn_guard_cut(g), 1);
  wd_conn_guard_close(g, e);
  close(sv[0]);
  close(sv[1]);
  wd_conn_guard_free(g);
}

WD_TEST(closed_entries_are_forgotten_and_free_drops_the_rest) {
  wd_conn_guard_t *g = NULL;
  WD_CHECK_EQ_INT(wd_conn_guard_new(30, 0, &g), 0);
  int sv[4][2];
  wd_conn_entry_t *e[4];
  for (int i = 0; i < 4; i++) {
    WD_CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
    e[i] = wd_conn_guard_open(g, sv[i][0]);
    WD_CHECK(e[i] != NULL);
  }
  WD_CHECK_EQ_INT(wd_conn_guard_count(g), 4);
  wd_conn_guard_close(g, e[1]); /* middle, head, tail */
  wd_conn_guard_close(g, e[3]);
  wd_conn_guard_close(g, e[0]);
  wd_conn_guard_close(g, NULL);
  WD_CHECK_EQ_INT(wd_conn_guard_count(g), 1);
  WD_CHECK_EQ_INT(wd_conn_guard_cut(g), 0);
  wd_conn_guard_free(g); /* e[2] still registered: freed here */
  for (int i = 0; i < 4; i++) {
    close(sv[i][0]);
    close(sv[i][1]);
  }
  WD_CHECK_EQ_INT(wd_conn_guard_new(0, 0, &g), WD_EINVAL);
}

int main(void) { return wd_test_main(); }
