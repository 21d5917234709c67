/*
 * test_diar_assign.c - core/diar_assign.c on hand-made transcripts and
 * turns (cuts where the words change speaker, overlaps, gaps, no turns),
 * the known-speaker matching and labels, and render.c's diarized formats.
 */
#include <stdlib.h>
#include <string.h>

#include "diar_assign.h"
#include "error.h"
#include "render.h"
#include "wd_test.h"

/* One segment's words: "text@start-end" items. */
typedef struct {
  const char *w;
  double s, e;
} word_spec_t;

/* A segment of words (n_words 0: none), its text the words joined, or
 * text when given. */
static void make_seg(wd_segment_t *g, int id, double start, double end, const word_spec_t *w,
                     int n_words, const char *text) {
  memset(g, 0, sizeof *g);
  g->id = id;
  g->start = start;
  g->end = end;
  size_t n = 0;
  for (int i = 0; i < n_words; i++)
    n += strlen(w[i].w);
  g->text = malloc(n + (text ? strlen(text) : 0) + 1);
  g->text[0] = '\0';
  if (text)
    strcpy(g->text, text);
  if (n_words) {
    g->words = calloc((size_t)n_words, sizeof *g->words);
    g->n_words = n_words;
    for (int i = 0; i < n_words; i++) {
      g->words[i] = (wd_word_t){ strdup(w[i].w), w[i].s, w[i].e, 0.9f };
      if (!text)
        strcat(g->text, w[i].w);
    }
  }
}

static void finish(wd_transcript_t *t) {
  size_t n = 0;
  for (int i = 0; i < t->n_segments; i++)
    n += strlen(t->segments[i].text);
  t->text = malloc(n + 1);
  t->text[0] = '\0';
  for (int i = 0; i < t->n_segments; i++)
    strcat(t->text, t->segments[i].text);
}

WD_TEST(cut_at_change_of_speaker) {
  /* One Whisper segment; speaker 1 speaks to 2.0 s, speaker 0 after. */
  wd_transcript_t t = { .n_segments = 2, .duration = 6.0 };
  t.segments = calloc(2, sizeof *t.segments);
  const word_spec_t w0[] = { { " Hello", 0.0, 0.5 }, { " there.", 0.6, 1.9 },
                             { " Hi,", 2.1, 2.5 },    { " how", 2.6, 2.9 },
                             { " are", 3.0, 3.2 },    { " you?", 3.3, 3.8 } };
  make_seg(&t.segments[0], 0, 0.0, 4.0, w0, 6, NULL);
  const word_spec_t w1[] = { { " Fine.", 4.2, 4.9 } };
  make_seg(&t.segments[1], 1, 4.0, 5.0, w1, 1, NULL);
  finish(&t);
  wd_diar_turn_t turns[] = { { 0.0, 2.0, 1 }, { 2.0, 4.0, 0 }, { 4.1, 5.0, 1 } };
  const wd_diar_result_t r = { turns, 3, 2, NULL };
  wd_diar_segs_t d;
  WD_CHECK_EQ_INT(wd_diar_assign(&t, &r, &d), 0);
  WD_CHECK_EQ_INT(d.n_segs, 3);
  WD_CHECK_EQ_INT(d.n_speakers, 2);
  if (d.n_segs == 3) {
    WD_CHECK_EQ_STR(d.segs[0].text, " Hello there.");
    WD_CHECK_EQ_STR(d.segs[1].text, " Hi, how are you?");
    WD_CHECK_EQ_STR(d.segs[2].text, " Fine.");
    /* Numbered in order of first appearance: the turns' speaker 1 is ours 0. */
    WD_CHECK_EQ_INT(d.segs[0].speaker, 0);
    WD_CHECK_EQ_INT(d.segs[1].speaker, 1);
    WD_CHECK_EQ_INT(d.segs[2].speaker, 0);
    WD_CHECK_EQ_INT(d.turn_speaker[0], 1);
    WD_CHECK_EQ_INT(d.turn_speaker[1], 0);
    /* The first piece starts with the segment, the last ends with it; the
     * cut is at the words. */
    WD_CHECK_NEAR(d.segs[0].start, 0.0, 1e-12);
    WD_CHECK_NEAR(d.segs[0].end, 1.9, 1e-12);
    WD_CHECK_NEAR(d.segs[1].start, 2.1, 1e-12);
    WD_CHECK_NEAR(d.segs[1].end, 4.0, 1e-12);
  }
  char *labels[2] = { 0 };
  WD_CHECK_EQ_INT(wd_diar_labels(&d, NULL, NULL, labels), 0);
  WD_CHECK_EQ_STR(labels[0], "A");
  WD_CHECK_EQ_STR(labels[1], "B");
  const char *const *lab = (const char *const *)labels;
  char *out = NULL;
  WD_CHECK_EQ_INT(wd_render_diarized(&t, &d, lab, WD_FMT_DIARIZED_JSON, "transcribe", &out), 0);
  WD_CHECK_EQ_STR(out,
                  "{\"task\":\"transcribe\",\"duration\":6.0,\"text\":\"Hello there. Hi, how are "
                  "you? Fine.\",\"segments\":[{\"type\":\"transcript.text.segment\",\"id\":"
                  "\"seg_0\",\"start\":0.0,\"end\":1.9,\"speaker\":\"A\",\"text\":\" Hello "
                  "there.\"},{\"type\":\"transcript.text.segment\",\"id\":\"seg_1\",\"start\":"
                  "2.1,\"end\":4.0,\"speaker\":\"B\",\"text\":\" Hi, how are you?\"},{\"type\":"
                  "\"transcript.text.segment\",\"id\":\"seg_2\",\"start\":4.0,\"end\":5.0,"
                  "\"speaker\":\"A\",\"text\":\" Fine.\"}],\"usage\":{\"type\":\"duration\","
                  "\"seconds\":6}}");
  free(out);
  WD_CHECK_EQ_INT(wd_render_diarized(&t, &d, lab, WD_FMT_TEXT, "transcribe", &out), 0);
  WD_CHECK_EQ_STR(out, "A: Hello there.\nB: Hi, how are you?\nA: Fine.\n");
  free(out);
  WD_CHECK_EQ_INT(wd_render_diarized(&t, &d, lab, WD_FMT_SRT, "transcribe", &out), 0);
  WD_CHECK_EQ_STR(out, "1\n00:00:00,000 --> 00:00:01,900\nA: Hello there.\n\n"
                       "2\n00:00:02,100 --> 00:00:04,000\nB: Hi, how are you?\n\n"
                       "3\n00:00:04,000 --> 00:00:05,000\nA: Fine.\n\n");
  free(out);
  WD_CHECK_EQ_INT(wd_render_diarized(&t, &d, lab, WD_FMT_VTT, "transcribe", &out), 0);
  WD_CHECK_EQ_STR(out, "WEBVTT\n\n00:00:00.000 --> 00:00:01.900\n<v A>Hello there.\n\n"
                       "00:00:02.100 --> 00:00:04.000\n<v B>Hi, how are you?\n\n"
                       "00:00:04.000 --> 00:00:05.000\n<v A>Fine.\n\n");
  free(out);
  WD_CHECK_EQ_INT(wd_render_diarized(&t, &d, lab, WD_FMT_JSON, "transcribe", &out), 0);
  WD_CHECK_EQ_STR(out, "{\"text\":\"Hello there. Hi, how are you? Fine.\",\"usage\":{\"type\":"
                       "\"duration\",\"seconds\":6}}");
  free(out);
  WD_CHECK_EQ_INT(wd_render_diarized(&t, &d, lab, WD_FMT_VERBOSE_JSON, "transcribe", &out),
                  WD_EINVAL);
  wd_diar_labels_free(labels, 2);
  wd_diar_segs_free(&d);
  wd_transcript_free(&t);
}

WD_TEST(overlap_gap_and_majority) {
  /* Overlapped speech: speaker 0's turn 0-3, speaker 1's 2.5-6. A word at
   * 2.4-3.0 overlaps 0 by 0.6 and 1 by 0.5: speaker 0. A word at 7.5-7.8
   * is 1.5 s from any turn: the segment's majority (speaker 1, three words
   * to two). A word at 6.3-6.6 is 0.3 s past speaker 1's turn: nearest. */
  wd_transcript_t t = { .n_segments = 1, .duration = 8.0 };
  t.segments = calloc(1, sizeof *t.segments);
  const word_spec_t w[] = { { " one", 0.5, 1.0 }, { " two", 2.4, 3.0 }, { " three", 3.5, 4.0 },
                            { " four", 4.5, 5.0 }, { " five", 6.3, 6.6 },
                            { " six", 7.5, 7.8 } };
  make_seg(&t.segments[0], 0, 0.0, 8.0, w, 6, NULL);
  finish(&t);
  wd_diar_turn_t turns[] = { { 0.0, 3.0, 0 }, { 2.5, 6.0, 1 } };
  const wd_diar_result_t r = { turns, 2, 2, NULL };
  wd_diar_segs_t d;
  WD_CHECK_EQ_INT(wd_diar_assign(&t, &r, &d), 0);
  WD_CHECK_EQ_INT(d.n_segs, 2);
  if (d.n_segs == 2) {
    WD_CHECK_EQ_STR(d.segs[0].text, " one two");
    WD_CHECK_EQ_STR(d.segs[1].text, " three four five six");
    WD_CHECK_EQ_INT(d.segs[0].speaker, 0);
    WD_CHECK_EQ_INT(d.segs[1].speaker, 1);
    WD_CHECK_NEAR(d.segs[1].end, 8.0, 1e-12);
  }
  wd_diar_segs_free(&d);
  wd_transcript_free(&t);
}

WD_TEST(segments_without_words) {
  /* No word timestamps: whole segments by overlap; one far from every turn
   * goes to the nearest, however far; its text stays. */
  wd_transcript_t t = { .n_segments = 3, .duration = 30.0 };
  t.segments = calloc(3, sizeof *t.segments);
  make_seg(&t.segments[0], 0, 0.0, 4.0, NULL, 0, " First.");
  make_seg(&t.segments[1], 1, 4.0, 9.0, NULL, 0, " Second.");
  make_seg(&t.segments[2], 2, 25.0, 29.0, NULL, 0, " Third.");
  finish(&t);
  wd_diar_turn_t turns[] = { { 0.5, 5.0, 2 }, { 5.0, 9.0, 0 }, { 9.5, 12.0, 1 } };
  const wd_diar_result_t r = { turns, 3, 3, NULL };
  wd_diar_segs_t d;
  WD_CHECK_EQ_INT(wd_diar_assign(&t, &r, &d), 0);
  WD_CHECK_EQ_INT(d.n_segs, 3);
  WD_CHECK_EQ_INT(d.n_speakers, 3);
  if (d.n_segs == 3) {
    WD_CHECK_EQ_INT(d.turn_speaker[d.segs[0].speaker], 2);
    WD_CHECK_EQ_INT(d.turn_speaker[d.segs[1].speaker], 0); /* 4 s of 0 over 1 s of 2 */
    WD_CHECK_EQ_INT(d.turn_speaker[d.segs[2].speaker], 1);
    WD_CHECK_EQ_STR(d.segs[2].text, " Third.");
  }
  wd_diar_segs_free(&d);
  wd_transcript_free(&t);
}

WD_TEST(no_turns_is_one_speaker_a) {
  wd_transcript_t t = { .n_segments = 2, .duration = 5.0 };
  t.segments = calloc(2, sizeof *t.segments);
  const word_spec_t w[] = { { " Ask", 0.0, 0.4 }, { " not.", 0.5, 1.0 } };
  make_seg(&t.segments[0], 0, 0.0, 1.0, w, 2, NULL);
  make_seg(&t.segments[1], 1, 1.0, 2.0, NULL, 0, " Why.");
  finish(&t);
  const wd_diar_result_t r = { 0 };
  wd_diar_segs_t d;
  WD_CHECK_EQ_INT(wd_diar_assign(&t, &r, &d), 0);
  WD_CHECK_EQ_INT(d.n_segs, 2);
  WD_CHECK_EQ_INT(d.n_speakers, 1);
  WD_CHECK_EQ_INT(d.turn_speaker[0], -1);
  char *labels[1] = { 0 };
  /* A known speaker cannot name the speaker of no turns. */
  const int known[1] = { 0 };
  const char *names[] = { "agent" };
  WD_CHECK_EQ_INT(wd_diar_labels(&d, known, names, labels), 0);
  WD_CHECK_EQ_STR(labels[0], "A");
  wd_diar_labels_free(labels, 1);
  wd_diar_segs_free(&d);
  /* NULL and an empty transcript. */
  WD_CHECK_EQ_INT(wd_diar_assign(&t, NULL, &d), 0);
  WD_CHECK_EQ_INT(d.n_segs, 2);
  wd_diar_segs_free(&d);
  wd_transcript_free(&t);
  /* Segments without text are left out (Whisper's empty ones). */
  wd_transcript_t blank = { .n_segments = 2, .duration = 3.0 };
  blank.segments = calloc(2, sizeof *blank.segments);
  make_seg(&blank.segments[0], 0, 0.0, 1.0, NULL, 0, " ");
  make_seg(&blank.segments[1], 1, 1.0, 2.0, NULL, 0, " Yes.");
  finish(&blank);
  WD_CHECK_EQ_INT(wd_diar_assign(&blank, NULL, &d), 0);
  WD_CHECK_EQ_INT(d.n_segs, 1);
  if (d.n_segs == 1)
    WD_CHECK_EQ_STR(d.segs[0].text, " Yes.");
  wd_diar_segs_free(&d);
  wd_transcript_free(&blank);
  wd_transcript_t empty = { 0 };
  WD_CHECK_EQ_INT(wd_diar_assign(&empty, NULL, &d), 0);
  WD_CHECK_EQ_INT(d.n_segs, 0);
  WD_CHECK_EQ_INT(d.n_speakers, 0);
  char *out = NULL;
  WD_CHECK_EQ_INT(wd_render_diarized(&empty, &d, NULL, WD_FMT_DIARIZED_JSON, NULL, &out), 0);
  WD_CHECK_EQ_STR(out, "{\"task\":\"transcribe\",\"duration\":0.0,\"text\":\"\",\"segments\":[],"
                       "\"usage\":{\"type\":\"duration\",\"seconds\":0}}");
  free(out);
  wd_diar_segs_free(&d);
}

/* An L2-normalized vector along axes a (weight ca) and b (weight cb). */
static void vec(float *v, int a, float ca, int b, float cb) {
  memset(v, 0, WD_DIAR_EMB_DIM * sizeof *v);
  v[a] += ca;
  v[b] += cb;
  const float n = sqrtf(ca * ca + cb * cb);
  v[a] /= n;
  if (b != a)
    v[b] /= n;
}

WD_TEST(known_speakers_best_pairs_first) {
  /* Three clusters, two references: ref 0 is close to clusters 1 (cos 0.6) and
   * 2 (0.55); ref 1 is close to cluster 1 (0.95) only. Best first: ref 1
   * takes cluster 1, then ref 0 takes cluster 2. Cluster 0 stays unnamed. */
  float cent[3 * WD_DIAR_EMB_DIM], refs[2 * WD_DIAR_EMB_DIM];
  vec(cent, 0, 1, 0, 0);
  vec(cent + WD_DIAR_EMB_DIM, 1, 1, 1, 0);
  vec(cent + 2 * WD_DIAR_EMB_DIM, 2, 1, 2, 0);
  memset(refs, 0, sizeof refs);
  refs[1] = 0.6f, refs[2] = 0.55f, refs[3] = sqrtf(1 - 0.36f - 0.3025f);
  vec(refs + WD_DIAR_EMB_DIM, 1, 0.95f, 4, sqrtf(1 - 0.95f * 0.95f));
  int known[3];
  wd_diar_match_known(cent, 3, refs, 2, 0.5f, known);
  WD_CHECK_EQ_INT(known[0], -1);
  WD_CHECK_EQ_INT(known[1], 1);
  WD_CHECK_EQ_INT(known[2], 0);
  /* Under the threshold: nobody named. */
  wd_diar_match_known(cent, 3, refs, 2, 0.97f, known);
  WD_CHECK_EQ_INT(known[0] + known[1] + known[2], -3);
  /* Labels: names where matched, letters for the rest, skipping none. */
  wd_diar_match_known(cent, 3, refs, 2, 0.5f, known);
  wd_diar_turn_t turns[] = { { 0, 1, 1 }, { 1, 2, 0 }, { 2, 3, 2 }, { 3, 4, 0 } };
  const wd_diar_result_t r = { turns, 4, 3, cent };
  wd_transcript_t t = { .n_segments = 4, .duration = 4 };
  t.segments = calloc(4, sizeof *t.segments);
  for (int i = 0; i < 4; i++)
    make_seg(&t.segments[i], i, i, i + 1, NULL, 0, " x");
  finish(&t);
  wd_diar_segs_t d;
  WD_CHECK_EQ_INT(wd_diar_assign(&t, &r, &d), 0);
  WD_CHECK_EQ_INT(d.n_speakers, 3);
  char *labels[3] = { 0 };
  const char *names[] = { "Alice", "Bob" };
  WD_CHECK_EQ_INT(wd_diar_labels(&d, known, names, labels), 0);
  WD_CHECK_EQ_STR(labels[0], "Bob");   /* turns' 1 first */
  WD_CHECK_EQ_STR(labels[1], "A");     /* turns' 0: unnamed, the first letter */
  WD_CHECK_EQ_STR(labels[2], "Alice"); /* turns' 2 */
  wd_diar_labels_free(labels, 3);
  wd_diar_segs_free(&d);
  wd_transcript_free(&t);
}

WD_TEST(many_letters) {
  /* 28 speakers: A..Z, AA, AB. */
  wd_diar_turn_t turns[28];
  wd_transcript_t t = { .n_segments = 28, .duration = 28 };
  t.segments = calloc(28, sizeof *t.segments);
  for (int i = 0; i < 28; i++) {
    turns[i] = (wd_diar_turn_t){ i, i + 1, i };
    make_seg(&t.segments[i], i, i, i + 1, NULL, 0, " y");
  }
  finish(&t);
  const wd_diar_result_t r = { turns, 28, 28, NULL };
  wd_diar_segs_t d;
  WD_CHECK_EQ_INT(wd_diar_assign(&t, &r, &d), 0);
  char *labels[28] = { 0 };
  WD_CHECK_EQ_INT(wd_diar_labels(&d, NULL, NULL, labels), 0);
  WD_CHECK_EQ_STR(labels[25], "Z");
  WD_CHECK_EQ_STR(labels[26], "AA");
  WD_CHECK_EQ_STR(labels[27], "AB");
  wd_diar_labels_free(labels, 28);
  wd_diar_segs_free(&d);
  wd_transcript_free(&t);
}

int main(void) { return wd_test_main(); }
