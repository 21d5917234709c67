/*
 * worker.h - the job queue and the one worker thread that drives an engine.
 *
 * Callers (HTTP threads, `whisperd transcribe`) submit decoded audio as
 * 16-bit samples, which the job holds to its end (32 kB a second); the
 * submitting thread makes one pass over the file's log-mel for its global
 * max, and the worker computes each 30 s window's log-mel as the window comes
 * up (about 3 ms on one core, beside milliseconds to seconds of model time).
 * The worker owns the engine: it admits queued jobs in FIFO order, but for
 * fair share between requests (wd_job_params_t.request), while sequence and
 * audio slots are free, encodes one waiting window per loop turn (a new
 * request's first, so a long file's next window queues behind a new file's
 * first one), and gathers the next token of every running job into
 * one engine step of up to max_batch rows. A job's results are bit-for-bit
 * the same whether it runs alone or beside others.
 *
 * Device loss: when an engine call says WD_EDEVLOST, every running job
 * ends with WD_EDEVLOST (its state on the device is gone), admission stops,
 * and the worker calls the engine's reset() until it succeeds (retrying
 * after 1, 2, 4 .. 30 s); queued jobs wait for it and then run. An engine
 * without reset() is used on as it is.
 *
 * Callbacks run on the worker thread and must not block (store, signal,
 * return). on_done is called exactly once for every job that
 * wd_worker_submit() accepted: when it completes, fails, is cancelled,
 * times out or is refused at shutdown. It may run before wd_worker_submit()
 * has returned in the submitting thread.
 *
 * Threading: wd_worker_submit, _cancel, _stats, _heartbeat and _drain are
 * safe from any thread; _new and _free from one controlling thread.
 */
#ifndef WD_WORKER_H
#define WD_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "engine.h"
#include "mel.h"
#include "tokenizer.h"

typedef struct wd_worker wd_worker_t;

/* What a second of queued or running audio holds: its 16-bit samples. */
#define WD_WORKER_BYTES_PER_AUDIO_S (WD_MEL_SAMPLE_RATE * 2)

typedef struct {
  const wd_engine_t *engine; /* used only on the worker thread; outlives the worker */
  const wd_tokenizer_t *tok;
  const wd_mel_t *mel;
  int queue_max;             /* queued (not yet running) jobs; more get WD_EBUSY */
  double audio_budget_s;     /* audio seconds of jobs queued plus running: a job
                              * that would pass it gets WD_EBUSY, unless the
                              * worker holds none; 0 = no limit. Each second
                              * holds WD_WORKER_BYTES_PER_AUDIO_S. */
  int max_batch;             /* rows per step, <= engine->max_seqs; 1 = no batching */
  int mel_ahead;             /* each running job's next log-mel window made ahead on a
                              * thread of the worker's (win_ahead.h): 0 where the
                              * engine's device_offload says so, 1 always, -1 never */
} wd_worker_opts_t;

typedef struct {
  void *ud;
  /* A segment is final (streaming, progress). done_s of total_s seconds of
   * audio are decoded. Optional. */
  void (*on_segment)(void *ud, const wd_segment_t *seg, double done_s, double total_s);
  /* The job detected its language (a multilingual model given none): code
   * ("de") and its probability, once, before any on_segment. A job that was
   * given its language, or whose model is English-only, never calls it.
   * Optional; it may submit jobs (chunk_job.c does). */
  void (*on_language)(void *ud, const char *code, float prob);
  /* The job ended. rc == 0: *t holds the transcript and the callee owns it
   * (wd_transcript_free). rc < 0: WD_ECANCELED, WD_ETIMEDOUT, WD_ESHUTDOWN,
   * WD_ENOMEM or an engine error (WD_EVULKAN, WD_EDEVLOST, ...); t is NULL. */
  void (*on_done)(void *ud, int rc, wd_transcript_t *t);
} wd_job_cb_t;

typedef struct {
  wd_decode_opts_t decode;   /* copied at submit, prompt tokens and language too */
  double timeout_s;          /* queued + running; 0 = no limit */
  wd_job_cb_t cb;
  /* 1: a later part of a job the worker already accepted (a chunk of a
   * chunked job, core/chunk_job.h), which holds the place its first part
   * won: neither queue_max nor the audio budget refuses it (a drain still
   * does). Its submitter bounds how many such parts it has queued at once. */
  int admitted;
  /* Jobs of one request share an id here (a chunked job's parts: its id);
   * 0 is a request of its own. When a slot frees, the worker admits the
   * first queued job of the request with the fewest jobs running (FIFO
   * among equals), a request with a job running never takes the worker's
   * last free slot or row, and its parts' encodes wait while a plain
   * request decodes (worker_sched.c): one request's many parts cannot hold
   * the worker while a short request waits behind all of them. */
  uint64_t request;
} wd_job_params_t;

/* Starts the worker thread. */
int wd_worker_new(const wd_worker_opts_t *opts, wd_worker_t **ret);

/* Drains (as wd_worker_drain with grace 0) if still running, joins the
 * thread and frees. NULL is allowed. */
void wd_worker_free(wd_worker_t *w);

/*
 * Queues a job for samples[0..n) (16 kHz mono, 16-bit: the signal is
 * samples / 32768, as core/audio.h decodes it). Takes ownership of samples
 * in every case (freed on error too). Runs the log-mel's max pass in the
 * calling thread. Returns 0 and the job's id (never 0), or WD_EBUSY (queue
 * full or audio budget spent; never for p->admitted),
 * WD_ESHUTDOWN (draining), WD_EINVAL (bad options: unknown language, a
 * multilingual option on an English-only model), WD_ERANGE (a beam_size or
 * best_of above the engine's sequence slots), WD_EUNSUP (beams or best_of
 * on an engine without seq_copy) or WD_ENOMEM.
 */
int wd_worker_submit(wd_worker_t *w, int16_t *samples, size_t n_samples,
                     const wd_job_params_t *p, uint64_t *ret_id);

/* Whether the worker's model is multilingual (it detects a language when
 * given none); 0 for an English-only one. */
int wd_worker_multilingual(const wd_worker_t *w);

/* Whether the worker could take audio_s more seconds of audio now (the
 * audio budget alone; the queue's length is submit's to check). The HTTP
 * layer asks with the length a file's header declares, before decoding. */
int wd_worker_has_room(wd_worker_t *w, double audio_s);

/* Cancels job id, queued or running; its on_done gets WD_ECANCELED soon
 * after. An unknown or finished id is ignored. */
void wd_worker_cancel(wd_worker_t *w, uint64_t id);

typedef struct {
  int queued, running;
  int queue_max, max_batch;
  double audio_held_s;             /* audio of the jobs queued, running or ending */
  double audio_budget_s;           /* wd_worker_opts_t's; 0 = none */
  uint64_t jobs_done, jobs_failed; /* ended with rc == 0 / rc < 0 */
  uint64_t steps;                  /* engine steps */
  uint64_t rows;                   /* sum of rows over steps (occupancy = rows / steps) */
  uint64_t rows_shed;              /* rows lent to fallback attempts taken back for a queued job */
  uint64_t steps_by_rows[WD_ENGINE_MAX_SEQS + 1]; /* steps with r rows at [r] */
  uint64_t encodes;                /* windows encoded */
  uint64_t windows_ahead;          /* windows whose log-mel was made ahead (mel_ahead) */
  uint64_t prefills;               /* prompts fed in one submit */
  uint64_t aligns;                 /* word-timestamp alignments */
  uint64_t device_losses;          /* engine calls that said WD_EDEVLOST (a lost or hung GPU) */
  uint64_t device_resets;          /* engine rebuilds that succeeded after one */
  int device_lost;                 /* 1 from a loss until the rebuild succeeds */
  double audio_s;                  /* seconds of audio of completed jobs */
  double decoded_s;                /* seconds of audio decoded, counted as every job (done,
                                    * failed or still running) moves past a window */
  double busy_s;                   /* worker time spent encoding and stepping */
} wd_worker_stats_t;

void wd_worker_stats(wd_worker_t *w, wd_worker_stats_t *ret);

/* CLOCK_MONOTONIC seconds of the worker's last sign of life: it beats after
 * every encode and step, and at least once a second while idle. A stuck GPU
 * call stops it (the daemon then stops feeding systemd's watchdog). While
 * the engine rebuilds after a lost device it reads as now, for at most
 * WD_WORKER_REBUILD_GRACE_S; a rebuild that hangs (a driver that never
 * returns from vkDeviceWaitIdle) then reads as stuck since it began, so
 * the watchdog restarts the daemon. */
#define WD_WORKER_REBUILD_GRACE_S 300.0
double wd_worker_heartbeat(wd_worker_t *w);

/* 1 when the worker makes its jobs' next log-mel windows ahead (mel_ahead,
 * resolved against the engine's device_offload). */
int wd_worker_mel_ahead(const wd_worker_t *w);

/*
 * Stops accepting (submit returns WD_ESHUTDOWN), ends every queued job with
 * WD_ESHUTDOWN, lets running jobs finish for up to grace_s seconds, then
 * cancels what is left with WD_ESHUTDOWN. Returns when no job is left.
 */
void wd_worker_drain(wd_worker_t *w, double grace_s);

#endif
