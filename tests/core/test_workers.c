/*
 * test_workers.c - the group over several workers (core/workers.c): which
 * worker a job goes to, job ids that find their worker back, summed
 * figures, the oldest heartbeat, a drain of every worker.
 *
 * The workers are fakes defined here (every wd_worker_* symbol workers.c
 * uses is defined in this file, so the linker never pulls worker.o from
 * libwd_core.a, as in tests/api/test_server.c). Each fake holds the counts
 * the test sets and records what the group asked of it; its submit can be
 * held half-way (as a real submit is while it computes the log-mel) to
 * show that jobs in flight count as load.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "wd_test.h"
#include "workers.h"

/* ======================= the fake worker ================================ */

struct wd_worker {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  wd_worker_stats_t st;   /* queued, running, queue_max, max_batch, device_lost */
  uint64_t next_id;
  int n_submits;
  uint64_t cancelled[16];
  int n_cancelled;
  int drained;
  double drain_grace;
  double hb;
  int hold;               /* submit waits until released */
  int holding;            /* a submit is waiting */
};

static void fake_init(wd_worker_t *w, int queue_max, int max_batch) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->st.queue_max = queue_max;
  w->st.max_batch = max_batch;
  w->next_id = 1;
  w->hb = 100.0;
}

static void fake_done(wd_worker_t *w) {
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
}

int wd_worker_multilingual(const wd_worker_t *w) {
  (void)w;
  return 0;
}

int wd_worker_has_room(wd_worker_t *w, double audio_s) {
  (void)audio_s;
  pthread_mutex_lock(&w->mu);
  const int room = !w->drained;
  pthread_mutex_unlock(&w->mu);
  return room;
}

int wd_worker_submit(wd_worker_t *w, int16_t *samples, size_t n_samples,
                     const wd_job_params_t *p, uint64_t *ret_id) {
  (void)n_samples;
  (void)p;
  free(samples);
  pthread_mutex_lock(&w->mu);
  if (w->drained) {
    pthread_mutex_unlock(&w->mu);
    return WD_ESHUTDOWN;
  }
  w->holding += w->hold;
  pthread_cond_broadcast(&w->cv);
  while (w->hold)
    pthread_cond_wait(&w->cv, &w->mu);
  w->n_submits++;
  w->st.queued++;
  if (ret_id)
    *ret_id = w->next_id;
  w->next_id++;
  pthread_mutex_unlock(&w->mu);
  return 0;
}

void wd_worker_cancel(wd_worker_t *w, uint64_t id) {
  pthread_mutex_lock(&w->mu);
  if (w->n_cancelled < 16)
    w->cancelled[w->n_cancelled++] = id;
  pthread_mutex_unlock(&w->mu);
}

void wd_worker_stats(wd_worker_t *w, wd_worker_stats_t *ret) {
  pthread_mutex_lock(&w->mu);
  *ret = w->st;
  pthread_mutex_unlock(&w->mu);
}

double wd_worker_heartbeat(wd_worker_t *w) { return w->hb; }

void wd_worker_drain(wd_worker_t *w, double grace_s) {
  pthread_mutex_lock(&w->mu);
  w->drained = 1;
  w->drain_grace = grace_s;
  pthread_mutex_unlock(&w->mu);
}

/* ======================= helpers ======================================== */

/* Submits one job (a few samples the group must free); returns the index
 * of the fake that got it, or -1, with the group's id in *ret_id. */
static int submit(wd_workers_t *g, wd_worker_t *fakes, int n, uint64_t *ret_id) {
  int before[WD_WORKERS_MAX];
  for (int i = 0; i < n; i++)
    before[i] = fakes[i].n_submits;
  wd_job_params_t p = { 0 };
  int16_t *pcm = calloc(160, sizeof *pcm);
  uint64_t id = 0;
  const int rc = wd_workers_submit(g, pcm, 160, &p, &id);
  if (ret_id)
    *ret_id = id;
  if (rc < 0)
    return rc;
  for (int i = 0; i < n; i++)
    if (fakes[i].n_submits != before[i])
      return i;
  return -1;
}

static void set_load(wd_worker_t *w, int queued, int running) {
  w->st.queued = queued;
  w->st.running = running;
}

/* ======================= tests ========================================== */

/* The fewest queued + running jobs relative to max_batch wins; ties go to
 * the lowest index. */
WD_TEST(least_loaded) {
  wd_worker_t f[3];
  fake_init(&f[0], 64, 4);
  fake_init(&f[1], 64, 4);
  fake_init(&f[2], 64, 4);
  wd_worker_t *ws[3] = { &f[0], &f[1], &f[2] };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 3, &g), 0);
  if (!g)
    return;
  WD_CHECK_EQ_INT(submit(g, f, 3, NULL), 0);   /* all idle: the lowest index */
  WD_CHECK_EQ_INT(submit(g, f, 3, NULL), 1);   /* 0 has one queued now */
  WD_CHECK_EQ_INT(submit(g, f, 3, NULL), 2);
  WD_CHECK_EQ_INT(submit(g, f, 3, NULL), 0);   /* 1 each: back to 0 */
  set_load(&f[0], 3, 4);
  set_load(&f[1], 0, 2);
  set_load(&f[2], 1, 1);
  WD_CHECK_EQ_INT(submit(g, f, 3, NULL), 1);   /* 2 = 2 < 7: the lower index */
  set_load(&f[1], 2, 4);
  WD_CHECK_EQ_INT(submit(g, f, 3, NULL), 2);   /* 2 < 6 < 7 */
  wd_workers_free(g);

  /* Relative to max_batch: 3 jobs on a batch of 8 weigh less than 1 on a
   * batch of 1, and 8 of 8 as much as 1 of 1 (a tie: the lower index). */
  wd_worker_t h[2];
  fake_init(&h[0], 64, 1);
  fake_init(&h[1], 64, 8);
  wd_worker_t *hs[2] = { &h[0], &h[1] };
  WD_CHECK_EQ_INT(wd_workers_new(hs, NULL, 2, &g), 0);
  set_load(&h[0], 0, 1);
  set_load(&h[1], 0, 3);
  WD_CHECK_EQ_INT(submit(g, h, 2, NULL), 1);
  set_load(&h[1], 0, 8);
  WD_CHECK_EQ_INT(submit(g, h, 2, NULL), 0);
  set_load(&h[0], 0, 1);
  set_load(&h[1], 0, 9);
  WD_CHECK_EQ_INT(submit(g, h, 2, NULL), 0);
  wd_workers_free(g);
  for (int i = 0; i < 3; i++)
    fake_done(&f[i]);
  fake_done(&h[0]);
  fake_done(&h[1]);
}

/* Speed: a worker that gets through twice the audio per busy second takes
 * twice the load before the other gets a job; an idle tie goes to the
 * faster; a worker busy under 2 s counts as fast as the fastest known.
 * Speed is audio decoded, not audio of finished jobs: f[1] has finished
 * little (it is deep in a long file) and is still the faster. */
WD_TEST(weighed_by_speed) {
  wd_worker_t f[2];
  fake_init(&f[0], 64, 4);
  fake_init(&f[1], 64, 4);
  wd_worker_t *ws[2] = { &f[0], &f[1] };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 2, &g), 0);
  if (!g)
    return;
  f[0].st.decoded_s = 30.0, f[0].st.busy_s = 10.0; /* 3 s of audio a second */
  f[1].st.decoded_s = 60.0, f[1].st.busy_s = 10.0; /* 6: twice as fast */
  f[0].st.audio_s = 30.0, f[1].st.audio_s = 5.0;   /* finished jobs: not the measure */
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 1);     /* both idle: the faster */
  set_load(&f[0], 0, 1);
  set_load(&f[1], 0, 1);
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 1);     /* 1/6 < 1/3 */
  set_load(&f[1], 0, 2);
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 1);     /* 2/6 = 1/3: the faster */
  set_load(&f[1], 0, 3);
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 0);     /* 3/6 > 1/3 */
  /* f[0] barely used: as fast as f[1], so the load alone decides. */
  f[0].st.busy_s = 1.0;
  set_load(&f[0], 0, 2);
  set_load(&f[1], 0, 3);
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 0);
  set_load(&f[0], 0, 3);
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 0);     /* a tie at equal speeds: the lower index */
  wd_workers_free(g);
  fake_done(&f[0]);
  fake_done(&f[1]);
}

/* A full queue or a lost device sends jobs elsewhere, however loaded the
 * others are; when every worker is unfit, the least loaded still gets it
 * (and may answer WD_EBUSY itself). */
WD_TEST(full_or_lost_workers_are_last) {
  wd_worker_t f[2];
  fake_init(&f[0], 2, 1);
  fake_init(&f[1], 100, 1);
  wd_worker_t *ws[2] = { &f[0], &f[1] };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 2, &g), 0);
  if (!g)
    return;
  set_load(&f[0], 2, 1);   /* full */
  set_load(&f[1], 50, 1);
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 1);
  set_load(&f[0], 0, 0);
  f[0].st.device_lost = 1; /* idle but rebuilding */
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 1);
  f[1].st.device_lost = 1; /* both lost: the least loaded */
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 0);
  f[0].st.device_lost = 0;
  f[1].st.device_lost = 0;
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 0);
  wd_workers_free(g);
  fake_done(&f[0]);
  fake_done(&f[1]);
}

/* The group's ids name the worker: a cancel reaches that worker with the
 * worker's own id, and no other worker hears of it. A group of one passes
 * ids through unchanged. */
WD_TEST(ids_round_trip_and_cancel) {
  wd_worker_t f[3];
  for (int i = 0; i < 3; i++)
    fake_init(&f[i], 64, 2);
  f[1].next_id = 41;       /* the workers' ids overlap, or not */
  f[2].next_id = 7;
  wd_worker_t *ws[3] = { &f[0], &f[1], &f[2] };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 3, &g), 0);
  if (!g)
    return;
  uint64_t ids[6];
  int who[6];
  for (int k = 0; k < 6; k++) {
    who[k] = submit(g, f, 3, &ids[k]);
    WD_CHECK(ids[k] != 0);
    for (int j = 0; j < k; j++)
      WD_CHECK(ids[j] != ids[k]);
  }
  WD_CHECK_EQ_INT(who[0], 0);
  WD_CHECK_EQ_INT(who[1], 1);
  WD_CHECK_EQ_INT(who[2], 2);
  WD_CHECK_EQ_INT(who[3], 0);
  /* Cancel them in another order: each lands on its worker with the id the
   * worker gave (0: 1, 2; 1: 41, 42; 2: 7, 8). */
  static const int order[6] = { 4, 1, 5, 0, 3, 2 };
  for (int k = 0; k < 6; k++)
    wd_workers_cancel(g, ids[order[k]]);
  WD_CHECK_EQ_INT(f[0].n_cancelled, 2);
  WD_CHECK_EQ_INT(f[1].n_cancelled, 2);
  WD_CHECK_EQ_INT(f[2].n_cancelled, 2);
  WD_CHECK_EQ_INT(f[1].cancelled[0], 42); /* ids[4] */
  WD_CHECK_EQ_INT(f[1].cancelled[1], 41); /* ids[1] */
  WD_CHECK_EQ_INT(f[2].cancelled[0], 8);  /* ids[5] */
  WD_CHECK_EQ_INT(f[2].cancelled[1], 7);
  WD_CHECK_EQ_INT(f[0].cancelled[0], 1);
  WD_CHECK_EQ_INT(f[0].cancelled[1], 2);
  wd_workers_cancel(g, 0); /* 0 is never an id */
  WD_CHECK_EQ_INT(f[0].n_cancelled + f[1].n_cancelled + f[2].n_cancelled, 6);
  wd_workers_free(g);

  /* One worker: the worker's ids. */
  wd_worker_t one;
  fake_init(&one, 64, 2);
  one.next_id = 1234;
  wd_worker_t *os[1] = { &one };
  WD_CHECK_EQ_INT(wd_workers_new(os, NULL, 1, &g), 0);
  uint64_t id = 0;
  WD_CHECK_EQ_INT(submit(g, &one, 1, &id), 0);
  WD_CHECK_EQ_INT(id, 1234);
  wd_workers_cancel(g, id);
  WD_CHECK_EQ_INT(one.n_cancelled, 1);
  WD_CHECK_EQ_INT(one.cancelled[0], 1234);
  wd_workers_free(g);
  for (int i = 0; i < 3; i++)
    fake_done(&f[i]);
  fake_done(&one);
}

/* Summed figures; device_lost only when every device is; the oldest
 * heartbeat; labels. */
WD_TEST(stats_heartbeat_labels) {
  wd_worker_t f[2];
  fake_init(&f[0], 10, 4);
  fake_init(&f[1], 10, 1);
  f[0].st = (wd_worker_stats_t){ .queued = 1, .running = 2, .queue_max = 10, .max_batch = 4,
                                 .jobs_done = 5, .jobs_failed = 1, .steps = 100, .rows = 250,
                                 .encodes = 7, .device_losses = 1, .device_resets = 1,
                                 .audio_s = 55.0, .busy_s = 5.5 };
  f[0].st.steps_by_rows[2] = 60;
  f[1].st = (wd_worker_stats_t){ .queued = 3, .running = 1, .queue_max = 10, .max_batch = 1,
                                 .jobs_done = 2, .steps = 40, .rows = 40, .encodes = 2,
                                 .device_lost = 1, .device_losses = 2, .audio_s = 22.0,
                                 .busy_s = 4.0 };
  f[1].st.steps_by_rows[1] = 40;
  f[1].st.steps_by_rows[2] = 1;
  f[0].hb = 50.0;
  f[1].hb = 20.0;
  wd_worker_t *ws[2] = { &f[0], &f[1] };
  const char *labels[2] = { "cpu", "vulkan:0 with a long name that is cut off here" };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, labels, 2, &g), 0);
  if (!g)
    return;
  wd_worker_stats_t st;
  wd_workers_stats(g, &st);
  WD_CHECK_EQ_INT(st.queued, 4);
  WD_CHECK_EQ_INT(st.running, 3);
  WD_CHECK_EQ_INT(st.queue_max, 20);
  WD_CHECK_EQ_INT(st.max_batch, 5);
  WD_CHECK_EQ_INT(st.jobs_done, 7);
  WD_CHECK_EQ_INT(st.jobs_failed, 1);
  WD_CHECK_EQ_INT(st.steps, 140);
  WD_CHECK_EQ_INT(st.rows, 290);
  WD_CHECK_EQ_INT(st.steps_by_rows[1], 40);
  WD_CHECK_EQ_INT(st.steps_by_rows[2], 61);
  WD_CHECK_EQ_INT(st.encodes, 9);
  WD_CHECK_EQ_INT(st.device_losses, 3);
  WD_CHECK_EQ_INT(st.device_resets, 1);
  WD_CHECK_EQ_INT(st.device_lost, 0); /* worker 0 still serves */
  WD_CHECK_NEAR(st.audio_s, 77.0, 1e-9);
  WD_CHECK_NEAR(st.busy_s, 9.5, 1e-9);
  f[0].st.device_lost = 1;
  wd_workers_stats(g, &st);
  WD_CHECK_EQ_INT(st.device_lost, 1);
  wd_workers_stats_at(g, 1, &st);
  WD_CHECK_EQ_INT(st.queued, 3);
  WD_CHECK_NEAR(wd_workers_heartbeat(g), 20.0, 0);
  WD_CHECK_EQ_INT(wd_workers_count(g), 2);
  WD_CHECK_EQ_STR(wd_workers_label(g, 0), "cpu");
  WD_CHECK_EQ_INT(strlen(wd_workers_label(g, 1)), WD_WORKERS_LABEL_MAX - 1);
  WD_CHECK(wd_workers_at(g, 1) == &f[1]);
  WD_CHECK(wd_workers_at(g, 2) == NULL);
  wd_workers_free(g);
  WD_CHECK_EQ_INT(wd_workers_new(ws, labels, 0, &g), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_workers_new(ws, labels, WD_WORKERS_MAX + 1, &g), WD_EINVAL);
  fake_done(&f[0]);
  fake_done(&f[1]);
}

/* A submit still computing its log-mel counts as load: a burst spreads
 * over the workers instead of piling onto the one that looked idle. */
typedef struct {
  wd_workers_t *g;
  int rc;
} bg_submit_t;

static void *bg_submit(void *arg) {
  bg_submit_t *b = arg;
  wd_job_params_t p = { 0 };
  b->rc = wd_workers_submit(b->g, calloc(16, sizeof(int16_t)), 16, &p, NULL);
  return NULL;
}

WD_TEST(submits_in_flight_count) {
  wd_worker_t f[2];
  fake_init(&f[0], 64, 1);
  fake_init(&f[1], 64, 1);
  f[0].hold = 1;
  wd_worker_t *ws[2] = { &f[0], &f[1] };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 2, &g), 0);
  if (!g)
    return;
  bg_submit_t b = { .g = g, .rc = 1 };
  pthread_t t;
  WD_CHECK_EQ_INT(pthread_create(&t, NULL, bg_submit, &b), 0);
  /* Wait (10 s at most: a group that sent it elsewhere fails here rather
   * than hanging) until worker 0 holds the first submit. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&f[0].mu);
  while (!f[0].holding && pthread_cond_timedwait(&f[0].cv, &f[0].mu, &until) == 0) {
  }
  const int held = f[0].holding;
  pthread_mutex_unlock(&f[0].mu);
  WD_CHECK_EQ_INT(held, 1);
  /* Worker 0 still shows nothing queued, but one submit is on its way. */
  WD_CHECK_EQ_INT(f[0].st.queued, 0);
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 1);
  pthread_mutex_lock(&f[0].mu);
  f[0].hold = 0;
  pthread_cond_broadcast(&f[0].cv);
  pthread_mutex_unlock(&f[0].mu);
  pthread_join(t, NULL);
  WD_CHECK_EQ_INT(b.rc, 0);
  WD_CHECK_EQ_INT(f[0].n_submits, 1);
  /* Both at one queued job: 0 again. */
  WD_CHECK_EQ_INT(submit(g, f, 2, NULL), 0);
  wd_workers_free(g);
  fake_done(&f[0]);
  fake_done(&f[1]);
}

/* A drain reaches every worker with the grace given, and the group then
 * refuses (freeing the samples: ASan would see a leak). */
WD_TEST(drain_all) {
  wd_worker_t f[3];
  for (int i = 0; i < 3; i++)
    fake_init(&f[i], 64, 2);
  wd_worker_t *ws[3] = { &f[0], &f[1], &f[2] };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 3, &g), 0);
  if (!g)
    return;
  wd_workers_drain(g, 2.5);
  for (int i = 0; i < 3; i++) {
    WD_CHECK_EQ_INT(f[i].drained, 1);
    WD_CHECK_NEAR(f[i].drain_grace, 2.5, 0);
  }
  WD_CHECK_EQ_INT(submit(g, f, 3, NULL), WD_ESHUTDOWN);
  for (int i = 0; i < 3; i++)
    WD_CHECK_EQ_INT(f[i].n_submits, 0);
  wd_workers_free(g);
  wd_workers_free(NULL);
  for (int i = 0; i < 3; i++)
    fake_done(&f[i]);
}

int main(void) { return wd_test_main(); }
