/*
 * route.h - the server's URL table: which route a method and path select,
 * and what a wrong method may use instead (for 405's Allow header).
 *
 * Paths are matched exactly, after MHD has split off the query string and
 * unescaped them; one trailing slash is tolerated ("/v1/models/"). Pure and
 * thread-safe.
 */
#ifndef WD_ROUTE_H
#define WD_ROUTE_H

typedef enum {
  WD_ROUTE_TRANSCRIPTIONS = 0, /* POST /v1/audio/transcriptions */
  WD_ROUTE_TRANSLATIONS,       /* POST /v1/audio/translations */
  WD_ROUTE_MODELS,             /* GET /v1/models and /v1/models/{id} */
  WD_ROUTE_HEALTH,             /* GET /health */
  WD_ROUTE_READY,              /* GET /ready */
  WD_ROUTE_METRICS,            /* GET /metrics */
  WD_ROUTE_REALTIME,           /* GET /v1/realtime (WebSocket) */
  WD_ROUTE_WEB,                /* GET /, /app.js, ...: the page (api/web.h) */
  WD_ROUTE_OTHER,              /* no route (404): one metrics label for all */
  WD_ROUTE_COUNT
} wd_route_t;

/*
 * Looks up method + path. Returns 200 with *ret set, 404 (*ret =
 * WD_ROUTE_OTHER), or 405 with *ret set and *ret_allow the allowed methods
 * ("POST" or "GET, HEAD"). For /v1/models/{id}, *ret_id points at the id
 * inside path (NULL for the list); ret_id may be NULL.
 */
int wd_route_match(const char *method, const char *path, wd_route_t *ret, const char **ret_allow,
                   const char **ret_id);

/* The metrics label of a route ("transcriptions", ..., "other"). */
const char *wd_route_name(wd_route_t r);

/* 1 when the path is under /v1/ (the routes that need the API key). */
int wd_route_needs_auth(const char *path);

#endif
