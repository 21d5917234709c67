/*
 * request.c - OpenAI audio form fields to a validated wd_request_t (see
 * request.h). Messages copy the wording of OpenAI's own errors where one is
 * known (reference/openai-audio-api.md 1.7), so SDK users recognise them.
 */
#include "request.h"

#include "decode.h"

#include <jansson.h>

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "error.h"
#include "languages.h"
#include "pystr.h"

/* The form fields this server reads; anything else is ignored. */
typedef enum {
  F_OTHER = 0,
  F_FILE,
  F_MODEL,
  F_LANGUAGE,
  F_PROMPT,
  F_RESPONSE_FORMAT,
  F_TEMPERATURE,
  F_TIMESTAMP_GRANULARITIES, /* an array */
  F_STREAM,
  F_INCLUDE,      /* include: an array, like timestamp_granularities */
  F_CHUNKING,     /* chunking_strategy, whole ("auto" or a JSON object) */
  F_CHUNKING_KEY, /* chunking_strategy[key]: the SDKs' flattened object */
  F_DIARIZE,      /* whisperd's own: diarize=true */
  F_KNOWN_NAMES,  /* known_speaker_names[]: an array */
  F_KNOWN_REFS,   /* known_speaker_references[]: an array of data URLs */
} wd_field_t;

/*
 * Which field a part name is. Scalars match exactly. The one array matches
 * `key`, `key[]` and `key[N]` (some form encoders number array items).
 */
static wd_field_t field_of(const char *name) {
  static const struct { const char *name; wd_field_t f; } scalars[] = {
    { "file", F_FILE },         { "model", F_MODEL },
    { "language", F_LANGUAGE }, { "prompt", F_PROMPT },
    { "response_format", F_RESPONSE_FORMAT }, { "temperature", F_TEMPERATURE },
    { "stream", F_STREAM },     { "chunking_strategy", F_CHUNKING },
    { "diarize", F_DIARIZE },
  };
  for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
    if (strcmp(name, scalars[i].name) == 0)
      return scalars[i].f;
  static const char cs[] = "chunking_strategy[";
  if (strncmp(name, cs, sizeof cs - 1) == 0 && name[strlen(name) - 1] == ']')
    return F_CHUNKING_KEY;
  static const struct { const char *name; wd_field_t f; } arrays[] = {
    { "timestamp_granularities", F_TIMESTAMP_GRANULARITIES }, { "include", F_INCLUDE },
    { "known_speaker_names", F_KNOWN_NAMES }, { "known_speaker_references", F_KNOWN_REFS },
  };
  for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++) {
    const size_t n = strlen(arrays[a].name);
    if (strncmp(name, arrays[a].name, n) != 0)
      continue;
    const char *rest = name + n;
    if (rest[0] == '\0' || strcmp(rest, "[]") == 0)
      return arrays[a].f;
    if (rest[0] == '[') {
      size_t k = 1;
      while (isdigit((unsigned char)rest[k]))
        k++;
      if (k > 1 && rest[k] == ']' && rest[k + 1] == '\0')
        return arrays[a].f;
    }
  }
  return F_OTHER;
}

/* The wire name of a field, for error params (static strings). */
static const char *field_name(wd_field_t f) {
  switch (f) {
  case F_MODEL: return "model";
  case F_LANGUAGE: return "language";
  case F_PROMPT: return "prompt";
  case F_RESPONSE_FORMAT: return "response_format";
  case F_TEMPERATURE: return "temperature";
  case F_TIMESTAMP_GRANULARITIES: return "timestamp_granularities";
  case F_STREAM: return "stream";
  case F_INCLUDE: return "include";
  case F_CHUNKING:
  case F_CHUNKING_KEY: return "chunking_strategy";
  case F_DIARIZE: return "diarize";
  case F_KNOWN_NAMES: return "known_speaker_names";
  case F_KNOWN_REFS: return "known_speaker_references";
  default: return NULL;
  }
}

/* A part's value as a NUL-terminated copy, trimmed of white space at both
 * ends when trim is set. NULL on OOM. */
static char *value_dup(const wd_multipart_part_t *p, int trim) {
  size_t n = p->len;
  const char *s = (const char *)p->data;
  if (trim)
    s = wd_py_strip(s, n, &n);
  char *out = malloc(n + 1);
  if (out) {
    memcpy(out, s, n);
    out[n] = '\0';
  }
  return out;
}

/* Replaces *dst with a copy of the part's value; an empty value clears it. */
static int set_text(char **dst, const wd_multipart_part_t *p, int trim) {
  char *v = value_dup(p, trim);
  if (!v)
    return WD_ENOMEM;
  free(*dst);
  *dst = NULL;
  if (v[0])
    *dst = v;
  else
    free(v);
  return 0;
}

static int oom(wd_api_error_t *err) {
  return wd_api_error_set(err, 500, NULL, NULL, "The server ran out of memory.");
}

/* The response_format values and what they render as. */
static int parse_format(const char *s, wd_format_t *ret) {
  static const struct { const char *name; wd_format_t f; } names[] = {
    { "json", WD_FMT_JSON }, { "text", WD_FMT_TEXT },        { "srt", WD_FMT_SRT },
    { "vtt", WD_FMT_VTT },   { "verbose_json", WD_FMT_VERBOSE_JSON },
    { "diarized_json", WD_FMT_DIARIZED_JSON },
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(s, names[i].name) == 0) {
      *ret = names[i].f;
      return 0;
    }
  return WD_EINVAL;
}

/* "true"/"false" as the SDKs send them; also 1/0, any case. */
static int parse_bool(const char *s, int *ret) {
  if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0)
    *ret = 1;
  else if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0)
    *ret = 0;
  else
    return WD_EINVAL;
  return 0;
}

/* The scalar text fields, collected before validation. */
typedef struct {
  char *format, *temperature, *stream;
  char *chunking;     /* chunking_strategy as sent whole */
  json_t *cs_keys;    /* chunking_strategy[key] = value, the values as strings */
  int gran_seen;      /* timestamp_granularities parts, empty ones included */
  char *bad_gran;     /* the first value that is neither segment nor word */
  char *bad_include;  /* the first include value other than logprobs */
  char *diarize;
  /* known_speaker_names[] and known_speaker_references[] as sent, the
   * first WD_DIAR_MAX_KNOWN of each kept; n_*: how many came. */
  char *names[WD_DIAR_MAX_KNOWN];
  int n_names;
  const wd_multipart_part_t *refs[WD_DIAR_MAX_KNOWN];
  int n_refs;
} wd_raw_t;

static void raw_clear(wd_raw_t *r) {
  free(r->format);
  free(r->temperature);
  free(r->stream);
  free(r->chunking);
  json_decref(r->cs_keys);
  free(r->bad_gran);
  free(r->bad_include);
  free(r->diarize);
  for (int i = 0; i < WD_DIAR_MAX_KNOWN; i++)
    free(r->names[i]);
}

/* One pass over the parts: the file, copies of the text fields. */
static int collect(const wd_multipart_t *form, wd_request_t *r, wd_raw_t *raw,
                   wd_api_error_t *err) {
  int have_file = 0;
  for (int i = 0; i < wd_multipart_count(form); i++) {
    const wd_multipart_part_t *p = wd_multipart_part(form, i);
    const wd_field_t f = field_of(p->name);
    int rc = 0;
    /* A NUL would cut the value short ("whisper-1\0x" is not whisper-1). */
    if (f != F_FILE && f != F_OTHER && memchr(p->data, '\0', p->len))
      return wd_api_error_set(err, 400, field_name(f), "invalid_value",
                              "Invalid value for '%s': it contains a NUL byte.", field_name(f));
    switch (f) {
    case F_FILE:
      have_file = 1;
      r->file = p->data;
      r->file_len = p->len;
      free(r->filename);
      r->filename = NULL;
      if (p->filename && !(r->filename = strdup(p->filename)))
        rc = WD_ENOMEM;
      break;
    case F_MODEL:
      rc = set_text(&r->model, p, 1);
      break;
    case F_LANGUAGE:
      rc = set_text(&r->language, p, 1);
      break;
    case F_PROMPT: {
      /* Only its tail can reach decoding (wd_decode_text_tail): a prompt of
       * megabytes is kept as its last few KiB, not copied whole. */
      const size_t off = wd_decode_text_tail((const char *)p->data, p->len);
      const wd_multipart_part_t tail = { .name = p->name, .data = p->data + off,
                                         .len = p->len - off };
      rc = set_text(&r->prompt, &tail, 0);
      break;
    }
    case F_RESPONSE_FORMAT:
      rc = set_text(&raw->format, p, 1);
      break;
    case F_TEMPERATURE:
      rc = set_text(&raw->temperature, p, 1);
      break;
    case F_STREAM:
      rc = set_text(&raw->stream, p, 1);
      break;
    case F_TIMESTAMP_GRANULARITIES: {
      char *v = value_dup(p, 1);
      if (!v) {
        rc = WD_ENOMEM;
        break;
      }
      raw->gran_seen++;
      if (strcmp(v, "segment") == 0)
        r->timestamps_segment = 1;
      else if (strcmp(v, "word") == 0)
        r->timestamps_word = 1;
      else if (v[0] && !raw->bad_gran) {
        raw->bad_gran = v;
        v = NULL;
      }
      free(v);
      break;
    }
    case F_INCLUDE: {
      char *v = value_dup(p, 1);
      if (!v) {
        rc = WD_ENOMEM;
        break;
      }
      if (strcmp(v, "logprobs") == 0)
        r->logprobs = 1;
      else if (v[0] && !raw->bad_include) {
        raw->bad_include = v;
        v = NULL;
      }
      free(v);
      break;
    }
    case F_CHUNKING:
      rc = set_text(&raw->chunking, p, 1);
      break;
    case F_CHUNKING_KEY: {
      /* "chunking_strategy[threshold]" -> "threshold" */
      const size_t kn = strlen(p->name) - (sizeof "chunking_strategy[]" - 1);
      char key[64];
      char *v = value_dup(p, 1);
      if (!v || (!raw->cs_keys && !(raw->cs_keys = json_object()))) {
        free(v);
        rc = WD_ENOMEM;
        break;
      }
      snprintf(key, sizeof key, "%.*s", (int)(kn < sizeof key ? kn : sizeof key - 1),
               p->name + sizeof "chunking_strategy[" - 1);
      if (json_object_set_new(raw->cs_keys, key, json_string_nocheck(v)) < 0)
        rc = WD_ENOMEM;
      free(v);
      break;
    }
    case F_DIARIZE:
      rc = set_text(&raw->diarize, p, 1);
      break;
    case F_KNOWN_NAMES:
      /* Every item counts, an empty one too: the counts must match. */
      if (raw->n_names < WD_DIAR_MAX_KNOWN && !(raw->names[raw->n_names] = value_dup(p, 1)))
        rc = WD_ENOMEM;
      raw->n_names++;
      break;
    case F_KNOWN_REFS:
      if (raw->n_refs < WD_DIAR_MAX_KNOWN)
        raw->refs[raw->n_refs] = p;
      raw->n_refs++;
      break;
    case F_OTHER:
      break;
    }
    if (rc < 0)
      return oom(err);
  }
  if (!have_file)
    return wd_api_error_set(err, 400, "file", "missing_required_parameter",
                            "Missing required parameter: 'file'.");
  return 0;
}

static int model_known(const wd_request_model_t *m, const char *name) {
  for (int i = 0; m && i < m->n_names; i++)
    if (m->names[i] && strcmp(m->names[i], name) == 0)
      return 1;
  return 0;
}

/* Checks language (transcriptions only) against the table and the model. */
static int check_language(wd_request_t *r, const wd_request_model_t *m, wd_api_error_t *err) {
  if (!r->language)
    return 0;
  const int idx = wd_languages_index(r->language);
  if (idx < 0)
    return wd_api_error_set(err, 400, "language", "invalid_language",
                            "Invalid language '%.64s'. Language parameter must be specified in "
                            "ISO-639-1 format.", r->language);
  /* Normalise to the table's spelling (lower case). */
  const char *code = wd_languages_code(idx);
  char *copy = strdup(code);
  if (!copy)
    return oom(err);
  free(r->language);
  r->language = copy;
  if (!m->multilingual && strcmp(code, "en") != 0)
    return wd_api_error_set(err, 400, "language", "unsupported_language",
                            "Model `%.128s` is English-only; it cannot transcribe language '%s'.",
                            r->model, code);
  if (m->multilingual && m->n_langs > 0 && idx >= m->n_langs)
    return wd_api_error_set(err, 400, "language", "unsupported_language",
                            "Model `%.128s` does not support language '%s'.", r->model, code);
  return 0;
}

/* A chunking_strategy member that must be a number (a JSON number, or the
 * text of one: the SDKs send form fields as text). 1: present, 0: absent,
 * -1: not a number. */
static int cs_number(const json_t *o, const char *key, double *ret) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v))
    return 0;
  if (json_is_number(v)) {
    *ret = json_number_value(v);
    return 1;
  }
  const char *s = json_string_value(v);
  char *end = NULL;
  if (!s || !*s)
    return -1;
  *ret = strtod(s, &end);
  return *end == '\0' && isfinite(*ret) ? 1 : -1;
}

/* OpenAI's chunking_strategy into r->chunking: "auto", or an object of type
 * server_vad whose members default as OpenAI's server_vad does (threshold
 * 0.5, prefix_padding_ms 300, silence_duration_ms 200). */
static int parse_chunking(wd_request_t *r, const wd_raw_t *raw, wd_api_error_t *err) {
  if (!raw->chunking && !raw->cs_keys)
    return 0;
  static const char what[] = "Invalid value for 'chunking_strategy': expected \"auto\" or an "
                             "object with type \"server_vad\" (threshold, prefix_padding_ms, "
                             "silence_duration_ms)";
  if (raw->chunking && raw->cs_keys)
    return wd_api_error_set(err, 400, "chunking_strategy", "invalid_value",
                            "%s; it was given both whole and as fields.", what);
  r->chunking.set = 1;
  r->chunking.threshold = 0.5;
  r->chunking.prefix_padding_ms = 300;
  r->chunking.silence_duration_ms = 200;
  if (raw->chunking && strcmp(raw->chunking, "auto") == 0) {
    r->chunking.is_auto = 1;
    return 0;
  }
  json_t *o = raw->cs_keys ? json_incref(raw->cs_keys) : json_loads(raw->chunking, 0, NULL);
  const char *type = json_string_value(json_object_get(o, "type"));
  int rc = 0;
  if (!json_is_object(o) || !type || strcmp(type, "server_vad") != 0) {
    rc = wd_api_error_set(err, 400, "chunking_strategy", "invalid_value", "%s.", what);
    goto out;
  }
  static const struct { const char *key; double lo, hi; } nums[] = {
    { "threshold", 0.0, 1.0 }, { "prefix_padding_ms", 0, 10000 },
    { "silence_duration_ms", 0, 60000 },
  };
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    double v = 0;
    const int got = cs_number(o, nums[i].key, &v);
    if (got < 0 || (got && (v < nums[i].lo || v > nums[i].hi))) {
      rc = wd_api_error_set(err, 400, "chunking_strategy", "invalid_value",
                            "Invalid value for 'chunking_strategy.%s': expected a number from "
                            "%g to %g.", nums[i].key, nums[i].lo, nums[i].hi);
      goto out;
    }
    if (!got)
      continue;
    if (i == 0)
      r->chunking.threshold = v;
    else if (i == 1)
      r->chunking.prefix_padding_ms = (int)v;
    else
      r->chunking.silence_duration_ms = (int)v;
  }
out:
  json_decref(o);
  return rc;
}

/* A data URL "data:[<mime>][;params];base64,<data>" into its bytes. The
 * MIME type is not checked: the audio decoder sniffs the bytes, as it does
 * the file's. WD_EFORMAT, WD_ENOMEM. */
static int data_url_decode(const wd_multipart_part_t *p, uint8_t **ret, size_t *ret_len) {
  const char *s = (const char *)p->data;
  size_t n = p->len;
  s = wd_py_strip(s, n, &n);
  if (n < 5 || strncasecmp(s, "data:", 5) != 0)
    return WD_EFORMAT;
  const char *comma = memchr(s, ',', n);
  if (!comma)
    return WD_EFORMAT;
  const size_t head = (size_t)(comma - s);
  if (head < 12 || strncasecmp(comma - 7, ";base64", 7) != 0)
    return WD_EFORMAT;
  const size_t body = n - head - 1;
  if (body == 0)
    return WD_EFORMAT;
  uint8_t *out = malloc(WD_BASE64_DECODED_MAX(body));
  if (!out)
    return WD_ENOMEM;
  const int rc = wd_base64_decode(comma + 1, body, WD_BASE64_URLSAFE, out, ret_len);
  if (rc < 0) {
    free(out);
    return rc;
  }
  *ret = out;
  return 0;
}

/* known_speaker_names[] and known_speaker_references[]: counts, names,
 * data URLs (their audio is checked once decoded, transcription.c). */
static int parse_known(wd_request_t *r, const wd_raw_t *raw, wd_api_error_t *err) {
  if (raw->n_names == 0 && raw->n_refs == 0)
    return 0;
  if (!r->diarize)
    return wd_api_error_set(err, 400, raw->n_names ? "known_speaker_names"
                                                   : "known_speaker_references",
                            "invalid_value",
                            "known_speaker_names and known_speaker_references need speaker "
                            "diarization: response_format 'diarized_json' or model "
                            "'" WD_REQUEST_DIARIZE_MODEL "'.");
  if (raw->n_names > WD_DIAR_MAX_KNOWN || raw->n_refs > WD_DIAR_MAX_KNOWN)
    return wd_api_error_set(err, 400, raw->n_names > WD_DIAR_MAX_KNOWN
                                          ? "known_speaker_names"
                                          : "known_speaker_references",
                            "array_above_max_length",
                            "Invalid '%s': array too long. Expected an array with maximum "
                            "length %d, but got an array with length %d instead.",
                            raw->n_names > WD_DIAR_MAX_KNOWN ? "known_speaker_names"
                                                             : "known_speaker_references",
                            WD_DIAR_MAX_KNOWN,
                            raw->n_names > WD_DIAR_MAX_KNOWN ? raw->n_names : raw->n_refs);
  if (raw->n_names != raw->n_refs)
    return wd_api_error_set(err, 400, raw->n_names < raw->n_refs ? "known_speaker_names"
                                                                 : "known_speaker_references",
                            "invalid_value",
                            "known_speaker_names and known_speaker_references must have the "
                            "same length: got %d names and %d references.",
                            raw->n_names, raw->n_refs);
  for (int i = 0; i < raw->n_names; i++) {
    const char *name = raw->names[i];
    const size_t len = strlen(name);
    int bad = len == 0 || len > 64;
    /* A label goes into WebVTT voice spans and SRT lines as it is. */
    for (size_t k = 0; k < len && !bad; k++)
      bad = (unsigned char)name[k] < 0x20 || name[k] == 0x7f || name[k] == '<' ||
            name[k] == '>' || name[k] == '&';
    for (size_t k = 0; k < len && !bad;) {
      const long l = wd_utf8_seq((const unsigned char *)name + k, len - k);
      bad = l <= 0;
      k += l > 0 ? (size_t)l : 0;
    }
    if (bad)
      return wd_api_error_set(err, 400, "known_speaker_names", "invalid_value",
                              "Invalid 'known_speaker_names[%d]': a name must be 1 to 64 "
                              "characters of UTF-8 without control characters, '<', '>' or "
                              "'&'.", i);
    for (int j = 0; j < i; j++)
      if (strcmp(raw->names[j], name) == 0)
        return wd_api_error_set(err, 400, "known_speaker_names", "invalid_value",
                                "Invalid 'known_speaker_names[%d]': '%.64s' is given twice.", i,
                                name);
  }
  for (int i = 0; i < raw->n_refs; i++) {
    const int rc = data_url_decode(raw->refs[i], &r->known_refs[i], &r->known_ref_lens[i]);
    if (rc == WD_ENOMEM)
      return oom(err);
    if (rc < 0)
      return wd_api_error_set(err, 400, "known_speaker_references", "invalid_value",
                              "Invalid 'known_speaker_references[%d]': expected a data URL of "
                              "audio, 'data:<mime type>;base64,<the file in base64>'.", i);
    r->n_known = i + 1;
    if (!(r->known_names[i] = strdup(raw->names[i])))
      return oom(err);
  }
  return 0;
}

static int validate(wd_request_t *r, wd_raw_t *raw, const wd_request_model_t *models,
                    int n_models, wd_api_error_t *err) {
  const int transcribe = r->task == WD_REQUEST_TRANSCRIBE;
  int mi = 0;
  while (mi < n_models && !model_known(&models[mi], r->model))
    mi++;
  /* OpenAI's diarizing model: the first model serves it, diarizing (unless
   * a served model is called that itself). */
  const int diarize_model = transcribe && strcmp(r->model, WD_REQUEST_DIARIZE_MODEL) == 0;
  if (mi == n_models && diarize_model && n_models > 0)
    mi = 0;
  if (mi == n_models)
    return wd_api_error_set(err, 404, NULL, "model_not_found",
                            "The model `%.200s` does not exist or you do not have access to it.",
                            r->model);
  const wd_request_model_t *m = &models[mi];
  r->model_idx = mi;
  r->format = WD_FMT_JSON;
  if (raw->format && parse_format(raw->format, &r->format) < 0)
    return wd_api_error_set(err, 400, "response_format", "invalid_value",
                            "'%.64s' is not one of ['json', 'text', 'srt', 'verbose_json', "
                            "'vtt', 'diarized_json'] - 'response_format'", raw->format);
  int diarize_field = 0;
  if (raw->diarize && parse_bool(raw->diarize, &diarize_field) < 0)
    return wd_api_error_set(err, 400, "diarize", "invalid_type",
                            "Invalid value for 'diarize': expected true or false, got '%.64s'.",
                            raw->diarize);
  r->diarize = r->format == WD_FMT_DIARIZED_JSON || diarize_model || diarize_field;
  if (r->format == WD_FMT_DIARIZED_JSON && !transcribe)
    return wd_api_error_set(err, 400, "response_format", "unsupported_value",
                            "response_format 'diarized_json' is for transcriptions; "
                            "translations cannot diarize.");
  if (r->diarize && r->format == WD_FMT_VERBOSE_JSON)
    return wd_api_error_set(err, 400, "response_format", "unsupported_value",
                            "response_format 'verbose_json' is not compatible with speaker "
                            "diarization; use 'diarized_json' (or json, text, srt, vtt).");
  if (r->diarize && !transcribe)
    return wd_api_error_set(err, 400, "diarize", "unsupported_value",
                            "Translations cannot diarize.");
  if (raw->temperature) {
    char *end = NULL;
    const double t = strtod(raw->temperature, &end);
    if (end == raw->temperature || *end != '\0' || !isfinite(t))
      return wd_api_error_set(err, 400, "temperature", "invalid_type",
                              "Invalid value for 'temperature': expected a number, got '%.64s'.",
                              raw->temperature);
    if (t < 0.0 || t > 1.0)
      return wd_api_error_set(err, 400, "temperature", "invalid_value",
                              "Invalid value for 'temperature': %g is not between 0 and 1.", t);
    r->temperature = t;
    r->has_temperature = 1;
  }
  int rc = parse_chunking(r, raw, err);
  if (rc)
    return rc;
  if (raw->bad_include)
    return wd_api_error_set(err, 400, "include", "invalid_value",
                            "'%.64s' is not one of ['logprobs'] - 'include'", raw->bad_include);
  if (r->logprobs && r->diarize)
    return wd_api_error_set(err, 400, "include", "unsupported_value",
                            "include 'logprobs' is not supported with speaker diarization.");
  rc = parse_known(r, raw, err);
  if (rc)
    return rc;
  if (r->logprobs && r->format != WD_FMT_JSON && r->format != WD_FMT_VERBOSE_JSON)
    return wd_api_error_set(err, 400, "include", "invalid_value",
                            "include 'logprobs' requires response_format 'json' or "
                            "'verbose_json'.");
  if (!transcribe) {
    /* Translations have no language, timestamp_granularities or stream
     * field: the source language is detected from the audio. */
    free(r->language);
    r->language = NULL;
    r->timestamps_segment = r->timestamps_word = 0;
    if (!m->multilingual)
      return wd_api_error_set(err, 400, "model", "unsupported_model",
                              "Model `%.128s` is English-only and cannot translate.", r->model);
    if (m->no_translate)
      return wd_api_error_set(err, 400, "model", "unsupported_model",
                              "Model `%.128s` was not trained to translate: its decoder was "
                              "cut down for transcription, as large-v3-turbo's is.",
                              r->model);
    return 0;
  }
  rc = check_language(r, m, err);
  if (rc)
    return rc;
  if (raw->bad_gran)
    return wd_api_error_set(err, 400, "timestamp_granularities", "invalid_value",
                            "'%.64s' is not one of ['word', 'segment'] - "
                            "'timestamp_granularities'", raw->bad_gran);
  if (r->timestamps_word && r->format != WD_FMT_VERBOSE_JSON)
    return wd_api_error_set(err, 400, "timestamp_granularities", "invalid_value",
                            "timestamp_granularities 'word' requires response_format "
                            "'verbose_json'.");
  if (raw->stream && parse_bool(raw->stream, &r->stream) < 0)
    return wd_api_error_set(err, 400, "stream", "invalid_type",
                            "Invalid value for 'stream': expected true or false, got '%.64s'.",
                            raw->stream);
  /* json has no place for speakers (OpenAI's Transcription is text, usage
   * and logprobs; its diarizing model labels diarized_json only): asked
   * with json, diarization is validated as above but not run, and the
   * answer is the plain transcription's. A stream has a place (its
   * segment events' speaker), whatever the format. */
  if (r->diarize && r->format == WD_FMT_JSON && !r->stream) {
    r->diarize = 0;
    for (int i = 0; i < r->n_known; i++) {
      free(r->known_names[i]);
      free(r->known_refs[i]);
      r->known_names[i] = NULL;
      r->known_refs[i] = NULL;
      r->known_ref_lens[i] = 0;
    }
    r->n_known = 0;
  }
  return 0;
}

int wd_request_parse(const wd_multipart_t *form, wd_request_task_t task,
                     const wd_request_model_t *model, wd_request_t *ret, wd_api_error_t *err) {
  return wd_request_parse_in(form, task, model, 1, ret, err);
}

int wd_request_parse_in(const wd_multipart_t *form, wd_request_task_t task,
                        const wd_request_model_t *models, int n_models, wd_request_t *ret,
                        wd_api_error_t *err) {
  memset(ret, 0, sizeof *ret);
  ret->task = task;
  wd_raw_t raw = { 0 };
  int rc = collect(form, ret, &raw, err);
  if (!rc && !ret->model)
    rc = wd_api_error_set(err, 400, "model", "missing_required_parameter",
                          "you must provide a model parameter");
  if (!rc)
    rc = validate(ret, &raw, models, n_models, err);
  raw_clear(&raw);
  if (rc)
    wd_request_clear(ret);
  return rc;
}

void wd_request_clear(wd_request_t *r) {
  if (!r)
    return;
  free(r->filename);
  free(r->model);
  free(r->language);
  free(r->prompt);
  for (int i = 0; i < WD_DIAR_MAX_KNOWN; i++) {
    free(r->known_names[i]);
    free(r->known_refs[i]);
  }
  memset(r, 0, sizeof *r);
}

int wd_request_prompt_tokens(const wd_request_t *r, const wd_tokenizer_t *tok, int32_t **ret_ids,
                             int *ret_n) {
  *ret_ids = NULL;
  *ret_n = 0;
  if (!r->prompt)
    return 0;
  return wd_decode_encode_text(tok, r->prompt, ret_ids, ret_n);
}
