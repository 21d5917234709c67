/*
 * served.c - the table of served models and the requests waiting for one
 * (see served.h).
 */
#include "served.h"

#include <stdlib.h>

#include "error.h"
#include "tokenizer.h"

void wd_served_table_init(wd_served_table_t *t) {
  *t = (wd_served_table_t){ 0 };
  atomic_init(&t->n, 0);
  pthread_mutex_init(&t->mu, NULL);
}

void wd_served_table_destroy(wd_served_table_t *t) {
  const int n = atomic_load(&t->n);
  for (int i = 0; i < n; i++) {
    t->models[i]->replaced = 0;
    wd_served_release(t->models[i]);
    t->models[i] = NULL;
  }
  atomic_store(&t->n, 0);
  pthread_mutex_destroy(&t->mu);
}

static wd_served_t *served_new(const wd_server_model_t *m) {
  wd_served_t *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->m = *m;
  const wd_special_tokens_t *sp = m->tok ? wd_tokenizer_special(m->tok) : NULL;
  r->n_langs = sp ? sp->n_langs : 0;
  atomic_init(&r->refs, 1); /* the slot's */
  return r;
}

/* ---- the records ------------------------------------------------------- */

int wd_served_attach(wd_served_table_t *t, const wd_server_model_t *m) {
  wd_served_t *r = served_new(m);
  if (!r)
    return WD_ENOMEM;
  pthread_mutex_lock(&t->mu);
  const int n = atomic_load(&t->n);
  if (n == WD_SERVER_MAX_MODELS) {
    pthread_mutex_unlock(&t->mu);
    free(r);
    return WD_EBUSY;
  }
  t->models[n] = r;
  atomic_store_explicit(&t->n, n + 1, memory_order_release);
  pthread_mutex_unlock(&t->mu);
  return n;
}

int wd_served_replace(wd_served_table_t *t, int i, const wd_server_model_t *m) {
  wd_served_t *r = served_new(m);
  if (!r)
    return WD_ENOMEM;
  pthread_mutex_lock(&t->mu);
  if (i < 0 || i >= atomic_load(&t->n)) {
    pthread_mutex_unlock(&t->mu);
    free(r);
    return WD_EINVAL;
  }
  wd_served_t *old = t->models[i];
  old->replaced = 1;
  t->models[i] = r;
  pthread_mutex_unlock(&t->mu);
  wd_served_changed(t, i); /* requests parked for its load look again */
  wd_served_release(old);  /* retires now, or when its last request ends */
  return 0;
}

int wd_served_count(wd_served_table_t *t) {
  return atomic_load_explicit(&t->n, memory_order_acquire);
}

int wd_served_snapshot(wd_served_table_t *t, wd_served_t **out) {
  pthread_mutex_lock(&t->mu);
  const int n = atomic_load(&t->n);
  for (int i = 0; i < n; i++)
    atomic_fetch_add(&(out[i] = t->models[i])->refs, 1);
  pthread_mutex_unlock(&t->mu);
  return n;
}

void wd_served_ref(wd_served_t *r) { atomic_fetch_add(&r->refs, 1); }

void wd_served_release(wd_served_t *r) {
  if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
    return;
  /* Nobody holds it: a replaced model's engines may go now (the daemon's
   * callback hands them to its own thread), a current one is the
   * daemon's to close after the table is destroyed. `replaced` is set
   * before the slot's reference is dropped, and the last decrement follows
   * every earlier one (seq_cst read-modify-writes), so it is seen here. */
  if (r->replaced && r->m.on_retire)
    r->m.on_retire(r->m.retire_ud);
  free(r);
}

void wd_served_release_all(wd_served_t **r, int n) {
  for (int i = 0; i < n; i++)
    wd_served_release(r[i]);
}

/* ---- waiting for a model ---------------------------------------------- */

unsigned wd_served_gen(wd_served_table_t *t, int slot) {
  if (slot < 0 || slot >= WD_SERVER_MAX_MODELS)
    return 0;
  pthread_mutex_lock(&t->mu);
  const unsigned g = t->gen[slot];
  pthread_mutex_unlock(&t->mu);
  return g;
}

int wd_served_wait(wd_served_table_t *t, int slot, unsigned gen, const wd_served_t *rec,
                   wd_model_waiter_t *w) {
  if (slot < 0 || slot >= WD_SERVER_MAX_MODELS)
    return 1;
  pthread_mutex_lock(&t->mu);
  int rc = 0;
  if (t->closed)
    rc = WD_ESHUTDOWN;
  else if (t->gen[slot] != gen || t->models[slot] != rec)
    rc = 1;
  else {
    w->slot = slot;
    w->next = t->waiters;
    t->waiters = w;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int wd_served_unwait(wd_served_table_t *t, wd_model_waiter_t *w) {
  pthread_mutex_lock(&t->mu);
  int found = 0;
  for (wd_model_waiter_t **p = &t->waiters; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      found = 1;
      break;
    }
  pthread_mutex_unlock(&t->mu);
  return found;
}

/* Slot's state changed (slot < 0: every slot; close: the table closes in
 * the same critical section, so no wait parks after the wake-up): its
 * count moves on, and the requests parked for it until now are unlinked,
 * then called back with the lock released. Each is called once: one that
 * parks again from its callback waits for the next change. */
static void changed(wd_served_table_t *t, int slot, int close) {
  wd_model_waiter_t *woken = NULL;
  pthread_mutex_lock(&t->mu);
  if (close)
    t->closed = 1;
  for (int k = 0; k < WD_SERVER_MAX_MODELS; k++)
    if (slot < 0 || k == slot)
      t->gen[k]++;
  for (wd_model_waiter_t **p = &t->waiters; *p;) {
    wd_model_waiter_t *w = *p;
    if (slot >= 0 && w->slot != slot) {
      p = &w->next;
      continue;
    }
    *p = w->next;
    w->next = woken;
    woken = w;
  }
  pthread_mutex_unlock(&t->mu);
  while (woken) {
    wd_model_waiter_t *w = woken;
    woken = w->next; /* before the callback: its request may park w again */
    w->cb(w->ud);
  }
}

void wd_served_changed(wd_served_table_t *t, int i) {
  if (i >= 0 && i < WD_SERVER_MAX_MODELS)
    changed(t, i, 0);
}

void wd_served_close(wd_served_table_t *t) { changed(t, -1, 1); }
