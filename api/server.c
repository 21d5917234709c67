/*
 * server.c - the HTTP server on libmicrohttpd (see server.h): daemon set-up
 * and shutdown, routing, authentication, and the small routes (/health,
 * /ready, /metrics, /v1/models). The audio routes live in transcription.c.
 *
 * MHD runs a pool of `threads` poll() threads (MHD_USE_INTERNAL_POLLING_THREAD
 * with MHD_OPTION_THREAD_POOL_SIZE); each connection stays on one thread.
 * Not epoll: libmicrohttpd (0.9.75, Debian 12, and later) races in
 * MHD_quiesce_daemon, which the drain calls on SIGTERM. The quiescing thread
 * and a worker thread both take the listen socket out of the worker's epoll
 * set, the loser gets ENOENT, and MHD_PANIC aborts the daemon with every
 * request in flight (seen once in the test suite; every time when the
 * quiescing thread's epoll_ctl is slowed: test_systemd.py's
 * test_sigterm_quiesce_while_http_threads_are_busy).
 * With poll() a quiesce only flags the workers and wakes them. At this
 * server's connection counts (max_connections, 256 by default, spread over
 * the threads) poll()'s cost per wake-up is small.
 * Per-request state (wd_req_t) is allocated on the first handler call and
 * freed in the NOTIFY_COMPLETED callback, which also records the request in
 * the metrics and the access log.
 *
 * Limits on clients: idle_timeout_s (MHD's connection timeout) cuts off a
 * silent client in any phase; max_connections caps sockets; a request body
 * must arrive within body_timeout_s (checked as data arrives, so a trickle
 * is cut off at the next byte after the deadline). The header phase has its
 * own total deadline, header_timeout_s, kept by the connection guard
 * (conn_guard.h) since MHD shows the handler nothing before the headers are
 * complete; MHD's per-connection memory limit (32 KiB) bounds their size.
 * max_connections_per_ip keeps one client address from taking every
 * connection.
 *
 * Ownership: the server copies the options' strings; what a model handed
 * to wd_server_attach or wd_server_replace points to is borrowed until
 * wd_server_free, or, for a replaced one, until its on_retire. Each model
 * is a refcounted record (wd_served_t): its slot and every request that
 * picked it hold a reference, so a replace never pulls a model from under
 * a request.
 */
#include "server.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "api_error.h"
#include "clock.h"
#include "error.h"
#include "chunk_job.h"
#include "log.h"
#include "realtime.h"
#include "response.h"
#include "route.h"
#include "server_internal.h"
#include "transcription.h"
#include "web.h"

#define WD_MODEL_WAIT_RETRY_S 5
#define WD_HEADER_TIMEOUT_DEFAULT_S 15
/* Decode threads when opts.decode_threads is 0. */
#define WD_DECODE_THREADS_DEFAULT 2
/* Diarization threads when opts.diarize_threads is 0: one, since each
 * diarization is CPU work beside the engine's on the same cores. */
#define WD_DIARIZE_THREADS_DEFAULT 1

/* One request on a connection, from its headers to its completion. */
typedef struct {
  wd_route_t route;
  double t_start;
  int status;                /* answered status (small routes); audio: from tr */
  char method[16];
  char *path;
  wd_transcription_t *tr;    /* audio routes */
  wd_rt_session_t *rt;       /* /v1/realtime: the session its 101 holds (realtime.h) */
  int deferred;              /* no body: answer on the next call */
} wd_req_t;

/* Every attached model's workers' figures, summed (device_lost: how many
 * groups lost theirs); the number of models. */
static int all_stats(wd_server_t *s, wd_worker_stats_t *ret) {
  wd_served_t *r[WD_SERVER_MAX_MODELS];
  const int n = wd_served_snapshot(&s->served, r);
  *ret = (wd_worker_stats_t){ 0 };
  for (int i = 0; i < n; i++) {
    wd_worker_stats_t st;
    if (!r[i]->m.workers)
      continue; /* not loaded */
    wd_workers_stats(r[i]->m.workers, &st);
    wd_worker_stats_add(ret, &st);
  }
  wd_served_release_all(r, n);
  return n;
}

int wd__server_retry_after(const wd_server_model_t *m) {
  if (!m || !m->workers)
    return WD_MODEL_WAIT_RETRY_S;
  wd_worker_stats_t st;
  wd_workers_stats(m->workers, &st);
  const uint64_t jobs = st.jobs_done + st.jobs_failed;
  /* The worker's mean busy time per job, times the jobs ahead, shared over
   * the batch; at least 1 s, at most the 60 s a client would still wait. */
  const double per_job = jobs ? st.busy_s / (double)jobs : 5.0;
  const double est = per_job * (st.queued + st.running) / (st.max_batch > 0 ? st.max_batch : 1);
  const double s_est = ceil(est);
  return s_est < 1 ? 1 : s_est > 60 ? 60 : (int)s_est;
}

/* ---- responses of the small routes ---------------------------------- */

/* Queues a JSON document (reference stolen) and records status in r. */
static enum MHD_Result reply_json(struct MHD_Connection *c, wd_req_t *r, int status, json_t *j) {
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!s)
    return MHD_NO;
  r->status = status;
  return wd_response_body(c, status, "application/json", s, strlen(s));
}

static enum MHD_Result reply_error(struct MHD_Connection *c, wd_req_t *r, const wd_api_error_t *e,
                                   const char *allow) {
  r->status = e->status;
  return wd_response_error(c, e, allow);
}

/* GET or HEAD of the page's assets (api/web.h): public (no key: the page
 * asks for it and sends it with its API calls), revalidated by ETag. */
static enum MHD_Result route_web(struct MHD_Connection *c, wd_req_t *r, const char *url) {
  const wd_web_asset_t *a = wd_web_find(url);
  if (!a)
    return MHD_NO; /* the route table matched it */
  unsigned long long h = 1469598103934665603ull; /* FNV-1a of the bytes */
  for (size_t i = 0; i < a->len; i++)
    h = (h ^ a->data[i]) * 1099511628211ull;
  char etag[24];
  snprintf(etag, sizeof etag, "\"%016llx\"", h);
  const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
  const int fresh = inm && strstr(inm, etag) != NULL;
  /* PERSISTENT: MHD only reads the bytes (the cast drops const for its API) */
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      fresh ? 0 : a->len, fresh ? NULL : (void *)(uintptr_t)a->data, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, "Server", "whisperd");
  MHD_add_response_header(resp, "Cache-Control", "no-cache");
  MHD_add_response_header(resp, "ETag", etag);
  MHD_add_response_header(resp, "Content-Type", a->content_type);
  MHD_add_response_header(resp, "Content-Security-Policy", WD_WEB_CSP);
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(resp, "X-Frame-Options", "DENY");
  r->status = fresh ? 304 : 200;
  const enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* OpenAI's model object, and whether the model is loaded now (a model
 * loaded on demand is not until its first request; SDKs ignore the field). */
static json_t *model_object(const wd_server_t *s, const char *id, int loaded) {
  return json_pack("{s:s, s:s, s:I, s:s, s:b}", "id", id, "object", "model", "created",
                   (json_int_t)s->created, "owned_by", "whisperd", "loaded", loaded);
}

/* GET /v1/models (id NULL) or /v1/models/{id}: every attached model's names. */
static enum MHD_Result route_models(wd_server_t *s, struct MHD_Connection *c, wd_req_t *r,
                                    const char *id) {
  wd_served_t *ms[WD_SERVER_MAX_MODELS];
  const int n_models = wd_served_snapshot(&s->served, ms);
  if (id) {
    int found = 0, loaded = 0;
    for (int k = 0; k < n_models; k++)
      for (int i = 0; i < ms[k]->m.n_names; i++)
        if (!found && ms[k]->m.names[i] && strcmp(ms[k]->m.names[i], id) == 0) {
          found = 1;
          loaded = ms[k]->m.workers != NULL;
        }
    wd_served_release_all(ms, n_models);
    if (found)
      return reply_json(c, r, 200, model_object(s, id, loaded));
    wd_api_error_t e;
    wd_api_error_set(&e, 404, NULL, "model_not_found",
                     "The model `%.200s` does not exist or you do not have access to it.", id);
    return reply_error(c, r, &e, NULL);
  }
  json_t *data = json_array();
  for (int k = 0; data && k < n_models; k++)
    for (int i = 0; i < ms[k]->m.n_names; i++)
      if (ms[k]->m.names[i])
        json_array_append_new(data,
                              model_object(s, ms[k]->m.names[i], ms[k]->m.workers != NULL));
  wd_served_release_all(ms, n_models);
  return reply_json(c, r, 200, data ? json_pack("{s:s, s:o}", "object", "list", "data", data)
                                    : NULL);
}

static enum MHD_Result route_ready(wd_server_t *s, struct MHD_Connection *c, wd_req_t *r) {
  const char *why = NULL;
  if (atomic_load(&s->quiescing))
    why = "shutting_down";
  else if (wd_served_count(&s->served) == 0)
    why = "loading";
  else if (!atomic_load(&s->ready))
    why = "starting";
  if (!why) {
    /* Rebuilding after a lost GPU (every device's, when there are
     * several): requests queue, but a load balancer should prefer another
     * instance meanwhile. */
    wd_worker_stats_t ws;
    all_stats(s, &ws);
    if (ws.device_lost)
      why = "device_rebuilding";
  }
  if (why)
    return reply_json(c, r, 503, json_pack("{s:s}", "status", why));
  return reply_json(c, r, 200, json_pack("{s:s}", "status", "ready"));
}

static enum MHD_Result route_metrics(wd_server_t *s, struct MHD_Connection *c, wd_req_t *r) {
  wd_metrics_state_t st = { 0 };
  st.model_loaded = wd_served_count(&s->served) > 0;
  st.ready = atomic_load(&s->ready) && st.model_loaded && !atomic_load(&s->quiescing);
  st.connections_suspended = atomic_load(&s->n_suspended);
  st.connections_open = wd_conn_guard_count(s->guard);
  st.connections_cut = (double)wd_conn_guard_cut(s->guard);
  wd_realtime_stats_t rs;
  wd_realtime_stats(s->realtime, &rs);
  st.rt_sessions_open = rs.sessions_open;
  st.rt_sessions_total = (double)rs.sessions_total;
  st.rt_turns_total = (double)rs.turns_total;
  st.rt_turns_failed = (double)rs.turns_failed;
  st.rt_turn_latency_s_sum = rs.turn_latency_s_sum;
  pthread_mutex_lock(&s->mu);
  st.requests_active = s->n_active;
  st.diar_running = s->n_diar_running;
  st.diar_queued = s->n_diarizing - s->n_diar_running;
  pthread_mutex_unlock(&s->mu);
  st.diar_held_s = wd__server_diar_held_s(s);
  st.diar_done = (double)atomic_load(&s->n_diar_done);
  st.diar_canceled = (double)atomic_load(&s->n_diar_canceled);
  st.diar_failed = (double)atomic_load(&s->n_diar_failed);
  wd_worker_stats_t ws;
  wd_metrics_worker_t per[WD_METRICS_MAX_WORKERS];
  int n_per = 0;
  wd_served_t *ms[WD_SERVER_MAX_MODELS];
  /* held until rendered: labels point in */
  const int n_models = wd_served_snapshot(&s->served, ms);
  if (st.model_loaded) {
    ws = (wd_worker_stats_t){ 0 };
    int n_loaded = 0;
    for (int k = 0; k < n_models; k++) {
      wd_worker_stats_t one;
      if (!ms[k]->m.workers)
        continue; /* loaded on demand, not now */
      wd_workers_stats(ms[k]->m.workers, &one);
      wd_worker_stats_add(&ws, &one);
      n_loaded++;
    }
    ws.device_lost = ws.device_lost == n_loaded; /* as one group: every device lost */
    for (int k = 0; k < n_models; k++) {
      wd_workers_t *g = ms[k]->m.workers;
      if (!g)
        continue;
      for (int i = 0; i < wd_workers_count(g) && n_per < WD_METRICS_MAX_WORKERS; i++) {
        /* model="..." where there are several (one model: the series as before) */
        per[n_per] = (wd_metrics_worker_t){ .device = wd_workers_label(g, i),
                                            .model = n_models > 1 ? ms[k]->m.label : NULL };
        wd_workers_stats_at(g, i, &per[n_per++].stats);
      }
    }
  }
  char *text = NULL;
  const int rc = wd_metrics_render(s->metrics, &st, st.model_loaded ? &ws : NULL, per, n_per,
                                   &text);
  wd_served_release_all(ms, n_models);
  if (rc < 0)
    return MHD_NO;
  r->status = 200;
  return wd_response_body(c, 200, "text/plain; version=0.0.4; charset=utf-8", text,
                          strlen(text));
}

/* ---- authentication ---------------------------------------------------- */

/* 1 when no key is configured or the request carries "Bearer <key>". The
 * comparison takes the same time wherever the first difference is. */
/* Whether key[0..n) is the API key (or none is required); constant time in
 * the key's length. */
static int key_ok(const wd_server_t *s, const char *key, size_t n) {
  if (!s->api_key || !s->api_key[0])
    return 1;
  const size_t k = strlen(s->api_key);
  unsigned diff = n != k;
  for (size_t i = 0; i < k; i++)
    diff |= (unsigned)(unsigned char)s->api_key[i] ^ (unsigned)(unsigned char)(i < n ? key[i] : 0);
  return diff == 0;
}

static int auth_ok(const wd_server_t *s, struct MHD_Connection *c, int *ret_missing) {
  *ret_missing = 0;
  if (!s->api_key || !s->api_key[0])
    return 1;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
  if (!h) {
    *ret_missing = 1;
    return 0;
  }
  while (*h == ' ' || *h == '\t')
    h++;
  if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
    return 0;
  h += 6;
  while (*h == ' ' || *h == '\t')
    h++;
  size_t n = strlen(h);
  while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
    n--;
  return key_ok(s, h, n);
}

/* ---- the MHD callbacks ------------------------------------------------- */

/* The header fields that say where a request's body ends. */
typedef struct {
  int n_length, n_encoding, bad_name;
  const char *encoding;      /* the Transfer-Encoding's value */
} framing_t;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
  (void)kind;
  framing_t *f = cls;
  if (strpbrk(key, " \t"))
    f->bad_name = 1; /* "Content-Length : 5" is no Content-Length to MHD */
  else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
    f->n_length++;
  else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
    f->n_encoding++;
    f->encoding = value;
  }
  return MHD_YES;
}

/*
 * Why the request's body could be read as ending elsewhere than where MHD
 * reads it (RFC 9112 6.1, 6.3; 5.1 for whitespace before the colon), or
 * NULL. MHD 0.9.75 takes the first of several Content-Lengths, lets
 * Transfer-Encoding override Content-Length and keeps the connection, and
 * reads a body of an encoding other than chunked to the connection's end:
 * a proxy in front that reads such a request otherwise (another
 * Content-Length, the Content-Length over the encoding) would send the
 * rest of the body to this server as the next request on the connection
 * (request smuggling). Refused whether or not the values agree: no
 * client has a reason to send two.
 */
static const char *framing_error(struct MHD_Connection *c, const char *version) {
  framing_t f = { 0 };
  MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
  if (f.bad_name)
    return "A header field name contains whitespace.";
  if (f.n_length > 1)
    return "The request has more than one Content-Length header.";
  if (f.n_encoding == 0)
    return NULL;
  if (f.n_length > 0)
    return "The request has both Content-Length and Transfer-Encoding.";
  if (f.n_encoding > 1 || !f.encoding || strcasecmp(f.encoding, "chunked") != 0)
    return "Transfer-Encoding must be chunked, alone.";
  if (strcmp(version, MHD_HTTP_VERSION_1_0) == 0)
    return "Transfer-Encoding is not allowed in an HTTP/1.0 request.";
  return NULL;
}

/* 1 when the request announces a body (Content-Length > 0 or chunked). */
static int has_body(struct MHD_Connection *c) {
  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
  if (cl && strtoull(cl, NULL, 10) > 0)
    return 1;
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding") != NULL;
}

/*
 * Routes the request and answers it, or hands it to a transcription. Called
 * on the first handler call for requests with a body (an answer then means
 * the body is refused, and MHD closes the connection after it), and on the
 * second call for requests without one: MHD keeps a connection alive only
 * when the answer comes after the whole request was read.
 */
static enum MHD_Result respond(wd_server_t *s, struct MHD_Connection *c, wd_req_t *r,
                               const char *method, const char *url, int body_read) {
  wd_api_error_t e;
  const char *allow = NULL, *id = NULL;
  const int found = wd_route_match(method, url, &r->route, &allow, &id);
  int missing = 0;
  size_t sub_n = 0;
  const char *sub = r->route == WD_ROUTE_REALTIME ? wd_realtime_subprotocol_key(c, &sub_n) : NULL;
  if (wd_route_needs_auth(url) && !(sub && key_ok(s, sub, sub_n)) && !auth_ok(s, c, &missing)) {
    if (missing)
      wd_api_error_set(&e, 401, NULL, "invalid_api_key",
                       "You didn't provide an API key. You need to provide your API key in an "
                       "Authorization header using Bearer auth (i.e. Authorization: Bearer "
                       "YOUR_KEY).");
    else
      wd_api_error_set(&e, 401, NULL, "invalid_api_key", "Incorrect API key provided.");
    return reply_error(c, r, &e, NULL);
  }
  if (found == 404 || (r->route == WD_ROUTE_WEB && s->o.no_web_ui)) {
    r->route = WD_ROUTE_OTHER; /* --web-ui off: as any unknown path */
    wd_api_error_set(&e, 404, NULL, NULL, "Invalid URL (%.15s %.200s)", method, url);
    return reply_error(c, r, &e, NULL);
  }
  if (found == 405) {
    wd_api_error_set(&e, 405, NULL, "method_not_allowed",
                     "Method %.15s is not allowed for %.200s; use %s.", method, url, allow);
    return reply_error(c, r, &e, allow);
  }
  switch (r->route) {
  case WD_ROUTE_HEALTH:
    return reply_json(c, r, 200, json_pack("{s:s}", "status", "ok"));
  case WD_ROUTE_READY:
    return route_ready(s, c, r);
  case WD_ROUTE_METRICS:
    return route_metrics(s, c, r);
  case WD_ROUTE_MODELS:
    return route_models(s, c, r, id);
  case WD_ROUTE_WEB:
    return route_web(c, r, url);
  case WD_ROUTE_REALTIME:
    return wd_realtime_upgrade(s->realtime, c, &r->status, &r->rt);
  case WD_ROUTE_TRANSCRIPTIONS:
  case WD_ROUTE_TRANSLATIONS:
    r->tr = wd_transcription_new(s, c,
                                 r->route == WD_ROUTE_TRANSLATIONS ? WD_REQUEST_TRANSLATE
                                                                   : WD_REQUEST_TRANSCRIBE,
                                 r->t_start);
    if (!r->tr) {
      wd_api_error_set(&e, 500, NULL, NULL, "The server ran out of memory.");
      return reply_error(c, r, &e, NULL);
    }
    if (!body_read)
      return wd_transcription_handle(r->tr, NULL, NULL, 1);
    /* No body follows: headers and end of body in this one call. */
    if (wd_transcription_handle(r->tr, NULL, NULL, 1) == MHD_NO)
      return MHD_NO;
    size_t zero = 0;
    return wd_transcription_handle(r->tr, NULL, &zero, 0);
  default:
    return MHD_NO;
  }
}

/* The connection's header-deadline entry (its MHD socket context). */
static wd_conn_entry_t *guard_entry(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* MHD thread: a connection opened or is closing (before its socket is
 * closed; see conn_guard.h). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  wd_server_t *s = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = ci ? wd_conn_guard_open(s->guard, ci->connect_fd) : NULL;
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    wd_conn_guard_close(s->guard, *socket_context);
    *socket_context = NULL;
  }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  wd_server_t *s = cls;
  wd_req_t *r = *con_cls;
  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r)
      return MHD_NO;
    r->t_start = wd_now_s();
    wd_conn_guard_busy(s->guard, guard_entry(c)); /* headers complete */
    snprintf(r->method, sizeof r->method, "%s", method);
    r->path = strdup(url);
    *con_cls = r;
    pthread_mutex_lock(&s->mu);
    s->n_active++;
    pthread_mutex_unlock(&s->mu);
    const char *framing = framing_error(c, version);
    if (framing) {
      /* Closed after the answer, so that nothing after these headers is
       * read as a request. MHD 0.9.75 closes after any answer queued on
       * the first call; `Connection: close` tells the client so, and
       * keeps it so whatever MHD does there. */
      const char *allow = NULL;
      wd_route_match(method, url, &r->route, &allow, NULL); /* the metrics' label */
      wd_api_error_t e;
      wd_api_error_set(&e, 400, NULL, "invalid_request", "%s", framing);
      r->status = 400;
      return wd_response_error_close(c, &e);
    }
    if (has_body(c))
      return respond(s, c, r, method, url, 0);
    r->deferred = 1;
    return MHD_YES;
  }
  if (r->deferred) {
    r->deferred = 0;
    return respond(s, c, r, method, url, 1);
  }
  if (r->tr)
    return wd_transcription_handle(r->tr, upload_data, upload_data_size, 0);
  /* A small route answered on the first call; MHD discards any body. */
  *upload_data_size = 0;
  return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  wd_server_t *s = cls;
  wd_req_t *r = *con_cls;
  if (!r)
    return;
  *con_cls = NULL;
  /* A kept-alive connection now waits for its next request's headers. */
  if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
    wd_conn_guard_idle(s->guard, guard_entry(c));
  double audio_s = 0;
  int status = r->status;
  if (r->tr)
    status = wd_transcription_completed(r->tr, &audio_s);
  /* Answered but cut short, or never answered: nginx's 499 when the client
   * left, 0 when we closed (timeout, error). */
  if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && status == 0)
    status = toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ? 499 : 0;
  const double dt = wd_now_s() - r->t_start;
  wd_metrics_request(s->metrics, r->route, status, dt);
  const int audio = r->route == WD_ROUTE_TRANSCRIPTIONS || r->route == WD_ROUTE_TRANSLATIONS;
  wd_log(audio ? WD_LOG_INFO : WD_LOG_DEBUG, "api: %s %s -> %d in %.3f s%s", r->method,
         r->path ? r->path : "?", status, dt,
         toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
  if (audio && audio_s > 0)
    wd_log_debug("api: %.1f s of audio", audio_s);
  wd_realtime_request_done(r->rt);
  free(r->path);
  free(r);
  pthread_mutex_lock(&s->mu);
  s->n_active--;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Watcher thread: the client of a waiting request hung up. */
static void on_hangup(void *ctx, uint64_t serial) {
  wd_server_t *s = ctx;
  uint64_t job_id = 0;
  wd_served_t *rec = NULL;
  if (!wd__transcription_hung_up(s, serial, &job_id, &rec))
    return; /* its job (and diarization) ended meanwhile */
  if (job_id) {
    wd_log_info("api: client went away, cancelling job %llu", (unsigned long long)job_id);
    wd_chunk_cancel(rec->m.workers, job_id);
  } else {
    wd_log_info("api: client went away, stopping its diarization");
  }
  wd_served_release(rec);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* MHD's own messages (mostly about misbehaving clients): debug level. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
    msg[--n] = '\0';
  wd_log_debug("api: libmicrohttpd: %s", msg);
}

/* ---- life cycle -------------------------------------------------------- */

static int fail(char *err, size_t err_len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t err_len, int rc, const char *fmt, ...) {
  if (err && err_len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* The port of the listening socket: asked from the socket itself, since
 * MHD 0.9.75 does not know it for an adopted socket. */
static int bound_port(struct MHD_Daemon *d, int fallback) {
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (!di || getsockname(di->listen_fd, (struct sockaddr *)&ss, &len) != 0)
    return fallback;
  if (ss.ss_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)&ss)->sin_port);
  if (ss.ss_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port);
  return fallback;
}

/* Frees what wd_server_start built; the MHD daemon must be stopped. */
static void server_destroy(wd_server_t *s) {
  /* The slots' references: the current models are the daemon's to close
   * (no retire), and no request holds one any more. */
  wd_served_table_destroy(&s->served);
  wd_realtime_free(s->realtime); /* MHD is stopped: nothing reaches the hub any more */
  wd_taskq_free(s->decoders);
  wd_taskq_free(s->diarizers); /* after the decoders, which push to it */
  wd_watcher_free(s->watcher);
  wd_conn_guard_free(s->guard);
  wd_metrics_free(s->metrics);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s->host);
  free(s->api_key);
  free(s);
}

int wd_server_start(const wd_server_opts_t *o, wd_server_t **ret, char *err, size_t err_len) {
  if (!o || !ret || o->max_body == 0 || o->port < 0 || o->port > 65535)
    return fail(err, err_len, WD_EINVAL, "invalid server options");
  wd_server_t *s = calloc(1, sizeof *s);
  if (!s)
    return fail(err, err_len, WD_ENOMEM, "out of memory");
  s->o = *o;
  s->created = time(NULL);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  wd_served_table_init(&s->served);
  s->host = strdup(o->host && o->host[0] ? o->host : "127.0.0.1");
  s->api_key = o->api_key ? strdup(o->api_key) : NULL;
  s->o.host = s->host;
  s->o.api_key = s->api_key;
  int rc = 0;
  if (!s->host || (o->api_key && !s->api_key) || wd_metrics_new(&s->metrics) < 0) {
    rc = fail(err, err_len, WD_ENOMEM, "out of memory");
    goto fail;
  }
  if ((rc = wd_watcher_new(on_hangup, s, &s->watcher)) < 0) {
    rc = fail(err, err_len, rc, "cannot start the hang-up watcher: %s", wd_strerror(rc));
    goto fail;
  }
  /* One decode per connection at most: max_connections bounds the tasks. */
  if ((rc = wd_taskq_new(o->decode_threads > 0 ? o->decode_threads : WD_DECODE_THREADS_DEFAULT,
                         o->max_connections > 0 ? o->max_connections : 1024, "wd-decode",
                         &s->decoders)) < 0) {
    rc = fail(err, err_len, rc, "cannot start the decode threads: %s", wd_strerror(rc));
    goto fail;
  }
  /* Diarizations have threads of their own: one of a long upload runs for
   * minutes, and on the decode threads two of them held up every other
   * upload (a jfk.wav answered after 169 s instead of 0.9 s behind two
   * 10-minute diarized uploads). One diarization per connection at most,
   * and the audio budget admits them (transcription.c). */
  if ((rc = wd_taskq_new(o->diarize_threads > 0 ? o->diarize_threads : WD_DIARIZE_THREADS_DEFAULT,
                         o->max_connections > 0 ? o->max_connections : 1024, "wd-diarize",
                         &s->diarizers)) < 0) {
    rc = fail(err, err_len, rc, "cannot start the diarization threads: %s", wd_strerror(rc));
    goto fail;
  }

  if (!(s->realtime = wd_realtime_new(s, o->realtime_sessions))) {
    rc = fail(err, err_len, WD_ENOMEM, "out of memory");
    goto fail;
  }

  const double header_s = o->header_timeout_s > 0 ? o->header_timeout_s : WD_HEADER_TIMEOUT_DEFAULT_S;
  if ((rc = wd_conn_guard_new(header_s, o->idle_timeout_s, &s->guard)) < 0) {
    rc = fail(err, err_len, rc, "cannot start the connection guard: %s", wd_strerror(rc));
    goto fail;
  }
  const unsigned max_conn = (unsigned)(o->max_connections > 0 ? o->max_connections : 256);
  const unsigned per_ip = o->max_connections_per_ip > 0 ? (unsigned)o->max_connections_per_ip
                                                        : (max_conn * 3 + 3) / 4;

  struct MHD_OptionItem extra[3];
  int k = 0;
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                       MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
  struct sockaddr_storage addr;
  if (o->listen_fd >= 0) {
    extra[k++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, o->listen_fd, NULL };
  } else {
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
                              .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *ai = NULL;
    const int gai = getaddrinfo(s->host, port, &hints, &ai);
    if (gai != 0 || !ai) {
      rc = fail(err, err_len, WD_EINVAL, "cannot resolve listen address '%s': %s", s->host,
                gai_strerror(gai));
      goto fail;
    }
    memset(&addr, 0, sizeof addr);
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (addr.ss_family == AF_INET6)
      flags |= MHD_USE_IPv6;
    extra[k++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, &addr };
  }
  if (o->threads > 1)
    extra[k++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, o->threads, NULL };
  extra[k] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };

  /* MHD's threads inherit this mask: signals stay with the daemon's main
   * thread (CONVENTIONS 8). */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  s->mhd = MHD_start_daemon(
      flags, (uint16_t)o->port, NULL, NULL, on_request, s,
      MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
      MHD_OPTION_ARRAY, extra,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)(o->idle_timeout_s > 0 ? o->idle_timeout_s : 0),
      MHD_OPTION_CONNECTION_LIMIT, max_conn,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
      MHD_OPTION_END);
  const int start_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!s->mhd) {
    if (o->listen_fd >= 0)
      rc = fail(err, err_len, WD_EIO, "cannot serve on the inherited socket %d", o->listen_fd);
    else
      rc = fail(err, err_len, WD_EIO, "cannot listen on %s port %d: %s", s->host, o->port,
                start_errno ? strerror(start_errno) : "libmicrohttpd failed to start");
    goto fail;
  }
  s->port = bound_port(s->mhd, o->port);
  wd_log_info("api: listening on %s port %d (%d HTTP threads, body limit %zu bytes)",
              o->listen_fd >= 0 ? "an inherited socket" : s->host, s->port,
              o->threads > 1 ? o->threads : 1, o->max_body);
  *ret = s;
  return 0;
fail:
  server_destroy(s);
  return rc;
}

int wd_server_port(const wd_server_t *s) { return s ? s->port : 0; }

void wd_server_model_changed(wd_server_t *s, int i) {
  if (s)
    wd_served_changed(&s->served, i);
}

int wd_server_replace(wd_server_t *s, int i, const wd_server_model_t *m) {
  if (!s || !m)
    return WD_EINVAL;
  const int rc = wd_served_replace(&s->served, i, m);
  if (rc == 0)
    wd_log_info("api: model %d replaced by '%s'", i, m->n_names > 0 ? m->names[0] : "?");
  return rc;
}

/* Attaches come from one thread (the daemon's start-up and reloads):
 * `created` is written before the first model's slot is published, and
 * read only by a request that saw that slot (after the table's lock). */
void wd_server_attach(wd_server_t *s, const wd_server_model_t *m) {
  if (!s || !m)
    return;
  if (wd_served_count(&s->served) == 0 && m->created > 0)
    s->created = (time_t)m->created;
  if (wd_served_attach(&s->served, m) < 0)
    return;
  wd_log_info("api: model attached as '%s' (%d name%s)", m->n_names > 0 ? m->names[0] : "?",
              m->n_names, m->n_names == 1 ? "" : "s");
}

void wd_server_set_ready(wd_server_t *s, int ready) {
  if (s)
    atomic_store(&s->ready, ready ? 1 : 0);
}

void wd_server_quiesce(wd_server_t *s) {
  if (!s || atomic_exchange(&s->quiescing, 1))
    return;
  /* The listening socket stops listening at once: a connection made
   * during the drain is refused there and then (a load balancer's or a
   * probe's check fails at once) instead of waiting in the kernel's
   * backlog, which nothing accepts from any more, until the exit resets
   * it. MHD is done with the socket when the quiesce returns: it flags
   * every HTTP thread before waking it; in poll mode a flagged thread
   * neither polls nor accepts on the socket, and one still in the poll it
   * was in checks the flag before it would accept; MHD_stop_daemon leaves
   * a quiesced socket alone. close() alone is not enough: a thread still
   * in that poll holds the socket, which listens on until the thread
   * wakes (connections made meanwhile are reset then); shutdown() stops
   * it listening whoever holds it. Not an inherited socket, though: under
   * socket activation systemd holds it too and listens on it after this
   * exit, so there it is only closed, and new connections wait in
   * systemd's backlog for the next start. */
  const MHD_socket fd = MHD_quiesce_daemon(s->mhd);
  if (fd != MHD_INVALID_SOCKET) {
    if (s->o.listen_fd < 0)
      shutdown(fd, SHUT_RDWR);
    close(fd);
  }
  wd_served_close(&s->served); /* requests parked for a model's load: 503 now */
  wd_realtime_stop(s->realtime); /* sessions end once their running turns have */
  wd_log_info("api: no longer accepting connections");
}

void wd_server_drain_by(wd_server_t *s, double grace_s) {
  if (s)
    atomic_store(&s->drain_deadline_us,
                 (long long)((wd_now_s() + (grace_s > 0 ? grace_s : 0)) * 1e6) + 1);
}

int wd__server_draining_past(wd_server_t *s) {
  const long long at = atomic_load(&s->drain_deadline_us);
  return at > 0 && wd_now_s() * 1e6 >= (double)at;
}

void wd__server_diar_started(wd_server_t *s) {
  pthread_mutex_lock(&s->mu);
  s->n_diarizing++;
  pthread_mutex_unlock(&s->mu);
}

void wd__server_diar_begun(wd_server_t *s) {
  pthread_mutex_lock(&s->mu);
  s->n_diar_running++;
  pthread_mutex_unlock(&s->mu);
}

void wd__server_diar_hold(wd_server_t *s, double audio_s) {
  atomic_fetch_add(&s->diar_held_ms, llround(audio_s * 1e3));
}

double wd__server_diar_held_s(wd_server_t *s) {
  return (double)atomic_load(&s->diar_held_ms) / 1e3;
}

void wd__server_diar_ended(wd_server_t *s, int rc) {
  if (rc == 0)
    atomic_fetch_add(&s->n_diar_done, 1);
  else if (rc == WD_ECANCELED || rc == WD_ESHUTDOWN)
    atomic_fetch_add(&s->n_diar_canceled, 1);
  else
    atomic_fetch_add(&s->n_diar_failed, 1);
  pthread_mutex_lock(&s->mu);
  s->n_diarizing--;
  s->n_diar_running--;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Waits on s->cv until *count is 0 or the deadline passes. Under s->mu. */
static void wait_zero(wd_server_t *s, const int *count, double deadline) {
  while (*count > 0) {
    const double now = wd_now_s();
    if (now >= deadline)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const double step = deadline - now < 0.5 ? deadline - now : 0.5;
    const long ns = ts.tv_nsec + (long)(step * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
}

int wd_server_free(wd_server_t *s, double wait_s) {
  if (!s)
    return 0;
  if (s->mhd) {
    wd_server_quiesce(s);
    /* Diarizations may run until the drain's deadline (none set: not at
     * all); past it they stop at their next window (503), so that the
     * decode threads' end below does not wait for them. Then every answer
     * gets wait_s to go out. */
    const long long at = atomic_load(&s->drain_deadline_us);
    pthread_mutex_lock(&s->mu);
    wait_zero(s, &s->n_diarizing, at > 0 ? (double)at / 1e6 : 0.0);
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->drain_deadline_us, (long long)(wd_now_s() * 1e6));
    pthread_mutex_lock(&s->mu);
    wait_zero(s, &s->n_active, wd_now_s() + (wait_s > 0 ? wait_s : 0));
    pthread_mutex_unlock(&s->mu);
    /* Uploads still decoding finish (a decode is bounded by max_audio_s)
     * and resume their connections, which then submit or answer. */
    wd_taskq_free(s->decoders);
    s->decoders = NULL;
    /* Diarizations those pushed, and any still queued, stop at once: the
     * drain's deadline has passed. */
    wd_taskq_free(s->diarizers);
    s->diarizers = NULL;
    pthread_mutex_lock(&s->mu);
    const int n_jobs = s->n_jobs;
    pthread_mutex_unlock(&s->mu);
    /* Jobs still in flight point into this server: cancel them and wait
     * for their on_done, which also resumes their connections (MHD must
     * not be stopped with a connection suspended). */
    if (n_jobs > 0) {
      wd_log_warning("api: %d job%s still running at shutdown, cancelling", n_jobs,
                     n_jobs == 1 ? "" : "s");
      wd_transcription_cancel_all(s);
    }
    pthread_mutex_lock(&s->mu);
    wait_zero(s, &s->n_jobs, wd_now_s() + (wait_s > 0 ? wait_s : 0) + 10.0);
    const int left = s->n_jobs;
    pthread_mutex_unlock(&s->mu);
    if (left > 0) {
      wd_log_error("api: %d job%s never ended; leaving the HTTP server running", left,
                   left == 1 ? "" : "s");
      return WD_EBUSY;
    }
    /* realtime sessions hand their sockets back to MHD before it stops;
     * the hub itself is freed after it stops (server_destroy), since a
     * handshake or upgrade callback can reach it until then */
    wd_realtime_drain(s->realtime, wait_s > 0 ? wait_s : 0);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
  }
  server_destroy(s);
  return 0;
}
