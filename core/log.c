/*
 * log.c - stderr logging with syslog priority prefixes (see log.h).
 *
 * A line is formatted into a stack buffer and written with one write(2) call,
 * so concurrent lines from different threads do not interleave.
 */
#include "log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static _Atomic int wd_log_level = WD_LOG_INFO;
static _Atomic int wd_log_style = WD_LOG_STYLE_SYSLOG;

static const char *const wd_log_names[8] = {
  "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
};

void wd_log_set_level(wd_log_level_t level) {
  atomic_store_explicit(&wd_log_level, (int)level, memory_order_relaxed);
}

wd_log_level_t wd_log_get_level(void) {
  return (wd_log_level_t)atomic_load_explicit(&wd_log_level, memory_order_relaxed);
}

void wd_log_set_style(wd_log_style_t style) {
  atomic_store_explicit(&wd_log_style, (int)style, memory_order_relaxed);
}

int wd_log_stderr_is_journal(void) {
  /* systemd sets JOURNAL_STREAM to "device:inode" of the stream it connected
   * to the journal; stderr is that stream only when they match (a child
   * whose stderr was redirected inherits the variable, not the stream). */
  const char *e = getenv("JOURNAL_STREAM");
  unsigned long long dev = 0, ino = 0;
  char extra;
  struct stat st;
  if (!e || sscanf(e, "%llu:%llu%c", &dev, &ino, &extra) != 2 ||
      fstat(STDERR_FILENO, &st) != 0)
    return 0;
  return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

const char *wd_log_level_name(wd_log_level_t level) {
  return (level >= 0 && level <= 7) ? wd_log_names[level] : "unknown";
}

int wd_log_level_parse(const char *s, wd_log_level_t *ret_level) {
  if (!s || !*s)
    return -1;
  if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0') {
    int v = s[0] - '0';
    *ret_level = (wd_log_level_t)(v < WD_LOG_ERR ? WD_LOG_ERR : v);
    return 0;
  }
  for (int i = WD_LOG_ERR; i <= WD_LOG_DEBUG; i++) {
    if (strcmp(s, wd_log_names[i]) == 0) {
      *ret_level = (wd_log_level_t)i;
      return 0;
    }
  }
  if (strcmp(s, "error") == 0) {
    *ret_level = WD_LOG_ERR;
    return 0;
  }
  if (strcmp(s, "warn") == 0) {
    *ret_level = WD_LOG_WARNING;
    return 0;
  }
  return -1;
}

void wd_logv(wd_log_level_t level, const char *fmt, va_list ap) {
  if ((int)level > atomic_load_explicit(&wd_log_level, memory_order_relaxed))
    return;
  char buf[2048];
  int n;
  if (atomic_load_explicit(&wd_log_style, memory_order_relaxed) == WD_LOG_STYLE_SYSLOG)
    n = snprintf(buf, sizeof buf, "<%d>", (int)level);
  else
    n = snprintf(buf, sizeof buf, "%s: ", wd_log_level_name(level));
  if (n < 0)
    return;
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  if (m < 0)
    return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof buf - 2) /* truncated: keep room for the newline */
    len = sizeof buf - 2;
  buf[len++] = '\n';
  /* One write per line; a short write to stderr is not worth retrying. */
  ssize_t w = write(STDERR_FILENO, buf, len);
  (void)w;
}

void wd_log(wd_log_level_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  wd_logv(level, fmt, ap);
  va_end(ap);
}
