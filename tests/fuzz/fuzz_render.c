/*
 * fuzz_render.c - the transcript renderers (core/render.c): text, segments,
 * SRT, WebVTT, JSON and verbose_json with every part flag, over transcripts
 * whose text is hostile (any bytes but NUL: a model can emit any token
 * sequence, and a sequence may split a UTF-8 character or spell "-->").
 *
 * Input, read front to back (fuzz_reader_t, zeros past the end): a flags
 * byte (task, language choice, detection probabilities), a duration, the
 * transcript text, then up to 8 segments, each with times, text, tokens and
 * up to 8 words. Times are what a decoder can produce: finite, 0 to about
 * 12 days, in steps of 10 ms, in any order. Checks: every output is valid
 * UTF-8, and JSON output parses back.
 */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "decode.h"
#include "fuzz_common.h"
#include "render.h"
#include "timing.h"

/* Codes a decoder can set: real ones, large-v3's "yue", and empty. */
static const char *const k_langs[] = { "en", "de", "yue", "zh", "", "auto", "haw", "jw" };

/* A NUL-terminated copy of a slice with NUL bytes dropped (C strings). */
static char *text_of(fuzz_reader_t *r, size_t max) {
  size_t n;
  const uint8_t *s = fuzz_bytes(r, max, &n);
  char *out = malloc(n + 1);
  if (!out)
    abort();
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] != '\0')
      out[k++] = (char)s[i];
  out[k] = '\0';
  return out;
}

static double time_of(fuzz_reader_t *r) { return (double)(fuzz_u32(r) % 100000000u) / 100.0; }

static float prob_of(fuzz_reader_t *r) { return (float)fuzz_u8(r) / 255.0f; }

/* Valid UTF-8 throughout: the repair pass must be the identity on it. */
static void check_utf8(const char *s) {
  const size_t n = strlen(s);
  char *fixed = wd_render_utf8_dup(s, n);
  FUZZ_CHECK(fixed != NULL);
  FUZZ_CHECK(strcmp(fixed, s) == 0);
  free(fixed);
}

static void check_json(const char *s) {
  json_error_t e;
  json_t *j = json_loads(s, 0, &e);
  FUZZ_CHECK(j != NULL && json_is_object(j));
  FUZZ_CHECK(json_object_get(j, "text") != NULL);
  json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_reader_t r = { data, size, 0 };
  wd_transcript_t t;
  memset(&t, 0, sizeof t);
  const uint8_t flags = fuzz_u8(&r);
  const char *task = (flags & 1) ? "translate" : "transcribe";
  snprintf(t.language, sizeof t.language, "%s", k_langs[(flags >> 1) & 7]);
  t.language_prob = prob_of(&r);
  if (flags & 16) {
    t.n_language_probs = 1 + (flags >> 5) % 5;
    for (int i = 0; i < t.n_language_probs; i++) {
      snprintf(t.language_probs[i].code, sizeof t.language_probs[i].code, "%s",
               k_langs[i % 4]);
      t.language_probs[i].prob = prob_of(&r);
    }
  }
  t.duration = time_of(&r);
  t.text = text_of(&r, 255);
  t.n_segments = fuzz_u8(&r) % 9;
  t.segments = calloc((size_t)t.n_segments + 1, sizeof *t.segments);
  if (!t.segments)
    abort();
  for (int i = 0; i < t.n_segments; i++) {
    wd_segment_t *s = &t.segments[i];
    s->id = i;
    s->seek = (int)(fuzz_u32(&r) % 1000000u);
    s->start = time_of(&r);
    s->end = time_of(&r);
    s->text = text_of(&r, 255);
    s->temperature = prob_of(&r);
    s->avg_logprob = -prob_of(&r) * 10.0f;
    s->compression_ratio = prob_of(&r) * 5.0f;
    s->no_speech_prob = prob_of(&r);
    s->n_tokens = fuzz_u8(&r) % 16;
    s->tokens = malloc(((size_t)s->n_tokens + 1) * sizeof *s->tokens);
    if (!s->tokens)
      abort();
    for (int k = 0; k < s->n_tokens; k++)
      s->tokens[k] = (int32_t)(fuzz_u32(&r) % 51866u);
    s->n_words = fuzz_u8(&r) % 9;
    s->words = s->n_words ? calloc((size_t)s->n_words, sizeof *s->words) : NULL;
    if (s->n_words && !s->words)
      abort();
    for (int k = 0; k < s->n_words; k++) {
      s->words[k].word = text_of(&r, 64);
      s->words[k].start = time_of(&r);
      s->words[k].end = time_of(&r);
      s->words[k].probability = prob_of(&r);
    }
  }

  static const wd_format_t fmts[] = { WD_FMT_TEXT, WD_FMT_SEGMENTS, WD_FMT_SRT, WD_FMT_VTT,
                                      WD_FMT_JSON, WD_FMT_VERBOSE_JSON };
  for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
    char *out = NULL;
    FUZZ_CHECK(wd_render(&t, fmts[f], task, &out) == 0 && out != NULL);
    check_utf8(out);
    if (fmts[f] == WD_FMT_JSON || fmts[f] == WD_FMT_VERBOSE_JSON)
      check_json(out);
    free(out);
  }
  for (unsigned fl = 0; fl < 8; fl++) {
    char *out = NULL;
    FUZZ_CHECK(wd_render_verbose_json(&t, task, fl, &out) == 0 && out != NULL);
    check_utf8(out);
    check_json(out);
    free(out);
  }
  wd_transcript_free(&t);
  return 0;
}
