/*
 * api_error.c - OpenAI error bodies and the mapping of internal failures to
 * HTTP statuses at the API boundary (see api_error.h).
 */
#include "api_error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "render.h"

/* The formats OpenAI names in its "Invalid file format" message. */
#define WD_API_FORMATS "['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']"

static const char *type_for_status(int status) {
  if (status == 429)
    return "rate_limit_error";
  return status >= 500 ? "server_error" : "invalid_request_error";
}

int wd_api_error_set(wd_api_error_t *e, int status, const char *param, const char *code,
                     const char *fmt, ...) {
  e->status = status;
  e->type = type_for_status(status);
  e->param = param;
  e->code = code;
  e->retry_after_s = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return status;
}

void wd_api_error_from_audio(wd_api_error_t *e, int rc, const char *detail, int max_audio_s) {
  const char *d = detail && detail[0] ? detail : wd_strerror(rc);
  switch (rc) {
  case WD_ETOOBIG:
    wd_api_error_set(e, 400, "file", "audio_too_long",
                     "Audio file is too long: this server accepts up to %d seconds (%s).",
                     max_audio_s, d);
    break;
  case WD_EAUDIO:
  case WD_EFORMAT:
  case WD_ETRUNC:
  case WD_EUNSUP:
  case WD_EINVAL: /* an empty file reaches the decoder as a bad argument */
    wd_api_error_set(e, 400, "file", "invalid_file_format",
                     "Invalid file format. Supported formats: " WD_API_FORMATS " (%s)", d);
    break;
  case WD_ENOMEM:
    wd_api_error_set(e, 500, NULL, NULL, "The server ran out of memory decoding the audio.");
    break;
  case WD_ETIMEDOUT: /* --decode-timeout: a file that takes this long is damaged or hostile */
    wd_api_error_set(e, 400, "file", "audio_decode_timeout",
                     "The audio file took too long to decode (%s). It may be damaged; "
                     "re-encoding it (for example as 16 kHz WAV) usually helps.", d);
    break;
  default:
    wd_api_error_set(e, 500, NULL, NULL, "Internal error decoding the audio (%s).",
                     wd_err_name(rc));
    break;
  }
}

void wd_api_error_from_job(wd_api_error_t *e, int rc, int when_submitting, double timeout_s,
                           int retry_after_s) {
  switch (rc) {
  case WD_EBUSY:
    wd_api_error_set(e, 429, NULL, "rate_limit_exceeded",
                     "The server is busy: its job queue is full or its audio budget is spent. Retry after %d s.",
                     retry_after_s > 0 ? retry_after_s : 1);
    e->retry_after_s = retry_after_s > 0 ? retry_after_s : 1;
    break;
  case WD_ESHUTDOWN:
    wd_api_error_set(e, 503, NULL, "shutting_down", "The server is shutting down.");
    e->retry_after_s = retry_after_s > 0 ? retry_after_s : 1;
    break;
  case WD_ETIMEDOUT:
    wd_api_error_set(e, 504, NULL, "timeout",
                     "The transcription did not finish within %.0f seconds.", timeout_s);
    break;
  case WD_ECANCELED:
    wd_api_error_set(e, 499, NULL, "canceled", "The request was canceled.");
    break;
  case WD_EDEVLOST:
  case WD_ENODEVICE:
    wd_api_error_set(e, 503, NULL, "device_unavailable",
                     "The inference device is unavailable (%s).", wd_strerror(rc));
    e->retry_after_s = retry_after_s > 0 ? retry_after_s : 1;
    break;
  default:
    if (when_submitting && (rc == WD_EINVAL || rc == WD_EUNSUP))
      /* The request was validated; the worker still found an option this
       * model cannot honour. It is about the request, so 4xx. During a job
       * the same codes are internal failures. */
      wd_api_error_set(e, 400, NULL, NULL,
                       "The requested decoding options are not supported by this model.");
    else if (rc == WD_ENOMEM)
      wd_api_error_set(e, 500, NULL, NULL, "The server ran out of memory.");
    else
      wd_api_error_set(e, 500, NULL, NULL, "Internal error during transcription (%s: %s).",
                       wd_err_name(rc), wd_strerror(rc));
    break;
  }
}

char *wd_api_error_json(const wd_api_error_t *e) {
  /* Messages quote user input (a model name), which may not be UTF-8. */
  char *msg = wd_render_utf8_dup(e->message, strlen(e->message));
  if (!msg)
    return NULL;
  json_t *j = json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", msg, "type",
                        e->type ? e->type : "server_error", "param", e->param, "code", e->code);
  free(msg);
  if (!j)
    return NULL;
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  return s;
}
