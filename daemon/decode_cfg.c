/*
 * decode_cfg.c - the decoding options of the configuration (see
 * decode_cfg.h).
 */
#include "decode_cfg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "languages.h"

/* A float option's text; WD_ECONFIG unless all of it is a number. */
static int parse_float(const char *key, const char *text, float *ret, char *err,
                       size_t err_len) {
  char *end = NULL;
  const double v = strtod(text, &end);
  if (end == text || *end != '\0' || !isfinite(v)) {
    snprintf(err, err_len, "%s: '%s' is not a number", key, text);
    return WD_ECONFIG;
  }
  *ret = (float)v;
  return 0;
}

/* "start,end,..." seconds into clips; WD_ECONFIG on anything else. */
static int parse_clips(const char *text, float *clips, int max, int *ret_n, char *err,
                       size_t err_len) {
  int n = 0;
  const char *p = text;
  while (*p) {
    char *end = NULL;
    const double v = strtod(p, &end);
    if (end == p || !isfinite(v) || v < 0 || n == max || (*end != ',' && *end != '\0')) {
      snprintf(err, err_len,
               "clip-timestamps: '%s' is not a list of at most %d times in seconds (start,end,...)",
               text, max);
      return WD_ECONFIG;
    }
    clips[n++] = (float)v;
    p = *end == ',' ? end + 1 : end;
  }
  *ret_n = n;
  return 0;
}

int wd_decode_cfg(const wd_config_t *cfg, wd_decode_opts_t *o, float *clips, int max_clips,
                  char *err, size_t err_len) {
  wd_decode_opts_default(o);
  const char *lang = cfg->language;
  if (lang && lang[0] && strcmp(lang, "auto") != 0) {
    const int i = wd_languages_find(lang);
    if (i < 0) {
      snprintf(err, err_len,
               "language: '%s' is not a language Whisper knows (an ISO 639-1 code such as "
               "en or de, a name such as german, or auto)",
               lang);
      return WD_ECONFIG;
    }
    o->language = wd_languages_code(i);
  }
  o->translate = cfg->task && strcmp(cfg->task, "translate") == 0;
  o->beam_size = cfg->beam_size;
  o->best_of = cfg->best_of;
  o->without_timestamps = !cfg->timestamps;
  o->condition_on_previous_text = cfg->condition;
  o->word_timestamps = cfg->word_timestamps;
  o->seed = (uint64_t)cfg->seed;
  o->carry_initial_prompt = cfg->carry_prompt;
  float t = 0.0f, inc = o->temperature_inc;
  int rc = parse_float("temperature", cfg->temperature ? cfg->temperature : "0", &t, err,
                       err_len);
  if (rc == 0 && cfg->temperature_inc)
    rc = parse_float("temperature-inc", cfg->temperature_inc, &inc, err, err_len);
  o->temperature_inc = inc;
  if (rc == 0 && cfg->hallucination_silence && cfg->hallucination_silence[0]) {
    float h = 0.0f;
    rc = parse_float("hallucination-silence", cfg->hallucination_silence, &h, err, err_len);
    if (rc == 0 && (!cfg->word_timestamps || h < 0.0f)) {
      snprintf(err, err_len, "hallucination-silence needs --word-timestamps and a value >= 0");
      rc = WD_ECONFIG;
    }
    o->hallucination_silence_threshold = h;
  }
  if (rc == 0 && cfg->patience && cfg->patience[0]) {
    rc = parse_float("patience", cfg->patience, &o->patience, err, err_len);
    if (rc == 0 && (o->beam_size <= 1 || !(o->patience > 0.0f && o->patience <= 2.0f))) {
      snprintf(err, err_len, "patience needs --beam-size above 1 and a value in (0, 2]");
      rc = WD_ECONFIG;
    }
  }
  if (rc == 0 && cfg->length_penalty && cfg->length_penalty[0]) {
    rc = parse_float("length-penalty", cfg->length_penalty, &o->length_penalty, err, err_len);
    if (rc == 0 && !(o->length_penalty >= 0.0f && o->length_penalty <= 1.0f)) {
      snprintf(err, err_len, "length-penalty must be within 0..1");
      rc = WD_ECONFIG;
    }
  }
  if (rc == 0 && cfg->clip_timestamps && cfg->clip_timestamps[0]) {
    rc = parse_clips(cfg->clip_timestamps, clips, max_clips, &o->n_clips, err, err_len);
    o->clips = clips;
  }
  const int trc = rc == 0 ? wd_decode_set_temperature(o, t, inc) : 0;
  if (trc == WD_ERANGE) {
    snprintf(err, err_len,
             "temperature %g with temperature-inc %g is a schedule of more than %d temperatures "
             "(each a whole new decode of a failing window): raise temperature-inc to at least "
             "%.4g",
             (double)t, (double)inc, WD_DECODE_MAX_TEMPS,
             (1.0 - (double)t) / (WD_DECODE_MAX_TEMPS - 1) + 1e-4);
    rc = WD_ECONFIG;
  } else if (trc < 0) {
    snprintf(err, err_len, "temperature must be within 0..1 and temperature-inc at most 1");
    rc = WD_ECONFIG;
  }
  if (rc == 0 && o->best_of > 1 && !(o->temperatures[o->n_temperatures - 1] > 0.0f)) {
    snprintf(err, err_len, "best-of samples above temperature 0: set temperature or "
                           "temperature-inc above 0");
    rc = WD_ECONFIG;
  }
  return rc;
}

int wd_vad_cfg(const wd_config_t *cfg, wd_vad_params_t *p, char *err, size_t err_len) {
  wd_vad_params_default(p);
  int rc = parse_float("vad-threshold", cfg->vad_threshold ? cfg->vad_threshold : "0.5",
                       &p->threshold, err, err_len);
  if (!rc)
    rc = parse_float("vad-max-speech-s", cfg->vad_max_speech_s ? cfg->vad_max_speech_s : "0",
                     &p->max_speech_s, err, err_len);
  if (!rc && (p->threshold <= 0.0f || p->threshold >= 1.0f)) {
    snprintf(err, err_len, "vad-threshold: %g is not between 0 and 1", (double)p->threshold);
    rc = WD_ECONFIG;
  }
  if (!rc && (p->max_speech_s < 0.0f || (p->max_speech_s > 0.0f && p->max_speech_s < 1.0f))) {
    snprintf(err, err_len, "vad-max-speech-s: %g is neither 0 (no limit) nor at least 1",
             (double)p->max_speech_s);
    rc = WD_ECONFIG;
  }
  p->min_speech_ms = cfg->vad_min_speech_ms;
  p->min_silence_ms = cfg->vad_min_silence_ms;
  p->speech_pad_ms = cfg->vad_speech_pad_ms;
  return rc;
}
