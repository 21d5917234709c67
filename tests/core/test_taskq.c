/*
 * test_taskq.c - core/taskq: tasks run in FIFO order on one thread and
 * concurrently on several; the bound counts queued plus running and refuses
 * at once (WD_EBUSY) past it; free runs every accepted task before it
 * returns; NULL and misuse are errors. Under TSan (tests/tsan.cmake).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "error.h"
#include "taskq.h"
#include "wd_test.h"

static void sleep_ms(long ms) {
  const struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

typedef struct {
  pthread_mutex_t mu;
  int order[64];
  int n;
  atomic_int ran;
  atomic_int entered; /* tasks started (then held at the gate) */
  atomic_int gate; /* tasks spin until it is 1 */
} rec_t;

typedef struct {
  rec_t *r;
  int id;
} task_arg_t;

static void record(void *arg) {
  task_arg_t *a = arg;
  atomic_fetch_add(&a->r->entered, 1);
  while (!atomic_load(&a->r->gate))
    sleep_ms(1);
  pthread_mutex_lock(&a->r->mu);
  a->r->order[a->r->n++] = a->id;
  pthread_mutex_unlock(&a->r->mu);
  atomic_fetch_add(&a->r->ran, 1);
}

WD_TEST(fifo_on_one_thread_and_bounded) {
  rec_t r = { .mu = PTHREAD_MUTEX_INITIALIZER };
  wd_taskq_t *q = NULL;
  WD_CHECK_EQ_INT(wd_taskq_new(1, 4, "test", &q), 0);
  task_arg_t a[6];
  for (int i = 0; i < 6; i++)
    a[i] = (task_arg_t){ &r, i };
  for (int i = 0; i < 4; i++)
    WD_CHECK_EQ_INT(wd_taskq_push(q, record, &a[i]), 0);
  /* One running (held at the gate) and three queued: full. */
  for (int k = 0; k < 2000 && atomic_load(&r.entered) < 1; k++)
    sleep_ms(1);
  WD_CHECK_EQ_INT(atomic_load(&r.entered), 1);
  WD_CHECK_EQ_INT(wd_taskq_push(q, record, &a[4]), WD_EBUSY);
  atomic_store(&r.gate, 1);
  while (atomic_load(&r.ran) < 4)
    sleep_ms(1);
  WD_CHECK_EQ_INT(wd_taskq_push(q, record, &a[5]), 0);
  wd_taskq_free(q); /* runs the accepted a[5] first */
  WD_CHECK_EQ_INT(atomic_load(&r.ran), 5);
  const int want[5] = { 0, 1, 2, 3, 5 };
  for (int i = 0; i < 5; i++)
    WD_CHECK_EQ_INT(r.order[i], want[i]);
}

WD_TEST(several_threads_run_side_by_side) {
  rec_t r = { .mu = PTHREAD_MUTEX_INITIALIZER };
  wd_taskq_t *q = NULL;
  WD_CHECK_EQ_INT(wd_taskq_new(3, 8, "test", &q), 0);
  task_arg_t a[3];
  for (int i = 0; i < 3; i++) {
    a[i] = (task_arg_t){ &r, i };
    WD_CHECK_EQ_INT(wd_taskq_push(q, record, &a[i]), 0);
  }
  /* All three are inside at once, held at the gate: one thread would
   * have started only the first. */
  for (int k = 0; k < 2000 && atomic_load(&r.entered) < 3; k++)
    sleep_ms(1);
  WD_CHECK_EQ_INT(atomic_load(&r.entered), 3);
  atomic_store(&r.gate, 1);
  wd_taskq_free(q);
  WD_CHECK_EQ_INT(atomic_load(&r.ran), 3);
}

WD_TEST(misuse_and_null) {
  wd_taskq_t *q = NULL;
  WD_CHECK_EQ_INT(wd_taskq_new(0, 4, "x", &q), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_taskq_new(1, 0, "x", &q), WD_EINVAL);
  WD_CHECK(q == NULL);
  WD_CHECK_EQ_INT(wd_taskq_push(NULL, record, NULL), WD_ESHUTDOWN);
  WD_CHECK_EQ_INT(wd_taskq_new(1, 1, "x", &q), 0);
  WD_CHECK_EQ_INT(wd_taskq_push(q, NULL, NULL), WD_EINVAL);
  wd_taskq_free(q);
  wd_taskq_free(NULL);
}

int main(void) { return wd_test_main(); }
