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
  check(WD_FMT_TEXT, "And so --> my fellow ask what \n");
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
    WD_CHECK_EQ_STR(json_string_value(json_object_get(j, "text")), "And so --> my fellow ask what ");
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
  check(WD_FMT_JSON, "{\"text\":\"And so --> my fellow ask what \"}");
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

int main(void) { return wd_test_main(); }
