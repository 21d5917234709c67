/*
 * workers.c - one group over several workers (see workers.h).
 *
 * The group keeps no queue of its own: each worker keeps its queue, its
 * batching and its device-loss handling (worker.h), and the group only
 * picks where a job goes. The pick reads every worker's queued and running
 * counts, and adds the submits already sent to that worker whose log-mel is
 * still being computed (pending[]): without them a burst of requests,
 * arriving before the first one is queued, would all see the same empty
 * worker and all go to worker 0.
 *
 * Locking: g->mu guards accepting and pending[]. It is taken before a
 * worker's own mutex (wd_worker_stats under it) and never the other way:
 * worker callbacks do not call into the group while holding their lock
 * (worker.h: callbacks run without it), so the order cannot invert.
 * wd_worker_submit itself runs without g->mu, so log-mels of several
 * requests are computed side by side, as with a single worker.
 */
#include "workers.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"

struct wd_workers {
  int n;
  wd_worker_t *w[WD_WORKERS_MAX];
  char label[WD_WORKERS_MAX][WD_WORKERS_LABEL_MAX];
  pthread_mutex_t mu;
  /* under mu */
  int accepting;
  int pending[WD_WORKERS_MAX]; /* submits to worker i not yet returned */
};

int wd_workers_new(wd_worker_t *const *workers, const char *const *labels, int n,
                   wd_workers_t **ret) {
  *ret = NULL;
  if (!workers || n < 1 || n > WD_WORKERS_MAX)
    return WD_EINVAL;
  for (int i = 0; i < n; i++)
    if (!workers[i])
      return WD_EINVAL;
  wd_workers_t *g = calloc(1, sizeof *g);
  if (!g)
    return WD_ENOMEM;
  if (pthread_mutex_init(&g->mu, NULL) != 0) {
    free(g);
    return WD_ENOMEM;
  }
  g->n = n;
  g->accepting = 1;
  for (int i = 0; i < n; i++) {
    g->w[i] = workers[i];
    if (labels && labels[i])
      snprintf(g->label[i], sizeof g->label[i], "%s", labels[i]);
    else
      snprintf(g->label[i], sizeof g->label[i], "%d", i);
  }
  *ret = g;
  return 0;
}

void wd_workers_free(wd_workers_t *g) {
  if (!g)
    return;
  pthread_mutex_destroy(&g->mu);
  free(g);
}

int wd_workers_count(const wd_workers_t *g) { return g->n; }

wd_worker_t *wd_workers_at(wd_workers_t *g, int i) {
  return i >= 0 && i < g->n ? g->w[i] : NULL;
}

const char *wd_workers_label(const wd_workers_t *g, int i) {
  return i >= 0 && i < g->n ? g->label[i] : "?";
}

/* A worker's standing for the pick: the smaller, the better. unfit counts
 * a full queue and a lost device. Then the load over what the worker gets
 * through: load / (cap * speed), where speed is its seconds of audio decoded
 * per busy second so far (a GPU beside the CPU engine, or a fast GPU beside a
 * slow one, is not an equal share). The integer parts are cross-multiplied
 * exactly and the speeds enter last, so equal speeds tie exactly where the
 * loads do; a tie goes to the faster worker, then the lower index. */
typedef struct {
  int unfit;
  long long load, cap;
  double speed;
} rank_t;

static int rank_better(const rank_t *a, const rank_t *b) {
  if (a->unfit != b->unfit)
    return a->unfit < b->unfit;
  const double la = (double)(a->load * b->cap) * b->speed;
  const double lb = (double)(b->load * a->cap) * a->speed;
  if (la != lb)
    return la < lb;
  return a->speed > b->speed;
}

/* A worker's speed is known once it has been busy this long: a warm-up or
 * a first short job says little. Until then it is taken to be as fast as
 * the fastest known one, so that a new or idle worker is tried. */
#define WD_SPEED_MIN_BUSY_S 2.0

/* The index of the least-loaded worker; under g->mu. */
static int pick(wd_workers_t *g) {
  rank_t r[WD_WORKERS_MAX];
  double fastest = 0.0;
  for (int i = 0; i < g->n; i++) {
    wd_worker_stats_t st;
    wd_worker_stats(g->w[i], &st);
    r[i] = (rank_t){
      .unfit = (st.queued + g->pending[i] >= st.queue_max) + st.device_lost +
               (st.audio_budget_s > 0 && st.audio_held_s >= st.audio_budget_s),
      .load = (long long)st.queued + st.running + g->pending[i],
      .cap = st.max_batch > 0 ? st.max_batch : 1,
      .speed = st.busy_s >= WD_SPEED_MIN_BUSY_S && st.decoded_s > 0 ? st.decoded_s / st.busy_s : 0,
    };
    if (r[i].speed > fastest)
      fastest = r[i].speed;
  }
  int best = 0;
  for (int i = 0; i < g->n; i++) {
    if (r[i].speed <= 0)
      r[i].speed = fastest > 0 ? fastest : 1.0;
    if (i > 0 && rank_better(&r[i], &r[best]))
      best = i;
  }
  return best;
}

int wd_workers_multilingual(const wd_workers_t *g) {
  return g && g->n > 0 && wd_worker_multilingual(g->w[0]);
}

int wd_workers_has_room(wd_workers_t *g, double audio_s) {
  for (int i = 0; g && i < g->n; i++) {
    wd_worker_stats_t st;
    wd_worker_stats(g->w[i], &st);
    if (!st.device_lost && wd_worker_has_room(g->w[i], audio_s))
      return 1;
  }
  return 0;
}

int wd_workers_submit(wd_workers_t *g, int16_t *samples, size_t n_samples,
                      const wd_job_params_t *p, uint64_t *ret_id) {
  if (!g) {
    free(samples);
    return WD_EINVAL;
  }
  if (g->n == 1) /* a single device: exactly the worker */
    return wd_worker_submit(g->w[0], samples, n_samples, p, ret_id);
  pthread_mutex_lock(&g->mu);
  if (!g->accepting) {
    pthread_mutex_unlock(&g->mu);
    free(samples);
    return WD_ESHUTDOWN;
  }
  const int i = pick(g);
  g->pending[i]++;
  pthread_mutex_unlock(&g->mu);

  uint64_t id = 0;
  const int rc = wd_worker_submit(g->w[i], samples, n_samples, p, &id);

  pthread_mutex_lock(&g->mu);
  g->pending[i]--;
  pthread_mutex_unlock(&g->mu);
  if (rc == 0 && ret_id)
    *ret_id = id * (uint64_t)g->n + (uint64_t)i;
  return rc;
}

void wd_workers_cancel(wd_workers_t *g, uint64_t id) {
  if (!g || id == 0)
    return;
  const uint64_t n = (uint64_t)g->n;
  wd_worker_cancel(g->w[id % n], id / n);
}

void wd_workers_stats_at(wd_workers_t *g, int i, wd_worker_stats_t *ret) {
  wd_worker_stats(g->w[i], ret);
}

void wd_worker_stats_add(wd_worker_stats_t *sum, const wd_worker_stats_t *st) {
  sum->queued += st->queued;
  sum->running += st->running;
  sum->queue_max += st->queue_max;
  sum->max_batch += st->max_batch;
  sum->audio_held_s += st->audio_held_s;
  sum->audio_budget_s += st->audio_budget_s;
  sum->jobs_done += st->jobs_done;
  sum->jobs_failed += st->jobs_failed;
  sum->steps += st->steps;
  sum->rows += st->rows;
  sum->rows_shed += st->rows_shed;
  for (size_t r = 0; r < sizeof sum->steps_by_rows / sizeof sum->steps_by_rows[0]; r++)
    sum->steps_by_rows[r] += st->steps_by_rows[r];
  sum->encodes += st->encodes;
  sum->windows_ahead += st->windows_ahead;
  sum->prefills += st->prefills;
  sum->aligns += st->aligns;
  sum->device_losses += st->device_losses;
  sum->device_resets += st->device_resets;
  sum->device_lost += st->device_lost != 0;
  sum->audio_s += st->audio_s;
  sum->decoded_s += st->decoded_s;
  sum->busy_s += st->busy_s;
}

void wd_workers_stats(wd_workers_t *g, wd_worker_stats_t *ret) {
  *ret = (wd_worker_stats_t){ 0 };
  for (int i = 0; i < g->n; i++) {
    wd_worker_stats_t st;
    wd_worker_stats(g->w[i], &st);
    wd_worker_stats_add(ret, &st);
  }
  ret->device_lost = ret->device_lost == g->n; /* every device of the group */
}

double wd_workers_heartbeat(wd_workers_t *g) {
  double oldest = wd_worker_heartbeat(g->w[0]);
  for (int i = 1; i < g->n; i++) {
    const double hb = wd_worker_heartbeat(g->w[i]);
    if (hb < oldest)
      oldest = hb;
  }
  return oldest;
}

/* One worker's drain on a thread of its own. */
typedef struct {
  wd_worker_t *w;
  double grace_s;
  pthread_t thread;
  int started;
} drain_arg_t;

static void *drain_main(void *arg) {
  drain_arg_t *a = arg;
  wd_worker_drain(a->w, a->grace_s);
  return NULL;
}

void wd_workers_drain(wd_workers_t *g, double grace_s) {
  if (g)
    wd_workers_drain_many(&g, 1, grace_s);
}

void wd_workers_drain_many(wd_workers_t *const *groups, int n_groups, double grace_s) {
  int n = 0;
  for (int k = 0; k < n_groups; k++) {
    pthread_mutex_lock(&groups[k]->mu);
    groups[k]->accepting = 0;
    pthread_mutex_unlock(&groups[k]->mu);
    n += groups[k]->n;
  }
  if (n == 1) {
    wd_worker_drain(groups[0]->w[0], grace_s);
    return;
  }
  /* Side by side, so that every worker's grace starts now. A thread that
   * cannot start drains inline afterwards (its grace then starts late, but
   * the drain still ends). */
  drain_arg_t *a = calloc((size_t)n, sizeof *a);
  for (int k = 0, i = 0; a && k < n_groups; k++)
    for (int j = 0; j < groups[k]->n; j++, i++) {
      a[i] = (drain_arg_t){ .w = groups[k]->w[j], .grace_s = grace_s };
      a[i].started = pthread_create(&a[i].thread, NULL, drain_main, &a[i]) == 0;
    }
  if (!a) { /* out of memory: one after another */
    for (int k = 0; k < n_groups; k++)
      for (int j = 0; j < groups[k]->n; j++)
        wd_worker_drain(groups[k]->w[j], grace_s);
    return;
  }
  for (int i = 0; i < n; i++) {
    if (a[i].started)
      pthread_join(a[i].thread, NULL);
    else
      wd_worker_drain(a[i].w, grace_s);
  }
  free(a);
}
