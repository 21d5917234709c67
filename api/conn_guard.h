/*
 * conn_guard.h - a total deadline on the header phase of every connection,
 * against slow-loris clients.
 *
 * libmicrohttpd restarts its idle timer on every byte, so a client that
 * trickles one header byte every few seconds holds its connection for ever,
 * and enough of them fill --max-connections: /health and everyone else are
 * then refused. MHD gives the access handler nothing until the headers are
 * complete, so the server cannot cut such a client off itself.
 *
 * The guard is told of every connection (MHD_OPTION_NOTIFY_CONNECTION)
 * and of the moment its headers are complete (the handler's first call). A
 * thread checks twice a second and shuts down (shutdown(2), SHUT_RDWR) the
 * socket of any connection whose headers did not complete within
 * header_timeout_s; MHD then reads end-of-file and closes it as it would a
 * client that left. After a request completes, a kept-alive connection
 * waits for its next request's headers: that wait gets the longer of
 * header_timeout_s and idle_s, since an idle keep-alive is MHD's to close.
 *
 * Why shutdown() from another thread is safe: the entry is removed in the
 * CLOSED notification, which MHD sends before it closes the socket, and the
 * guard removes and shuts down under the same mutex. So every socket the
 * guard shuts down is still open and still that connection's; its number
 * cannot have been reused.
 *
 * Threading: every function may be called from any thread.
 */
#ifndef WD_CONN_GUARD_H
#define WD_CONN_GUARD_H

#include <stdint.h>

typedef struct wd_conn_guard wd_conn_guard_t;
typedef struct wd_conn_entry wd_conn_entry_t;

/* Starts the checking thread. header_timeout_s > 0; idle_s is the
 * keep-alive wait (MHD's connection timeout), 0 for none. */
int wd_conn_guard_new(double header_timeout_s, double idle_s, wd_conn_guard_t **ret);

/* Stops and joins the thread, frees the entries left. NULL is allowed. */
void wd_conn_guard_free(wd_conn_guard_t *g);

/* A connection was accepted on socket fd: its header clock starts. NULL
 * when out of memory (that connection is then not guarded). */
wd_conn_entry_t *wd_conn_guard_open(wd_conn_guard_t *g, int fd);

/* Its request's headers are complete: no deadline until it is idle again. */
void wd_conn_guard_busy(wd_conn_guard_t *g, wd_conn_entry_t *e);

/* Its request completed: the wait for the next request's headers starts. */
void wd_conn_guard_idle(wd_conn_guard_t *g, wd_conn_entry_t *e);

/* The connection is closing (before its socket is): forgets and frees e.
 * NULL is allowed. */
void wd_conn_guard_close(wd_conn_guard_t *g, wd_conn_entry_t *e);

/* Connections cut off so far, and connections guarded now. */
uint64_t wd_conn_guard_cut(wd_conn_guard_t *g);
int wd_conn_guard_count(wd_conn_guard_t *g);

#endif
