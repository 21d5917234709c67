/*
 * served.h - the table of served models and the requests waiting for one
 * (issue #39): one refcounted record (wd_served_t) per attached model, each
 * slot's change count, and the list of requests parked until their slot's
 * next change. The server holds one table (server_internal.h) and its
 * public model calls (wd_server_attach, wd_server_replace,
 * wd_server_model_changed, wd_server_quiesce) delegate here; the audio
 * routes and the Realtime turns use it directly. Not for use outside api/.
 *
 * Locking: the table's own mutex guards the slots, their change counts,
 * the waiter list and the closed flag. It is a leaf lock: nothing else is
 * taken while holding it, and no callback runs under it. A caller may hold
 * its own lock when calling in (a transcription parks under its t->mu).
 *
 * Records: the slot holds one reference to its record, and every user one
 * more (wd_served_snapshot, wd_served_ref), dropped with wd_served_release.
 * A record replaced in its slot calls its model's on_retire on its last
 * release; the current ones are the daemon's to close after
 * wd_served_table_destroy (no on_retire).
 */
#ifndef WD_SERVED_H
#define WD_SERVED_H

#include <pthread.h>
#include <stdatomic.h>

#include "server.h"

/* A request parked until its model's slot changes (wd_served_wait): cb(ud)
 * is called once, from the thread that changed it, outside every lock of
 * the table. The struct belongs to the caller; the table links it. */
typedef struct wd_model_waiter {
  void (*cb)(void *ud);
  void *ud;
  int slot;
  struct wd_model_waiter *next;
} wd_model_waiter_t;

/* One attached model as requests see it: what the daemon passed, and a
 * count of its users (the table's slot and every request that picked it).
 * The last release of a replaced record calls its on_retire. */
typedef struct {
  wd_server_model_t m;
  int n_langs;               /* language tokens of the model */
  atomic_int refs;
  int replaced;              /* its slot holds a newer one (set under the table's mu) */
} wd_served_t;

/* The table. Its fields are served.c's: use the functions below. */
typedef struct {
  pthread_mutex_t mu;
  wd_served_t *models[WD_SERVER_MAX_MODELS]; /* slots [0, n) */
  atomic_int n;              /* only grows; stored under mu, read lock-free */
  unsigned gen[WD_SERVER_MAX_MODELS]; /* each slot's change count */
  wd_model_waiter_t *waiters;
  int closed;                /* wd_served_close: waits refused */
} wd_served_table_t;

void wd_served_table_init(wd_served_table_t *t);
/* Drops the slots' references (no on_retire: the current models are the
 * daemon's to close); no request may hold a record or be parked now. */
void wd_served_table_destroy(wd_served_table_t *t);

/* Appends a record of m (borrowed until destroy, or its on_retire once
 * replaced): its slot, WD_ENOMEM, or WD_EBUSY when every slot is taken. */
int wd_served_attach(wd_served_table_t *t, const wd_server_model_t *m);
/* Puts a record of m in slot i; the old one retires on its last release.
 * Parked requests of slot i are called back. 0, WD_EINVAL (no such slot),
 * WD_ENOMEM (the old one stays). */
int wd_served_replace(wd_served_table_t *t, int i, const wd_server_model_t *m);
/* How many slots are taken (0 before the first attach); lock-free. */
int wd_served_count(wd_served_table_t *t);

/* Every attached model's record, each with a reference taken; how many.
 * out has room for WD_SERVER_MAX_MODELS. */
int wd_served_snapshot(wd_served_table_t *t, wd_served_t **out);
/* One more reference on a record the caller holds one of. */
void wd_served_ref(wd_served_t *r);
/* Drops a reference (NULL allowed); never touches the table. */
void wd_served_release(wd_served_t *r);
/* wd_served_release on each of r[0..n). */
void wd_served_release_all(wd_served_t **r, int n);

/* Slot's change count now: read it before looking at the slot's record
 * and asking its on_demand, then pass it to wd_served_wait. */
unsigned wd_served_gen(wd_served_table_t *t, int slot);
/* Parks w until slot's next change: 0. 1 when slot changed since gen or
 * no longer holds rec (look again now), WD_ESHUTDOWN when the table is
 * closed; w is then not linked. */
int wd_served_wait(wd_served_table_t *t, int slot, unsigned gen, const wd_served_t *rec,
                   wd_model_waiter_t *w);
/* Unlinks w if still parked: 1 (its callback will not run), else 0 (it
 * has run or is running). */
int wd_served_unwait(wd_served_table_t *t, wd_model_waiter_t *w);
/* Slot i's state changed (loaded, failed, refused): its count moves on
 * and its parked requests are unlinked, then called back with the lock
 * released, each once (one that parks again from its callback waits for
 * the next change). i out of range: nothing. */
void wd_served_changed(wd_served_table_t *t, int i);
/* The server is stopping: waits are refused from now on, every slot's
 * count moves on and every parked request is called back. */
void wd_served_close(wd_served_table_t *t);

#endif
