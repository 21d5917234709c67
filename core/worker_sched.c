/*
 * worker_sched.c - the worker's scheduling policy (worker.c runs it, and
 * worker_internal.h has the shapes): which queued job is admitted when a
 * slot frees (admission by fair share between requests,
 * wd__worker_pick_queued), when the one picked waits to leave a slot and a
 * row spare for a request that comes later (wd__worker_keep_spare, on the
 * rows wd__worker_rows_to_admit says it needs), and which running job
 * encodes next, a chunked request's parts paced while a plain request
 * decodes (wd__worker_pick_encode). docs/vad.md describes the behaviour
 * and its figures. Nothing here locks, blocks or calls the engine: each
 * function reads the worker's state under the discipline its comment
 * names and returns a choice, which worker.c carries out (the encode pick
 * also resets the pacing's account, enc_ahead_s, when no plain request is
 * under way).
 */
#include <stdint.h>

#include "decoder.h"
#include "worker.h"
#include "worker_internal.h"

/* ---- which running job encodes next ------------------------------------ */

/* How many of jobs[0..live) of request r (not 0) have been encoded at
 * least once since their admission (admission sets last_encode to 0): the
 * request's jobs under way. */
static int request_started(wd_job_t *const *jobs, int live, uint64_t r) {
  int n = 0;
  for (int i = 0; i < live; i++)
    n += jobs[i]->request == r && jobs[i]->last_encode > 0;
  return n;
}

/*
 * The job whose window to encode this turn, or NULL. First the job of the
 * request with the fewest jobs under way, a request of its own counting 0
 * (its next window is all the progress it can make, while a chunked
 * request with parts under way progresses through them), then the one
 * encoded least recently, then run[]'s order. Counting a plain file's
 * later windows as 1 instead put base's jfk.wav (detection, then window)
 * behind new parts: 4.5-5.4 s instead of 3.2-3.7 s behind two 10-minute
 * chunked uploads. The parts still get their turns: while a plain request
 * decodes they get up to half of the worker's time (below).
 *
 * An encode takes as long as tens of steps (base on a CPU: ~0.9 s against
 * ~15 ms; a chunk part of a multilingual model without a language encodes
 * twice, detection and window), and a turn is one encode and one step, so
 * a plain request decoding beside the newly admitted parts of chunked jobs
 * moved one token per encode. While a plain request (request 0) is under
 * way, the parts of a request that has parts under way therefore wait
 * until the prefills, steps and callbacks since have taken as long as
 * their encodes (enc_ahead_s): the steps get at least half of the worker's
 * time. Parts alone, or plain requests alone (N uploads at once), encode
 * as they did, in the order they did. *ret_paced: the pick is such a part.
 */
wd_job_t *wd__worker_pick_encode(wd_worker_t *w, wd_job_t *const *jobs, int live,
                                 int *ret_paced) {
  int solo = 0, steps = 0;
  for (int i = 0; i < live; i++) {
    solo |= jobs[i]->request == 0 && jobs[i]->last_encode > 0;
    steps |= wd_decoder_need(jobs[i]->dec) == WD_DEC_STEP;
  }
  if (!solo)
    w->enc_ahead_s = 0;
  const int hold = solo && steps && w->enc_ahead_s > 0; /* a paced part waits */
  wd_job_t *best = NULL;
  int best_n = 0, best_paced = 0;
  for (int i = 0; i < live; i++) {
    wd_job_t *j = jobs[i];
    if (wd_decoder_need(j->dec) != WD_DEC_ENCODE)
      continue;
    const int n = j->request ? request_started(jobs, live, j->request) : 0;
    const int paced = j->request && n > 0 && solo;
    if (paced && hold)
      continue;
    if (!best || n < best_n || (n == best_n && j->last_encode < best->last_encode)) {
      best = j;
      best_n = n;
      best_paced = paced;
    }
  }
  *ret_paced = best_paced;
  return best;
}

/* ---- admission --------------------------------------------------------- */

/* Under mu: how many running jobs belong to request r (0: none do). */
static int request_running(const wd_worker_t *w, uint64_t r) {
  int n = 0;
  for (int i = 0; r != 0 && i < w->n_running; i++)
    n += w->run[i]->request == r;
  return n;
}

/* How far down the queue the pick looks: a bound on the work done under
 * mu per admission; jobs further back keep FIFO order among themselves. */
#define WD_WORKER_PICK_SCAN 256

/* Under mu, the queue not empty: the job to admit next, the first queued
 * job of the request with the fewest jobs running (wd_job_params_t.request),
 * and in *ret_before the job queued before it (NULL at the head). A
 * request's parts (a chunked job's, each decoded as a job of its own) are
 * queued max_batch at a time; admitted in plain FIFO order they held every
 * slot and a short request behind two 10-minute chunked ones waited 48 s
 * on base instead of 2.3. A request with none running ties with a job
 * of its own, and a request with parts running keeps at least one going,
 * so none starves; its later parts are passed over by every request with
 * fewer jobs running. */
wd_job_t *wd__worker_pick_queued(const wd_worker_t *w, wd_job_t **ret_before) {
  wd_job_t *best = w->head, *best_before = NULL, *prev = w->head;
  int best_n = request_running(w, best->request);
  for (int k = 1; best_n > 0 && prev->next && k < WD_WORKER_PICK_SCAN; k++) {
    wd_job_t *j = prev->next;
    const int n = j->request == best->request ? best_n : request_running(w, j->request);
    if (n < best_n) {
      best = j;
      best_before = prev;
      best_n = n;
    }
    prev = j;
  }
  *ret_before = best_before;
  return best;
}

/* Under mu: whether j, picked next, must wait to leave room. On a worker of
 * two or more slots, a request with a job running never takes the last
 * free slot, nor the last free row: a request that comes while long chunked
 * jobs run starts at once instead of waiting for one of their parts to end
 * (a part of a 10-minute upload runs for seconds on a GPU, tens of seconds
 * on a CPU). The price: a chunked job alone runs on one row fewer than
 * max_batch (its held-back part still lets fallback attempts borrow the
 * free row, run_turn's spare in worker.c). The rule is
 * wd__worker_rows_to_admit's: j waits when no rows will do (0) or when it
 * needs a spare row beside its own (more than n_rows) and fewer are free.
 * A job that needs only its own rows never waits here: whether they are
 * free is admission's own check, before this one (worker.c). */
int wd__worker_keep_spare(const wd_worker_t *w, const wd_job_t *j) {
  const int need = wd__worker_rows_to_admit(w, j);
  return need == 0 ||
         (need > j->n_rows && wd__worker_free_slots(w->seq_used, w->o.engine->max_seqs) < need);
}

/* Under mu: the free rows j's admission needs: n_rows; one more, the spare
 * row, on a worker of two or more slots when j's request has a job
 * running; or 0 when it waits whatever is free (its request would take the
 * last slot). What admission takes back from lent rows for it, and no
 * more, and what wd__worker_keep_spare holds it back by. */
int wd__worker_rows_to_admit(const wd_worker_t *w, const wd_job_t *j) {
  if (w->cap < 2 || request_running(w, j->request) == 0)
    return j->n_rows;
  return w->n_running + 1 >= w->cap ? 0 : j->n_rows + 1;
}

/* How many of the n slots of bit mask mask are free (clear). */
int wd__worker_free_slots(unsigned mask, int n) {
  int k = 0;
  for (int i = 0; i < n; i++)
    k += !(mask & (1u << i));
  return k;
}

