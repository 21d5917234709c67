/*
 * test_route.c - the URL table and the Prometheus exposition, without a
 * server.
 */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "route.h"
#include "web.h"
#include "wd_test.h"

static void check(const char *method, const char *path, int want, wd_route_t route,
                  const char *allow, const char *id) {
  wd_route_t r;
  const char *a = (const char *)1, *i = (const char *)1;
  const int got = wd_route_match(method, path, &r, &a, &i);
  if (got != want)
    fprintf(stderr, "%s %s: %d, want %d\n", method, path, got, want);
  WD_CHECK_EQ_INT(got, want);
  WD_CHECK_EQ_INT(r, route);
  if (allow)
    WD_CHECK_EQ_STR(a, allow);
  else
    WD_CHECK(a == NULL);
  if (id)
    WD_CHECK_EQ_STR(i, id);
  else
    WD_CHECK(i == NULL);
}

WD_TEST(table) {
  check("POST", "/v1/audio/transcriptions", 200, WD_ROUTE_TRANSCRIPTIONS, NULL, NULL);
  check("POST", "/v1/audio/transcriptions/", 200, WD_ROUTE_TRANSCRIPTIONS, NULL, NULL);
  check("POST", "/v1/audio/translations", 200, WD_ROUTE_TRANSLATIONS, NULL, NULL);
  check("GET", "/v1/audio/translations", 405, WD_ROUTE_TRANSLATIONS, "POST", NULL);
  check("PUT", "/v1/audio/transcriptions", 405, WD_ROUTE_TRANSCRIPTIONS, "POST", NULL);
  check("GET", "/v1/models", 200, WD_ROUTE_MODELS, NULL, NULL);
  check("HEAD", "/v1/models", 200, WD_ROUTE_MODELS, NULL, NULL);
  check("GET", "/v1/models/whisper-1", 200, WD_ROUTE_MODELS, NULL, "whisper-1");
  check("GET", "/v1/models/org/name", 200, WD_ROUTE_MODELS, NULL, "org/name");
  check("POST", "/v1/models", 405, WD_ROUTE_MODELS, "GET, HEAD", NULL);
  check("GET", "/health", 200, WD_ROUTE_HEALTH, NULL, NULL);
  check("GET", "/ready", 200, WD_ROUTE_READY, NULL, NULL);
  check("GET", "/metrics", 200, WD_ROUTE_METRICS, NULL, NULL);
  check("POST", "/metrics", 405, WD_ROUTE_METRICS, "GET, HEAD", NULL);
  check("GET", "/", 200, WD_ROUTE_WEB, NULL, NULL);
  check("HEAD", "/", 200, WD_ROUTE_WEB, NULL, NULL);
  check("GET", "/app.js", 200, WD_ROUTE_WEB, NULL, NULL);
  check("GET", "/app.css", 200, WD_ROUTE_WEB, NULL, NULL);
  check("HEAD", "/worklet.js", 200, WD_ROUTE_WEB, NULL, NULL);
  check("POST", "/", 405, WD_ROUTE_WEB, "GET, HEAD", NULL);
  check("GET", "/app.jsx", 404, WD_ROUTE_OTHER, NULL, NULL);
  check("GET", "/index.html", 404, WD_ROUTE_OTHER, NULL, NULL);
  check("GET", "//", 404, WD_ROUTE_OTHER, NULL, NULL);
  check("GET", "/web/app.js", 404, WD_ROUTE_OTHER, NULL, NULL);
  check("GET", "/healthz", 404, WD_ROUTE_OTHER, NULL, NULL);
  check("GET", "/health//", 404, WD_ROUTE_OTHER, NULL, NULL);
  check("POST", "/v1/audio/transcriptionsX", 404, WD_ROUTE_OTHER, NULL, NULL);
  check("GET", "/V1/models", 404, WD_ROUTE_OTHER, NULL, NULL);
  check("get", "/health", 405, WD_ROUTE_HEALTH, "GET, HEAD", NULL); /* methods are case-sensitive */
  WD_CHECK(wd_route_needs_auth("/v1/models"));
  WD_CHECK(wd_route_needs_auth("/v1/anything"));
  WD_CHECK(!wd_route_needs_auth("/v1"));
  WD_CHECK(!wd_route_needs_auth("/health"));
  WD_CHECK(!wd_route_needs_auth("/metrics"));
  WD_CHECK(!wd_route_needs_auth("/"));
  WD_CHECK(!wd_route_needs_auth("/app.js"));
  WD_CHECK_EQ_STR(wd_route_name(WD_ROUTE_WEB), "web");
  WD_CHECK_EQ_STR(wd_route_name(WD_ROUTE_TRANSLATIONS), "translations");
  WD_CHECK_EQ_STR(wd_route_name(WD_ROUTE_COUNT), "other");
}

/* The page's embedded assets: found by path (one trailing slash, as the
 * routes), their types, the bytes of api/web/ as they are. */
WD_TEST(web_assets) {
  const wd_web_asset_t *a = wd_web_find("/");
  WD_CHECK(a != NULL);
  WD_CHECK_EQ_STR(a->content_type, "text/html; charset=utf-8");
  WD_CHECK(a->len > 100 && strncmp((const char *)a->data, "<!doctype html>", 15) == 0);
  WD_CHECK(a->data[a->len] == 0); /* a NUL after the bytes, not counted */
  WD_CHECK(strstr((const char *)a->data, "src=\"/app.js\"") != NULL);
  a = wd_web_find("/app.js/");
  WD_CHECK(a != NULL && strcmp(a->path, "/app.js") == 0);
  WD_CHECK_EQ_STR(a->content_type, "text/javascript; charset=utf-8");
  a = wd_web_find("/worklet.js");
  WD_CHECK(a != NULL && strstr((const char *)a->data, "registerProcessor") != NULL);
  WD_CHECK_EQ_STR(wd_web_find("/app.css")->content_type, "text/css; charset=utf-8");
  WD_CHECK(wd_web_find("") == NULL);
  WD_CHECK(wd_web_find("//") == NULL);
  WD_CHECK(wd_web_find("/app") == NULL);
  WD_CHECK(wd_web_find(NULL) == NULL);
  size_t n = 0, total = 0;
  for (const wd_web_asset_t *e = wd_web_assets; e->path; e++, n++)
    total += e->len;
  WD_CHECK_EQ_INT((int)n, 4);
  WD_CHECK(total == wd_web_total_bytes());
  WD_CHECK(total < 64 * 1024); /* one small page */
  WD_CHECK(strstr(WD_WEB_CSP, "default-src 'none'") && strstr(WD_WEB_CSP, "script-src 'self'"));
  WD_CHECK(!strstr(WD_WEB_CSP, "unsafe"));
}

WD_TEST(metrics_exposition) {
  wd_metrics_t *m = NULL;
  WD_CHECK_EQ_INT(wd_metrics_new(&m), 0);
  wd_metrics_request(m, WD_ROUTE_TRANSCRIPTIONS, 200, 0.3);
  wd_metrics_request(m, WD_ROUTE_TRANSCRIPTIONS, 200, 7.0);
  wd_metrics_request(m, WD_ROUTE_TRANSCRIPTIONS, 429, 0.001);
  wd_metrics_request(m, WD_ROUTE_OTHER, 404, 0.001);
  wd_metrics_request(m, WD_ROUTE_HEALTH, 9999, -1); /* clamped: code 0, 0 s */
  const wd_metrics_state_t st = { .ready = 1, .model_loaded = 1, .requests_active = 2 };
  wd_worker_stats_t ws = { .queued = 3, .running = 2, .queue_max = 64, .max_batch = 8,
                           .jobs_done = 5, .jobs_failed = 1, .steps = 4, .rows = 10,
                           .audio_s = 80, .decoded_s = 100, .busy_s = 12.5 };
  ws.steps_by_rows[1] = 1;
  ws.steps_by_rows[3] = 3;
  char *s = NULL;
  WD_CHECK_EQ_INT(wd_metrics_render(m, &st, &ws, NULL, 0, &s), 0);
  static const char *const want[] = {
    "# TYPE whisperd_http_requests_total counter\n",
    "whisperd_http_requests_total{route=\"transcriptions\",code=\"200\"} 2\n",
    "whisperd_http_requests_total{route=\"transcriptions\",code=\"429\"} 1\n",
    "whisperd_http_requests_total{route=\"other\",code=\"404\"} 1\n",
    "whisperd_http_requests_total{route=\"health\",code=\"0\"} 1\n",
    "whisperd_http_request_duration_seconds_bucket{route=\"transcriptions\",le=\"0.005\"} 1\n",
    "whisperd_http_request_duration_seconds_bucket{route=\"transcriptions\",le=\"0.5\"} 2\n",
    "whisperd_http_request_duration_seconds_bucket{route=\"transcriptions\",le=\"5\"} 2\n",
    "whisperd_http_request_duration_seconds_bucket{route=\"transcriptions\",le=\"10\"} 3\n",
    "whisperd_http_request_duration_seconds_bucket{route=\"transcriptions\",le=\"+Inf\"} 3\n",
    "whisperd_http_request_duration_seconds_count{route=\"transcriptions\"} 3\n",
    "whisperd_http_requests_active 2\n",
    "whisperd_queue_depth 3\n",
    "whisperd_jobs_running 2\n",
    "whisperd_jobs_total{result=\"failed\"} 1\n",
    "whisperd_engine_steps_by_rows_total{rows=\"3\"} 3\n",
    "whisperd_engine_steps_by_rows_total{rows=\"16\"} 0\n",
    "whisperd_batch_rows_mean 2.5\n",
    "whisperd_real_time_factor 0.125\n",
    "whisperd_audio_seconds_total 80\n",
    "whisperd_audio_decoded_seconds_total 100\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (!s || !strstr(s, want[i]))
      fprintf(stderr, "missing: %s", want[i]);
    WD_CHECK(s && strstr(s, want[i]) != NULL);
  }
  /* Every sample line belongs to a family announced by # TYPE before it. */
  WD_CHECK(s && strstr(s, "whisperd_http_requests_total{route=\"metrics\"") == NULL);
  free(s);
  /* Without a worker: no worker series. */
  WD_CHECK_EQ_INT(wd_metrics_render(m, NULL, NULL, NULL, 0, &s), 0);
  WD_CHECK(s && strstr(s, "whisperd_queue_depth") == NULL);
  WD_CHECK(s && strstr(s, "whisperd_ready 0\n") != NULL);
  free(s);
  wd_metrics_free(m);
  wd_metrics_free(NULL);
}

/* Per-worker series beside the summed ones: one line per worker in each
 * family, labelled worker and device (escaped), announced once by # TYPE;
 * none when no per-worker figures are given. */
WD_TEST(metrics_per_worker) {
  wd_metrics_t *m = NULL;
  WD_CHECK_EQ_INT(wd_metrics_new(&m), 0);
  const wd_metrics_state_t st = { .ready = 1, .model_loaded = 1 };
  wd_metrics_worker_t per[2] = {
    { .device = "cpu", .stats = { .queued = 1, .running = 2, .jobs_done = 7, .jobs_failed = 1,
                                  .encodes = 9, .steps = 300, .audio_s = 77, .busy_s = 4.5 } },
    { .device = "vulkan:0 \"x\"", .stats = { .running = 3, .jobs_done = 4, .device_lost = 1,
                                             .device_losses = 2 } },
  };
  wd_worker_stats_t sum = { .queued = 1, .running = 5, .jobs_done = 11, .jobs_failed = 1 };
  char *s = NULL;
  WD_CHECK_EQ_INT(wd_metrics_render(m, &st, &sum, per, 2, &s), 0);
  static const char *const want[] = {
    "whisperd_jobs_running 5\n",
    "whisperd_jobs_total{result=\"done\"} 11\n",
    "# TYPE whisperd_worker_running gauge\n"
    "whisperd_worker_running{worker=\"0\",device=\"cpu\"} 2\n"
    "whisperd_worker_running{worker=\"1\",device=\"vulkan:0 \\\"x\\\"\"} 3\n",
    "whisperd_worker_queued{worker=\"0\",device=\"cpu\"} 1\n",
    "# TYPE whisperd_worker_jobs_total counter\n",
    "whisperd_worker_jobs_total{worker=\"0\",device=\"cpu\",result=\"done\"} 7\n",
    "whisperd_worker_jobs_total{worker=\"0\",device=\"cpu\",result=\"failed\"} 1\n",
    "whisperd_worker_jobs_total{worker=\"1\",device=\"vulkan:0 \\\"x\\\"\",result=\"done\"} 4\n",
    "whisperd_worker_windows_encoded_total{worker=\"0\",device=\"cpu\"} 9\n",
    "whisperd_worker_engine_steps_total{worker=\"0\",device=\"cpu\"} 300\n",
    "whisperd_worker_audio_seconds_total{worker=\"0\",device=\"cpu\"} 77\n",
    "whisperd_worker_engine_seconds_total{worker=\"0\",device=\"cpu\"} 4.5\n",
    "whisperd_worker_device_lost{worker=\"0\",device=\"cpu\"} 0\n",
    "whisperd_worker_device_lost{worker=\"1\",device=\"vulkan:0 \\\"x\\\"\"} 1\n",
    "whisperd_worker_device_losses_total{worker=\"1\",device=\"vulkan:0 \\\"x\\\"\"} 2\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (!s || !strstr(s, want[i]))
      fprintf(stderr, "missing: %s", want[i]);
    WD_CHECK(s && strstr(s, want[i]) != NULL);
  }
  /* Each family once. */
  const char *first = s ? strstr(s, "# TYPE whisperd_worker_running ") : NULL;
  WD_CHECK(first && !strstr(first + 1, "# TYPE whisperd_worker_running "));
  free(s);
  WD_CHECK_EQ_INT(wd_metrics_render(m, &st, &sum, NULL, 0, &s), 0);
  WD_CHECK(s && strstr(s, "whisperd_worker_running") == NULL);
  WD_CHECK(s && strstr(s, "whisperd_jobs_running 5\n") != NULL);
  free(s);
  wd_metrics_free(m);
}

int main(void) { return wd_test_main(); }
