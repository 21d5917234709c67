/*
 * metrics.c - counters and the Prometheus exposition (see metrics.h).
 *
 * Series (all prefixed whisperd_):
 *   http_requests_total{route,code}          counter, only pairs seen so far
 *   http_request_duration_seconds{route}     histogram (buckets below)
 *   http_requests_active, http_connections_suspended, ready, model_loaded
 *   http_connections_open                    gauge
 *   http_connections_header_timeouts_total   counter: slow-loris cut-offs
 *   diarizations_running                     gauge: speaker diarizations now
 *   diarizations_queued                      gauge: waiting for a diarization thread
 *   diarizations_audio_seconds               gauge: their audio in the budget
 *   diarizations_total{result="done"|"canceled"|"failed"}   counter
 *   queue_depth, queue_capacity, queue_audio_seconds,
 *   queue_audio_budget_seconds, jobs_running, batch_max_rows       gauges
 *   jobs_total{result="done"|"failed"}       counter
 *   engine_steps_total, engine_step_rows_total, windows_encoded_total
 *   engine_steps_by_rows_total{rows="1".."16"}  counter: batch occupancy (WD_ENGINE_MAX_SEQS)
 *   batch_rows_mean                          gauge: rows / steps
 *   audio_seconds_total, worker_busy_seconds_total   counters
 *   real_time_factor                         gauge: busy / audio seconds
 *   device_losses_total, device_resets_total counters: lost (or hung) GPU, rebuilds
 * The figures above are every worker's summed (core/workers.h). Each worker
 * (one per device of --device) also has series of its own, labelled
 * {worker="0",device="cpu"} (worker: its index, device: its --device entry):
 *   worker_queued, worker_running, worker_device_lost          gauges
 *   worker_jobs_total{result="done"|"failed"}, worker_windows_encoded_total,
 *   worker_engine_steps_total, worker_audio_seconds_total,
 *   worker_engine_seconds_total, worker_device_losses_total    counters
 */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "workers.h"

/* Request latency buckets in seconds: a health check to a three-hour file. */
static const double wd_buckets[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                     5,     10,   30,    60,   120, 300,  600, 1800, 3600 };
#define WD_N_BUCKETS (sizeof wd_buckets / sizeof wd_buckets[0])
#define WD_N_STATUS 600 /* index = status code; 0 = no response */

typedef struct {
  uint64_t by_status[WD_N_STATUS];
  uint64_t buckets[WD_N_BUCKETS]; /* non-cumulative here, summed when rendered */
  uint64_t count;
  double sum;
} wd_route_counters_t;

struct wd_metrics {
  pthread_mutex_t mu;
  wd_route_counters_t routes[WD_ROUTE_COUNT];
};

int wd_metrics_new(wd_metrics_t **ret) {
  wd_metrics_t *m = calloc(1, sizeof *m);
  if (!m)
    return WD_ENOMEM;
  pthread_mutex_init(&m->mu, NULL);
  *ret = m;
  return 0;
}

void wd_metrics_free(wd_metrics_t *m) {
  if (!m)
    return;
  pthread_mutex_destroy(&m->mu);
  free(m);
}

void wd_metrics_request(wd_metrics_t *m, wd_route_t route, int status, double seconds) {
  if (!m)
    return;
  if (route < 0 || route >= WD_ROUTE_COUNT)
    route = WD_ROUTE_OTHER;
  if (status < 100 || status >= WD_N_STATUS)
    status = 0;
  if (!(seconds >= 0))
    seconds = 0;
  size_t b = 0;
  while (b < WD_N_BUCKETS && seconds > wd_buckets[b])
    b++;
  pthread_mutex_lock(&m->mu);
  wd_route_counters_t *c = &m->routes[route];
  c->by_status[status]++;
  if (b < WD_N_BUCKETS)
    c->buckets[b]++;
  c->count++;
  c->sum += seconds;
  pthread_mutex_unlock(&m->mu);
}

/* A growing output string; err is sticky. */
typedef struct {
  char *s;
  size_t len, cap;
  int err;
} wd_out_t;

static void out_printf(wd_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out_printf(wd_out_t *o, const char *fmt, ...) {
  if (o->err)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(o->s ? o->s + o->len : NULL, o->s ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      o->err = 1;
      return;
    }
    if (o->s && o->len + (size_t)n < o->cap) {
      o->len += (size_t)n;
      return;
    }
    const size_t cap = (o->cap ? o->cap * 2 : 8192) + (size_t)n;
    char *s = realloc(o->s, cap);
    if (!s) {
      o->err = 1;
      return;
    }
    o->s = s;
    o->cap = cap;
  }
}

/* # HELP and # TYPE lines of one metric family. */
static void family(wd_out_t *o, const char *name, const char *type, const char *help) {
  out_printf(o, "# HELP whisperd_%s %s\n# TYPE whisperd_%s %s\n", name, help, name, type);
}

static void gauge(wd_out_t *o, const char *name, const char *help, double v) {
  family(o, name, "gauge", help);
  out_printf(o, "whisperd_%s %.17g\n", name, v);
}

static void counter(wd_out_t *o, const char *name, const char *help, double v) {
  family(o, name, "counter", help);
  out_printf(o, "whisperd_%s %.17g\n", name, v);
}

static void render_http(wd_out_t *o, const wd_route_counters_t *rc) {
  family(o, "http_requests_total", "counter",
         "HTTP requests answered, by route and status code (0: closed without a response).");
  for (int r = 0; r < WD_ROUTE_COUNT; r++)
    for (int s = 0; s < WD_N_STATUS; s++)
      if (rc[r].by_status[s])
        out_printf(o, "whisperd_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                   wd_route_name((wd_route_t)r), s, (unsigned long long)rc[r].by_status[s]);
  family(o, "http_request_duration_seconds", "histogram",
         "Seconds from a request's headers to its last response byte.");
  for (int r = 0; r < WD_ROUTE_COUNT; r++) {
    const char *name = wd_route_name((wd_route_t)r);
    uint64_t cum = 0;
    for (size_t b = 0; b < WD_N_BUCKETS; b++) {
      cum += rc[r].buckets[b];
      out_printf(o, "whisperd_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                 name, wd_buckets[b], (unsigned long long)cum);
    }
    out_printf(o, "whisperd_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
               name, (unsigned long long)rc[r].count);
    out_printf(o, "whisperd_http_request_duration_seconds_sum{route=\"%s\"} %.9g\n", name,
               rc[r].sum);
    out_printf(o, "whisperd_http_request_duration_seconds_count{route=\"%s\"} %llu\n", name,
               (unsigned long long)rc[r].count);
  }
}

static void render_worker(wd_out_t *o, const wd_worker_stats_t *ws) {
  gauge(o, "queue_depth", "Jobs waiting in the queue.", ws->queued);
  gauge(o, "queue_capacity", "Jobs the queue holds before answering 429.", ws->queue_max);
  gauge(o, "queue_audio_seconds", "Audio seconds of the jobs queued and running.",
        ws->audio_held_s);
  gauge(o, "queue_audio_budget_seconds",
        "Audio seconds queued and running before answering 429 (0: no budget).",
        ws->audio_budget_s);
  gauge(o, "jobs_running", "Jobs the worker is decoding.", ws->running);
  gauge(o, "batch_max_rows", "Most sequences decoded in one engine step.", ws->max_batch);
  family(o, "jobs_total", "counter", "Jobs ended, by result (failed includes canceled).");
  out_printf(o, "whisperd_jobs_total{result=\"done\"} %llu\n",
             (unsigned long long)ws->jobs_done);
  out_printf(o, "whisperd_jobs_total{result=\"failed\"} %llu\n",
             (unsigned long long)ws->jobs_failed);
  counter(o, "engine_steps_total", "Decoder steps run.", (double)ws->steps);
  counter(o, "engine_step_rows_total", "Sequences decoded, summed over steps.", (double)ws->rows);
  family(o, "engine_steps_by_rows_total", "counter",
         "Decoder steps by the number of sequences batched in them (batch occupancy).");
  const int max_rows = (int)(sizeof ws->steps_by_rows / sizeof ws->steps_by_rows[0]) - 1;
  for (int r = 1; r <= max_rows; r++)
    out_printf(o, "whisperd_engine_steps_by_rows_total{rows=\"%d\"} %llu\n", r,
               (unsigned long long)ws->steps_by_rows[r]);
  gauge(o, "batch_rows_mean", "Mean sequences per decoder step since start.",
        ws->steps ? (double)ws->rows / (double)ws->steps : 0.0);
  counter(o, "windows_encoded_total", "30-second audio windows encoded.", (double)ws->encodes);
  counter(o, "windows_made_ahead_total",
          "Windows whose log-mel was made on another thread while the device decoded the one "
          "before (--mel-ahead).",
          (double)ws->windows_ahead);
  counter(o, "prefills_total", "Window prompts fed to the decoder in one submit.",
          (double)ws->prefills);
  counter(o, "word_alignments_total", "Windows aligned for word timestamps.", (double)ws->aligns);
  counter(o, "audio_seconds_total", "Seconds of audio in completed jobs.", ws->audio_s);
  counter(o, "audio_decoded_seconds_total",
          "Seconds of audio decoded, counted window by window, jobs finished or not.",
          ws->decoded_s);
  counter(o, "worker_busy_seconds_total", "Seconds the worker spent encoding and decoding.",
          ws->busy_s);
  /* Over audio decoded, not audio of completed jobs: busy time goes to
   * cancelled and unfinished jobs as well. */
  gauge(o, "real_time_factor",
        "Worker busy seconds per second of audio decoded since start (lower is faster).",
        ws->decoded_s > 0 ? ws->busy_s / ws->decoded_s : 0.0);
  counter(o, "device_losses_total", "Times the GPU device was lost or hung.",
          (double)ws->device_losses);
  counter(o, "device_resets_total", "Engine rebuilds (device, weights, plans) after a loss.",
          (double)ws->device_resets);
}

/* The per-worker families, in order; value k of a worker's figures. */
enum { PW_QUEUED, PW_RUNNING, PW_DONE, PW_ENCODES, PW_STEPS, PW_AUDIO, PW_BUSY, PW_LOST,
       PW_LOSSES, PW_COUNT };

static const struct {
  const char *name, *type, *help;
} wd_per_worker[PW_COUNT] = {
  [PW_QUEUED] = { "worker_queued", "gauge", "Jobs waiting in one worker's queue." },
  [PW_RUNNING] = { "worker_running", "gauge", "Jobs one worker is decoding." },
  [PW_DONE] = { "worker_jobs_total", "counter",
                "Jobs one worker ended, by result (failed includes canceled)." },
  [PW_ENCODES] = { "worker_windows_encoded_total", "counter",
                   "30-second audio windows one worker encoded." },
  [PW_STEPS] = { "worker_engine_steps_total", "counter", "Decoder steps one worker ran." },
  [PW_AUDIO] = { "worker_audio_seconds_total", "counter",
                 "Seconds of audio in the jobs one worker completed." },
  [PW_BUSY] = { "worker_engine_seconds_total", "counter",
                "Seconds one worker spent encoding and decoding." },
  [PW_LOST] = { "worker_device_lost", "gauge",
                "1 while one worker's device is lost and its engine rebuilds." },
  [PW_LOSSES] = { "worker_device_losses_total", "counter",
                  "Times one worker's device was lost or hung." },
};

static double pw_value(const wd_worker_stats_t *s, int k) {
  switch (k) {
  case PW_QUEUED: return s->queued;
  case PW_RUNNING: return s->running;
  case PW_DONE: return (double)s->jobs_done;
  case PW_ENCODES: return (double)s->encodes;
  case PW_STEPS: return (double)s->steps;
  case PW_AUDIO: return s->audio_s;
  case PW_BUSY: return s->busy_s;
  case PW_LOST: return s->device_lost;
  default: return (double)s->device_losses;
  }
}

/* A label value with \, " and newline escaped (text format 0.0.4). */
static void label_escape(char *dst, size_t cap, const char *v) {
  size_t n = 0;
  for (; v && *v && n + 3 < cap; v++) {
    if (*v == '\\' || *v == '"' || *v == '\n') {
      dst[n++] = '\\';
      dst[n++] = *v == '\n' ? 'n' : *v;
    } else {
      dst[n++] = *v;
    }
  }
  dst[n] = '\0';
}

static void render_per_worker(wd_out_t *o, const wd_metrics_worker_t *per, int n_per) {
  char labels[WD_METRICS_MAX_WORKERS][160];
  if (n_per > WD_METRICS_MAX_WORKERS)
    n_per = WD_METRICS_MAX_WORKERS;
  for (int i = 0; i < n_per; i++) {
    char dev[64], model[64];
    label_escape(dev, sizeof dev, per[i].device);
    label_escape(model, sizeof model, per[i].model ? per[i].model : "");
    snprintf(labels[i], sizeof labels[i], "worker=\"%d\",device=\"%s\"%s%s%s", i, dev,
             per[i].model ? ",model=\"" : "", model, per[i].model ? "\"" : "");
  }
  for (int k = 0; k < PW_COUNT; k++) {
    family(o, wd_per_worker[k].name, wd_per_worker[k].type, wd_per_worker[k].help);
    for (int i = 0; i < n_per; i++) {
      if (k == PW_DONE) {
        out_printf(o, "whisperd_%s{%s,result=\"done\"} %llu\n", wd_per_worker[k].name,
                   labels[i], (unsigned long long)per[i].stats.jobs_done);
        out_printf(o, "whisperd_%s{%s,result=\"failed\"} %llu\n", wd_per_worker[k].name,
                   labels[i], (unsigned long long)per[i].stats.jobs_failed);
      } else {
        out_printf(o, "whisperd_%s{%s} %.17g\n", wd_per_worker[k].name, labels[i],
                   pw_value(&per[i].stats, k));
      }
    }
  }
}

int wd_metrics_render(wd_metrics_t *m, const wd_metrics_state_t *st, const wd_worker_stats_t *ws,
                      const wd_metrics_worker_t *per, int n_per, char **ret) {
  /* Copy under the lock, format outside it. */
  wd_route_counters_t *rc = malloc(sizeof m->routes);
  if (!rc)
    return WD_ENOMEM;
  pthread_mutex_lock(&m->mu);
  memcpy(rc, m->routes, sizeof m->routes);
  pthread_mutex_unlock(&m->mu);
  wd_out_t o = { 0 };
  render_http(&o, rc);
  free(rc);
  gauge(&o, "http_requests_active", "Requests between their headers and their end.",
        st ? st->requests_active : 0);
  gauge(&o, "http_connections_suspended", "Connections waiting on the worker.",
        st ? st->connections_suspended : 0);
  gauge(&o, "http_connections_open", "HTTP connections accepted and not yet closed.",
        st ? st->connections_open : 0);
  counter(&o, "http_connections_header_timeouts_total",
          "Connections closed for not sending complete headers within --header-timeout.",
          st ? st->connections_cut : 0);
  gauge(&o, "realtime_sessions_open", "Realtime transcription sessions open now.",
        st ? st->rt_sessions_open : 0);
  counter(&o, "realtime_sessions_total", "Realtime transcription sessions opened.",
          st ? st->rt_sessions_total : 0);
  counter(&o, "realtime_turns_total", "Turns committed in realtime sessions.",
          st ? st->rt_turns_total : 0);
  counter(&o, "realtime_turns_failed_total", "Realtime turns whose transcription failed.",
          st ? st->rt_turns_failed : 0);
  counter(&o, "realtime_turn_latency_seconds_sum",
          "Seconds from each turn's end (speech_stopped or commit) to its completed event, "
          "summed over the completed turns.",
          st ? st->rt_turn_latency_s_sum : 0);
  gauge(&o, "diarizations_running", "Speaker diarizations running now.",
        st ? st->diar_running : 0);
  gauge(&o, "diarizations_queued",
        "Speaker diarizations waiting for a diarization thread (--diarize-threads).",
        st ? st->diar_queued : 0);
  gauge(&o, "diarizations_audio_seconds",
        "Audio seconds of diarizations whose transcription has ended, held in the audio budget "
        "beside queue_audio_seconds.",
        st ? st->diar_held_s : 0);
  family(&o, "diarizations_total", "counter",
         "Speaker diarizations ended: done, canceled (the client left, the transcription failed "
         "or the drain stopped it) or failed.");
  out_printf(&o, "whisperd_diarizations_total{result=\"done\"} %.17g\n", st ? st->diar_done : 0);
  out_printf(&o, "whisperd_diarizations_total{result=\"canceled\"} %.17g\n",
             st ? st->diar_canceled : 0);
  out_printf(&o, "whisperd_diarizations_total{result=\"failed\"} %.17g\n",
             st ? st->diar_failed : 0);
  gauge(&o, "ready", "1 when the server accepts transcriptions.", st ? st->ready : 0);
  gauge(&o, "model_loaded", "1 once the model is attached.", st ? st->model_loaded : 0);
  if (ws)
    render_worker(&o, ws);
  if (ws && per && n_per > 0)
    render_per_worker(&o, per, n_per);
  if (o.err) {
    free(o.s);
    return WD_ENOMEM;
  }
  *ret = o.s;
  return 0;
}
