/*
 * server.h - the HTTP server: OpenAI's audio API on libmicrohttpd.
 *
 * Routes: POST /v1/audio/transcriptions, POST /v1/audio/translations,
 * GET /v1/models, GET /health (liveness: always 200), GET /ready (200 once
 * the daemon called wd_server_set_ready(s, 1), else 503), GET /metrics
 * (Prometheus text).
 *
 * The server starts before the model is loaded so /health answers during
 * start-up; audio routes answer 503 until wd_server_attach() hands it the
 * worker. HTTP threads parse the upload; decode threads (opts.decode_threads)
 * turn it into samples, then the HTTP thread submits the job and suspends the
 * connection; the worker's callbacks resume it. HTTP threads never decode,
 * run or wait on the model.
 *
 * Threading: _start, _attach, _quiesce and _free from the controlling
 * thread; _set_ready from any thread.
 */
#ifndef WD_SERVER_H
#define WD_SERVER_H

#include <stddef.h>

#include "diar.h"
#include "tokenizer.h"
#include "vad.h"
#include "workers.h"

typedef struct wd_server wd_server_t;

typedef struct {
  const char *host;          /* bind address, when listen_fd < 0 */
  int port;
  int listen_fd;             /* socket-activated listening socket, or -1 */
  int threads;               /* HTTP threads */
  size_t max_body;           /* bytes; larger bodies get 413 while they are read */
  int max_connections;
  int idle_timeout_s;        /* a silent client is disconnected */
  const char *api_key;       /* NULL or "": no authentication */
  int max_audio_s;           /* per-request audio cap */
  double job_timeout_s;      /* queued + running */
  double decode_timeout_s;   /* one upload's audio decode (core/audio.h timeout_s);
                              * 0 = no bound */
  int body_timeout_s;        /* whole time to receive one request body (slow
                              * clients); 0 = 300 s. A client that stops
                              * sending is cut off sooner, by idle_timeout_s */
  int header_timeout_s;      /* whole time to receive one request's headers
                              * however slowly they trickle; 0 = 15 s */
  int max_connections_per_ip;/* 0 = 3/4 of max_connections */
  int decode_threads;        /* threads that decode uploads off the HTTP
                              * threads; 0 = 2 */
  int diarize_threads;       /* threads that run diarizations, off the
                              * decode threads; 0 = 1 */
  int realtime_sessions;     /* /v1/realtime sessions at once; 0 = 32 */
  int no_web_ui;             /* 1: no page at / (404 there, as any unknown path) */
  int realtime_partial_ms;   /* partial transcripts of an open turn every this
                              * many ms of speech, workers idle; 0 = none */
} wd_server_opts_t;

/*
 * Binds (or adopts listen_fd, which the server then owns) and starts
 * serving. port 0 binds a free port (see wd_server_port). Returns 0, or
 * WD_EINVAL / WD_EIO / WD_ENOMEM with a message in err.
 */
int wd_server_start(const wd_server_opts_t *o, wd_server_t **ret, char *err, size_t err_len);

/* The TCP port the server listens on (useful after binding port 0). */
int wd_server_port(const wd_server_t *s);

/* A model is loaded: audio routes use its workers and tok from now on.
 * names are the accepted `model` values (whisper-1, the model's name,
 * aliases); /v1/models lists every model's, in attach order. Several
 * models may be attached (up to WD_SERVER_MAX_MODELS, one call each): a
 * request goes to the first whose names hold its `model`. Everything
 * passed must outlive the server's use of it (until wd_server_free). */
#define WD_SERVER_MAX_MODELS 4
typedef struct {
  wd_workers_t *workers;     /* one worker per device (core/workers.h) */
  const wd_tokenizer_t *tok;
  int multilingual;          /* translations and language need it */
  const char *const *names;
  int n_names;
  int no_translate;          /* multilingual but cannot translate (wd_model_can_translate) */
  /* Decoding defaults (beam_size, best_of, the temperature schedule and
   * its step, from which a request's `temperature` builds its own), or NULL
   * for openai transcribe()'s. */
  const wd_decode_opts_t *decode;
  long long created;         /* /v1/models `created` (the model file's mtime, so
                              * replicas and restarts agree); 0: server start */
  /* Silero VAD (core/vad_job.h) for requests' chunking_strategy, NULL when
   * the server has none; vad_default (--vad): for every request. */
  const wd_vad_model_t *vad;
  const wd_vad_params_t *vad_params;
  int vad_default;
  /* Speaker diarization (core/diar.h) for requests that ask for it
   * (diarized_json, gpt-4o-transcribe-diarize, diarize=true), run on the
   * decode threads beside the transcription; NULL when the server has
   * none: those requests are answered 400. */
  const wd_diar_t *diar;
  const wd_diar_params_t *diar_params;
  const char *label;         /* the model's name, for the per-worker metrics */
  void (*on_retire)(void *ud); /* wd_server_replace: the model is no longer used */
  void *retire_ud;
  /* workers NULL: a model the daemon loads on demand (names, multilingual
   * and no_translate known, nothing loaded). A request for it calls
   * on_demand(demand_ud) (any thread; it must not block), which returns
   * the seconds a client should wait (a load is under way), WD_EBUSY
   * (over the memory budget while every other model is in use) or
   * WD_EMODEL (its last load failed with load_error, and the file has not
   * changed since). An upload for a model whose load is under way is
   * parked (its connection suspended, no thread held) until the daemon
   * changes that model (wd_server_replace, wd_server_model_changed), then
   * goes on; otherwise it is answered 503 at once, with the load's error
   * when it failed. A realtime turn for it waits on its session's thread,
   * the turns after it behind it. */
  int (*on_demand)(void *ud);
  void *demand_ud;
  const char *load_error;    /* on demand: why its last load failed, or NULL */
} wd_server_model_t;

void wd_server_attach(wd_server_t *s, const wd_server_model_t *m);

/* Model i (attach order) is m from now on: requests that picked the old one
 * finish on it, new ones get m. When the old one's last request ends (now,
 * if none runs), its on_retire(retire_ud) is called, from whichever thread
 * ended it (a worker's, an HTTP thread, this one): hand its engines to a
 * thread of your own to close, never close them there. WD_EINVAL for no
 * model i, WD_ENOMEM. */
int wd_server_replace(wd_server_t *s, int i, const wd_server_model_t *m);

/* Model i's state changed without a new record (its load was refused over
 * the memory budget): the requests parked for it look again. Any thread;
 * wd_server_replace does this itself. Their callbacks run on this thread. */
void wd_server_model_changed(wd_server_t *s, int i);

void wd_server_set_ready(wd_server_t *s, int ready);

/* Stops accepting connections (SIGTERM) and closes the listening socket, so
 * that new connections are refused at once; requests in progress, and
 * further requests on connections already open, go on (/ready answers them
 * 503 "shutting_down"). */
void wd_server_quiesce(wd_server_t *s);

/* The drain's deadline, grace_s from now: speaker diarizations (which run
 * beside the workers' jobs, not in them) may finish until then and are
 * stopped at it, answered 503 as the workers' drain answers the jobs it
 * cancels; wd_server_free waits for them that long. Call it with the grace
 * given to wd_workers_drain(), when the drain starts. */
void wd_server_drain_by(wd_server_t *s, double grace_s);

/*
 * Lets speaker diarizations run until the drain's deadline
 * (wd_server_drain_by; none set: not at all) and stops those still
 * running, then waits up to wait_s for open requests to finish answering,
 * then closes everything and frees. NULL is allowed. The workers must still exist: call
 * wd_workers_drain() before this and free them after. Jobs still
 * running are cancelled and waited for (their callbacks point into the
 * server), up to wait_s + 10 s; if the worker never ends them, the server
 * is leaked rather than freed under its feet, with an error logged, and
 * WD_EBUSY is returned: its threads still run and may call the worker, so
 * the caller must then leave the worker and the model alone (and exit).
 * Returns 0 otherwise.
 */
int wd_server_free(wd_server_t *s, double wait_s);

#endif
