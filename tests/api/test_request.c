/*
 * test_request.c - OpenAI form fields to a validated request: every field,
 * every refusal with its status, param and code, the SDKs' array and object
 * spellings, and the prompt as openai/whisper encodes it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "multipart.h"
#include "request.h"
#include "wd_test.h"

/* A multipart body built in memory; fields are (name, value) pairs. */
typedef struct {
  char buf[65536];
  size_t len;
  wd_multipart_t *form;
} form_t;

static void form_add(form_t *f, const char *name, const char *value, size_t vlen,
                     const char *filename) {
  f->len += (size_t)snprintf(f->buf + f->len, sizeof f->buf - f->len,
                             "--B\r\nContent-Disposition: form-data; name=\"%s\"", name);
  if (filename)
    f->len += (size_t)snprintf(f->buf + f->len, sizeof f->buf - f->len, "; filename=\"%s\"",
                               filename);
  f->len += (size_t)snprintf(f->buf + f->len, sizeof f->buf - f->len, "\r\n\r\n");
  memcpy(f->buf + f->len, value, vlen);
  f->len += vlen;
  memcpy(f->buf + f->len, "\r\n", 2);
  f->len += 2;
}

/* Builds the form from NULL-terminated name/value pairs; "file" gets a
 * filename and fake audio bytes when its value is NULL. */
static wd_multipart_t *form_build(form_t *f, const char *const *kv) {
  f->len = 0;
  for (int i = 0; kv[i]; i += 2) {
    if (strcmp(kv[i], "file") == 0 && !kv[i + 1])
      form_add(f, "file", "RIFF\0WAVE", 9, "a.wav");
    else
      form_add(f, kv[i], kv[i + 1], strlen(kv[i + 1]), NULL);
  }
  f->len += (size_t)snprintf(f->buf + f->len, sizeof f->buf - f->len, "--B--\r\n");
  char err[256];
  f->form = NULL;
  int rc = wd_multipart_parse("multipart/form-data; boundary=B", f->buf, f->len, &f->form, err,
                              sizeof err);
  WD_CHECK_EQ_INT(rc, 0);
  return f->form;
}

static const char *const names[] = { "whisper-1", "tiny.en", "my-alias" };
static const wd_request_model_t english = { names, 3, 0, 0, 0 };
static const wd_request_model_t multi = { names, 3, 1, 99, 0 };
static const wd_request_model_t v3 = { names, 3, 1, 100, 0 };
static const wd_request_model_t turbo = { names, 3, 1, 100, 1 };

static form_t g_form;

/* Parses kv for task on model m; expects success. */
static int parse_ok(const char *const *kv, wd_request_task_t task, const wd_request_model_t *m,
                    wd_request_t *r) {
  wd_api_error_t e = { 0 };
  form_build(&g_form, kv);
  int rc = wd_request_parse(g_form.form, task, m, r, &e);
  if (rc)
    fprintf(stderr, "unexpected %d: %s\n", rc, e.message);
  WD_CHECK_EQ_INT(rc, 0);
  return rc;
}

/* Parses kv; expects status with param and code, and message containing msg. */
static void parse_fail(const char *const *kv, wd_request_task_t task, const wd_request_model_t *m,
                       int status, const char *param, const char *code, const char *msg) {
  wd_api_error_t e = { 0 };
  wd_request_t r;
  form_build(&g_form, kv);
  int rc = wd_request_parse(g_form.form, task, m, &r, &e);
  if (rc != status || !strstr(e.message, msg))
    fprintf(stderr, "got %d '%s', want %d '%s'\n", rc, e.message, status, msg);
  WD_CHECK_EQ_INT(rc, status);
  WD_CHECK_EQ_INT(e.status, status);
  if (param)
    WD_CHECK_EQ_STR(e.param, param);
  else
    WD_CHECK(e.param == NULL);
  if (code)
    WD_CHECK_EQ_STR(e.code, code);
  WD_CHECK(strstr(e.message, msg) != NULL);
  WD_CHECK_EQ_STR(e.type, status >= 500 ? "server_error" : "invalid_request_error");
  /* A failed parse leaves nothing to free. */
  WD_CHECK(r.model == NULL && r.language == NULL && r.prompt == NULL && r.filename == NULL);
  wd_multipart_free(g_form.form);
}

#define KV(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define T WD_REQUEST_TRANSCRIBE
#define TR WD_REQUEST_TRANSLATE

WD_TEST(defaults) {
  wd_request_t r;
  if (parse_ok(KV("model", "whisper-1", "file", NULL), T, &english, &r) == 0) {
    WD_CHECK_EQ_STR(r.model, "whisper-1");
    WD_CHECK_EQ_INT(r.file_len, 9);
    WD_CHECK(r.file && memcmp(r.file, "RIFF\0WAVE", 9) == 0);
    WD_CHECK_EQ_STR(r.filename, "a.wav");
    WD_CHECK(r.language == NULL && r.prompt == NULL);
    WD_CHECK_EQ_INT(r.format, WD_FMT_JSON);
    WD_CHECK_EQ_INT(r.has_temperature, 0);
    WD_CHECK_EQ_INT(r.stream, 0);
    WD_CHECK_EQ_INT(r.timestamps_word, 0);
    WD_CHECK_EQ_INT(r.task, T);
  }
  wd_request_clear(&r);
  wd_request_clear(&r); /* twice is fine */
  wd_multipart_free(g_form.form);
}

/* Every field the Python SDK sends, in its order, file last. */
WD_TEST(python_sdk_fields) {
  wd_request_t r;
  if (parse_ok(KV("model", "my-alias", "language", "EN", "prompt", "  Hello there.\n",
                  "response_format", "verbose_json", "temperature", "0.2",
                  "timestamp_granularities[]", "segment", "stream", "true",
                  "include[]", "logprobs", "chunking_strategy[type]", "server_vad", "file",
                  NULL),
               T, &multi, &r) == 0) {
    WD_CHECK_EQ_STR(r.model, "my-alias");
    WD_CHECK_EQ_STR(r.language, "en");
    WD_CHECK_EQ_STR(r.prompt, "  Hello there.\n"); /* kept as sent */
    WD_CHECK_EQ_INT(r.format, WD_FMT_VERBOSE_JSON);
    WD_CHECK_NEAR(r.temperature, 0.2, 1e-12);
    WD_CHECK_EQ_INT(r.has_temperature, 1);
    WD_CHECK_EQ_INT(r.timestamps_segment, 1);
    WD_CHECK_EQ_INT(r.stream, 1);
    WD_CHECK(r.chunking.set && !r.chunking.is_auto);
  }
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
}

WD_TEST(required_fields) {
  parse_fail(KV("model", "whisper-1"), T, &english, 400, "file", "missing_required_parameter",
             "Missing required parameter: 'file'.");
  parse_fail(KV("file", NULL), T, &english, 400, "model", "missing_required_parameter",
             "you must provide a model parameter");
  parse_fail(KV("model", "", "file", NULL), T, &english, 400, "model", NULL,
             "you must provide a model parameter");
  parse_fail(KV("model", "  ", "file", NULL), TR, &multi, 400, "model", NULL, "model parameter");
}

WD_TEST(unknown_model_is_404) {
  parse_fail(KV("model", "whisper-2", "file", NULL), T, &english, 404, NULL, "model_not_found",
             "The model `whisper-2` does not exist or you do not have access to it.");
  parse_fail(KV("model", "Whisper-1", "file", NULL), T, &english, 404, NULL, "model_not_found",
             "`Whisper-1`");
  /* Before the model is known nothing matches. */
  const wd_request_model_t none = { NULL, 0, 1, 0, 0 };
  parse_fail(KV("model", "whisper-1", "file", NULL), T, &none, 404, NULL, "model_not_found",
             "does not exist");
}

WD_TEST(response_format_values) {
  static const struct { const char *v; wd_format_t f; } ok[] = {
    { "json", WD_FMT_JSON }, { "text", WD_FMT_TEXT }, { "srt", WD_FMT_SRT },
    { "vtt", WD_FMT_VTT },   { "verbose_json", WD_FMT_VERBOSE_JSON }, { " srt ", WD_FMT_SRT },
    { "", WD_FMT_JSON },
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    wd_request_t r;
    if (parse_ok(KV("model", "whisper-1", "response_format", ok[i].v, "file", NULL), T, &english,
                 &r) == 0)
      WD_CHECK_EQ_INT(r.format, ok[i].f);
    wd_request_clear(&r);
    wd_multipart_free(g_form.form);
    if (parse_ok(KV("model", "whisper-1", "response_format", ok[i].v, "file", NULL), TR, &multi,
                 &r) == 0)
      WD_CHECK_EQ_INT(r.format, ok[i].f);
    wd_request_clear(&r);
    wd_multipart_free(g_form.form);
  }
  parse_fail(KV("model", "whisper-1", "response_format", "txt", "file", NULL), T, &english, 400,
             "response_format", "invalid_value",
             "'txt' is not one of ['json', 'text', 'srt', 'verbose_json', 'vtt', "
             "'diarized_json']");
  parse_fail(KV("model", "whisper-1", "response_format", "JSON", "file", NULL), T, &english, 400,
             "response_format", NULL, "'JSON'");
}

/* A data URL of `bytes` in base64 ("RIFF" -> "UklGRg=="). */
#define REF_RIFF "data:audio/wav;base64,UklGRg=="

WD_TEST(diarization) {
  wd_request_t r;
  /* diarized_json diarizes, with any served model's name. */
  if (parse_ok(KV("model", "whisper-1", "response_format", "diarized_json", "file", NULL), T,
               &english, &r) == 0) {
    WD_CHECK_EQ_INT(r.format, WD_FMT_DIARIZED_JSON);
    WD_CHECK_EQ_INT(r.diarize, 1);
    WD_CHECK_EQ_INT(r.n_known, 0);
  }
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  /* OpenAI's diarizing model: served by the first model, diarizing for
   * text, srt and vtt; json (its default) has no place for speakers: not
   * diarized. */
  static const char *const fmts[] = { "json", "text", "srt", "vtt" };
  for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
    if (parse_ok(KV("model", "gpt-4o-transcribe-diarize", "response_format", fmts[i], "file",
                    NULL), T, &english, &r) == 0) {
      WD_CHECK_EQ_INT(r.diarize, i > 0);
      WD_CHECK_EQ_INT(r.model_idx, 0);
      WD_CHECK_EQ_STR(r.model, "gpt-4o-transcribe-diarize");
    }
    wd_request_clear(&r);
    wd_multipart_free(g_form.form);
  }
  /* json streamed has a place (the segment events' speaker): diarized. */
  if (parse_ok(KV("model", "gpt-4o-transcribe-diarize", "stream", "true", "file", NULL), T,
               &english, &r) == 0) {
    WD_CHECK_EQ_INT(r.format, WD_FMT_JSON);
    WD_CHECK_EQ_INT(r.diarize, 1);
  }
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  /* json with known speakers: checked as for a diarization (a bad one is
   * still refused), then dropped with it. */
  if (parse_ok(KV("model", "gpt-4o-transcribe-diarize", "known_speaker_names[]", "a",
                  "known_speaker_references[]", REF_RIFF, "file", NULL), T, &english, &r) == 0) {
    WD_CHECK_EQ_INT(r.diarize, 0);
    WD_CHECK_EQ_INT(r.n_known, 0);
    WD_CHECK(r.known_refs[0] == NULL && r.known_names[0] == NULL);
  }
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  parse_fail(KV("model", "gpt-4o-transcribe-diarize", "known_speaker_names[]", "a",
                "known_speaker_references[]", "UklGRg==", "file", NULL), T, &english, 400,
             "known_speaker_references", "invalid_value", "data URL");
  /* whisperd's own diarize=true; false and absent do not diarize; true
   * with json (the default) neither. */
  if (parse_ok(KV("model", "tiny.en", "diarize", "true", "file", NULL), T, &english, &r) == 0)
    WD_CHECK_EQ_INT(r.diarize, 0);
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  if (parse_ok(KV("model", "tiny.en", "diarize", "true", "response_format", "vtt", "file", NULL),
               T, &english, &r) == 0)
    WD_CHECK_EQ_INT(r.diarize, 1);
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  if (parse_ok(KV("model", "tiny.en", "diarize", "false", "file", NULL), T, &english, &r) == 0)
    WD_CHECK_EQ_INT(r.diarize, 0);
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  parse_fail(KV("model", "tiny.en", "diarize", "maybe", "file", NULL), T, &english, 400,
             "diarize", "invalid_type", "'maybe'");
  parse_fail(KV("model", "gpt-4o-transcribe-diarize", "response_format", "verbose_json", "file",
                NULL), T, &english, 400, "response_format", NULL, "diarized_json");
  parse_fail(KV("model", "whisper-1", "response_format", "diarized_json", "file", NULL), TR,
             &multi, 400, "response_format", NULL, "translations");
  /* The alias is for transcriptions only. */
  parse_fail(KV("model", "gpt-4o-transcribe-diarize", "file", NULL), TR, &multi, 404, NULL,
             "model_not_found", "gpt-4o-transcribe-diarize");
  parse_fail(KV("model", "gpt-4o-transcribe-diarize", "include[]", "logprobs", "file", NULL), T,
             &english, 400, "include", NULL, "diarization");
}

WD_TEST(known_speakers) {
  wd_request_t r;
  /* Two pairs, as the SDK sends them (repeated [] fields); base64 decoded. */
  if (parse_ok(KV("model", "whisper-1", "response_format", "diarized_json",
                  "known_speaker_names[]", "agent", "known_speaker_names[]", "customer",
                  "known_speaker_references[]", REF_RIFF, "known_speaker_references[]",
                  "data:audio/mpeg;codecs=mp3;base64,AAEC/w", "file", NULL), T, &english,
               &r) == 0) {
    WD_CHECK_EQ_INT(r.n_known, 2);
    WD_CHECK_EQ_STR(r.known_names[0], "agent");
    WD_CHECK_EQ_STR(r.known_names[1], "customer");
    WD_CHECK_EQ_INT(r.known_ref_lens[0], 4);
    WD_CHECK(r.known_refs[0] && memcmp(r.known_refs[0], "RIFF", 4) == 0);
    WD_CHECK_EQ_INT(r.known_ref_lens[1], 4);
    WD_CHECK(r.known_refs[1] && memcmp(r.known_refs[1], "\x00\x01\x02\xff", 4) == 0);
  }
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  /* Counts; param: the shorter list. */
  parse_fail(KV("model", "whisper-1", "response_format", "diarized_json",
                "known_speaker_names[]", "agent", "file", NULL), T, &english, 400,
             "known_speaker_references", "invalid_value", "got 1 names and 0 references");
  parse_fail(KV("model", "whisper-1", "response_format", "diarized_json",
                "known_speaker_references[]", REF_RIFF, "file", NULL), T, &english, 400,
             "known_speaker_names", "invalid_value", "same length");
  parse_fail(KV("model", "whisper-1", "response_format", "diarized_json",
                "known_speaker_names[]", "a", "known_speaker_names[]", "b",
                "known_speaker_references[]", REF_RIFF, "file", NULL), T, &english, 400,
             "known_speaker_references", "invalid_value", "got 2 names and 1 references");
  parse_fail(KV("model", "whisper-1", "response_format", "diarized_json",
                "known_speaker_names[]", "a", "known_speaker_names[]", "b",
                "known_speaker_names[]", "c", "known_speaker_names[]", "d",
                "known_speaker_names[]", "e", "file", NULL), T, &english, 400,
             "known_speaker_names", "array_above_max_length", "maximum length 4");
  parse_fail(KV("model", "whisper-1", "response_format", "diarized_json",
                "known_speaker_references[]", REF_RIFF, "known_speaker_references[]", REF_RIFF,
                "known_speaker_references[]", REF_RIFF, "known_speaker_references[]", REF_RIFF,
                "known_speaker_references[]", REF_RIFF, "file", NULL), T, &english, 400,
             "known_speaker_references", "array_above_max_length", "got an array with length 5");
  /* Without diarization. */
  parse_fail(KV("model", "whisper-1", "known_speaker_names[]", "a",
                "known_speaker_references[]", REF_RIFF, "file", NULL), T, &english, 400,
             "known_speaker_names", NULL, "diarization");
  /* Names: empty, too long, markup, repeated. */
  static const char *const bad_names[] = { "", "<b>", "a&b", "tab\there",
                                           "0123456789012345678901234567890123456789012345678901"
                                           "234567890123456789" };
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
    parse_fail(KV("model", "whisper-1", "response_format", "diarized_json",
                  "known_speaker_names[]", bad_names[i], "known_speaker_references[]", REF_RIFF,
                  "file", NULL), T, &english, 400, "known_speaker_names", "invalid_value",
               "known_speaker_names[0]");
  parse_fail(KV("model", "whisper-1", "response_format", "diarized_json",
                "known_speaker_names[]", "x", "known_speaker_names[]", "x",
                "known_speaker_references[]", REF_RIFF, "known_speaker_references[]", REF_RIFF,
                "file", NULL), T, &english, 400, "known_speaker_names", "invalid_value",
             "given twice");
  /* References that are not base64 data URLs. */
  static const char *const bad_refs[] = { "http://example.com/a.wav", "data:audio/wav,RIFF",
                                          "data:audio/wav;base64,", "data:audio/wav;base64,U$lG",
                                          "data:;base64,U", "UklGRg==" };
  for (size_t i = 0; i < sizeof bad_refs / sizeof bad_refs[0]; i++)
    parse_fail(KV("model", "whisper-1", "response_format", "diarized_json",
                  "known_speaker_names[]", "a", "known_speaker_references[]", bad_refs[i],
                  "file", NULL), T, &english, 400, "known_speaker_references", "invalid_value",
               "known_speaker_references[0]");
}

WD_TEST(temperature_values) {
  static const struct { const char *v; double t; } ok[] = {
    { "0", 0 }, { "0.0", 0 }, { "1", 1 }, { "1.0", 1 }, { " 0.5 ", 0.5 }, { "2e-1", 0.2 },
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    wd_request_t r;
    if (parse_ok(KV("model", "whisper-1", "temperature", ok[i].v, "file", NULL), T, &english,
                 &r) == 0)
      WD_CHECK_NEAR(r.temperature, ok[i].t, 1e-12);
    wd_request_clear(&r);
    wd_multipart_free(g_form.form);
  }
  static const char *const bad_type[] = { "abc", "0.5x", "nan", "inf", "-inf", "--1", "0 .5" };
  for (size_t i = 0; i < sizeof bad_type / sizeof bad_type[0]; i++)
    parse_fail(KV("model", "whisper-1", "temperature", bad_type[i], "file", NULL), T, &english,
               400, "temperature", NULL, "Invalid value for 'temperature'");
  parse_fail(KV("model", "whisper-1", "temperature", "1.1", "file", NULL), T, &english, 400,
             "temperature", "invalid_value", "not between 0 and 1");
  parse_fail(KV("model", "whisper-1", "temperature", "-0.1", "file", NULL), T, &english, 400,
             "temperature", "invalid_value", "not between 0 and 1");
}

WD_TEST(language_rules) {
  wd_request_t r;
  if (parse_ok(KV("model", "whisper-1", "language", "De", "file", NULL), T, &multi, &r) == 0)
    WD_CHECK_EQ_STR(r.language, "de");
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  /* English on an English-only model is fine. */
  if (parse_ok(KV("model", "tiny.en", "language", "en", "file", NULL), T, &english, &r) == 0)
    WD_CHECK_EQ_STR(r.language, "en");
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  if (parse_ok(KV("model", "whisper-1", "language", "yue", "file", NULL), T, &v3, &r) == 0)
    WD_CHECK_EQ_STR(r.language, "yue");
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  parse_fail(KV("model", "whisper-1", "language", "english", "file", NULL), T, &multi, 400,
             "language", "invalid_language",
             "Invalid language 'english'. Language parameter must be specified in ISO-639-1 "
             "format.");
  parse_fail(KV("model", "whisper-1", "language", "xx", "file", NULL), T, &multi, 400, "language",
             NULL, "Invalid language 'xx'");
  parse_fail(KV("model", "tiny.en", "language", "de", "file", NULL), T, &english, 400, "language",
             "unsupported_language", "Model `tiny.en` is English-only");
  parse_fail(KV("model", "whisper-1", "language", "yue", "file", NULL), T, &multi, 400,
             "language", "unsupported_language", "does not support language 'yue'");
}

WD_TEST(translations) {
  wd_request_t r;
  /* language, timestamp_granularities and stream are not translation
   * fields: ignored, even when they would be refused on transcriptions. */
  if (parse_ok(KV("model", "whisper-1", "language", "xx", "stream", "maybe",
                  "timestamp_granularities[]", "word", "file", NULL),
               TR, &multi, &r) == 0) {
    WD_CHECK(r.language == NULL);
    WD_CHECK_EQ_INT(r.stream, 0);
    WD_CHECK_EQ_INT(r.timestamps_word, 0);
    WD_CHECK_EQ_INT(r.task, TR);
  }
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  parse_fail(KV("model", "tiny.en", "file", NULL), TR, &english, 400, "model", "unsupported_model",
             "Model `tiny.en` is English-only and cannot translate.");
  parse_fail(KV("model", "whisper-1", "file", NULL), TR, &turbo, 400, "model",
             "unsupported_model", "was not trained to translate");
  /* The model is checked before the English-only refusal. */
  parse_fail(KV("model", "nope", "file", NULL), TR, &english, 404, NULL, "model_not_found",
             "`nope`");
}

WD_TEST(timestamp_granularities_spellings) {
  static const char *const spellings[] = { "timestamp_granularities[]", "timestamp_granularities",
                                           "timestamp_granularities[0]" };
  for (size_t i = 0; i < 3; i++) {
    wd_request_t r;
    if (parse_ok(KV("model", "whisper-1", spellings[i], "segment", "file", NULL), T, &english,
                 &r) == 0)
      WD_CHECK_EQ_INT(r.timestamps_segment, 1);
    wd_request_clear(&r);
    wd_multipart_free(g_form.form);
    if (parse_ok(KV("model", "whisper-1", "response_format", "verbose_json", spellings[i], "word",
                    "file", NULL),
                 T, &english, &r) == 0) {
      WD_CHECK_EQ_INT(r.timestamps_word, 1);
      WD_CHECK_EQ_INT(r.timestamps_segment, 0);
    }
    wd_request_clear(&r);
    wd_multipart_free(g_form.form);
  }
  /* Not the array: a different field, ignored. */
  wd_request_t r;
  if (parse_ok(KV("model", "whisper-1", "timestamp_granularities[x]", "word",
                  "timestamp_granularitiesX", "word", "file", NULL),
               T, &english, &r) == 0)
    WD_CHECK_EQ_INT(r.timestamps_word, 0);
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  /* json + word is a 400 on the real API too (param timestamp_granularities). */
  parse_fail(KV("model", "whisper-1", "timestamp_granularities[]", "segment",
                "timestamp_granularities[]", "word", "file", NULL),
             T, &english, 400, "timestamp_granularities", "invalid_value",
             "requires response_format 'verbose_json'");
  parse_fail(KV("model", "whisper-1", "response_format", "text", "timestamp_granularities[]",
                "word", "file", NULL),
             T, &english, 400, "timestamp_granularities", NULL, "verbose_json");
  parse_fail(KV("model", "whisper-1", "timestamp_granularities[]", "sentence", "file", NULL), T,
             &english, 400, "timestamp_granularities", "invalid_value",
             "'sentence' is not one of ['word', 'segment']");
}

WD_TEST(stream_values) {
  static const struct { const char *v; int s; } ok[] = {
    { "true", 1 }, { "false", 0 }, { "TRUE", 1 }, { "False", 0 }, { "1", 1 }, { "0", 0 },
    { "", 0 },
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    wd_request_t r;
    if (parse_ok(KV("model", "whisper-1", "stream", ok[i].v, "file", NULL), T, &english, &r) == 0)
      WD_CHECK_EQ_INT(r.stream, ok[i].s);
    wd_request_clear(&r);
    wd_multipart_free(g_form.form);
  }
  parse_fail(KV("model", "whisper-1", "stream", "yes", "file", NULL), T, &english, 400, "stream",
             NULL, "expected true or false");
}

/* chunking_strategy as the SDKs send it: "auto", or the object flattened
 * into chunking_strategy[key] fields (openai-python 3.x, captured), or a
 * JSON object as curl users write it; OpenAI's server_vad defaults fill
 * the members left out. */
WD_TEST(chunking_strategy_forms) {
  wd_request_t r;
  if (parse_ok(KV("model", "whisper-1", "chunking_strategy", "auto", "file", NULL), T, &english,
               &r) == 0)
    WD_CHECK(r.chunking.set && r.chunking.is_auto);
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  if (parse_ok(KV("model", "whisper-1", "chunking_strategy[type]", "server_vad",
                  "chunking_strategy[threshold]", "0.6", "chunking_strategy[prefix_padding_ms]",
                  "100", "chunking_strategy[silence_duration_ms]", "700", "file", NULL),
               T, &english, &r) == 0) {
    WD_CHECK(r.chunking.set && !r.chunking.is_auto && r.chunking.threshold == 0.6);
    WD_CHECK_EQ_INT(r.chunking.prefix_padding_ms, 100);
    WD_CHECK_EQ_INT(r.chunking.silence_duration_ms, 700);
  }
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  if (parse_ok(KV("model", "whisper-1", "chunking_strategy",
                  "{\"type\": \"server_vad\", \"threshold\": 0.25}", "file", NULL),
               T, &english, &r) == 0) {
    WD_CHECK(r.chunking.set && r.chunking.threshold == 0.25);
    WD_CHECK_EQ_INT(r.chunking.prefix_padding_ms, 300);
    WD_CHECK_EQ_INT(r.chunking.silence_duration_ms, 200);
  }
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  if (parse_ok(KV("model", "whisper-1", "file", NULL), T, &english, &r) == 0)
    WD_CHECK(!r.chunking.set);
  wd_request_clear(&r);
  wd_multipart_free(g_form.form);
  parse_fail(KV("model", "whisper-1", "chunking_strategy", "manual", "file", NULL), T, &english,
             400, "chunking_strategy", "invalid_value", "server_vad");
  parse_fail(KV("model", "whisper-1", "chunking_strategy[type]", "semantic_vad", "file", NULL), T,
             &english, 400, "chunking_strategy", "invalid_value", "server_vad");
  parse_fail(KV("model", "whisper-1", "chunking_strategy[type]", "server_vad",
                "chunking_strategy[threshold]", "1.5", "file", NULL),
             T, &english, 400, "chunking_strategy", "invalid_value", "threshold");
  parse_fail(KV("model", "whisper-1", "chunking_strategy[type]", "server_vad",
                "chunking_strategy[silence_duration_ms]", "soon", "file", NULL),
             T, &english, 400, "chunking_strategy", "invalid_value", "silence_duration_ms");
  parse_fail(KV("model", "whisper-1", "chunking_strategy", "{\"type\": \"server_vad\"",
                "file", NULL), T, &english, 400, "chunking_strategy", "invalid_value", "auto");
  parse_fail(KV("model", "whisper-1", "chunking_strategy", "auto", "chunking_strategy[type]",
                "server_vad", "file", NULL), T, &english, 400, "chunking_strategy",
             "invalid_value", "both");
}

/* include: the array spellings, "logprobs" alone, json formats only. */
WD_TEST(include_logprobs) {
  static const char *const spellings[] = { "include[]", "include", "include[0]" };
  for (size_t i = 0; i < 3; i++) {
    wd_request_t r;
    if (parse_ok(KV("model", "whisper-1", spellings[i], "logprobs", "file", NULL), T, &english,
                 &r) == 0)
      WD_CHECK_EQ_INT(r.logprobs, 1);
    wd_request_clear(&r);
    wd_multipart_free(g_form.form);
  }
  parse_fail(KV("model", "whisper-1", "include[]", "logits", "file", NULL), T, &english, 400,
             "include", "invalid_value", "'logits' is not one of ['logprobs']");
  parse_fail(KV("model", "whisper-1", "include[]", "logprobs", "response_format", "vtt", "file",
                NULL), T, &english, 400, "include", "invalid_value", "requires response_format");
}

WD_TEST(repeated_fields_last_wins_and_file_anywhere) {
  wd_request_t r;
  form_t *f = &g_form;
  f->len = 0;
  form_add(f, "model", "nope", 4, NULL);
  form_add(f, "file", "one", 3, "1.wav");
  form_add(f, "model", "whisper-1", 9, NULL);
  form_add(f, "file", "second", 6, NULL); /* no filename: still the file */
  form_add(f, "response_format", "text", 4, NULL);
  f->len += (size_t)sprintf(f->buf + f->len, "--B--");
  char err[128];
  WD_CHECK_EQ_INT(wd_multipart_parse("multipart/form-data; boundary=B", f->buf, f->len, &f->form,
                                     err, sizeof err), 0);
  wd_api_error_t e;
  WD_CHECK_EQ_INT(wd_request_parse(f->form, T, &english, &r, &e), 0);
  WD_CHECK_EQ_STR(r.model, "whisper-1");
  WD_CHECK_EQ_INT(r.file_len, 6);
  WD_CHECK(r.filename == NULL);
  WD_CHECK_EQ_INT(r.format, WD_FMT_TEXT);
  wd_request_clear(&r);
  wd_multipart_free(f->form);
}

WD_TEST(nul_in_text_field) {
  form_t *f = &g_form;
  f->len = 0;
  form_add(f, "model", "whisper-1\0x", 11, NULL);
  form_add(f, "file", "a", 1, "a.wav");
  f->len += (size_t)sprintf(f->buf + f->len, "--B--");
  char err[128];
  WD_CHECK_EQ_INT(wd_multipart_parse("multipart/form-data; boundary=B", f->buf, f->len, &f->form,
                                     err, sizeof err), 0);
  wd_request_t r;
  wd_api_error_t e;
  WD_CHECK_EQ_INT(wd_request_parse(f->form, T, &english, &r, &e), 400);
  WD_CHECK_EQ_STR(e.param, "model");
  WD_CHECK(strstr(e.message, "NUL") != NULL);
  wd_multipart_free(f->form);
}

WD_TEST(empty_file_is_accepted_here) {
  /* The audio decoder refuses it later with the right message. */
  form_t *f = &g_form;
  f->len = 0;
  form_add(f, "model", "whisper-1", 9, NULL);
  form_add(f, "file", "", 0, "empty.wav");
  f->len += (size_t)sprintf(f->buf + f->len, "--B--");
  char err[128];
  WD_CHECK_EQ_INT(wd_multipart_parse("multipart/form-data; boundary=B", f->buf, f->len, &f->form,
                                     err, sizeof err), 0);
  wd_request_t r;
  wd_api_error_t e;
  WD_CHECK_EQ_INT(wd_request_parse(f->form, T, &english, &r, &e), 0);
  WD_CHECK_EQ_INT(r.file_len, 0);
  wd_request_clear(&r);
  wd_multipart_free(f->form);
}

/*
 * A toy vocabulary: token i < 256 is byte i, so ids of ASCII text are its
 * bytes; the other 50000 text tokens are distinct 3-byte strings of high
 * bytes that ASCII never merges into.
 */
static wd_tokenizer_t *byte_tokenizer(void) {
  enum { N = 50256 };
  static char blob[N * 3];
  static const char *toks[N];
  static size_t lens[N];
  for (int i = 0; i < N; i++) {
    char *b = &blob[i * 3];
    if (i < 256) {
      b[0] = (char)i;
      lens[i] = 1;
    } else {
      const int k = i - 256;
      b[0] = (char)(0x80 + k % 128);
      b[1] = (char)(0x80 + k / 128 % 128);
      b[2] = (char)(0x80 + k / 16384);
      lens[i] = 3;
    }
    toks[i] = b;
  }
  wd_tokenizer_t *t = NULL;
  int rc = wd_tokenizer_new(toks, lens, N, 51864, &t);
  WD_CHECK_EQ_INT(rc, 0);
  return t;
}

WD_TEST(prompt_is_space_plus_stripped_text) {
  wd_tokenizer_t *tok = byte_tokenizer();
  if (!tok)
    return;
  wd_request_t r = { 0 };
  int32_t *ids = NULL;
  int n = -1;
  WD_CHECK_EQ_INT(wd_request_prompt_tokens(&r, tok, &ids, &n), 0); /* no prompt */
  WD_CHECK(ids == NULL && n == 0);
  r.prompt = strdup(" \t Hi.\r\n\v");
  WD_CHECK_EQ_INT(wd_request_prompt_tokens(&r, tok, &ids, &n), 0);
  WD_CHECK_EQ_INT(n, 4);
  if (ids && n == 4) {
    WD_CHECK_EQ_INT(ids[0], ' ');
    WD_CHECK_EQ_INT(ids[1], 'H');
    WD_CHECK_EQ_INT(ids[2], 'i');
    WD_CHECK_EQ_INT(ids[3], '.');
  }
  free(ids);
  /* Only white space: openai encodes " " (the prompt is truthy). */
  free(r.prompt);
  r.prompt = strdup("   ");
  WD_CHECK_EQ_INT(wd_request_prompt_tokens(&r, tok, &ids, &n), 0);
  WD_CHECK_EQ_INT(n, 1);
  free(ids);
  WD_CHECK_EQ_INT(wd_request_prompt_tokens(&r, NULL, &ids, &n), WD_EINVAL);
  wd_request_clear(&r);
  wd_tokenizer_free(tok);
}

int main(void) { return wd_test_main(); }
