/*
 * realtime_event.c - Realtime client events and the session's configuration
 * (see realtime_event.h).
 */
#include "realtime_event.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "error.h"
#include "languages.h"

void wd_rt_config_default(wd_rt_config_t *c) {
  *c = (wd_rt_config_t){ .format = WD_RT_PCM24, .vad = 1, .threshold = 0.5f,
                         .prefix_padding_ms = 300, .silence_duration_ms = 500 };
  snprintf(c->model, sizeof c->model, "whisper-1");
}

void wd_rt_config_free(wd_rt_config_t *c) {
  free(c->prompt);
  c->prompt = NULL;
}

int wd_rt_format_rate(wd_rt_format_t f) { return f == WD_RT_PCM24 ? 24000 : 8000; }

static const char *const FORMATS[] = { "audio/pcm", "audio/pcmu", "audio/pcma" };

json_t *wd_rt_config_json(const wd_rt_config_t *c) {
  json_t *fmt = c->format == WD_RT_PCM24
                    ? json_pack("{s:s, s:i}", "type", FORMATS[0], "rate", 24000)
                    : json_pack("{s:s}", "type", FORMATS[c->format]);
  json_t *tr = json_pack("{s:s}", "model", c->model);
  if (tr && c->language[0])
    json_object_set_new(tr, "language", json_string(c->language));
  if (tr && c->prompt)
    json_object_set_new(tr, "prompt", json_string(c->prompt));
  json_t *td = c->vad ? json_pack("{s:s, s:f, s:i, s:i}", "type", "server_vad", "threshold",
                                  (double)c->threshold, "prefix_padding_ms", c->prefix_padding_ms,
                                  "silence_duration_ms", c->silence_duration_ms)
                      : json_null();
  json_t *inc = json_array();
  if (inc && c->logprobs)
    json_array_append_new(inc, json_string("item.input_audio_transcription.logprobs"));
  return json_pack("{s:s, s:s, s:{s:{s:o, s:o, s:o, s:n}}, s:o}", "type", "transcription",
                   "object", "realtime.transcription_session", "audio", "input", "format", fmt,
                   "transcription", tr, "turn_detection", td, "noise_reduction", "include", inc);
}

/* ---- events ------------------------------------------------------------ */

static int fail(wd_rt_error_t *err, int rc, const char *code, const char *param, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));

static int fail(wd_rt_error_t *err, int rc, const char *code, const char *param, const char *fmt,
                ...) {
  err->code = code;
  err->param = param;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return rc;
}

/* The bytes of s's longest prefix of at most max bytes that ends at a
 * character boundary (s is UTF-8, as jansson gives it): an echo cut there
 * stays valid UTF-8, which jansson needs to send it at all. */
static int utf8_prefix(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n > max) {
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) /* s[n] continues a character */
      n--;
  }
  return (int)n;
}

/* A string member, or NULL when absent; *bad when present and not a string. */
static const char *str_of(json_t *o, const char *key, int *bad) {
  json_t *v = json_object_get(o, key);
  if (v && !json_is_string(v) && !json_is_null(v))
    *bad = 1;
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static int turn_detection(json_t *td, wd_rt_config_t *c, wd_rt_error_t *err) {
  static const char P[] = "session.audio.input.turn_detection";
  if (json_is_null(td)) {
    c->vad = 0;
    return 0;
  }
  int bad = 0;
  const char *type = json_is_object(td) ? str_of(td, "type", &bad) : NULL;
  if (!type || bad || (strcmp(type, "server_vad") != 0 && strcmp(type, "semantic_vad") != 0))
    return fail(err, WD_EINVAL, "invalid_value", P,
                "turn_detection must be null, {\"type\": \"server_vad\", ...} or semantic_vad.");
  c->vad = 1;
  if (strcmp(type, "semantic_vad") == 0) { /* eagerness has no meaning here: server_vad's defaults */
    c->threshold = 0.5f, c->prefix_padding_ms = 300, c->silence_duration_ms = 500;
    return 0;
  }
  json_t *t = json_object_get(td, "threshold"), *pp = json_object_get(td, "prefix_padding_ms"),
         *sd = json_object_get(td, "silence_duration_ms");
  if (t && !json_is_null(t)) {
    const double v = json_number_value(t);
    if (!json_is_number(t) || !(v >= 0.0 && v <= 1.0))
      return fail(err, WD_EINVAL, "invalid_value", P, "threshold must be a number in [0, 1].");
    c->threshold = (float)v;
  }
  if (pp && !json_is_null(pp)) {
    if (!json_is_integer(pp) || json_integer_value(pp) < 0 || json_integer_value(pp) > 10000)
      return fail(err, WD_EINVAL, "invalid_value", P,
                  "prefix_padding_ms must be an integer of 0 to 10000.");
    c->prefix_padding_ms = (int)json_integer_value(pp);
  }
  if (sd && !json_is_null(sd)) {
    if (!json_is_integer(sd) || json_integer_value(sd) < 32 || json_integer_value(sd) > 10000)
      return fail(err, WD_EINVAL, "invalid_value", P,
                  "silence_duration_ms must be an integer of 32 to 10000.");
    c->silence_duration_ms = (int)json_integer_value(sd);
  }
  return 0;
}

/* session.update's session onto c (a copy of the current one). */
static int session_update(json_t *s, wd_rt_config_t *c, wd_rt_error_t *err) {
  int bad = 0;
  if (!json_is_object(s))
    return fail(err, WD_EINVAL, "missing_required_parameter", "session",
                "session.update needs a `session` object.");
  const char *type = str_of(s, "type", &bad);
  if (bad || (type && strcmp(type, "transcription") != 0))
    return fail(err, WD_EUNSUP, "unsupported_value", "session.type",
                "This server runs transcription sessions only (session.type \"transcription\", "
                "?intent=transcription).");
  json_t *in = json_object_get(json_object_get(s, "audio"), "input");
  if (json_object_get(s, "audio") && !json_is_object(json_object_get(s, "audio")))
    return fail(err, WD_EINVAL, "invalid_type", "session.audio", "audio must be an object.");
  if (in && !json_is_object(in))
    return fail(err, WD_EINVAL, "invalid_type", "session.audio.input", "input must be an object.");
  json_t *fmt = json_object_get(in, "format");
  if (fmt) {
    const char *ft = json_is_object(fmt) ? str_of(fmt, "type", &bad) : NULL;
    json_t *rate = json_object_get(fmt, "rate");
    int f = -1;
    for (int i = 0; ft && i < 3; i++)
      if (strcmp(ft, FORMATS[i]) == 0)
        f = i;
    if (f < 0 || bad)
      return fail(err, WD_EUNSUP, "invalid_value", "session.audio.input.format.type",
                  "format.type must be audio/pcm, audio/pcmu or audio/pcma.");
    if (f == WD_RT_PCM24 && rate && !json_is_null(rate) &&
        !(json_is_integer(rate) && json_integer_value(rate) == 24000))
      return fail(err, WD_EUNSUP, "invalid_value", "session.audio.input.format.rate",
                  "audio/pcm is 24000 Hz only.");
    c->format = (wd_rt_format_t)f;
  }
  json_t *tr = json_object_get(in, "transcription");
  if (tr && !json_is_null(tr)) {
    if (!json_is_object(tr))
      return fail(err, WD_EINVAL, "invalid_type", "session.audio.input.transcription",
                  "transcription must be an object.");
    const char *model = str_of(tr, "model", &bad), *lang = str_of(tr, "language", &bad),
               *prompt = str_of(tr, "prompt", &bad);
    if (bad)
      return fail(err, WD_EINVAL, "invalid_type", "session.audio.input.transcription",
                  "model, language and prompt must be strings.");
    if (model) {
      if (!model[0] || strlen(model) >= sizeof c->model)
        return fail(err, WD_EINVAL, "invalid_value", "session.audio.input.transcription.model",
                    "The model name is empty or too long.");
      snprintf(c->model, sizeof c->model, "%s", model);
    }
    if (lang && lang[0]) { /* "" (or null): detected */
      const int idx = wd_languages_index(lang);
      if (idx < 0)
        return fail(err, WD_EINVAL, "invalid_value", "session.audio.input.transcription.language",
                    "Invalid language '%.*s': language must be an ISO-639-1 code Whisper "
                    "knows (such as \"en\", \"fr\", \"ja\").", utf8_prefix(lang, 32), lang);
      snprintf(c->language, sizeof c->language, "%s", wd_languages_code(idx));
    } else if (lang) {
      c->language[0] = 0;
    }
    if (json_object_get(tr, "prompt")) {
      free(c->prompt);
      c->prompt = prompt && prompt[0] ? strdup(prompt) : NULL;
      if (prompt && prompt[0] && !c->prompt)
        return fail(err, WD_ENOMEM, NULL, NULL, "Out of memory.");
    }
  }
  json_t *td = json_object_get(in, "turn_detection");
  if (td) {
    const int rc = turn_detection(td, c, err);
    if (rc < 0)
      return rc;
  }
  json_t *nr = json_object_get(in, "noise_reduction");
  if (nr)
    c->noise_reduction = !json_is_null(nr);
  json_t *inc = json_object_get(s, "include");
  if (inc && !json_is_null(inc)) {
    if (!json_is_array(inc))
      return fail(err, WD_EINVAL, "invalid_type", "session.include", "include must be an array.");
    c->logprobs = 0;
    size_t i;
    json_t *v;
    json_array_foreach(inc, i, v) {
      if (json_is_string(v) &&
          strcmp(json_string_value(v), "item.input_audio_transcription.logprobs") == 0)
        c->logprobs = 1;
      else
        return fail(err, WD_EUNSUP, "invalid_value", "session.include",
                    "include may hold \"item.input_audio_transcription.logprobs\" only.");
    }
  }
  return 0;
}

int wd_rt_event_parse(const char *json, size_t n, const wd_rt_config_t *cur, wd_rt_event_t *ev,
                      wd_rt_error_t *err) {
  memset(ev, 0, sizeof *ev);
  json_error_t je;
  json_t *root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(root)) {
    json_decref(root);
    return fail(err, WD_EFORMAT, "invalid_json", NULL,
                "The message is not a JSON object: %s.", root ? "another JSON value" : je.text);
  }
  int bad = 0, rc = 0;
  const char *id = str_of(root, "event_id", &bad), *type = str_of(root, "type", &bad);
  if (id)
    snprintf(ev->event_id, sizeof ev->event_id, "%.*s", utf8_prefix(id, sizeof ev->event_id - 1),
             id);
  if (!type || bad) {
    rc = fail(err, WD_EINVAL, "missing_required_parameter", "type",
              "Every client event needs a string `type`.");
  } else if (strcmp(type, "session.update") == 0) {
    ev->type = WD_RT_SESSION_UPDATE;
    ev->cfg = *cur;
    ev->cfg.prompt = cur->prompt ? strdup(cur->prompt) : NULL;
    if (cur->prompt && !ev->cfg.prompt)
      rc = fail(err, WD_ENOMEM, NULL, NULL, "Out of memory.");
    else
      rc = session_update(json_object_get(root, "session"), &ev->cfg, err);
  } else if (strcmp(type, "input_audio_buffer.append") == 0) {
    ev->type = WD_RT_APPEND;
    const char *a = str_of(root, "audio", &bad);
    const size_t len = a ? strlen(a) : 0;
    if (!a || bad)
      rc = fail(err, WD_EINVAL, "missing_required_parameter", "audio",
                "input_audio_buffer.append needs `audio`, base64 of the session's format.");
    else if (!(ev->audio = malloc(WD_BASE64_DECODED_MAX(len))))
      rc = fail(err, WD_ENOMEM, NULL, NULL, "Out of memory.");
    else if (wd_base64_decode(a, len, WD_BASE64_PADDED, ev->audio, &ev->audio_len) < 0)
      rc = fail(err, WD_EINVAL, "invalid_value", "audio", "`audio` is not valid base64.");
  } else if (strcmp(type, "input_audio_buffer.commit") == 0) {
    ev->type = WD_RT_COMMIT;
  } else if (strcmp(type, "input_audio_buffer.clear") == 0) {
    ev->type = WD_RT_CLEAR;
  } else {
    rc = fail(err, WD_EUNSUP, "invalid_event", "type",
              "This server does not handle client events of type `%.*s` in a transcription "
              "session.", utf8_prefix(type, 64), type);
  }
  json_decref(root);
  if (rc < 0) {
    char keep[sizeof ev->event_id];
    memcpy(keep, ev->event_id, sizeof keep);
    wd_rt_event_clear(ev);
    memcpy(ev->event_id, keep, sizeof keep);
  }
  return rc;
}

void wd_rt_event_clear(wd_rt_event_t *ev) {
  free(ev->audio);
  if (ev->type == WD_RT_SESSION_UPDATE)
    wd_rt_config_free(&ev->cfg);
  memset(ev, 0, sizeof *ev);
}
