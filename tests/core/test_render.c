/*
 * test_render.c - SRT, WebVTT, text, segment lines and OpenAI JSON from a
 * fixed transcript, byte for byte.
 */
#include <jansson.h>
#include <stdlib.h>

#include "error.h"
#include "render.h"
#include "wd_test.h"

static wd_transcript_t sample(void) {
  static int32_t t0[] = { 50363, 843, 50750 }, t1[] = { 50750, 1265, 50900 };
  static wd_segment_t segs[2];
  segs[0] = (wd_segment_t){ .id = 0, .start = 0.0, .end = 7.74, .text = " And so --> my fellow",
                            .tokens = t0, .n_tokens = 3, .avg_logprob = -0.25f,
                            .compression_ratio = 1.25f, .no_speech_prob = 0.0625f };
  segs[1] = (wd_segment_t){ .id = 1, .start = 7.74, .end = 3723.5, .text = " ask what ",
                            .tokens = t1, .n_tokens = 3 };
  wd_transcript_t t = { .segments = segs, .n_segments = 2,
                        .text = " And so --> my fellow ask what ", .duration = 11.0 };
  strcpy(t.language, "en");
  return t;
}

/* The first segment object of a verbose_json document. */
static json_t *s0_text_holder(json_t *j) { return json_array_get(json_object_get(j, "segments"), 0); }

static void check(wd_format_t f, const char *want) {
  wd_transcript_t t = sample();
  char *s = NULL;
  WD_CHECK_EQ_INT(wd_render(&t, f, "transcribe", &s), 0);
  WD_CHECK_EQ_STR(s, want);
  free(s);
}

WD_TEST(srt) {
  check(WD_FMT_SRT, "1\n00:00:00,000 --> 00:00:07,740\nAnd so -> my fellow\n\n"
                    "2\n00:00:07,740 --> 01:02:03,500\nask what\n\n");
}

WD_TEST(vtt) {
  check(WD_FMT_VTT, "WEBVTT\n\n00:00:00.000 --> 00:00:07.740\nAnd so -> my fellow\n\n"
                    "00:00:07.740 --> 01:02:03.500\nask what\n\n");
}

WD_TEST(text_and_segments) {
  check(WD_FMT_TEXT, "And so --> my fellow ask what\n");
  check(WD_FMT_SEGMENTS, "[00:00:00.000 --> 00:00:07.740]  And so -> my fellow\n"
                         "[00:00:07.740 --> 01:02:03.500]  ask what\n");
}

WD_TEST(verbose_json_shape) {
  wd_transcript_t t = sample();
  char *s = NULL;
  WD_CHECK_EQ_INT(wd_render(&t, WD_FMT_VERBOSE_JSON, "transcribe", &s), 0);
  json_error_t e;
  json_t *j = s ? json_loads(s, 0, &e) : NULL;
  WD_CHECK(j != NULL);
  if (j) {
    WD_CHECK_EQ_STR(json_string_value(json_object_get(j, "task")), "transcribe");
    WD_CHECK_EQ_STR(json_string_value(json_object_get(j, "language")), "english");
    WD_CHECK_NEAR(json_real_value(json_object_get(j, "duration")), 11.0, 0);
    WD_CHECK_EQ_STR(json_string_value(json_object_get(j, "text")), "And so --> my fellow ask what");
    WD_CHECK_EQ_STR(json_string_value(json_object_get(s0_text_holder(j), "text")),
                    " And so --> my fellow");
    json_t *u = json_object_get(j, "usage");
    WD_CHECK_EQ_STR(json_string_value(json_object_get(u, "type")), "duration");
    WD_CHECK_EQ_INT(json_integer_value(json_object_get(u, "seconds")), 11);
    json_t *segs = json_object_get(j, "segments");
    WD_CHECK_EQ_INT(json_array_size(segs), 2);
    json_t *s0 = json_array_get(segs, 0);
    WD_CHECK_NEAR(json_real_value(json_object_get(s0, "end")), 7.74, 0);
    WD_CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(s0, "tokens"), 2)), 50750);
    WD_CHECK_NEAR(json_real_value(json_object_get(s0, "avg_logprob")), -0.25, 0);
    WD_CHECK(strstr(s, "7.74,") != NULL); /* shortest form, not 7.7400000000000002 */
    json_decref(j);
  }
  free(s);
  check(WD_FMT_JSON, "{\"text\":\"And so --> my fellow ask what\","
                    "\"usage\":{\"type\":\"duration\",\"seconds\":11}}");
}

WD_TEST(format_names) {
  wd_format_t f;
  WD_CHECK_EQ_INT(wd_format_parse("verbose_json", &f), 0);
  WD_CHECK_EQ_INT(f, WD_FMT_VERBOSE_JSON);
  WD_CHECK_EQ_INT(wd_format_parse("txt", &f), 0);
  WD_CHECK_EQ_INT(f, WD_FMT_SEGMENTS);
  WD_CHECK_EQ_INT(wd_format_parse("docx", &f), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_format_parse(NULL, &f), WD_EINVAL);
}

WD_TEST(empty_transcript) {
  wd_transcript_t t = { 0 };
  strcpy(t.language, "en");
  char *s = NULL;
  WD_CHECK_EQ_INT(wd_render(&t, WD_FMT_SRT, NULL, &s), 0);
  WD_CHECK_EQ_STR(s, "");
  free(s);
  WD_CHECK_EQ_INT(wd_render(&t, WD_FMT_VERBOSE_JSON, NULL, &s), 0);
  WD_CHECK(s && strstr(s, "\"segments\":[]") != NULL);
  free(s);
}

WD_TEST(usage_seconds_round_up) {
  WD_CHECK_EQ_INT(wd_render_usage_seconds(8.47), 9);
  WD_CHECK_EQ_INT(wd_render_usage_seconds(11.0), 11);
  WD_CHECK_EQ_INT(wd_render_usage_seconds(0.01), 1);
  WD_CHECK_EQ_INT(wd_render_usage_seconds(0.0), 0);
  WD_CHECK_EQ_INT(wd_render_usage_seconds(-1.0), 0);
  WD_CHECK_EQ_INT(wd_render_usage_seconds(NAN), 0);
}

/* Python's bytes.decode("utf-8", errors="replace") on the same inputs. */
WD_TEST(utf8_repair_maximal_subparts) {
  static const struct { const char *in; size_t n; const char *want; } cases[] = {
    { "abc", 3, "abc" },
    { "\xC3\xA9", 2, "\xC3\xA9" },                       /* é */
    { "\xC3", 1, "\xEF\xBF\xBD" },                       /* cut after the lead byte */
    { "a\xE2\x82", 3, "a\xEF\xBF\xBD" },                 /* one U+FFFD for E2 82 */
    { "\xE2\x82x", 3, "\xEF\xBF\xBDx" },
    { "\xF0\x9F\x98\x80", 4, "\xF0\x9F\x98\x80" },     /* emoji */
    { "\xF0\x9F\x98", 3, "\xEF\xBF\xBD" },
    { "\x80\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD" },      /* lone continuations */
    { "\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD" },      /* overlong */
    { "\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" }, /* surrogate */
    { "\xF4\x90\x80\x80", 4,
      "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" }, /* above U+10FFFF */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *s = wd_render_utf8_dup(cases[i].in, cases[i].n);
    WD_CHECK_EQ_STR(s, cases[i].want);
    free(s);
  }
}

WD_TEST(split_character_still_renders_json) {
  static wd_segment_t seg = { .text = " caf\xC3" };
  wd_transcript_t t = { .segments = &seg, .n_segments = 1, .text = " caf\xC3", .duration = 1 };
  strcpy(t.language, "fr");
  char *s = NULL;
  WD_CHECK_EQ_INT(wd_render(&t, WD_FMT_VERBOSE_JSON, "transcribe", &s), 0);
  WD_CHECK(s && strstr(s, "\"text\":\"caf\xEF\xBF\xBD\"") != NULL);
  WD_CHECK(s && strstr(s, "\"language\":\"french\"") != NULL);
  free(s);
  WD_CHECK_EQ_INT(wd_render(&t, WD_FMT_TEXT, NULL, &s), 0);
  WD_CHECK_EQ_STR(s, "caf\xEF\xBF\xBD\n");
  free(s);
}

int main(void) { return wd_test_main(); }
