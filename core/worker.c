/*
 * worker.c - the job queue and the worker thread (see worker.h).
 *
 * Shapes: worker_internal.h (the job's and the worker's structs, the queue,
 * run[] and the slots). The scheduling policy, which queued job is admitted
 * and which running job encodes next, is worker_sched.c's; this file
 * carries out its choices.
 *
 * One loop turn of the worker thread:
 *   1. under the mutex: end queued jobs that were cancelled, timed out or
 *      refused by a drain; admit queued jobs while slots are free (rows
 *      lent to running jobs' fallback attempts come back for them first);
 *   2. without it: end running jobs that were cancelled or timed out; encode
 *      at most ONE window (wd__worker_pick_encode: a request with nothing
 *      under way first, then the job encoded least recently, so a long
 *      file's next window waits behind a new file's first; a chunked
 *      request's parts wait while a plain request decodes, until the steps
 *      have had as much time as their encodes); the
 *      prefills (a window's prompt in one submit) of the jobs that start a
 *      window; then one engine step over the rows of every job that needs a
 *      step (after the slot copies its beams asked for), and
 *      each job's logits rows back to its decoder (the decoders filter and
 *      sample in parallel on a small pool, core/pool.h).
 * Callbacks are always called without the mutex held, so they may call
 * wd_worker_submit or wd_worker_cancel (an HTTP layer holding its own
 * request lock around submit would otherwise deadlock against on_done).
 *
 * Ownership: a job belongs to the queue, then to run[]; whoever unlinks it
 * calls its on_done once and frees it. run[] and the queue change only under
 * the mutex, so wd_worker_cancel can look jobs up from any thread; the
 * decoder and slots of a running job are touched by the worker thread only.
 */
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "decoder.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "pool.h"
#include "worker_internal.h"

static void beat(wd_worker_t *w) { atomic_store(&w->heartbeat_ns, wd_now_ns()); }

/* Frees the job's audio and gives its seconds back to the budget, then
 * calls on_done, then frees the job; the job is unlinked (and counted in
 * n_ending), no lock held. The audio goes first (the transcript was taken
 * out of the decoder already): a client that has its answer finds the
 * budget free again, never a 429 for audio that is about to be freed. A
 * drain returns only after this. */
static void job_end(wd_worker_t *w, wd_job_t *j, int rc, wd_transcript_t *t) {
  const double held_s = j->held_s;
  int ahead = 0, made = 0;
  wd_decoder_ahead_counts(j->dec, &ahead, &made);
  wd_decoder_free(j->dec);
  j->dec = NULL;
  pthread_mutex_lock(&w->mu);
  w->st.windows_ahead += (uint64_t)ahead;
  w->held_s -= held_s;
  if (w->held_s < 1e-6) /* no drift below zero from the sums */
    w->held_s = 0.0;
  w->st.audio_held_s = w->held_s;
  pthread_mutex_unlock(&w->mu);
  if (j->cb.on_done)
    j->cb.on_done(j->cb.ud, rc, t);
  else if (t)
    wd_transcript_free(t);
  free(j);
  pthread_mutex_lock(&w->mu);
  w->n_ending--;
  pthread_cond_broadcast(&w->idle);
  pthread_mutex_unlock(&w->mu);
}

/* ---- the worker thread ------------------------------------------------- */

/* Passes an engine call's rc through, noting a lost device. */
static int eng_rc(wd_worker_t *w, int rc) {
  if (rc == WD_EDEVLOST && !w->lost) {
    w->reset_at = 0.0;
    w->reset_backoff = 1.0;
    /* lost is written under mu (HTTP threads read it in queue_full) and
     * only by this thread, which may read it without the lock. */
    pthread_mutex_lock(&w->mu);
    w->lost = 1;
    w->st.device_losses++;
    w->st.device_lost = 1;
    pthread_mutex_unlock(&w->mu);
  }
  return rc;
}

/* Adds the audio job j has moved past since the last call to st.decoded_s;
 * under w->mu. Counted per window rather than per finished job, so a worker
 * deep in a long file, or whose jobs were cancelled, does not read as slow
 * to the multi-device pick (busy_s grows all along). */
static void credit_decoded(wd_worker_t *w, wd_job_t *j) {
  const double done = wd_decoder_done_s(j->dec);
  if (done > j->credited_s) {
    w->st.decoded_s += done - j->credited_s;
    j->credited_s = done;
  }
}

/* Takes running job j out of run[] and gives its slots back; worker thread. */
static void run_remove(wd_worker_t *w, wd_job_t *j, int rc, double audio_s) {
  pthread_mutex_lock(&w->mu);
  credit_decoded(w, j);
  for (int i = 0; i < w->n_running; i++)
    if (w->run[i] == j) {
      memmove(&w->run[i], &w->run[i + 1], (size_t)(w->n_running - i - 1) * sizeof *w->run);
      w->n_running--;
      break;
    }
  if (rc == 0) {
    w->st.jobs_done++;
    w->st.audio_s += audio_s;
  } else {
    w->st.jobs_failed++;
  }
  w->n_ending++;
  pthread_mutex_unlock(&w->mu);
  for (int r = 0; r < j->n_held; r++)
    w->seq_used &= ~(1u << j->seq[r]);
  w->audio_used &= ~(1u << j->audio);
}

/* Ends running job j: with its transcript when rc == 0 and it is done. */
static void run_finish(wd_worker_t *w, wd_job_t *j, int rc) {
  wd_transcript_t t;
  if (rc == 0)
    rc = wd_decoder_take_result(j->dec, &t);
  run_remove(w, j, rc, rc == 0 ? t.duration : 0.0);
  job_end(w, j, rc, rc == 0 ? &t : NULL);
}

/* Passes a language just detected to on_language, then the segments
 * finalised since the last call to on_segment. */
static void report_segments(wd_job_t *j) {
  if (j->cb.on_language && !j->lang_reported) {
    float p = 0.0f;
    const char *code = wd_decoder_detected(j->dec, &p);
    if (code) {
      j->lang_reported = 1;
      j->cb.on_language(j->cb.ud, code, p);
    }
  }
  int n = 0;
  const wd_segment_t *s = wd_decoder_segments(j->dec, &n);
  if (j->cb.on_segment)
    for (int i = j->n_reported; i < n; i++)
      j->cb.on_segment(j->cb.ud, &s[i], wd_decoder_done_s(j->dec), wd_decoder_total_s(j->dec));
  j->n_reported = n;
}

/* One job's share of the work after a step: its decoder takes its rows. */
typedef struct {
  wd_decoder_t *dec;
  const float *rows[WD_DECODER_MAX_ROWS];
  int rc;
} wd_advance_t;

static void advance_one(void *arg, int i) {
  wd_advance_t *a = (wd_advance_t *)arg + i;
  a->rc = wd_decoder_advance(a->dec, a->rows);
}

/* After an engine call begun at t0: a heartbeat, then the worker's lock,
 * which it returns holding, with the call's time counted as busy and
 * *count (a field of w->st) incremented. The caller counts anything else
 * and unlocks. */
static void count_call(wd_worker_t *w, double t0, uint64_t *count) {
  const double dt = wd_now_s() - t0;
  beat(w);
  pthread_mutex_lock(&w->mu);
  (*count)++;
  w->st.busy_s += dt;
}

/* Lowest clear bit of mask below n, or -1. */
static int take_slot(unsigned *mask, int n) {
  for (int i = 0; i < n; i++)
    if (!(*mask & (1u << i))) {
      *mask |= 1u << i;
      return i;
    }
  return -1;
}

/* Worker thread: rows job j holds past what its decoder wants now (and
 * past its own n_rows) go back to the free slots. Returns how many. */
static int trim_held(wd_worker_t *w, wd_job_t *j) {
  const int want = wd_decoder_rows_wanted(j->dec);
  int held = j->n_held;
  while (held > want && held > j->n_rows)
    w->seq_used &= ~(1u << j->seq[--held]);
  const int back = j->n_held - held;
  if (back > 0) {
    j->n_held = held;
    wd_decoder_rows_held(j->dec, held);
  }
  return back;
}

/* Worker thread: the rows lent to job j's attempts that it can give back
 * now come back to the free slots (wd_decoder_rows_shed says which it
 * keeps). Returns how many came back (the caller counts them in
 * st.rows_shed under mu). */
static int shed_lent(wd_worker_t *w, wd_job_t *j) {
  int keep[WD_DECODER_MAX_ROWS], seq[WD_DECODER_MAX_ROWS];
  if (j->n_held <= j->n_rows)
    return 0;
  const int m = wd_decoder_rows_shed(j->dec, keep);
  if (m <= 0)
    return 0;
  unsigned kept = 0;
  for (int r = 0; r < m; r++) {
    seq[r] = j->seq[keep[r]];
    kept |= 1u << seq[r];
  }
  for (int r = 0; r < j->n_held; r++)
    if (!(kept & (1u << j->seq[r])))
      w->seq_used &= ~(1u << j->seq[r]);
  memcpy(j->seq, seq, (size_t)m * sizeof *seq);
  const int back = j->n_held - m;
  j->n_held = m;
  return back;
}

/* Grows or shrinks the rows job j holds toward what its decoder wants now
 * (extra rows for fallback attempts side by side, decoder.h). Rows are
 * lent only while no job waits in the queue (spare = 0 then): a queued
 * job never waits for slots lent to attempts that could have run one after
 * another; lent rows come back when the attempts end, or when a job is
 * queued meanwhile: at its admission where it needs them (reclaim_lent),
 * else here. */
static void job_rows(wd_worker_t *w, wd_job_t *j, int spare) {
  const int want = wd_decoder_rows_wanted(j->dec), max_seqs = w->o.engine->max_seqs;
  if (!spare) {
    /* a job waits: lent rows come back now, not when the attempts end */
    const int back = shed_lent(w, j);
    if (back > 0) {
      pthread_mutex_lock(&w->mu);
      w->st.rows_shed += (uint64_t)back;
      pthread_mutex_unlock(&w->mu);
    }
  }
  trim_held(w, j);
  int held = j->n_held;
  while (spare && held < want && held < WD_DECODER_MAX_ROWS) {
    const int s = take_slot(&w->seq_used, max_seqs);
    if (s < 0)
      break;
    j->seq[held++] = s;
  }
  if (held != j->n_held) {
    j->n_held = held;
    wd_decoder_rows_held(j->dec, held);
  }
}

/* A job's slot work before its prefill or step: row 0 starts afresh on its
 * audio slot, then the copies its search asked for (beams, samples). */
static int job_slot_work(wd_worker_t *w, wd_job_t *j, const wd_dec_work_t *wk) {
  const wd_engine_t *e = w->o.engine;
  int rc = wk->reset ? eng_rc(w, e->seq_reset(e->self, j->seq[0], j->audio)) : 0;
  if (rc == 0 && wk->n_copy > 0) {
    int dst[WD_DECODER_MAX_ROWS], src[WD_DECODER_MAX_ROWS];
    for (int i = 0; i < wk->n_copy; i++) {
      dst[i] = j->seq[wk->copy_dst[i]];
      src[i] = j->seq[wk->copy_src[i]];
    }
    rc = e->seq_copy ? eng_rc(w, e->seq_copy(e->self, wk->n_copy, dst, src)) : WD_EUNSUP;
  }
  return rc;
}

/* A window's alignment-head attention, for its word timestamps. */
static int job_align(wd_worker_t *w, wd_job_t *j, const wd_dec_work_t *wk) {
  const wd_engine_t *e = w->o.engine;
  const double t0 = wd_now_s();
  int rc = e->align ? eng_rc(w, e->align(e->self, j->audio, wk->n_align, wk->align,
                                         wk->align_n_text, wk->n_heads, wk->heads, wk->qk,
                                         wk->probs))
                    : WD_EUNSUP;
  count_call(w, t0, &w->st.aligns);
  pthread_mutex_unlock(&w->mu);
  return rc < 0 ? rc : wd_decoder_advance(j->dec, NULL);
}

/* A window's initial tokens into row 0 in one submit, and its logits back. */
static int job_prefill(wd_worker_t *w, wd_job_t *j, const wd_dec_work_t *wk) {
  const wd_engine_t *e = w->o.engine;
  const float *lg = NULL;
  const double t0 = wd_now_s();
  int rc = eng_rc(w, e->prefill(e->self, j->seq[0], wk->n_prefill, wk->prefill, &lg));
  count_call(w, t0, &w->st.prefills);
  pthread_mutex_unlock(&w->mu);
  return rc < 0 ? rc : wd_decoder_advance(j->dec, &lg);
}

/* The running jobs that are cancelled, timed out, past the drain's grace
 * or done end here; jobs[0..n) keeps the others, whose count it returns. */
static int end_stopped(wd_worker_t *w, wd_job_t **jobs, int n, int shutdown) {
  const double now = wd_now_s();
  int live = 0;
  for (int i = 0; i < n; i++) {
    wd_job_t *j = jobs[i];
    const int rc = atomic_load(&j->cancel) ? WD_ECANCELED
                   : (j->deadline > 0 && now >= j->deadline) ? WD_ETIMEDOUT
                   : shutdown ? WD_ESHUTDOWN : 0;
    if (rc < 0 || wd_decoder_need(j->dec) == WD_DEC_DONE) /* done: e.g. < 10 ms of audio */
      run_finish(w, j, rc);
    else
      jobs[live++] = j;
  }
  return live;
}

/* One encode, of wd__worker_pick_encode's job. A job that fails or is done leaves
 * jobs[0..*live). */
static void run_encode(wd_worker_t *w, wd_job_t **jobs, int *live) {
  const wd_engine_t *e = w->o.engine;
  int paced = 0;
  wd_job_t *enc = wd__worker_pick_encode(w, jobs, *live, &paced);
  if (!enc)
    return;
  const double t0 = wd_now_s();
  int rc = eng_rc(w, e->encode(e->self, enc->audio, wd_decoder_window(enc->dec)));
  if (paced)
    w->enc_ahead_s += wd_now_s() - t0;
  count_call(w, t0, &w->st.encodes);
  credit_decoded(w, enc); /* its seek is where the windows before this one ended */
  pthread_mutex_unlock(&w->mu);
  enc->last_encode = ++w->encode_clock;
  if (rc == 0)
    rc = wd_decoder_encoded(enc->dec);
  if (rc < 0)
    wd_log_warning("worker: job %llu: encode failed: %s", (unsigned long long)enc->id,
                   wd_strerror(rc));
  if (rc < 0 || wd_decoder_need(enc->dec) == WD_DEC_DONE) {
    for (int i = 0; i < *live; i++)
      if (jobs[i] == enc)
        jobs[i] = jobs[--*live];
    run_finish(w, enc, rc);
  }
}

/* The rows of one engine step: who owns which. */
typedef struct {
  int seqs[WD_WORKER_MAX_RUN];
  int32_t tokens[WD_WORKER_MAX_RUN];
  wd_job_t *owner[WD_WORKER_MAX_RUN];
  int first[WD_WORKER_MAX_RUN], count[WD_WORKER_MAX_RUN];
  int n_owner, rows;
} wd_step_rows_t;

/* Slot work and prefills or alignments of the jobs that need a step, and
 * the rows of one step over the others into *st. */
static void gather_rows(wd_worker_t *w, wd_job_t **jobs, int live, int spare,
                        wd_step_rows_t *st) {
  st->n_owner = st->rows = 0;
  for (int i = 0; i < live; i++) {
    wd_job_t *j = jobs[i];
    if (wd_decoder_need(j->dec) != WD_DEC_STEP)
      continue;
    job_rows(w, j, spare);
    wd_dec_work_t wk;
    wd_decoder_work(j->dec, &wk);
    int rc = job_slot_work(w, j, &wk);
    if (rc == 0 && (wk.n_prefill > 0 || wk.n_align > 0)) {
      rc = wk.n_align > 0 ? job_align(w, j, &wk) : job_prefill(w, j, &wk);
      report_segments(j);
      if (rc < 0 || wd_decoder_need(j->dec) == WD_DEC_DONE)
        run_finish(w, j, rc);
      continue;
    }
    /* slots never exceed WD_WORKER_MAX_RUN, so neither do rows */
    if (rc == 0 && (wk.n < 1 || st->rows + wk.n > WD_WORKER_MAX_RUN))
      rc = WD_EINTERNAL;
    if (rc < 0) {
      run_finish(w, j, rc);
      continue;
    }
    for (int r = 0; r < wk.n; r++) {
      st->seqs[st->rows + r] = j->seq[wk.rows[r]];
      st->tokens[st->rows + r] = wk.tokens[r];
    }
    st->owner[st->n_owner] = j;
    st->first[st->n_owner] = st->rows;
    st->count[st->n_owner++] = wk.n;
    st->rows += wk.n;
  }
}

/* One engine step over the gathered rows; each job's rows are then filtered
 * and sampled on the pool (independent decoders, so the same bits on any
 * thread), and its callbacks run here. */
static void run_step(wd_worker_t *w, const wd_step_rows_t *st) {
  const wd_engine_t *e = w->o.engine;
  const float *lg = NULL;
  const double t0 = wd_now_s();
  const int rc = eng_rc(w, e->step(e->self, st->rows, st->seqs, st->tokens, &lg));
  count_call(w, t0, &w->st.steps);
  w->st.rows += (uint64_t)st->rows;
  w->st.steps_by_rows[st->rows <= WD_ENGINE_MAX_SEQS ? st->rows : WD_ENGINE_MAX_SEQS]++;
  pthread_mutex_unlock(&w->mu);
  if (rc < 0) {
    /* The step failed: every job that was in it. */
    wd_log_warning("worker: decoder step failed: %s", wd_strerror(rc));
    for (int i = 0; i < st->n_owner; i++)
      run_finish(w, st->owner[i], rc);
    return;
  }
  wd_advance_t adv[WD_WORKER_MAX_RUN];
  for (int i = 0; i < st->n_owner; i++) {
    adv[i].dec = st->owner[i]->dec;
    for (int r = 0; r < st->count[i]; r++)
      adv[i].rows[r] = lg + (size_t)(st->first[i] + r) * (size_t)e->n_vocab;
  }
  wd_pool_run(w->pool, st->n_owner, advance_one, adv);
  for (int i = 0; i < st->n_owner; i++) {
    wd_job_t *j = st->owner[i];
    report_segments(j);
    if (adv[i].rc < 0 || wd_decoder_need(j->dec) == WD_DEC_DONE)
      run_finish(w, j, adv[i].rc);
  }
}

/* The running part of one turn (see the file comment). No lock held. */
static void run_turn(wd_worker_t *w) {
  wd_job_t *jobs[WD_WORKER_MAX_RUN];
  pthread_mutex_lock(&w->mu);
  const int n = w->n_running;
  memcpy(jobs, w->run, (size_t)n * sizeof *jobs);
  const int shutdown = w->draining && wd_now_s() >= w->grace_deadline;
  /* rows may be lent while no queued job could take them: none queued, or
   * only parts that wd__worker_keep_spare holds back */
  const int spare = (w->n_queued == 0 || w->held_back) && !w->draining;
  pthread_mutex_unlock(&w->mu);
  int live = end_stopped(w, jobs, n, shutdown);
  run_encode(w, jobs, &live);
  wd_step_rows_t st;
  const double t0 = wd_now_s();
  gather_rows(w, jobs, live, spare, &st);
  if (st.rows > 0)
    run_step(w, &st);
  if (w->enc_ahead_s > 0) { /* prefills, alignments and the step pay it back */
    w->enc_ahead_s -= wd_now_s() - t0;
    if (w->enc_ahead_s < 0)
      w->enc_ahead_s = 0;
  }
}

/* After a lost device: the running jobs end with WD_EDEVLOST (their
 * caches and encoded windows went with the device); worker thread, no lock
 * held. */
static void fail_running(wd_worker_t *w) {
  wd_job_t *jobs[WD_WORKER_MAX_RUN];
  pthread_mutex_lock(&w->mu);
  const int n = w->n_running;
  memcpy(jobs, w->run, (size_t)n * sizeof *jobs);
  pthread_mutex_unlock(&w->mu);
  for (int i = 0; i < n; i++)
    run_finish(w, jobs[i], WD_EDEVLOST);
}

/* One try at rebuilding the engine after a lost device; worker thread, no
 * lock held. Queued jobs stay queued either way. */
static void try_reset(wd_worker_t *w) {
  const wd_engine_t *e = w->o.engine;
  if (!e->reset) {
    wd_log_warning("worker: the engine lost its device and cannot rebuild; going on");
    pthread_mutex_lock(&w->mu);
    w->lost = 0;
    w->st.device_lost = 0;
    pthread_mutex_unlock(&w->mu);
    return;
  }
  wd_log_warning("worker: GPU device lost: rebuilding the engine");
  const double t0 = wd_now_s();
  beat(w);
  atomic_store(&w->rebuild_ns, (long long)(t0 * 1e9));
  const int rc = e->reset(e->self);
  beat(w); /* before the grace ends: a read between the two sees a fresh beat */
  atomic_store(&w->rebuild_ns, 0);
  if (rc < 0) {
    wd_log_error("worker: engine rebuild failed (%s); next try in %.0f s", wd_strerror(rc),
                 w->reset_backoff);
    w->reset_at = wd_now_s() + w->reset_backoff;
    w->reset_backoff = w->reset_backoff * 2 < 30.0 ? w->reset_backoff * 2 : 30.0;
    return;
  }
  pthread_mutex_lock(&w->mu);
  w->lost = 0;
  w->st.device_resets++;
  w->st.device_lost = 0;
  pthread_mutex_unlock(&w->mu);
  wd_log_info("worker: engine rebuilt in %.0f ms; serving again", (wd_now_s() - t0) * 1e3);
}

/* Under mu: takes j (queued after `before`, NULL at the head) off the queue. */
static void unlink_queued(wd_worker_t *w, wd_job_t *j, wd_job_t *before) {
  if (before)
    before->next = j->next;
  else
    w->head = j->next;
  if (w->tail == j)
    w->tail = before;
  w->n_queued--;
  j->next = NULL;
}

/* Under mu, worker thread, between turns: rows lent to running jobs'
 * attempts come back until `need` slots are free: those their groups can
 * give back now, and those held past what their decoders want (a group
 * that began on fewer rows than it was lent). A job queued while a
 * window's spare attempts held every free row waited two turns (two
 * encodes of other jobs: seconds on a CPU) for the lender's next steps to
 * give them back. */
static void reclaim_lent(wd_worker_t *w, int need) {
  const int max_seqs = w->o.engine->max_seqs;
  for (int i = 0; i < w->n_running && wd__worker_free_slots(w->seq_used, max_seqs) < need; i++) {
    const int back = shed_lent(w, w->run[i]) + trim_held(w, w->run[i]);
    w->st.rows_shed += (uint64_t)back;
  }
}

static void *worker_main(void *arg) {
  wd_worker_t *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    beat(w);
    /* Queued jobs that end without running: looked for after a cancel, during
     * a drain, and four times a second for deadlines (not every turn: the
     * queue may be long and a turn may be one short GPU step). */
    const double now = wd_now_s();
    wd_job_t *ended[64];
    int ended_rc[64], n_ended = 0;
    if (w->cancels || w->draining || now >= w->next_sweep) {
      w->cancels = 0;
      w->next_sweep = now + 0.25;
      wd_job_t **pp = &w->head, *prev = NULL;
      while (*pp && n_ended < 64) {
        wd_job_t *j = *pp;
        const int rc = w->draining ? WD_ESHUTDOWN
                       : atomic_load(&j->cancel) ? WD_ECANCELED
                       : (j->deadline > 0 && now >= j->deadline) ? WD_ETIMEDOUT : 0;
        if (rc == 0) {
          prev = j;
          pp = &j->next;
          continue;
        }
        unlink_queued(w, j, prev);
        w->n_ending++;
        w->st.jobs_failed++;
        ended_rc[n_ended] = rc;
        ended[n_ended++] = j;
      }
      if (n_ended == 64)
        w->cancels = 1; /* more may be left: look again next turn */
    }
    /* A lost device: rebuild (or wait for the next try) before admitting. */
    if (w->lost && w->n_running == 0 && !w->draining && now >= w->reset_at) {
      pthread_mutex_unlock(&w->mu);
      try_reset(w);
      pthread_mutex_lock(&w->mu);
    }
    /* Admit while slots are free, the next job by fair share. */
    w->held_back = 0;
    while (!w->lost && !w->draining && w->head && w->n_running < w->cap) {
      wd_job_t *before, *j = wd__worker_pick_queued(w, &before);
      const int need = wd__worker_rows_to_admit(w, j);
      if (need > wd__worker_free_slots(w->seq_used, w->o.engine->max_seqs))
        reclaim_lent(w, need);
      if (j->n_rows > wd__worker_free_slots(w->seq_used, w->o.engine->max_seqs))
        break;
      if (wd__worker_keep_spare(w, j)) {
        w->held_back = 1; /* and every job the pick passed over: see wd__worker_pick_queued */
        break;
      }
      unlink_queued(w, j, before);
      for (int r = 0; r < j->n_rows; r++)
        j->seq[r] = take_slot(&w->seq_used, w->o.engine->max_seqs);
      j->n_held = j->n_rows;
      j->audio = take_slot(&w->audio_used, w->o.engine->max_audio);
      j->last_encode = 0; /* admitted jobs encode before any second window */
      w->run[w->n_running++] = j;
    }
    w->st.queued = w->n_queued;
    w->st.running = w->n_running;
    if (w->n_running == 0 && n_ended == 0) {
      pthread_cond_broadcast(&w->idle);
      if (w->stop)
        break;
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      pthread_cond_timedwait(&w->wake, &w->mu, &ts);
      continue;
    }
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < n_ended; i++)
      job_end(w, ended[i], ended_rc[i], NULL);
    /* Running jobs (this thread alone changes run[]) make their next
     * windows ahead from now on; the call does nothing the second time. */
    for (int i = 0; w->ahead && i < w->n_running; i++)
      (void)wd_decoder_set_ahead(w->run[i]->dec, w->ahead);
    run_turn(w);
    if (w->lost)
      fail_running(w);
    pthread_mutex_lock(&w->mu);
    w->st.queued = w->n_queued;
    w->st.running = w->n_running;
    pthread_cond_broadcast(&w->idle);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* ---- public ------------------------------------------------------------ */

int wd_worker_new(const wd_worker_opts_t *opts, wd_worker_t **ret) {
  *ret = NULL;
  if (!opts || !opts->engine || !opts->tok || !opts->mel || opts->queue_max < 1 ||
      opts->max_batch < 1)
    return WD_EINVAL;
  const wd_engine_t *e = opts->engine;
  if (e->max_seqs < 1 || e->max_audio < 1)
    return WD_EINVAL;
  wd_worker_t *w = calloc(1, sizeof *w);
  if (!w)
    return WD_ENOMEM;
  w->o = *opts;
  w->cap = opts->max_batch;
  if (w->cap > e->max_seqs)
    w->cap = e->max_seqs;
  if (w->cap > e->max_audio)
    w->cap = e->max_audio;
  if (w->cap > WD_WORKER_MAX_RUN)
    w->cap = WD_WORKER_MAX_RUN;
  /* Sampling threads: one per running job at most, and no more than the
   * processors (the worker thread itself is one of them). */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int extra = (cpus > 0 && cpus < w->cap ? (int)cpus : w->cap) - 1;
  if (wd_pool_new(extra > 0 ? extra : 0, &w->pool) < 0) {
    free(w);
    return WD_ENOMEM;
  }
  /* One thread makes the next windows ahead: a block is a few ms of one
   * core (4.5 at 80 bins on an Intel Xeon of family 6 model 207, bench_mel)
   * and a job asks for one per window, so it keeps up with a GPU
   * stepping 16 jobs; a task per running job at most, plus one that has
   * told its job it is done and not yet returned. */
  if ((opts->mel_ahead > 0 || (opts->mel_ahead == 0 && e->device_offload)) &&
      wd_taskq_new(1, WD_WORKER_MAX_RUN + 1, "wd-mel-ahead", &w->ahead) < 0) {
    wd_pool_free(w->pool);
    free(w);
    return WD_ENOMEM;
  }
  w->accepting = 1;
  w->next_id = 1;
  w->st.queue_max = opts->queue_max;
  w->st.audio_budget_s = opts->audio_budget_s;
  w->st.max_batch = w->cap;
  beat(w);
  int ok = pthread_mutex_init(&w->mu, NULL) == 0;
  ok = ok && pthread_cond_init(&w->wake, NULL) == 0 && pthread_cond_init(&w->idle, NULL) == 0;
  if (!ok || pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    wd_taskq_free(w->ahead);
    wd_pool_free(w->pool);
    free(w);
    return WD_ENOMEM;
  }
  w->thread_started = 1;
  *ret = w;
  return 0;
}

int wd_worker_mel_ahead(const wd_worker_t *w) { return w && w->ahead; }

void wd_worker_free(wd_worker_t *w) {
  if (!w)
    return;
  wd_worker_drain(w, 0.0);
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_broadcast(&w->wake);
  pthread_mutex_unlock(&w->mu);
  if (w->thread_started)
    pthread_join(w->thread, NULL);
  wd_taskq_free(w->ahead); /* every decoder is freed, and waited for its block */
  wd_pool_free(w->pool);
  pthread_cond_destroy(&w->wake);
  pthread_cond_destroy(&w->idle);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

/* Under mu: the queue is full. Jobs that the next turn will admit into
 * free run slots do not count against queue_max: until that turn (which
 * can be seconds away on a CPU) they only look queued, and refusing a
 * request with a slot free would be a 429 an idle daemon should not give. */
static int queue_full(const wd_worker_t *w) {
  const int free_run = w->lost ? 0 : w->cap - w->n_running;
  return w->n_queued >= w->o.queue_max + (free_run > 0 ? free_run : 0);
}

/* Under mu: audio_s more seconds would pass the audio budget. A worker
 * holding nothing takes any job (one request is bounded by max_audio_s),
 * so a budget below that cannot starve a long file forever. */
static int audio_full(const wd_worker_t *w, double audio_s) {
  return w->o.audio_budget_s > 0 && w->held_s > 0 && w->held_s + audio_s > w->o.audio_budget_s;
}

/* Under mu: why a job of audio_s seconds cannot be queued now, or 0. The
 * later parts of an accepted job (p->admitted) hold their place: only a
 * drain refuses them, so a job the worker took is never cut part-way by
 * a queue that other requests keep full. */
static int refusal(const wd_worker_t *w, const wd_job_params_t *p, double audio_s) {
  if (!w->accepting)
    return WD_ESHUTDOWN;
  if (!p->admitted && (queue_full(w) || audio_full(w, audio_s)))
    return WD_EBUSY;
  return 0;
}

int wd_worker_multilingual(const wd_worker_t *w) {
  return wd_tokenizer_is_multilingual(w->o.tok);
}

int wd_worker_has_room(wd_worker_t *w, double audio_s) {
  pthread_mutex_lock(&w->mu);
  const int room = w->accepting && !audio_full(w, audio_s);
  pthread_mutex_unlock(&w->mu);
  return room;
}

int wd_worker_submit(wd_worker_t *w, int16_t *samples, size_t n_samples,
                     const wd_job_params_t *p, uint64_t *ret_id) {
  if (!w || !p || (!samples && n_samples > 0)) {
    free(samples);
    return WD_EINVAL;
  }
  /* Refuse before the log-mel's pass when the answer is already known. */
  const double audio_s = (double)n_samples / WD_MEL_SAMPLE_RATE;
  pthread_mutex_lock(&w->mu);
  int rc = refusal(w, p, audio_s);
  pthread_mutex_unlock(&w->mu);
  if (rc < 0) {
    free(samples);
    return rc;
  }
  const double t0 = wd_now_s();
  wd_mel_pcm_t *audio = NULL;
  if ((rc = wd_mel_pcm_new(w->o.mel, samples, n_samples, 1, &audio)) < 0)
    return rc;
  wd_job_t *j = calloc(1, sizeof *j);
  if (!j) {
    wd_mel_pcm_free(audio);
    return WD_ENOMEM;
  }
  const wd_engine_t *e = w->o.engine;
  if ((rc = wd_decoder_new(w->o.tok, e, audio, &p->decode, &j->dec)) < 0) {
    free(j);
    return rc;
  }
  /* More rows than the engine has slots could never be admitted. */
  j->n_rows = wd_decoder_n_rows(j->dec);
  if (j->n_rows > e->max_seqs || j->n_rows > WD_WORKER_MAX_RUN) {
    wd_decoder_free(j->dec);
    free(j);
    return WD_ERANGE;
  }
  j->cb = p->cb;
  j->request = p->request;
  j->deadline = p->timeout_s > 0 ? t0 + p->timeout_s : 0.0;
  j->held_s = audio_s;
  pthread_mutex_lock(&w->mu);
  rc = refusal(w, p, audio_s);
  if (rc == 0) {
    w->held_s += audio_s;
    w->st.audio_held_s = w->held_s;
    j->id = w->next_id++;
    if (ret_id)
      *ret_id = j->id;
    if (w->tail)
      w->tail->next = j;
    else
      w->head = j;
    w->tail = j;
    w->n_queued++;
    w->st.queued = w->n_queued;
    pthread_cond_signal(&w->wake);
  }
  pthread_mutex_unlock(&w->mu);
  if (rc < 0) {
    wd_decoder_free(j->dec);
    free(j);
  }
  return rc;
}

void wd_worker_cancel(wd_worker_t *w, uint64_t id) {
  if (!w || id == 0)
    return;
  pthread_mutex_lock(&w->mu);
  for (wd_job_t *j = w->head; j; j = j->next)
    if (j->id == id)
      atomic_store(&j->cancel, 1);
  for (int i = 0; i < w->n_running; i++)
    if (w->run[i]->id == id)
      atomic_store(&w->run[i]->cancel, 1);
  w->cancels = 1;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->mu);
}

void wd_worker_stats(wd_worker_t *w, wd_worker_stats_t *ret) {
  pthread_mutex_lock(&w->mu);
  *ret = w->st;
  ret->queued = w->n_queued;
  ret->running = w->n_running;
  pthread_mutex_unlock(&w->mu);
}

double wd_worker_heartbeat(wd_worker_t *w) {
  /* A rebuild makes no progress to beat for (a large model's upload and
   * pipelines take a while) but is not a hang: it reads as alive for up to
   * WD_WORKER_REBUILD_GRACE_S, then as stuck since it began. */
  const long long rb = atomic_load(&w->rebuild_ns);
  if (rb != 0) {
    const double since = (double)rb * 1e-9, now = wd_now_s();
    return now - since < WD_WORKER_REBUILD_GRACE_S ? now : since;
  }
  return (double)atomic_load(&w->heartbeat_ns) * 1e-9;
}

void wd_worker_drain(wd_worker_t *w, double grace_s) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  if (!w->draining) {
    w->accepting = 0;
    w->draining = 1;
    w->grace_deadline = wd_now_s() + (grace_s > 0 ? grace_s : 0.0);
  }
  pthread_cond_broadcast(&w->wake);
  while (w->n_queued > 0 || w->n_running > 0 || w->n_ending > 0)
    pthread_cond_wait(&w->idle, &w->mu);
  pthread_mutex_unlock(&w->mu);
}
