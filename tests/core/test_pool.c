/*
 * test_pool.c - the worker's parallel loop: every index runs exactly once
 * per loop, loops of every size (0, 1, more than the threads) follow each
 * other without a straggler touching the next loop's work, and an empty
 * pool runs inline.
 */
#include <stdatomic.h>
#include <string.h>

#include "pool.h"
#include "wd_test.h"

typedef struct {
  atomic_int hits[64];
  int loop;
  atomic_int wrong_loop; /* an index saw another loop's argument */
} ctx_t;

typedef struct {
  ctx_t *c;
  int loop;
} arg_t;

static void body(void *arg, int i) {
  arg_t *a = arg;
  if (a->loop != a->c->loop)
    atomic_fetch_add(&a->c->wrong_loop, 1);
  atomic_fetch_add(&a->c->hits[i], 1);
}

static void run_loops(int n_threads) {
  wd_pool_t *p = NULL;
  WD_CHECK_EQ_INT(wd_pool_new(n_threads, &p), 0);
  ctx_t c;
  memset(&c, 0, sizeof c);
  int bad = 0;
  for (int loop = 0; loop < 3000; loop++) {
    const int n = loop % 23;
    for (int i = 0; i < 64; i++)
      atomic_store(&c.hits[i], 0);
    c.loop = loop;
    arg_t a = { &c, loop };
    wd_pool_run(p, n, body, &a);
    for (int i = 0; i < 64; i++)
      bad += atomic_load(&c.hits[i]) != (i < n ? 1 : 0);
  }
  WD_CHECK_EQ_INT(bad, 0);
  WD_CHECK_EQ_INT(atomic_load(&c.wrong_loop), 0);
  wd_pool_free(p);
}

WD_TEST(every_index_once_per_loop_with_threads) { run_loops(3); }
WD_TEST(every_index_once_per_loop_inline) { run_loops(0); }
WD_TEST(free_null_and_bad_size) {
  wd_pool_free(NULL);
  wd_pool_t *p = NULL;
  WD_CHECK(wd_pool_new(-1, &p) < 0 && p == NULL);
}

int main(void) { return wd_test_main(); }
