/*
 * test_served.c - the served-model table alone (api/served.h): records and
 * their references, a replaced record's retire on its last release, and
 * the waiting for a slot's change: the callback runs once, outside the
 * table's lock, and may park again; an unwait before the change keeps it
 * from running; a closed table refuses waits; a stale count is refused.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "error.h"
#include "served.h"
#include "wd_test.h"

static int g_retired[4];

static void on_retire(void *ud) { g_retired[(int)(intptr_t)ud]++; }

static wd_server_model_t model(int id) {
  return (wd_server_model_t){ .on_retire = on_retire, .retire_ud = (void *)(intptr_t)id };
}

static int refs(const wd_served_t *r) { return atomic_load(&r->refs); }

/* A table holding models 0..n-1. */
static void table_with(wd_served_table_t *t, int n) {
  wd_served_table_init(t);
  for (int i = 0; i < n; i++) {
    const wd_server_model_t m = model(i);
    wd_served_attach(t, &m);
  }
}

/* Parks w on slot as a request does: the count first, then the record. */
static int wait_now(wd_served_table_t *t, int slot, wd_model_waiter_t *w) {
  wd_served_t *r[WD_SERVER_MAX_MODELS];
  const unsigned g = wd_served_gen(t, slot);
  const int n = wd_served_snapshot(t, r);
  const int rc = wd_served_wait(t, slot, g, slot < n ? r[slot] : NULL, w);
  wd_served_release_all(r, n);
  return rc;
}

WD_TEST(attach_snapshot_release_count_references) {
  wd_served_table_t t;
  wd_served_table_init(&t);
  WD_CHECK_EQ_INT(wd_served_count(&t), 0);
  wd_served_t *out[WD_SERVER_MAX_MODELS];
  WD_CHECK_EQ_INT(wd_served_snapshot(&t, out), 0);
  const wd_server_model_t m0 = model(0), m1 = model(1);
  WD_CHECK_EQ_INT(wd_served_attach(&t, &m0), 0);
  WD_CHECK_EQ_INT(wd_served_attach(&t, &m1), 1);
  WD_CHECK_EQ_INT(wd_served_count(&t), 2);
  WD_CHECK_EQ_INT(wd_served_snapshot(&t, out), 2);
  WD_CHECK(out[0]->m.retire_ud == (void *)0 && out[1]->m.retire_ud == (void *)1);
  WD_CHECK_EQ_INT(refs(out[0]), 2); /* the slot's and the snapshot's */
  WD_CHECK_EQ_INT(refs(out[1]), 2);
  wd_served_ref(out[0]);
  WD_CHECK_EQ_INT(refs(out[0]), 3);
  wd_served_release(out[0]);
  wd_served_release_all(out, 2);
  WD_CHECK_EQ_INT(refs(out[0]), 1);
  WD_CHECK_EQ_INT(refs(out[1]), 1);
  wd_served_release(NULL);
  /* every slot taken: refused */
  for (int i = 2; i < WD_SERVER_MAX_MODELS; i++)
    WD_CHECK_EQ_INT(wd_served_attach(&t, &m1), i);
  WD_CHECK_EQ_INT(wd_served_attach(&t, &m1), WD_EBUSY);
  WD_CHECK_EQ_INT(wd_served_count(&t), WD_SERVER_MAX_MODELS);
  /* the current models are the daemon's to close: no retire */
  wd_served_table_destroy(&t);
  WD_CHECK_EQ_INT(g_retired[0] + g_retired[1], 0);
}

WD_TEST(replaced_record_retires_on_its_last_release) {
  g_retired[0] = g_retired[1] = g_retired[2] = 0;
  wd_served_table_t t;
  wd_served_table_init(&t);
  const wd_server_model_t m0 = model(0), m1 = model(1), m2 = model(2);
  WD_CHECK_EQ_INT(wd_served_replace(&t, 0, &m1), WD_EINVAL); /* no slot yet */
  WD_CHECK_EQ_INT(wd_served_attach(&t, &m0), 0);
  WD_CHECK_EQ_INT(wd_served_replace(&t, 1, &m1), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_served_replace(&t, -1, &m1), WD_EINVAL);
  wd_served_t *held[WD_SERVER_MAX_MODELS];
  WD_CHECK_EQ_INT(wd_served_snapshot(&t, held), 1); /* a request holds m0 */
  const unsigned g = wd_served_gen(&t, 0);
  WD_CHECK_EQ_INT(wd_served_replace(&t, 0, &m1), 0);
  WD_CHECK(wd_served_gen(&t, 0) == g + 1);
  WD_CHECK_EQ_INT(g_retired[0], 0); /* still held */
  WD_CHECK_EQ_INT(refs(held[0]), 1);
  wd_served_t *now[WD_SERVER_MAX_MODELS];
  WD_CHECK_EQ_INT(wd_served_snapshot(&t, now), 1);
  WD_CHECK(now[0] != held[0] && now[0]->m.retire_ud == (void *)1);
  wd_served_release(held[0]);
  WD_CHECK_EQ_INT(g_retired[0], 1); /* its last release */
  /* a replace with nobody holding the old one: retired at once */
  wd_served_release(now[0]);
  WD_CHECK_EQ_INT(wd_served_replace(&t, 0, &m2), 0);
  WD_CHECK_EQ_INT(g_retired[1], 1);
  wd_served_table_destroy(&t);
  WD_CHECK_EQ_INT(g_retired[0], 1);
  WD_CHECK_EQ_INT(g_retired[1], 1);
  WD_CHECK_EQ_INT(g_retired[2], 0); /* current at destroy: no retire */
}

/* A waiter's callback: counts its calls, checks that the table's lock is
 * free (a trylock from this thread succeeds), and parks again once when
 * asked to. */
typedef struct {
  wd_served_table_t *t;
  wd_model_waiter_t w;
  int calls;
  int lock_free;
  int repark;                /* park again from the callback this many times */
  int repark_rc;
} waiter_t;

static void on_changed(void *ud) {
  waiter_t *x = ud;
  x->calls++;
  if (pthread_mutex_trylock(&x->t->mu) == 0) {
    x->lock_free++;
    pthread_mutex_unlock(&x->t->mu);
  }
  if (x->repark > 0) {
    x->repark--;
    x->repark_rc = wait_now(x->t, x->w.slot, &x->w);
  }
}

static int park(waiter_t *x, wd_served_table_t *t, int slot) {
  x->t = t;
  x->w = (wd_model_waiter_t){ .cb = on_changed, .ud = x };
  return wait_now(t, slot, &x->w);
}

WD_TEST(changed_calls_each_waiter_once_outside_the_lock) {
  wd_served_table_t t;
  table_with(&t, 2);
  waiter_t a = { 0 }, b = { 0 }, c = { 0 };
  WD_CHECK_EQ_INT(park(&a, &t, 0), 0);
  WD_CHECK_EQ_INT(park(&b, &t, 0), 0);
  WD_CHECK_EQ_INT(park(&c, &t, 1), 0);
  b.repark = 1; /* parks again from its callback: waits for the next change */
  wd_served_changed(&t, 0);
  WD_CHECK_EQ_INT(a.calls, 1);
  WD_CHECK_EQ_INT(a.lock_free, 1);
  WD_CHECK_EQ_INT(b.calls, 1);
  WD_CHECK_EQ_INT(b.lock_free, 1);
  WD_CHECK_EQ_INT(b.repark_rc, 0);
  WD_CHECK_EQ_INT(c.calls, 0); /* another slot */
  wd_served_changed(&t, 0);
  WD_CHECK_EQ_INT(a.calls, 1); /* once: no longer linked */
  WD_CHECK_EQ_INT(b.calls, 2); /* its second park */
  WD_CHECK_EQ_INT(wd_served_unwait(&t, &a.w), 0);
  WD_CHECK_EQ_INT(wd_served_unwait(&t, &b.w), 0);
  wd_served_changed(&t, WD_SERVER_MAX_MODELS); /* out of range: nothing */
  wd_served_changed(&t, -1); /* nor below: only a close wakes every slot */
  WD_CHECK_EQ_INT(c.calls, 0);
  /* a replace wakes its slot too */
  const wd_server_model_t m2 = model(2);
  WD_CHECK_EQ_INT(wd_served_replace(&t, 1, &m2), 0);
  WD_CHECK_EQ_INT(c.calls, 1);
  WD_CHECK_EQ_INT(c.lock_free, 1);
  wd_served_table_destroy(&t);
}

WD_TEST(unwait_before_change_keeps_the_callback_from_running) {
  wd_served_table_t t;
  table_with(&t, 1);
  waiter_t a = { 0 }, b = { 0 };
  WD_CHECK_EQ_INT(park(&a, &t, 0), 0);
  WD_CHECK_EQ_INT(park(&b, &t, 0), 0);
  WD_CHECK_EQ_INT(wd_served_unwait(&t, &a.w), 1);
  WD_CHECK_EQ_INT(wd_served_unwait(&t, &a.w), 0); /* already unlinked */
  wd_served_changed(&t, 0);
  WD_CHECK_EQ_INT(a.calls, 0);
  WD_CHECK_EQ_INT(b.calls, 1);
  wd_served_table_destroy(&t);
}

WD_TEST(stale_count_or_record_is_refused) {
  wd_served_table_t t;
  wd_served_table_init(&t);
  const wd_server_model_t m0 = model(0), m1 = model(1);
  wd_served_attach(&t, &m0);
  wd_served_t *r[WD_SERVER_MAX_MODELS];
  WD_CHECK_EQ_INT(wd_served_snapshot(&t, r), 1);
  waiter_t a = { .t = &t };
  a.w = (wd_model_waiter_t){ .cb = on_changed, .ud = &a };
  const unsigned g = wd_served_gen(&t, 0);
  wd_served_changed(&t, 0);
  WD_CHECK_EQ_INT(wd_served_wait(&t, 0, g, r[0], &a.w), 1); /* changed since g */
  const unsigned g2 = wd_served_gen(&t, 0);
  WD_CHECK(g2 != g);
  WD_CHECK_EQ_INT(wd_served_wait(&t, 0, g2, NULL, &a.w), 1); /* not its record */
  WD_CHECK_EQ_INT(wd_served_wait(&t, -1, 0, NULL, &a.w), 1); /* no such slot */
  WD_CHECK_EQ_INT(wd_served_wait(&t, WD_SERVER_MAX_MODELS, 0, NULL, &a.w), 1);
  WD_CHECK(wd_served_gen(&t, -1) == 0);
  /* a replace between the count's read and the wait: refused too */
  const unsigned g3 = wd_served_gen(&t, 0);
  wd_served_replace(&t, 0, &m1);
  WD_CHECK_EQ_INT(wd_served_wait(&t, 0, g3, r[0], &a.w), 1);
  WD_CHECK_EQ_INT(wd_served_unwait(&t, &a.w), 0); /* never linked */
  wd_served_changed(&t, 0);
  WD_CHECK_EQ_INT(a.calls, 0);
  wd_served_release(r[0]);
  wd_served_table_destroy(&t);
}

WD_TEST(close_wakes_every_slot_and_refuses_later_waits) {
  wd_served_table_t t;
  table_with(&t, 2);
  waiter_t a = { 0 }, b = { 0 }, c = { 0 };
  WD_CHECK_EQ_INT(park(&a, &t, 0), 0);
  WD_CHECK_EQ_INT(park(&b, &t, 1), 0);
  b.repark = 1; /* a re-park from the close's callback is refused */
  const unsigned g0 = wd_served_gen(&t, 0), g1 = wd_served_gen(&t, 1);
  wd_served_close(&t);
  WD_CHECK_EQ_INT(a.calls, 1);
  WD_CHECK_EQ_INT(b.calls, 1);
  WD_CHECK_EQ_INT(a.lock_free + b.lock_free, 2);
  WD_CHECK_EQ_INT(b.repark_rc, WD_ESHUTDOWN);
  WD_CHECK(wd_served_gen(&t, 0) != g0 && wd_served_gen(&t, 1) != g1);
  WD_CHECK_EQ_INT(park(&c, &t, 0), WD_ESHUTDOWN);
  WD_CHECK_EQ_INT(wd_served_unwait(&t, &c.w), 0);
  /* the records stay usable after the close */
  wd_served_t *r[WD_SERVER_MAX_MODELS];
  WD_CHECK_EQ_INT(wd_served_snapshot(&t, r), 2);
  wd_served_release_all(r, 2);
  wd_served_changed(&t, 0);
  WD_CHECK_EQ_INT(a.calls + b.calls + c.calls, 2);
  wd_served_table_destroy(&t);
}

/* Waits parked from several threads while another changes the slot: each
 * parked waiter is called exactly once, and each refused one never. */
typedef struct {
  wd_served_table_t *t;
  atomic_int calls;
  wd_model_waiter_t w;
} tw_t;

static void on_tw(void *ud) { atomic_fetch_add(&((tw_t *)ud)->calls, 1); }

#define N_TW 64

static void *parker(void *arg) {
  tw_t *x = arg;
  x->w = (wd_model_waiter_t){ .cb = on_tw, .ud = x };
  return (void *)(intptr_t)wait_now(x->t, 0, &x->w);
}

WD_TEST(concurrent_waits_and_changes_call_each_parked_waiter_once) {
  wd_served_table_t t;
  table_with(&t, 1);
  static tw_t xs[N_TW];
  pthread_t th[N_TW];
  for (int i = 0; i < N_TW; i++) {
    xs[i].t = &t;
    atomic_init(&xs[i].calls, 0);
    pthread_create(&th[i], NULL, parker, &xs[i]);
    if (i % 8 == 0)
      wd_served_changed(&t, 0);
  }
  int rcs[N_TW];
  for (int i = 0; i < N_TW; i++) {
    void *rv;
    pthread_join(th[i], &rv);
    rcs[i] = (int)(intptr_t)rv;
  }
  wd_served_close(&t);
  int bad = 0;
  for (int i = 0; i < N_TW; i++)
    bad += atomic_load(&xs[i].calls) != (rcs[i] == 0 ? 1 : 0);
  WD_CHECK_EQ_INT(bad, 0);
  wd_served_table_destroy(&t);
}

int main(void) { return wd_test_main(); }
