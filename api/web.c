/*
 * web.c - the embedded page's lookup (see web.h).
 */
#include "web.h"

#include <string.h>

const wd_web_asset_t *wd_web_find(const char *path) {
  if (!path)
    return NULL;
  for (const wd_web_asset_t *a = wd_web_assets; a->path; a++) {
    const size_t n = strlen(a->path);
    if (strncmp(path, a->path, n) == 0 &&
        (path[n] == '\0' || (n > 1 && path[n] == '/' && path[n + 1] == '\0')))
      return a;
  }
  return NULL;
}

size_t wd_web_total_bytes(void) {
  size_t n = 0;
  for (const wd_web_asset_t *a = wd_web_assets; a->path; a++)
    n += a->len;
  return n;
}
