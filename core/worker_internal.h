/*
 * worker_internal.h - what the worker (worker.c: the thread, its turn loop,
 * submit, cancel, stats, drain) and its scheduling policy (worker_sched.c:
 * which queued job is admitted, which running job encodes next) share: the
 * job's and the worker's structs and the policy's functions. Not an
 * interface; worker.h is.
 *
 * Shapes: a FIFO of queued jobs (linked list, at most queue_max new jobs,
 * plus the admitted later parts of accepted ones, worker.h); run[] holds
 * the running jobs, at most cap = min(max_batch, engine max_seqs,
 * engine max_audio). A running job holds one audio slot and as many
 * sequence slots as its decoder has rows (1, beam_size or best_of) for its
 * whole life, and borrows free ones while a window's fallback attempts run
 * side by side if no job could be admitted (job_rows, worker.c), until
 * the admission of a job that needs them (reclaim_lent). Admission
 * is FIFO but for fair share between requests (wd__worker_pick_queued: the
 * parts of a chunked request yield to requests with fewer jobs running,
 * wd__worker_keep_spare: and never take a worker's last free slot or row);
 * the job picked that needs more rows than are free waits instead of being
 * overtaken forever.
 */
#ifndef WD_WORKER_INTERNAL_H
#define WD_WORKER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "decoder.h"
#include "pool.h"
#include "taskq.h"
#include "worker.h"

#define WD_WORKER_MAX_RUN WD_ENGINE_MAX_SEQS

typedef struct wd_job {
  uint64_t id;
  wd_decoder_t *dec;
  wd_job_cb_t cb;
  double deadline;          /* CLOCK_MONOTONIC seconds, 0 = none */
  atomic_int cancel;        /* set by wd_worker_cancel */
  int seq[WD_DECODER_MAX_ROWS]; /* engine sequence slot of each decoder row */
  int n_rows, audio;        /* rows it needs to run (admission); audio slot */
  int n_held;               /* rows held: n_rows, more while fallback attempts run */
  uint64_t request;         /* wd_job_params_t's; 0: a request of its own */
  uint64_t last_encode;     /* round-robin key: smaller encodes first */
  int n_reported;           /* segments passed to on_segment */
  int lang_reported;        /* on_language called */
  double credited_s;        /* of its audio, what st.decoded_s counts already */
  double held_s;            /* its audio's length, counted in w->held_s */
  struct wd_job *next;
} wd_job_t;

struct wd_worker {
  wd_worker_opts_t o;
  int cap;                  /* running jobs at most */
  wd_pool_t *pool;          /* samples the rows of a step in parallel */
  wd_taskq_t *ahead;        /* makes running jobs' next log-mel windows, or NULL (mel_ahead) */
  pthread_t thread;
  int thread_started;
  pthread_mutex_t mu;
  pthread_cond_t wake;      /* work arrived, a cancel, a drain, stop */
  pthread_cond_t idle;      /* a turn ended (drain waits on it) */
  /* under mu */
  wd_job_t *head, *tail;
  int n_queued;
  double held_s;            /* audio seconds of jobs queued, running or ending */
  wd_job_t *run[WD_WORKER_MAX_RUN];
  int n_running;
  int n_ending;             /* unlinked, their on_done not yet returned */
  uint64_t next_id;
  int accepting, draining, stop;
  int cancels;              /* a cancel arrived: sweep the queue */
  int held_back;            /* admission stopped at a part wd__worker_keep_spare holds back */
  double next_sweep, grace_deadline;
  wd_worker_stats_t st;
  /* worker thread only */
  uint64_t encode_clock;
  double enc_ahead_s; /* encode time of parts of a busy request not yet matched by
                         step time while a request of its own steps
                         (wd__worker_pick_encode) */
  unsigned seq_used, audio_used; /* bit masks of engine slots */
  int lost; /* an engine call said WD_EDEVLOST: reset before admitting; written by this
               thread under mu (queue_full reads it there), read here without it */
  double reset_at, reset_backoff; /* next reset() try, and the wait after a failed one */
  atomic_llong heartbeat_ns;
  atomic_llong rebuild_ns; /* CLOCK_MONOTONIC start of the running reset(), 0 when none */
};

/* ---- the scheduling policy (worker_sched.c) ------------------------------ */

/* The running job whose window to encode this turn among jobs[0..live), or
 * NULL; *ret_paced: it is a part that pays its encode back in step time
 * (w->enc_ahead_s). Worker thread, no lock held. */
wd_job_t *wd__worker_pick_encode(wd_worker_t *w, wd_job_t *const *jobs, int live,
                                 int *ret_paced);
/* Under mu, the queue not empty: the queued job to admit next, and in
 * *ret_before the job queued before it (NULL at the head). */
wd_job_t *wd__worker_pick_queued(const wd_worker_t *w, wd_job_t **ret_before);
/* Under mu: whether j, picked next, must wait to leave a slot or row free
 * (decided from wd__worker_rows_to_admit). */
int wd__worker_keep_spare(const wd_worker_t *w, const wd_job_t *j);
/* Under mu: the free rows j's admission needs, a spare one included, or 0
 * when it waits whatever is free: the spare-row rule. */
int wd__worker_rows_to_admit(const wd_worker_t *w, const wd_job_t *j);
/* How many of the n slots of bit mask mask (w->seq_used, w->audio_used)
 * are free. */
int wd__worker_free_slots(unsigned mask, int n);

#endif
