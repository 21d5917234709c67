/*
 * web.h - the daemon's own page (GET /): its assets, embedded in the binary
 * at build time from api/web/ (cmake/embed_web.cmake), and the headers they
 * are served with.
 */
#ifndef WD_WEB_H
#define WD_WEB_H

#include <stddef.h>

typedef struct {
  const char *path;         /* URL path: "/", "/app.js", ... */
  const char *content_type; /* with its charset */
  const unsigned char *data;
  size_t len;
} wd_web_asset_t;

/* The table, ended by an entry whose path is NULL (generated). */
extern const wd_web_asset_t wd_web_assets[];

/* The asset served at path (one trailing slash tolerated, as routes are),
 * or NULL. */
const wd_web_asset_t *wd_web_find(const char *path);

/* Bytes of all assets together. */
size_t wd_web_total_bytes(void);

/* The Content-Security-Policy every asset is served with: nothing but the
 * daemon itself, no inline script or style. */
#define WD_WEB_CSP                                                                              \
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "            \
  "connect-src 'self' ws: wss:; media-src 'self' blob:; worker-src 'self'; base-uri 'none'; " \
  "form-action 'none'; frame-ancestors 'none'"

#endif
