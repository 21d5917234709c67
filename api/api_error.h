/*
 * api_error.h - an OpenAI-style API error: HTTP status plus the body
 * {"error":{"message","type","param","code"}}.
 *
 * This is the API boundary for error codes. Internal WD_E* codes mean
 * different things in different places (WD_ENOENT is "no such model file"
 * in core/, WD_EINVAL "bad argument"), so nothing here maps a code through
 * wd_err_http_status() blindly: each source of failure (the audio decoder,
 * the worker, the server itself) has its own function that decides which
 * failures are the client's (4xx) and which are ours (5xx).
 *
 * Pure functions; the struct is a plain value the caller owns.
 */
#ifndef WD_API_ERROR_H
#define WD_API_ERROR_H

#include <stddef.h>

typedef struct {
  int status;              /* HTTP status, 400..599 (499: the client went away) */
  const char *type;        /* "invalid_request_error", "server_error", ... (static) */
  const char *param;       /* the offending form field, or NULL (static) */
  const char *code;        /* machine-readable code, or NULL (static) */
  int retry_after_s;       /* > 0: send Retry-After with this many seconds */
  char message[512];
} wd_api_error_t;

/* Fills e. type follows status: 429 "rate_limit_error", other 4xx
 * "invalid_request_error", 5xx "server_error". param and code must be
 * static strings (or NULL). Returns status, so handlers can
 * `return wd_api_error_set(...)`. */
int wd_api_error_set(wd_api_error_t *e, int status, const char *param, const char *code,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * A failure of wd_audio_decode() on the uploaded file. WD_EAUDIO and other
 * content errors become OpenAI's 400 "Invalid file format" with the
 * decoder's detail appended; WD_ETOOBIG becomes 400 for audio longer than
 * max_audio_s; WD_ETIMEDOUT (past --decode-timeout) becomes 400
 * "audio_decode_timeout"; WD_ENOMEM and anything unexpected 500.
 */
void wd_api_error_from_audio(wd_api_error_t *e, int rc, const char *detail, int max_audio_s);

/*
 * A job that wd_worker_submit() refused (when_submitting = 1) or that ended
 * with rc < 0 in on_done (when_submitting = 0): WD_EBUSY 429, WD_ESHUTDOWN
 * 503, WD_ETIMEDOUT 504, WD_ECANCELED 499, device loss 503, bad options at
 * submit 400, WD_ENOMEM and everything else 500. timeout_s is named in the
 * 504 message. retry_after_s is used for 429 and 503.
 */
void wd_api_error_from_job(wd_api_error_t *e, int rc, int when_submitting, double timeout_s,
                           int retry_after_s);

/* The JSON body, malloc'd (NULL on allocation failure). */
char *wd_api_error_json(const wd_api_error_t *e);

#endif
