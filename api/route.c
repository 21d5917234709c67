/*
 * route.c - the URL table (see route.h).
 */
#include "route.h"

#include <string.h>

#include "web.h"

typedef struct {
  const char *path;
  wd_route_t route;
  int post;          /* POST only; otherwise GET and HEAD */
} wd_route_row_t;

static const wd_route_row_t wd_routes[] = {
  { "/v1/audio/transcriptions", WD_ROUTE_TRANSCRIPTIONS, 1 },
  { "/v1/audio/translations", WD_ROUTE_TRANSLATIONS, 1 },
  { "/v1/models", WD_ROUTE_MODELS, 0 },
  { "/health", WD_ROUTE_HEALTH, 0 },
  { "/ready", WD_ROUTE_READY, 0 },
  { "/metrics", WD_ROUTE_METRICS, 0 },
  { "/v1/realtime", WD_ROUTE_REALTIME, 0 },
};

static const char *const wd_route_names[WD_ROUTE_COUNT] = {
  "transcriptions", "translations", "models", "health", "ready", "metrics", "realtime", "web",
  "other",
};

const char *wd_route_name(wd_route_t r) {
  return (r >= 0 && r < WD_ROUTE_COUNT) ? wd_route_names[r] : "other";
}

int wd_route_needs_auth(const char *path) { return path && strncmp(path, "/v1/", 4) == 0; }

/* path equals want, optionally followed by one '/'. */
static int path_is(const char *path, const char *want) {
  const size_t n = strlen(want);
  return strncmp(path, want, n) == 0 && (path[n] == '\0' || (path[n] == '/' && path[n + 1] == '\0'));
}

int wd_route_match(const char *method, const char *path, wd_route_t *ret, const char **ret_allow,
                   const char **ret_id) {
  *ret = WD_ROUTE_OTHER;
  *ret_allow = NULL;
  if (ret_id)
    *ret_id = NULL;
  if (!method || !path)
    return 404;
  const wd_route_row_t *row = NULL;
  for (size_t i = 0; i < sizeof wd_routes / sizeof wd_routes[0] && !row; i++)
    if (path_is(path, wd_routes[i].path))
      row = &wd_routes[i];
  /* /v1/models/{id}: one model object; the id may itself contain '/'. */
  static const char prefix[] = "/v1/models/";
  if (!row && strncmp(path, prefix, sizeof prefix - 1) == 0 && path[sizeof prefix - 1] != '\0') {
    row = &wd_routes[2];
    if (ret_id)
      *ret_id = path + sizeof prefix - 1;
  }
  /* the page's assets (api/web.h; whether it is on is the server's call) */
  static const wd_route_row_t web = { "/", WD_ROUTE_WEB, 0 };
  if (!row && wd_web_find(path))
    row = &web;
  if (!row)
    return 404;
  *ret = row->route;
  const int ok = row->post ? strcmp(method, "POST") == 0
                           : (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0);
  if (ok)
    return 200;
  *ret_allow = row->post ? "POST" : "GET, HEAD";
  return 405;
}
