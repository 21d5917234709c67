/*
 * log.h - logging to stderr with syslog priority prefixes.
 *
 * Each line is written as "<N>message\n" where N is the syslog priority
 * (journald strips the prefix and records the priority) when stderr is the
 * journal's stream, and as "level: message" everywhere else (a terminal, a
 * file, docker logs, a pipe): daemon/main.c picks the style with
 * wd_log_stderr_is_journal(). One process-wide
 * threshold decides what is written; it is set once at start-up by the daemon
 * and read with relaxed atomics elsewhere, so logging is thread-safe.
 *
 * Rules (CONVENTIONS.md 5): only daemon/ and api/ log at INFO or above; core/
 * and gpu/ return error codes and log at DEBUG.
 */
#ifndef WD_LOG_H
#define WD_LOG_H

#include <stdarg.h>

/* The values are syslog's LOG_* priorities. */
typedef enum {
  WD_LOG_ERR = 3,
  WD_LOG_WARNING = 4,
  WD_LOG_NOTICE = 5,
  WD_LOG_INFO = 6,
  WD_LOG_DEBUG = 7,
} wd_log_level_t;

typedef enum {
  WD_LOG_STYLE_SYSLOG = 0, /* "<6>message" for journald */
  WD_LOG_STYLE_PLAIN = 1,  /* "info: message" for a terminal */
} wd_log_style_t;

void wd_log_set_level(wd_log_level_t level);
wd_log_level_t wd_log_get_level(void);
void wd_log_set_style(wd_log_style_t style);

/* Whether stderr is the journal's stream (JOURNAL_STREAM names it): the
 * only place "<N>" prefixes are read rather than shown. */
int wd_log_stderr_is_journal(void);

/* Parses "err", "warning", "notice", "info", "debug" (or "0".."7"). */
int wd_log_level_parse(const char *s, wd_log_level_t *ret_level);
const char *wd_log_level_name(wd_log_level_t level);

/* Writes one line; a trailing newline is added. Returns nothing so that it can
 * be used inside "log and return" statements through the macros below. */
void wd_log(wd_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void wd_logv(wd_log_level_t level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Log and return err in one statement: `return wd_log_err(r, "...", ...)`. */
#define wd_log_errc(err, level, ...) (wd_log((level), __VA_ARGS__), (err))

#define wd_log_error(...)   wd_log(WD_LOG_ERR, __VA_ARGS__)
#define wd_log_warning(...) wd_log(WD_LOG_WARNING, __VA_ARGS__)
#define wd_log_notice(...)  wd_log(WD_LOG_NOTICE, __VA_ARGS__)
#define wd_log_info(...)    wd_log(WD_LOG_INFO, __VA_ARGS__)
#define wd_log_debug(...)   wd_log(WD_LOG_DEBUG, __VA_ARGS__)

#endif
