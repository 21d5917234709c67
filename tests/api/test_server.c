/*
 * test_server.c - the HTTP server in process, on 127.0.0.1 and a free port,
 * driven over raw sockets.
 *
 * The worker is a fake defined here (it replaces core/worker.c at link
 * time: every wd_worker_* symbol the server uses, through the group of
 * core/workers.c, is defined in this file, so the linker never pulls
 * worker.o from libwd_core.a). The server sees it as a group of one. It decodes
 * nothing: each job follows the behaviour the test picks (finish after a
 * delay with a fixed two-segment transcript, finish before submit returns,
 * hold until cancelled, fail, time out, refuse). That makes the races and
 * error paths of the server reproducible without a model: routing, auth,
 * body limits with and without Content-Length, slow and vanishing clients,
 * every response format, SSE, 429/500/503/504, metrics.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api_helpers.h"
#include "error.h"
#include "server.h"
#include "worker.h"
#include "workers.h"
#include "wd_test.h"

/* ======================= the fake worker ================================ */

typedef enum {
  FAKE_OK = 0,   /* segments, then on_done(0) after delay_ms */
  FAKE_SYNC,     /* on_done(0) runs before wd_worker_submit returns */
  FAKE_HOLD,     /* nothing until cancelled */
  FAKE_FAIL,     /* on_done(WD_EVULKAN) */
  FAKE_TIMEOUT,  /* on_done(WD_ETIMEDOUT) */
  FAKE_BUSY,     /* submit returns WD_EBUSY */
} fake_mode_t;

typedef struct fake_job {
  uint64_t id;
  fake_mode_t mode;
  wd_job_cb_t cb;
  size_t n_samples;
  char language[8];
  double due;
  int cancelled;
  int finished;
  int keep;      /* FAKE_SYNC: the submitter frees it once unlinked */
  int unlinked;
  struct fake_job *next;
} fake_job_t;

struct wd_worker {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  fake_job_t *jobs;
  uint64_t next_id;
  int stop;
  wd_worker_stats_t st;
};

/* What the test sets, and what the fake saw. Guarded by the worker's mu. */
static struct {
  fake_mode_t mode;
  int delay_ms;
  int n_submits, n_cancels, n_done;
  int last_rc;
  char last_language[8];
  int last_language_null;
  int last_translate;
  int last_n_prompt;
  int32_t last_prompt[16];
  size_t last_n_samples;
  double last_timeout;
  int last_had_on_segment;
  double room_s;        /* wd_worker_has_room's limit; 0 = any */
  int n_room_asks;
  double last_room_ask_s;
} g_fake;

static wd_worker_t *g_worker;
static wd_workers_t *g_group; /* g_worker alone, as the server sees it */

static wd_worker_t *fake_worker(void);
static wd_workers_t *fake_group(void);

/* Picks the behaviour of the jobs submitted from now on. */
static void fake_set(fake_mode_t mode, int delay_ms) {
  fake_worker();
  pthread_mutex_lock(&g_worker->mu);
  g_fake.mode = mode;
  g_fake.delay_ms = delay_ms;
  pthread_mutex_unlock(&g_worker->mu);
}

static int fake_get(const int *field) {
  pthread_mutex_lock(&g_worker->mu);
  const int v = *field;
  pthread_mutex_unlock(&g_worker->mu);
  return v;
}

/* The transcript every successful job produces. */
static void fake_transcript(wd_transcript_t *t, const fake_job_t *j) {
  memset(t, 0, sizeof *t);
  t->n_segments = 2;
  t->segments = calloc(2, sizeof *t->segments);
  static const char *const texts[2] = { " Hello there.", " General Kenobi." };
  for (int i = 0; i < 2; i++) {
    wd_segment_t *s = &t->segments[i];
    s->id = i;
    s->start = i * 1.5;
    s->end = i * 1.5 + 1.5;
    s->text = strdup(texts[i]);
    s->n_tokens = 2;
    s->tokens = malloc(2 * sizeof *s->tokens);
    s->tokens[0] = 50364;
    s->tokens[1] = 50439;
  }
  t->text = strdup(" Hello there. General Kenobi.");
  snprintf(t->language, sizeof t->language, "%s", j->language[0] ? j->language : "en");
  t->duration = (double)j->n_samples / 16000.0;
}

/* Runs a job's callbacks; the worker's lock is not held. */
static void fake_run(wd_worker_t *w, fake_job_t *j, int delay_ms) {
  int rc = 0;
  if (j->cancelled)
    rc = WD_ECANCELED;
  else if (j->mode == FAKE_FAIL)
    rc = WD_EVULKAN;
  else if (j->mode == FAKE_TIMEOUT)
    rc = WD_ETIMEDOUT;
  wd_transcript_t t;
  fake_transcript(&t, j);
  if (rc == 0 && j->cb.on_segment)
    for (int i = 0; i < t.n_segments; i++) {
      j->cb.on_segment(j->cb.ud, &t.segments[i], t.segments[i].end, t.duration);
      if (delay_ms)
        th_sleep_ms(delay_ms / 2);
    }
  j->cb.on_done(j->cb.ud, rc, rc == 0 ? &t : NULL);
  wd_transcript_free(&t); /* the callee moved the contents out (or left them) */
  pthread_mutex_lock(&w->mu);
  g_fake.n_done++;
  g_fake.last_rc = rc;
  if (rc == 0)
    w->st.jobs_done++;
  else
    w->st.jobs_failed++;
  w->st.audio_s += t.duration;
  w->st.busy_s += 0.01;
  j->finished = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void *fake_main(void *arg) {
  wd_worker_t *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    fake_job_t *pick = NULL;
    for (fake_job_t *j = w->jobs; j && !pick; j = j->next)
      if (!j->finished && (j->cancelled || (j->mode != FAKE_HOLD && th_now() >= j->due)))
        pick = j;
    if (!pick && w->stop)
      break;
    if (!pick) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 5000000;
      if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait(&w->cv, &w->mu, &ts);
      continue;
    }
    const int delay = g_fake.delay_ms;
    w->st.queued--;
    w->st.running++;
    pthread_mutex_unlock(&w->mu);
    fake_run(w, pick, delay);
    pthread_mutex_lock(&w->mu);
    w->st.running--;
    /* Unlink finished jobs. */
    for (fake_job_t **pp = &w->jobs; *pp;) {
      if ((*pp)->finished) {
        fake_job_t *dead = *pp;
        *pp = dead->next;
        dead->unlinked = 1;
        if (!dead->keep)
          free(dead);
        pthread_cond_broadcast(&w->cv);
      } else {
        pp = &(*pp)->next;
      }
    }
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

int wd_worker_new(const wd_worker_opts_t *opts, wd_worker_t **ret) {
  wd_worker_t *w = calloc(1, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->next_id = 1;
  w->st.queue_max = opts ? opts->queue_max : 4;
  w->st.max_batch = opts ? opts->max_batch : 4;
  pthread_create(&w->thread, NULL, fake_main, w);
  *ret = w;
  return 0;
}

void wd_worker_drain(wd_worker_t *w, double grace_s) {
  (void)grace_s;
  pthread_mutex_lock(&w->mu);
  for (fake_job_t *j = w->jobs; j; j = j->next)
    j->cancelled = 1;
  pthread_cond_broadcast(&w->cv);
  for (;;) {
    int left = 0;
    for (fake_job_t *j = w->jobs; j; j = j->next)
      left += !j->finished;
    if (!left)
      break;
    pthread_cond_wait(&w->cv, &w->mu);
  }
  pthread_mutex_unlock(&w->mu);
}

void wd_worker_free(wd_worker_t *w) {
  if (!w)
    return;
  wd_worker_drain(w, 0);
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  while (w->jobs) {
    fake_job_t *j = w->jobs;
    w->jobs = j->next;
    free(j);
  }
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}

int wd_worker_multilingual(const wd_worker_t *w) {
  (void)w;
  return 0;
}

int wd_worker_has_room(wd_worker_t *w, double audio_s) {
  pthread_mutex_lock(&w->mu);
  g_fake.n_room_asks++;
  g_fake.last_room_ask_s = audio_s;
  const int room = g_fake.room_s <= 0 || audio_s <= g_fake.room_s;
  pthread_mutex_unlock(&w->mu);
  return room;
}

int wd_worker_submit(wd_worker_t *w, int16_t *samples, size_t n_samples,
                     const wd_job_params_t *p, uint64_t *ret_id) {
  free(samples);
  pthread_mutex_lock(&w->mu);
  g_fake.n_submits++;
  const fake_mode_t mode = g_fake.mode;
  g_fake.last_n_samples = n_samples;
  g_fake.last_language_null = p->decode.language == NULL;
  snprintf(g_fake.last_language, sizeof g_fake.last_language, "%s",
           p->decode.language ? p->decode.language : "");
  g_fake.last_translate = p->decode.translate;
  g_fake.last_n_prompt = p->decode.n_prompt;
  for (int i = 0; i < p->decode.n_prompt && i < 16; i++)
    g_fake.last_prompt[i] = p->decode.prompt[i];
  g_fake.last_timeout = p->timeout_s;
  g_fake.last_had_on_segment = p->cb.on_segment != NULL;
  if (mode == FAKE_BUSY) {
    pthread_mutex_unlock(&w->mu);
    return WD_EBUSY;
  }
  fake_job_t *j = calloc(1, sizeof *j);
  j->id = w->next_id++;
  j->mode = mode;
  j->keep = mode == FAKE_SYNC;
  j->cb = p->cb;
  j->n_samples = n_samples;
  snprintf(j->language, sizeof j->language, "%s", p->decode.language ? p->decode.language : "");
  j->due = th_now() + (mode == FAKE_SYNC ? 0 : g_fake.delay_ms / 1000.0);
  j->next = w->jobs;
  w->jobs = j;
  w->st.queued++;
  *ret_id = j->id;
  pthread_cond_broadcast(&w->cv);
  /* FAKE_SYNC: return only after on_done has run on the worker thread. */
  if (mode == FAKE_SYNC) {
    while (!j->unlinked)
      pthread_cond_wait(&w->cv, &w->mu);
    free(j);
  }
  pthread_mutex_unlock(&w->mu);
  return 0;
}

void wd_worker_cancel(wd_worker_t *w, uint64_t id) {
  pthread_mutex_lock(&w->mu);
  for (fake_job_t *j = w->jobs; j; j = j->next)
    if (j->id == id && !j->finished && !j->cancelled) {
      j->cancelled = 1;
      g_fake.n_cancels++;
    }
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void wd_worker_stats(wd_worker_t *w, wd_worker_stats_t *ret) {
  pthread_mutex_lock(&w->mu);
  *ret = w->st;
  ret->steps = 10;
  ret->rows = 25;
  ret->steps_by_rows[2] = 5;
  ret->steps_by_rows[3] = 5;
  pthread_mutex_unlock(&w->mu);
}

double wd_worker_heartbeat(wd_worker_t *w) {
  (void)w;
  return th_now();
}

/* ======================= fixtures ======================================= */

/* The one fake worker, started on first use. */
static wd_worker_t *fake_worker(void) {
  if (!g_worker) {
    const wd_worker_opts_t wo = { .queue_max = 64, .max_batch = 4 }; /* the daemon's default */
    wd_worker_new(&wo, &g_worker);
  }
  return g_worker;
}

static wd_workers_t *fake_group(void) {
  if (!g_group) {
    wd_worker_t *w = fake_worker();
    WD_CHECK_EQ_INT(wd_workers_new(&w, NULL, 1, &g_group), 0);
  }
  return g_group;
}

static wd_tokenizer_t *g_tok;
static const char *const g_names[] = { "whisper-1", "tiny" };

static wd_server_opts_t default_opts(void) {
  return (wd_server_opts_t){ .host = "127.0.0.1", .port = 0, .listen_fd = -1, .threads = 2,
                             .max_body = 1 << 20, .max_connections = 64, .idle_timeout_s = 10,
                             .api_key = NULL, .max_audio_s = 60, .job_timeout_s = 30,
                             .body_timeout_s = 10 };
}

/* Starts a server; attaches the fake worker unless attach is 0. */
static wd_server_t *start(const wd_server_opts_t *o, int attach) {
  wd_server_t *s = NULL;
  char err[256] = "";
  const int rc = wd_server_start(o, &s, err, sizeof err);
  if (rc)
    fprintf(stderr, "wd_server_start: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  if (!s)
    return NULL;
  WD_CHECK(wd_server_port(s) > 0);
  if (attach) {
    if (!g_tok)
      g_tok = th_tokenizer(51865);
    /* created: the model file's mtime in the daemon, shown by /v1/models. */
    const wd_server_model_t m = { .workers = fake_group(), .tok = g_tok, .multilingual = 1,
                                  .names = g_names, .n_names = 2, .created = 1700000000 };
    wd_server_attach(s, &m);
    wd_server_set_ready(s, 1);
  }
  fake_set(FAKE_OK, 0);
  pthread_mutex_lock(&g_worker->mu);
  g_fake.n_submits = g_fake.n_cancels = g_fake.n_done = 0;
  pthread_mutex_unlock(&g_worker->mu);
  return s;
}

static void stop(wd_server_t *s) {
  if (g_worker)
    wd_worker_drain(g_worker, 0);
  wd_server_free(s, 5);
}

/* A transcription form: model, extra fields (name, value pairs), a WAV. */
static void form(th_buf_t *b, const char *model, const char *const *fields, double seconds) {
  b->len = 0;
  if (model)
    th_form_field(b, "model", model);
  for (int i = 0; fields && fields[i]; i += 2)
    th_form_field(b, fields[i], fields[i + 1]);
  th_buf_t wav = { 0 };
  th_wav(&wav, seconds);
  th_form_file(b, "file", wav.p, wav.len);
  th_buf_free(&wav);
  th_form_end(b);
}

static th_resp_t post_form(wd_server_t *s, const char *path, const char *model,
                           const char *const *fields) {
  th_buf_t b = { 0 };
  form(&b, model, fields, 0.5);
  th_resp_t r = th_request(wd_server_port(s), "POST", path, TH_MULTIPART, b.p, b.len);
  th_buf_free(&b);
  return r;
}

/* s, or "" for NULL. */
static const char *nz(const char *s) { return s ? s : ""; }

/* The error object of a response body, checked for the four keys. */
static void check_error(const th_resp_t *r, int status, const char *code, const char *msg) {
  WD_CHECK_EQ_INT(r->status, status);
  json_error_t je;
  json_t *j = r->body ? json_loads(r->body, 0, &je) : NULL;
  json_t *e = json_object_get(j, "error");
  WD_CHECK(json_is_object(e));
  WD_CHECK(json_object_get(e, "message") && json_object_get(e, "type") &&
           json_object_get(e, "param") && json_object_get(e, "code"));
  if (code)
    WD_CHECK_EQ_STR(json_string_value(json_object_get(e, "code")), code);
  if (msg && !strstr(nz(json_string_value(json_object_get(e, "message"))), msg)) {
    fprintf(stderr, "message '%s' lacks '%s'\n", json_string_value(json_object_get(e, "message")),
            msg);
    WD_CHECK(0);
  }
  const char *ct = th_header(r, "Content-Type");
  WD_CHECK_EQ_STR(ct, "application/json");
  json_decref(j);
}

#define F(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* 1 when /metrics shows needle within 2 s: a request is counted when MHD
 * completes it, which may be just after the client read its answer. */
static int metrics_show(int port, const char *needle) {
  for (int i = 0; i < 200; i++) {
    th_resp_t r = th_request(port, "GET", "/metrics", NULL, NULL, 0);
    const int found = r.body && strstr(r.body, needle);
    th_resp_free(&r);
    if (found)
      return 1;
    th_sleep_ms(10);
  }
  fprintf(stderr, "/metrics never showed '%s'\n", needle);
  return 0;
}

/* ======================= tests: no model yet ============================= */

WD_TEST(before_attach_health_ready_metrics) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 0);
  if (!s)
    return;
  const int port = wd_server_port(s);
  th_resp_t r = th_request(port, "GET", "/health", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_STR(r.body, "{\"status\":\"ok\"}");
  th_resp_free(&r);
  r = th_request(port, "GET", "/ready", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 503);
  WD_CHECK(r.body && strstr(r.body, "loading"));
  th_resp_free(&r);
  r = th_request(port, "GET", "/metrics", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK(r.body && strstr(r.body, "\nwhisperd_ready 0\n"));
  WD_CHECK(r.body && strstr(r.body, "\nwhisperd_model_loaded 0\n"));
  WD_CHECK(r.body && !strstr(r.body, "whisperd_queue_depth"));
  WD_CHECK(metrics_show(port, "whisperd_http_requests_total{route=\"ready\",code=\"503\"} 1"));
  WD_CHECK(r.body && strstr(r.body, "# TYPE whisperd_http_request_duration_seconds histogram"));
  WD_CHECK(strncmp(nz(th_header(&r, "Content-Type")), "text/plain; version=0.0.4", 25) == 0);
  th_resp_free(&r);
  r = th_request(port, "GET", "/v1/models", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_STR(r.body, "{\"object\":\"list\",\"data\":[]}");
  th_resp_free(&r);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", NULL);
  check_error(&r, 503, "model_not_ready", "still loading");
  WD_CHECK_EQ_STR(th_header(&r, "Retry-After"), "5");
  th_resp_free(&r);
  /* Attached but not yet warmed up: audio works, /ready still says no. */
  if (!g_tok)
    g_tok = th_tokenizer(51865);
  const wd_server_model_t m = { fake_group(), g_tok, 1, g_names, 2, 0, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL };
  wd_server_attach(s, &m);
  r = th_request(port, "GET", "/ready", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 503);
  WD_CHECK(r.body && strstr(r.body, "starting"));
  th_resp_free(&r);
  wd_server_set_ready(s, 1);
  r = th_request(port, "GET", "/ready", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  stop(s);
}

WD_TEST(routing_404_405_head) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  const int port = wd_server_port(s);
  th_resp_t r = th_request(port, "GET", "/nope", NULL, NULL, 0);
  check_error(&r, 404, NULL, "Invalid URL (GET /nope)");
  th_resp_free(&r);
  r = th_request(port, "POST", "/v1/audio/nope", NULL, "x", 1);
  check_error(&r, 404, NULL, "Invalid URL (POST /v1/audio/nope)");
  th_resp_free(&r);
  r = th_request(port, "GET", "/v1/audio/transcriptions", NULL, NULL, 0);
  check_error(&r, 405, "method_not_allowed", NULL);
  WD_CHECK_EQ_STR(th_header(&r, "Allow"), "POST");
  th_resp_free(&r);
  r = th_request(port, "POST", "/health", NULL, "x", 1);
  check_error(&r, 405, NULL, NULL);
  WD_CHECK_EQ_STR(th_header(&r, "Allow"), "GET, HEAD");
  th_resp_free(&r);
  r = th_request(port, "DELETE", "/v1/models", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 405);
  th_resp_free(&r);
  r = th_request(port, "HEAD", "/health", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_INT(r.body_len, 0);
  th_resp_free(&r);
  /* Models, with a trailing slash too, and one by id. */
  r = th_request(port, "GET", "/v1/models/", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  json_error_t je;
  json_t *j = json_loads(r.body ? r.body : "", 0, &je);
  WD_CHECK_EQ_STR(json_string_value(json_object_get(j, "object")), "list");
  json_t *d = json_object_get(j, "data");
  WD_CHECK_EQ_INT(json_array_size(d), 2);
  WD_CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(d, 0), "id")), "whisper-1");
  WD_CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(d, 1), "owned_by")),
                  "whisperd");
  WD_CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(d, 0), "created")),
                  1700000000);
  json_decref(j);
  th_resp_free(&r);
  r = th_request(port, "GET", "/v1/models/tiny", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK(r.body && strstr(r.body, "\"id\":\"tiny\""));
  th_resp_free(&r);
  r = th_request(port, "GET", "/v1/models/gpt-4", NULL, NULL, 0);
  check_error(&r, 404, "model_not_found", "The model `gpt-4` does not exist");
  th_resp_free(&r);
  stop(s);
}

WD_TEST(bearer_auth_on_v1_only) {
  wd_server_opts_t o = default_opts();
  o.api_key = "sekrit";
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  const int port = wd_server_port(s);
  th_resp_t r = th_request(port, "GET", "/v1/models", NULL, NULL, 0);
  check_error(&r, 401, "invalid_api_key", "You didn't provide an API key");
  WD_CHECK_EQ_STR(th_header(&r, "WWW-Authenticate"), "Bearer");
  th_resp_free(&r);
  r = th_request(port, "GET", "/v1/models", "Authorization: Bearer wrong\r\n", NULL, 0);
  check_error(&r, 401, "invalid_api_key", "Incorrect API key provided.");
  th_resp_free(&r);
  r = th_request(port, "GET", "/v1/models", "Authorization: Bearer sekrit2\r\n", NULL, 0);
  WD_CHECK_EQ_INT(r.status, 401);
  th_resp_free(&r);
  r = th_request(port, "GET", "/v1/models", "Authorization: Basic c2Vrcml0\r\n", NULL, 0);
  WD_CHECK_EQ_INT(r.status, 401);
  th_resp_free(&r);
  r = th_request(port, "GET", "/v1/models", "authorization: bearer  sekrit \r\n", NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  /* Unknown /v1 routes need the key too (no probing without it). */
  r = th_request(port, "GET", "/v1/nope", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 401);
  th_resp_free(&r);
  /* An upload is refused before its body is read. */
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", NULL);
  WD_CHECK_EQ_INT(r.status, 401);
  th_resp_free(&r);
  static const char *const open_paths[] = { "/health", "/metrics" };
  for (int i = 0; i < 2; i++) {
    r = th_request(port, "GET", open_paths[i], NULL, NULL, 0);
    WD_CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
  }
  r = th_request(port, "GET", "/ready", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  WD_CHECK_EQ_INT(fake_get(&g_fake.n_submits), 0);
  stop(s);
}

/* ======================= body limits ===================================== */

WD_TEST(body_limit_with_content_length_refused_before_upload) {
  wd_server_opts_t o = default_opts();
  o.max_body = 4096;
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  /* Headers only: the 413 must come without the body being sent. */
  int fd = th_connect(wd_server_port(s));
  const char head[] = "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n" TH_MULTIPART
                      "Content-Length: 4097\r\n\r\n";
  WD_CHECK_EQ_INT(th_send_all(fd, head, sizeof head - 1), 0);
  th_resp_t r = th_read_response(fd, 0, 5000);
  check_error(&r, 413, "request_too_large", "Maximum content size limit (4096) exceeded (4097");
  th_resp_free(&r);
  close(fd);
  /* The same with Expect: 100-continue (curl sends it for big bodies). */
  fd = th_connect(wd_server_port(s));
  const char head2[] = "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n" TH_MULTIPART
                       "Expect: 100-continue\r\nContent-Length: 99999999\r\n\r\n";
  WD_CHECK_EQ_INT(th_send_all(fd, head2, sizeof head2 - 1), 0);
  r = th_read_response(fd, 0, 5000);
  WD_CHECK_EQ_INT(r.status, 413);
  th_resp_free(&r);
  close(fd);
  /* Exactly at the limit is read (and here fails later as multipart). */
  char *body = malloc(4096);
  memset(body, 'x', 4096);
  r = th_request(wd_server_port(s), "POST", "/v1/audio/transcriptions", TH_MULTIPART, body, 4096);
  check_error(&r, 400, "invalid_multipart", "Malformed multipart body");
  th_resp_free(&r);
  free(body);
  stop(s);
}

/* Sends body as chunks of `chunk` bytes with Transfer-Encoding: chunked. */
static int send_chunked(int fd, const char *path, const char *body, size_t len, size_t chunk) {
  char head[512];
  const int n = snprintf(head, sizeof head,
                         "POST %s HTTP/1.1\r\nHost: x\r\n" TH_MULTIPART
                         "Transfer-Encoding: chunked\r\n\r\n", path);
  if (th_send_all(fd, head, (size_t)n) < 0)
    return -1;
  for (size_t off = 0; off < len; off += chunk) {
    const size_t k = len - off < chunk ? len - off : chunk;
    char sz[32];
    const int m = snprintf(sz, sizeof sz, "%zx\r\n", k);
    if (th_send_all(fd, sz, (size_t)m) < 0 || th_send_all(fd, body + off, k) < 0 ||
        th_send_all(fd, "\r\n", 2) < 0)
      return -1;
  }
  return th_send_all(fd, "0\r\n\r\n", 5);
}

WD_TEST(body_limit_chunked_without_content_length) {
  wd_server_opts_t o = default_opts();
  o.max_body = 64 * 1024;
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  /* A valid upload sent chunked, as the Node SDK does: accepted. */
  th_buf_t b = { 0 };
  form(&b, "whisper-1", NULL, 0.5);
  int fd = th_connect(wd_server_port(s));
  WD_CHECK_EQ_INT(send_chunked(fd, "/v1/audio/transcriptions", b.p, b.len, 1000), 0);
  th_resp_t r = th_read_response(fd, 0, 10000);
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  close(fd);
  /* Over the limit: 413 as soon as the body crosses it. */
  b.len = 0;
  form(&b, "whisper-1", NULL, 3.0); /* about 96 KB */
  WD_CHECK(b.len > o.max_body);
  fd = th_connect(wd_server_port(s));
  WD_CHECK_EQ_INT(send_chunked(fd, "/v1/audio/transcriptions", b.p, b.len, 8192), 0);
  r = th_read_response(fd, 0, 10000);
  check_error(&r, 413, "request_too_large", "Maximum content size limit (65536) exceeded");
  th_resp_free(&r);
  close(fd);
  /* Far over it: the same early 413; the rest (past the 16 MiB linger) is
   * not read, so the send may break with EPIPE or a reset. */
  const size_t huge = o.max_body * 64;
  char *junk = malloc(huge);
  memset(junk, 'j', huge);
  fd = th_connect(wd_server_port(s));
  (void)send_chunked(fd, "/v1/audio/transcriptions", junk, huge, 65536);
  r = th_read_response(fd, 0, 10000);
  check_error(&r, 413, "request_too_large", "Maximum content size limit (65536) exceeded");
  th_resp_free(&r);
  close(fd);
  free(junk);
  th_buf_free(&b);
  WD_CHECK_EQ_INT(fake_get(&g_fake.n_submits), 1);
  stop(s);
}

WD_TEST(slow_and_silent_clients_are_cut_off) {
  wd_server_opts_t o = default_opts();
  o.idle_timeout_s = 1;
  o.body_timeout_s = 2;
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  /* Silent after connecting: closed after the idle timeout. */
  int fd = th_connect(wd_server_port(s));
  double t0 = th_now();
  th_resp_t r = th_read_response(fd, 0, 8000);
  WD_CHECK_EQ_INT(r.status, 0);
  WD_CHECK_EQ_INT(r.closed, 1);
  WD_CHECK(th_now() - t0 < 5);
  th_resp_free(&r);
  close(fd);
  /* A trickle that is never idle for long: closed by the body deadline. */
  fd = th_connect(wd_server_port(s));
  const char head[] = "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n" TH_MULTIPART
                      "Content-Length: 100000\r\n\r\n";
  th_send_all(fd, head, sizeof head - 1);
  t0 = th_now();
  int closed = 0;
  while (th_now() - t0 < 8 && !closed) {
    if (th_send_all(fd, "xxxxxxxxxx", 10) < 0)
      closed = 1;
    th_buf_t in = { 0 };
    if (th_recv_some(fd, &in, 500) == 0)
      closed = 1;
    th_buf_free(&in);
  }
  WD_CHECK(closed);
  WD_CHECK(th_now() - t0 < 5);
  close(fd);
  stop(s);
}

/* ======================= validation through HTTP ========================= */

WD_TEST(bad_requests) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  const int port = wd_server_port(s);
  th_resp_t r = th_request(port, "POST", "/v1/audio/transcriptions",
                           "Content-Type: application/json\r\n", "{}", 2);
  check_error(&r, 400, "invalid_content_type", "multipart/form-data");
  th_resp_free(&r);
  r = th_request(port, "POST", "/v1/audio/transcriptions", NULL, "{}", 2);
  WD_CHECK_EQ_INT(r.status, 400);
  th_resp_free(&r);
  r = th_request(port, "POST", "/v1/audio/transcriptions",
                 "Content-Type: multipart/form-data\r\n", "x", 1);
  check_error(&r, 400, "invalid_content_type", "boundary");
  th_resp_free(&r);
  const char trunc[] = "--" TH_BOUNDARY "\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nw";
  r = th_request(port, "POST", "/v1/audio/translations", TH_MULTIPART, trunc, sizeof trunc - 1);
  check_error(&r, 400, "invalid_multipart", "truncated");
  th_resp_free(&r);
  r = post_form(s, "/v1/audio/transcriptions", NULL, NULL);
  check_error(&r, 400, "missing_required_parameter", "model");
  th_resp_free(&r);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-9", NULL);
  check_error(&r, 404, "model_not_found",
              "The model `whisper-9` does not exist or you do not have access to it.");
  th_resp_free(&r);
  /* No diarization models: 400 naming the script that fetches them. */
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("response_format", "diarized_json"));
  check_error(&r, 400, "diarization_unavailable", "scripts/fetch-diarization.sh");
  th_resp_free(&r);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1",
                F("timestamp_granularities[]", "word"));
  check_error(&r, 400, NULL, "verbose_json");
  th_resp_free(&r);
  /* Audio that is not audio. */
  th_buf_t b = { 0 };
  th_form_field(&b, "model", "whisper-1");
  th_form_file(&b, "file", "this is not audio at all", 24);
  th_form_end(&b);
  r = th_request(port, "POST", "/v1/audio/transcriptions", TH_MULTIPART, b.p, b.len);
  check_error(&r, 400, "invalid_file_format", "Invalid file format. Supported formats: [");
  th_resp_free(&r);
  /* Longer than max_audio_s. */
  b.len = 0;
  form(&b, "whisper-1", NULL, 2.0);
  wd_server_free(s, 1);
  o.max_audio_s = 1;
  s = start(&o, 1);
  r = th_request(wd_server_port(s), "POST", "/v1/audio/transcriptions", TH_MULTIPART, b.p, b.len);
  check_error(&r, 400, "audio_too_long", "up to 1 seconds");
  th_resp_free(&r);
  th_buf_free(&b);
  WD_CHECK_EQ_INT(fake_get(&g_fake.n_submits), 0);
  stop(s);
}

/* ======================= answers ========================================= */

WD_TEST(every_response_format) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  th_resp_t r = post_form(s, "/v1/audio/transcriptions", "whisper-1", NULL);
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_STR(th_header(&r, "Content-Type"), "application/json");
  WD_CHECK_EQ_STR(r.body, "{\"text\":\"Hello there. General Kenobi.\","
                          "\"usage\":{\"type\":\"duration\",\"seconds\":1}}");
  th_resp_free(&r);
  r = post_form(s, "/v1/audio/transcriptions", "tiny",
                F("response_format", "verbose_json", "language", "DE",
                  "timestamp_granularities[]", "segment"));
  WD_CHECK_EQ_INT(r.status, 200);
  json_error_t je;
  json_t *j = json_loads(r.body ? r.body : "", 0, &je);
  WD_CHECK_EQ_STR(json_string_value(json_object_get(j, "task")), "transcribe");
  WD_CHECK_EQ_STR(json_string_value(json_object_get(j, "language")), "german");
  WD_CHECK_NEAR(json_real_value(json_object_get(j, "duration")), 0.5, 1e-9);
  WD_CHECK_EQ_INT(json_array_size(json_object_get(j, "segments")), 2);
  WD_CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(json_object_get(j, "segments"),
                                                                   1), "text")),
                  " General Kenobi.");
  json_decref(j);
  th_resp_free(&r);
  WD_CHECK_EQ_STR(g_fake.last_language, "de");
  WD_CHECK_EQ_INT(g_fake.last_translate, 0);
  WD_CHECK_EQ_INT(g_fake.last_n_samples, 8000);
  WD_CHECK_NEAR(g_fake.last_timeout, 30, 0);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("response_format", "text"));
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_STR(th_header(&r, "Content-Type"), "text/plain; charset=utf-8");
  WD_CHECK_EQ_STR(r.body, "Hello there. General Kenobi.\n");
  th_resp_free(&r);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("response_format", "srt"));
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_STR(r.body, "1\n00:00:00,000 --> 00:00:01,500\nHello there.\n\n"
                          "2\n00:00:01,500 --> 00:00:03,000\nGeneral Kenobi.\n\n");
  th_resp_free(&r);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("response_format", "vtt"));
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_STR(th_header(&r, "Content-Type"), "text/plain; charset=utf-8"); /* as OpenAI */
  WD_CHECK(r.body && strncmp(r.body, "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\n", 37) == 0);
  th_resp_free(&r);
  /* The prompt reaches the worker as " " + stripped text, tokenized. */
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("prompt", "  Hi\n"));
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  WD_CHECK_EQ_INT(g_fake.last_n_prompt, 3);
  WD_CHECK_EQ_INT(g_fake.last_prompt[0], ' ');
  WD_CHECK_EQ_INT(g_fake.last_prompt[1], 'H');
  WD_CHECK_EQ_INT(g_fake.last_language_null, 1);
  /* Translations: task translate, language detected, reported as English. */
  r = post_form(s, "/v1/audio/translations", "whisper-1",
                F("response_format", "verbose_json", "language", "de", "stream", "true"));
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_STR(th_header(&r, "Content-Type"), "application/json");
  WD_CHECK(r.body && strstr(r.body, "\"task\":\"translate\",\"language\":\"english\""));
  th_resp_free(&r);
  WD_CHECK_EQ_INT(g_fake.last_translate, 1);
  WD_CHECK_EQ_INT(g_fake.last_language_null, 1);
  WD_CHECK_EQ_INT(g_fake.last_had_on_segment, 0);
  stop(s);
}

WD_TEST(english_only_model) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = NULL;
  char err[128];
  WD_CHECK_EQ_INT(wd_server_start(&o, &s, err, sizeof err), 0);
  if (!s)
    return;
  static wd_tokenizer_t *en;
  if (!en)
    en = th_tokenizer(51864);
  const wd_server_model_t m = { fake_group(), en, 0, g_names, 2, 0, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL };
  wd_server_attach(s, &m);
  fake_set(FAKE_OK, 0);
  th_resp_t r = post_form(s, "/v1/audio/translations", "whisper-1", NULL);
  check_error(&r, 400, "unsupported_model", "English-only");
  th_resp_free(&r);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("language", "fr"));
  check_error(&r, 400, "unsupported_language", "English-only");
  th_resp_free(&r);
  /* language=en is accepted but no language token goes to the decoder. */
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("language", "en"));
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  WD_CHECK_EQ_INT(g_fake.last_language_null, 1);
  stop(s);
  wd_tokenizer_free(en);
  en = NULL;
}

WD_TEST(done_before_submit_returns) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  fake_set(FAKE_SYNC, 0);
  for (int i = 0; i < 20; i++) {
    th_resp_t r = post_form(s, "/v1/audio/transcriptions", "whisper-1", NULL);
    WD_CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
  }
  /* Streaming too: every event is already there when the stream starts. */
  th_resp_t r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("stream", "true"));
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK(r.body && strstr(r.body, "transcript.text.done"));
  th_resp_free(&r);
  stop(s);
}

WD_TEST(job_errors_map_to_statuses) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  fake_set(FAKE_BUSY, 0);
  th_resp_t r = post_form(s, "/v1/audio/transcriptions", "whisper-1", NULL);
  check_error(&r, 429, "rate_limit_exceeded", "queue is full");
  WD_CHECK(th_header(&r, "Retry-After") && atoi(th_header(&r, "Retry-After")) >= 1);
  th_resp_free(&r);
  fake_set(FAKE_FAIL, 10);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", NULL);
  check_error(&r, 500, NULL, "WD_EVULKAN");
  th_resp_free(&r);
  fake_set(FAKE_TIMEOUT, 10);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", NULL);
  check_error(&r, 504, "timeout", "30 seconds");
  th_resp_free(&r);
  stop(s);
}

/* Splits an SSE body into its data payloads. */
static int sse_events(const char *body, char ev[][512], int max) {
  int n = 0;
  for (const char *p = body; p && *p && n < max;) {
    const char *end = strstr(p, "\n\n");
    if (!end)
      break;
    if (strncmp(p, "data: ", 6) == 0)
      snprintf(ev[n++], 512, "%.*s", (int)(end - p - 6), p + 6);
    p = end + 2;
  }
  return n;
}

WD_TEST(streaming_sse) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  fake_set(FAKE_OK, 300); /* the stream waits (suspended) between events */
  th_resp_t r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("stream", "true"));
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK_EQ_STR(th_header(&r, "Content-Type"), "text/event-stream");
  char ev[8][512];
  const int n = sse_events(r.body, ev, 8);
  WD_CHECK_EQ_INT(n, 4);
  if (n == 4) {
    WD_CHECK_EQ_STR(ev[0], "{\"type\":\"transcript.text.delta\",\"delta\":\"Hello there.\"}");
    WD_CHECK_EQ_STR(ev[1], "{\"type\":\"transcript.text.delta\",\"delta\":\" General Kenobi.\"}");
    /* usage: 0.5 s of audio is 25 encoder positions; the fake's two
     * segments hold 4 tokens; no prompt. */
    WD_CHECK_EQ_STR(ev[2], "{\"type\":\"transcript.text.done\","
                           "\"text\":\"Hello there. General Kenobi.\",\"usage\":{\"type\":\"tokens\","
                           "\"input_tokens\":25,\"input_token_details\":{\"text_tokens\":0,"
                           "\"audio_tokens\":25},\"output_tokens\":4,\"total_tokens\":29}}");
    WD_CHECK_EQ_STR(ev[3], "[DONE]");
  }
  th_resp_free(&r);
  WD_CHECK_EQ_INT(g_fake.last_had_on_segment, 1);
  /* An error mid-stream is an event, not a status. */
  fake_set(FAKE_FAIL, 200);
  r = post_form(s, "/v1/audio/transcriptions", "whisper-1", F("stream", "true"));
  WD_CHECK_EQ_INT(r.status, 200);
  const int m = sse_events(r.body, ev, 8);
  WD_CHECK_EQ_INT(m, 1);
  WD_CHECK(m == 1 && strncmp(ev[0], "{\"error\":{\"message\":", 20) == 0);
  th_resp_free(&r);
  stop(s);
}

/* ======================= disconnects ===================================== */

/* Waits until the fake saw `want` cancels, up to 5 s. */
static int wait_cancels(int want) {
  const double t0 = th_now();
  while (th_now() - t0 < 5) {
    if (fake_get(&g_fake.n_cancels) >= want)
      return 1;
    th_sleep_ms(10);
  }
  return 0;
}

WD_TEST(disconnect_cancels_waiting_and_streaming_jobs) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  fake_set(FAKE_HOLD, 0);
  th_buf_t b = { 0 };
  form(&b, "whisper-1", NULL, 0.5);
  char head[512];
  int hn = snprintf(head, sizeof head, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
                    TH_MULTIPART "Content-Length: %zu\r\n\r\n", b.len);
  int fd = th_connect(wd_server_port(s));
  th_send_all(fd, head, (size_t)hn);
  th_send_all(fd, b.p, b.len);
  th_sleep_ms(300); /* the job is held; the connection is suspended */
  WD_CHECK_EQ_INT(fake_get(&g_fake.n_cancels), 0);
  close(fd);
  WD_CHECK(wait_cancels(1));
  /* Streaming: the client reads the first events, then leaves. */
  fake_set(FAKE_HOLD, 0);
  th_buf_t sb = { 0 };
  form(&sb, "whisper-1", F("stream", "true"), 0.5);
  hn = snprintf(head, sizeof head, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
                TH_MULTIPART "Content-Length: %zu\r\n\r\n", sb.len);
  fd = th_connect(wd_server_port(s));
  th_send_all(fd, head, (size_t)hn);
  th_send_all(fd, sb.p, sb.len);
  th_buf_t in = { 0 };
  th_recv_some(fd, &in, 2000); /* the 200 and its headers */
  WD_CHECK(in.p && strncmp(in.p, "HTTP/1.1 200", 12) == 0);
  th_buf_free(&in);
  close(fd);
  WD_CHECK(wait_cancels(2));
  /* The server is unharmed. */
  fake_set(FAKE_OK, 0);
  th_resp_t r = th_request(wd_server_port(s), "POST", "/v1/audio/transcriptions", TH_MULTIPART,
                           b.p, b.len);
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  th_buf_free(&b);
  th_buf_free(&sb);
  stop(s);
}

/* ======================= concurrency, metrics, shutdown ================== */

typedef struct {
  int port;
  int ok;
  const th_buf_t *body;
} client_arg_t;

static void *client_main(void *arg) {
  client_arg_t *a = arg;
  for (int i = 0; i < 5; i++) {
    th_resp_t r = th_request(a->port, "POST", "/v1/audio/transcriptions", TH_MULTIPART,
                             a->body->p, a->body->len);
    a->ok += r.status == 200;
    th_resp_free(&r);
  }
  return NULL;
}

/* Admission comes before decoding: with the queue full, a request is
 * refused 429 without its audio being decoded, which shows in that an
 * upload that is not audio at all gets the 429 (decoded, it would be a 400),
 * and in the worker never seeing it. "Full" is the fake worker's stats
 * saying so (every run slot busy, two jobs queued of two). */
WD_TEST(full_queue_refuses_before_decoding) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  wd_worker_t *w = fake_worker();
  fake_set(FAKE_OK, 0);
  pthread_mutex_lock(&w->mu);
  w->st.queue_max = 2;
  w->st.queued += 2;
  w->st.running += w->st.max_batch;
  const int submits = g_fake.n_submits;
  pthread_mutex_unlock(&w->mu);
  th_buf_t bad = { 0 };
  th_form_field(&bad, "model", "whisper-1");
  th_form_file(&bad, "file", "this is not audio at all", 24);
  th_form_end(&bad);
  th_resp_t r = th_request(wd_server_port(s), "POST", "/v1/audio/transcriptions", TH_MULTIPART,
                           bad.p, bad.len);
  check_error(&r, 429, "rate_limit_exceeded", "queue is full");
  WD_CHECK(th_header(&r, "Retry-After") != NULL);
  th_resp_free(&r);
  pthread_mutex_lock(&w->mu);
  WD_CHECK_EQ_INT(g_fake.n_submits, submits);
  w->st.queued -= 2;
  w->st.running -= w->st.max_batch;
  w->st.queue_max = 64;
  pthread_mutex_unlock(&w->mu);
  /* With room again the same upload is decoded, and refused as bad audio. */
  r = th_request(wd_server_port(s), "POST", "/v1/audio/transcriptions", TH_MULTIPART, bad.p,
                 bad.len);
  check_error(&r, 400, "invalid_file_format", NULL);
  th_resp_free(&r);
  th_buf_free(&bad);
  stop(s);
}

/* A WAV whose header says it holds more audio than the worker has room for
 * is refused with 429 before it is decoded; one that fits goes in. */
WD_TEST(declared_length_over_budget_refused_before_decoding) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  wd_worker_t *w = fake_worker();
  fake_set(FAKE_OK, 0);
  pthread_mutex_lock(&w->mu);
  g_fake.room_s = 20.0;
  const int submits = g_fake.n_submits, asks = g_fake.n_room_asks;
  pthread_mutex_unlock(&w->mu);
  th_buf_t wav = { 0 };
  th_wav(&wav, 30.0);
  th_buf_t b = { 0 };
  th_form_field(&b, "model", "whisper-1");
  th_form_file(&b, "file", wav.p, wav.len);
  th_form_end(&b);
  th_resp_t r = th_request(wd_server_port(s), "POST", "/v1/audio/transcriptions", TH_MULTIPART,
                           b.p, b.len);
  check_error(&r, 429, "rate_limit_exceeded", NULL);
  WD_CHECK(th_header(&r, "Retry-After") != NULL);
  th_resp_free(&r);
  pthread_mutex_lock(&w->mu);
  WD_CHECK_EQ_INT(g_fake.n_submits, submits);
  WD_CHECK_EQ_INT(g_fake.n_room_asks, asks + 1);
  WD_CHECK_NEAR(g_fake.last_room_ask_s, 30.0, 1e-6);
  g_fake.room_s = 40.0;
  pthread_mutex_unlock(&w->mu);
  r = th_request(wd_server_port(s), "POST", "/v1/audio/transcriptions", TH_MULTIPART, b.p, b.len);
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  pthread_mutex_lock(&w->mu);
  WD_CHECK_EQ_INT(g_fake.n_submits, submits + 1);
  WD_CHECK_EQ_INT((int)g_fake.last_n_samples, 30 * 16000);
  g_fake.room_s = 0;
  pthread_mutex_unlock(&w->mu);
  th_buf_free(&b);
  th_buf_free(&wav);
  stop(s);
}

WD_TEST(concurrent_clients_and_metrics) {
  wd_server_opts_t o = default_opts();
  o.threads = 4;
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  fake_set(FAKE_OK, 20);
  th_buf_t b = { 0 };
  form(&b, "whisper-1", NULL, 0.5);
  enum { N = 8 };
  pthread_t th[N];
  client_arg_t args[N];
  for (int i = 0; i < N; i++) {
    args[i] = (client_arg_t){ wd_server_port(s), 0, &b };
    pthread_create(&th[i], NULL, client_main, &args[i]);
  }
  int ok = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    ok += args[i].ok;
  }
  WD_CHECK_EQ_INT(ok, N * 5);
  WD_CHECK(metrics_show(wd_server_port(s), "whisperd_http_requests_total{route=\"transcriptions\","
                                           "code=\"200\"} 40\n"));
  th_resp_t r = th_request(wd_server_port(s), "GET", "/metrics", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  WD_CHECK(r.body && strstr(r.body, "whisperd_http_request_duration_seconds_count"
                                    "{route=\"transcriptions\"} 40\n"));
  WD_CHECK(r.body && strstr(r.body, "\nwhisperd_queue_depth 0\n"));
  WD_CHECK(r.body && strstr(r.body, "\nwhisperd_queue_capacity 64\n"));
  WD_CHECK(r.body && strstr(r.body, "whisperd_engine_steps_by_rows_total{rows=\"3\"} 5\n"));
  WD_CHECK(r.body && strstr(r.body, "\nwhisperd_batch_rows_mean 2.5\n"));
  WD_CHECK(r.body && strstr(r.body, "\nwhisperd_ready 1\n"));
  WD_CHECK(r.body && strstr(r.body, "whisperd_real_time_factor"));
  WD_CHECK(r.body && strstr(r.body, "whisperd_jobs_total{result=\"done\"}"));
  th_resp_free(&r);
  th_buf_free(&b);
  stop(s);
}

WD_TEST(quiesce_then_free_with_a_job_in_flight) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  const int port = wd_server_port(s);
  fake_set(FAKE_HOLD, 0);
  th_buf_t b = { 0 };
  form(&b, "whisper-1", NULL, 0.5);
  char head[512];
  const int hn = snprintf(head, sizeof head, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x"
                          "\r\n" TH_MULTIPART "Content-Length: %zu\r\n\r\n", b.len);
  int fd = th_connect(port);
  th_send_all(fd, head, (size_t)hn);
  th_send_all(fd, b.p, b.len);
  th_sleep_ms(200);
  wd_server_quiesce(s);
  /* No new connections: refused at once, the listening socket is closed
   * (left open, the kernel accepted them and nothing answered). */
  int fd2 = th_connect(port);
  WD_CHECK(fd2 < 0);
  if (fd2 >= 0)
    close(fd2);
  /* Free without draining the worker first: the server cancels the job,
   * waits for its on_done, answers the client and stops. */
  const double t0 = th_now();
  wd_server_free(s, 0.2);
  WD_CHECK(th_now() - t0 < 5);
  th_resp_t r = th_read_response(fd, 0, 2000);
  /* The client got the cancellation or a closed connection, not a hang. */
  WD_CHECK(r.status == 499 || r.status == 0);
  th_resp_free(&r);
  close(fd);
  th_buf_free(&b);
  wd_server_free(NULL, 0);
}

WD_TEST(start_errors) {
  wd_server_opts_t o = default_opts();
  wd_server_t *s = NULL, *s2 = NULL;
  char err[256] = "";
  WD_CHECK_EQ_INT(wd_server_start(&o, &s, err, sizeof err), 0);
  o.port = wd_server_port(s);
  err[0] = '\0';
  WD_CHECK_EQ_INT(wd_server_start(&o, &s2, err, sizeof err), WD_EIO);
  WD_CHECK(strstr(err, "cannot listen") != NULL);
  o.port = 0;
  o.host = "not an address";
  err[0] = '\0';
  WD_CHECK(wd_server_start(&o, &s2, err, sizeof err) < 0);
  WD_CHECK(err[0] != '\0');
  o.max_body = 0;
  WD_CHECK_EQ_INT(wd_server_start(&o, &s2, err, sizeof err), WD_EINVAL);
  wd_server_free(s, 0);
}

WD_TEST(keep_alive_and_adopted_listen_socket) {
  /* A socket bound and listening already, as systemd hands it over. */
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET };
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  WD_CHECK_EQ_INT(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
  WD_CHECK_EQ_INT(listen(lfd, 16), 0);
  WD_CHECK_EQ_INT(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
  wd_server_opts_t o = default_opts();
  o.listen_fd = lfd;
  o.port = 1; /* ignored */
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  WD_CHECK_EQ_INT(wd_server_port(s), ntohs(a.sin_port));
  /* Several requests on one connection: per-request state starts afresh. */
  int fd = th_connect(wd_server_port(s));
  th_buf_t b = { 0 };
  form(&b, "whisper-1", F("response_format", "text"), 0.5);
  char head[512];
  const int hn = snprintf(head, sizeof head, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x"
                          "\r\n" TH_MULTIPART "Content-Length: %zu\r\n\r\n", b.len);
  for (int i = 0; i < 3; i++) {
    th_send_all(fd, head, (size_t)hn);
    th_send_all(fd, b.p, b.len);
    th_resp_t r = th_read_response(fd, 0, 5000);
    WD_CHECK_EQ_INT(r.status, 200);
    WD_CHECK_EQ_STR(r.body, "Hello there. General Kenobi.\n");
    th_resp_free(&r);
    const char get[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    th_send_all(fd, get, sizeof get - 1);
    r = th_read_response(fd, 0, 5000);
    WD_CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
  }
  close(fd);
  th_buf_free(&b);
  stop(s); /* closes the adopted socket */
}

WD_TEST(connection_limit) {
  wd_server_opts_t o = default_opts();
  o.max_connections = 2;
  wd_server_t *s = start(&o, 1);
  if (!s)
    return;
  const int port = wd_server_port(s);
  int fds[2] = { th_connect(port), th_connect(port) };
  th_sleep_ms(100);
  /* The third is accepted and closed at once, without an answer. */
  int fd3 = th_connect(port);
  if (fd3 >= 0) {
    const char get[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    th_send_all(fd3, get, sizeof get - 1);
    th_resp_t r = th_read_response(fd3, 0, 2000);
    WD_CHECK_EQ_INT(r.status, 0);
    th_resp_free(&r);
    close(fd3);
  }
  close(fds[0]);
  close(fds[1]);
  th_sleep_ms(100);
  th_resp_t r = th_request(port, "GET", "/health", NULL, NULL, 0);
  WD_CHECK_EQ_INT(r.status, 200);
  th_resp_free(&r);
  stop(s);
}

WD_TEST(cleanup) {
  wd_workers_free(g_group);
  g_group = NULL;
  wd_worker_free(g_worker);
  g_worker = NULL;
  wd_tokenizer_free(g_tok);
  g_tok = NULL;
}

int main(void) { return wd_test_main(); }
