/*
 * test_timing.c - core/timing against openai/whisper's timing.py.
 *
 * Golden files (tests/data/timing/, written by
 * tests/tools/gen_timing_golden.py from openai-whisper 20250625 itself) give
 * openai's DTW paths, median filters, word splits, punctuation merges,
 * add_word_timestamps results on hand-made alignments, and whole windows
 * (find_alignment + add_word_timestamps on chosen cross-attention scores).
 * Hand-built cases check the rules one at a time: DTW ties, median filter
 * edges, standardisation, the duration heuristics, segment boundaries, the
 * anomaly score and the seek rules.
 */
#include <stdint.h>
#include <unistd.h>

#include "decode.h"
#include "error.h"
#include "model.h"
#include "timing.h"
#include "tokenizer.h"
#include "wd_synth_model.h"
#include "wd_test.h"
#include "wd_tiktoken.h"

/* ------------------------------------------------------------- fixtures */

static wd_tiktoken_t g_gpt2, g_multi;
static wd_tokenizer_t *g_en, *g_ml;

/* Builds the English-only and multilingual tokenizers once. */
static int setup(void) {
  static int done = 0, ok = 0;
  if (done)
    return ok;
  done = 1;
  if (wd_tiktoken_load(wd_test_data("tokenizer/gpt2.tiktoken"), &g_gpt2) < 0 ||
      wd_tiktoken_load(wd_test_data("tokenizer/multilingual.tiktoken"), &g_multi) < 0)
    return 0;
  ok = wd_tokenizer_new((const char *const *)g_gpt2.tokens, g_gpt2.lens, g_gpt2.n, 51864,
                        &g_en) == 0 &&
       wd_tokenizer_new((const char *const *)g_multi.tokens, g_multi.lens, g_multi.n, 51865,
                        &g_ml) == 0;
  return ok;
}

static const wd_tokenizer_t *vocab_tok(const char *name) {
  return strcmp(name, "gpt2") == 0 ? g_en : g_ml;
}

/* A golden file as whitespace-separated tokens; '#' lines are comments. */
typedef struct {
  char *buf;
  char *p;
} rd_t;

static int rd_open(rd_t *r, const char *name) {
  r->buf = r->p = NULL;
  FILE *f = fopen(wd_test_data(name), "rb");
  if (!f)
    return -1;
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  r->buf = malloc((size_t)n + 1);
  if (!r->buf || fread(r->buf, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(r->buf);
    return -1;
  }
  fclose(f);
  r->buf[n] = '\0';
  for (char *l = r->buf; l && *l;) { /* blank out comment lines */
    char *e = strchr(l, '\n');
    if (*l == '#')
      memset(l, ' ', e ? (size_t)(e - l) : strlen(l));
    l = e ? e + 1 : NULL;
  }
  r->p = r->buf;
  return 0;
}

static const char *rd_tok(rd_t *r) {
  while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r')
    r->p++;
  if (!*r->p)
    return NULL;
  const char *t = r->p;
  while (*r->p && *r->p != ' ' && *r->p != '\n' && *r->p != '\t' && *r->p != '\r')
    r->p++;
  if (*r->p)
    *r->p++ = '\0';
  return t;
}

static int rd_int(rd_t *r) {
  const char *t = rd_tok(r);
  return t ? (int)strtol(t, NULL, 10) : 0;
}

static double rd_dbl(rd_t *r) {
  const char *t = rd_tok(r);
  return t ? strtod(t, NULL) : NAN;
}

/* A hex-encoded UTF-8 string ("-" for ""), malloc'd. */
static char *rd_hex(rd_t *r) {
  const char *t = rd_tok(r);
  if (!t)
    return NULL;
  if (strcmp(t, "-") == 0)
    return strdup("");
  const size_t n = strlen(t) / 2;
  char *s = malloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(t + 2 * i, "%2x", &v);
    s[i] = (char)v;
  }
  s[n] = '\0';
  return s;
}

/* Advances to the next "case"; 0 at the end. */
static int rd_case(rd_t *r) {
  const char *t = rd_tok(r);
  return t && strcmp(t, "case") == 0;
}

static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

/* ------------------------------------------------------------------- DTW */

WD_TEST(dtw_hand_diagonal) {
  /* A clear diagonal of low values (DTW runs on -matrix, so costs are low). */
  const float x[9] = { 0, 5, 5, 5, 0, 5, 5, 5, 0 };
  int ti[6], tt[6];
  const int n = wd_timing_dtw(x, 3, 3, ti, tt);
  WD_CHECK_EQ_INT(n, 3);
  for (int k = 0; k < 3; k++) {
    WD_CHECK_EQ_INT(ti[k], k);
    WD_CHECK_EQ_INT(tt[k], k);
  }
}

WD_TEST(dtw_hand_ties) {
  /* All zeros: at (2,2) every predecessor costs 0, and openai's ties go
   * left; (2,1) has only "up" finite. Path (0,0) (1,0) (1,1). */
  const float x[4] = { 0, 0, 0, 0 };
  int ti[4], tt[4];
  WD_CHECK_EQ_INT(wd_timing_dtw(x, 2, 2, ti, tt), 3);
  const int want_i[3] = { 0, 1, 1 }, want_t[3] = { 0, 0, 1 };
  for (int k = 0; k < 3; k++) {
    WD_CHECK_EQ_INT(ti[k], want_i[k]);
    WD_CHECK_EQ_INT(tt[k], want_t[k]);
  }
  /* One row: all left moves; one column: all up moves. */
  const float row[4] = { 1, 2, 3, 4 };
  WD_CHECK_EQ_INT(wd_timing_dtw(row, 1, 4, ti, tt), 4);
  WD_CHECK_EQ_INT(ti[3], 0);
  WD_CHECK_EQ_INT(tt[3], 3);
  WD_CHECK_EQ_INT(wd_timing_dtw(row, 4, 1, ti, tt), 4);
  WD_CHECK_EQ_INT(ti[3], 3);
  WD_CHECK_EQ_INT(tt[3], 0);
  /* No audio positions: the backtrace walks up the first column at -1. */
  WD_CHECK_EQ_INT(wd_timing_dtw(NULL, 2, 0, ti, tt), 2);
  WD_CHECK_EQ_INT(tt[0], -1);
  WD_CHECK_EQ_INT(ti[1], 1);
}

WD_TEST(dtw_golden) {
  rd_t r;
  WD_CHECK(rd_open(&r, "timing/dtw.txt") == 0);
  int cases = 0, bad = 0;
  while (rd_case(&r)) {
    const int n = rd_int(&r), m = rd_int(&r);
    float *x = malloc((size_t)(n * m) * sizeof *x);
    for (int k = 0; k < n * m; k++)
      x[k] = (float)rd_dbl(&r);
    const int len = rd_int(&r);
    int *wi = malloc((size_t)len * sizeof *wi), *wt = malloc((size_t)len * sizeof *wt);
    for (int k = 0; k < len; k++)
      wi[k] = rd_int(&r);
    for (int k = 0; k < len; k++)
      wt[k] = rd_int(&r);
    int *gi = malloc((size_t)(n + m) * sizeof *gi), *gt = malloc((size_t)(n + m) * sizeof *gt);
    const int got = wd_timing_dtw(x, n, m, gi, gt);
    int same = got == len;
    for (int k = 0; same && k < len; k++)
      same = gi[k] == wi[k] && gt[k] == wt[k];
    if (!same) {
      fprintf(stderr, "dtw case %d (%dx%d): path differs (len %d vs %d)\n", cases, n, m, got, len);
      bad++;
    }
    cases++;
    free(x);
    free(wi);
    free(wt);
    free(gi);
    free(gt);
  }
  free(r.buf);
  WD_CHECK(cases >= 40);
  WD_CHECK_EQ_INT(bad, 0);
}

/* --------------------------------------------------------- median filter */

WD_TEST(median_filter_edges) {
  /* Reflect padding: [4 3 2 | 1 2 3 4 5 | 4 3 2]; every window's median is 3. */
  float x[5] = { 1, 2, 3, 4, 5 };
  WD_CHECK_EQ_INT(wd_timing_median_filter(x, 1, 5, 7), 0);
  for (int k = 0; k < 5; k++)
    WD_CHECK(x[k] == 3.0f);
  /* Rows no longer than width / 2 stay as they are. */
  float y[3] = { 9, -1, 4 };
  WD_CHECK_EQ_INT(wd_timing_median_filter(y, 1, 3, 7), 0);
  WD_CHECK(y[0] == 9 && y[1] == -1 && y[2] == 4);
  /* A spike disappears; edges use the mirrored neighbours. */
  float z[6] = { 0, 0, 10, 0, 0, 7 };
  WD_CHECK_EQ_INT(wd_timing_median_filter(z, 1, 6, 3), 0);
  const float want[6] = { 0, 0, 0, 0, 0, 0 };
  for (int k = 0; k < 6; k++)
    WD_CHECK(z[k] == want[k]);
  WD_CHECK_EQ_INT(wd_timing_median_filter(z, 1, 6, 4), WD_EINVAL); /* even width */
}

WD_TEST(median_filter_golden) {
  rd_t r;
  WD_CHECK(rd_open(&r, "timing/medfilt.txt") == 0);
  int cases = 0, bad = 0;
  while (rd_case(&r)) {
    const int rows = rd_int(&r), len = rd_int(&r), width = rd_int(&r);
    float *x = malloc((size_t)(rows * len) * sizeof *x);
    float *want = malloc((size_t)(rows * len) * sizeof *want);
    for (int k = 0; k < rows * len; k++)
      x[k] = (float)rd_dbl(&r);
    for (int k = 0; k < rows * len; k++)
      want[k] = (float)rd_dbl(&r);
    WD_CHECK_EQ_INT(wd_timing_median_filter(x, rows, len, width), 0);
    for (int k = 0; k < rows * len; k++) {
      if (!same_float(x[k], want[k])) {
        fprintf(stderr, "medfilt case %d (%dx%d w%d) [%d]: %g vs %g\n", cases, rows, len, width,
                k, (double)x[k], (double)want[k]);
        bad++;
        break;
      }
    }
    cases++;
    free(x);
    free(want);
  }
  free(r.buf);
  WD_CHECK(cases >= 40);
  WD_CHECK_EQ_INT(bad, 0);
}

/* ------------------------------------------------------- the matrix */

WD_TEST(standardisation) {
  /* One head, n_sot 1, three tokens, two audio positions, no filtering
   * (width 1). Softmax rows: [.5 .5], [.75 .25], [.25 .75]; per position
   * mean .5 and std sqrt(.125 / 3); the kept row is token 1:
   * [(.75 - .5) / std, (.25 - .5) / std] = [1.2247449, -1.2247449]. */
  const float l3 = logf(3.0f);
  const float qk[3 * 4] = { 0, 0, 9, 9, l3, 0, 9, 9, 0, l3, 9, 9 }; /* n_audio_ctx 4 */
  float m[2];
  WD_CHECK_EQ_INT(wd_timing_attention_matrix(qk, 1, 3, 4, 1, 4, 1.0f, 1, m), 0);
  WD_CHECK_NEAR(m[0], 1.2247449, 1e-5);
  WD_CHECK_NEAR(m[1], -1.2247449, 1e-5);
  /* Two identical heads average to the same. */
  float qk2[2 * 12];
  memcpy(qk2, qk, sizeof qk);
  memcpy(qk2 + 12, qk, sizeof qk);
  WD_CHECK_EQ_INT(wd_timing_attention_matrix(qk2, 2, 3, 4, 1, 4, 1.0f, 1, m), 0);
  WD_CHECK_NEAR(m[0], 1.2247449, 1e-5);
  /* qk_scale multiplies the scores before the softmax: scale 0 gives equal
   * rows, a zero variance and NaN (0 / 0), as torch would. */
  WD_CHECK_EQ_INT(wd_timing_attention_matrix(qk, 1, 3, 4, 1, 4, 0.0f, 1, m), 0);
  WD_CHECK(isnan(m[0]));
}

/* ------------------------------------------------------------ word split */

static int check_split(const wd_tokenizer_t *t, const char *lang, const char *text,
                       const char *const *want, int n_want) {
  int32_t ids[256];
  int n = 0;
  if (wd_tokenizer_encode(t, text, strlen(text), ids, 255, &n) != 0)
    return 0;
  ids[n++] = wd_tokenizer_special(t)->eot;
  wd_timing_word_t *w = NULL;
  int nw = 0, ok = wd_timing_split_words(t, lang, ids, n, &w, &nw) == 0 && nw == n_want;
  int tokens = 0;
  for (int i = 0; ok && i < nw; i++) {
    ok = strcmp(w[i].word, want[i]) == 0 && w[i].tok_begin == tokens;
    tokens += w[i].n_tok;
    if (!ok)
      fprintf(stderr, "word %d: '%s' vs '%s'\n", i, w[i].word, want[i]);
  }
  ok = ok && tokens == n;
  wd_timing_words_free(w, nw);
  return ok;
}

WD_TEST(split_english) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  /* A subword that strips to punctuation starts a word: "." of "3.14"
   * (tokens " 3" "." "14") and ")"; "14" and "ok" join the word before. */
  const char *const want[] = { " Hello", " world", "!", " It's", " 3", ".14", " (ok", ")",
                               "<|endoftext|>" };
  WD_CHECK(check_split(g_en, NULL, " Hello world! It's 3.14 (ok)", want, 9));
  WD_CHECK(check_split(g_ml, "en", " Hello world! It's 3.14 (ok)", want, 9));
}

WD_TEST(split_cjk) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  /* zh splits at every complete character sequence a token ends; the
   * full-width comma is three byte tokens that only decode together. */
  const char *const want[] = { "你好", "，", "世界", "<|endoftext|>" };
  WD_CHECK(check_split(g_ml, "zh", "你好，世界", want, 4));
  /* The same text split on spaces is one word (no spaces, no ASCII
   * punctuation) plus EOT. */
  const char *const want_sp[] = { "你好，世界", "<|endoftext|>" };
  WD_CHECK(check_split(g_ml, "de", "你好，世界", want_sp, 2));
}

WD_TEST(split_golden) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  rd_t r;
  WD_CHECK(rd_open(&r, "timing/split.txt") == 0);
  int cases = 0, bad = 0;
  while (rd_case(&r)) {
    const char *lang = rd_tok(&r), *vocab = rd_tok(&r);
    const int n = rd_int(&r);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int k = 0; k < n; k++)
      ids[k] = rd_int(&r);
    wd_timing_word_t *w = NULL;
    int nw = 0;
    const int rc = wd_timing_split_words(vocab_tok(vocab), strcmp(lang, "-") ? lang : NULL, ids, n,
                                         &w, &nw);
    const int want_n = rd_int(&r);
    int ok = rc == 0 && nw == want_n, tokens = 0;
    for (int k = 0; k < want_n; k++) {
      char *ws = rd_hex(&r);
      const int nt = rd_int(&r);
      if (ok && (strcmp(ws, w[k].word) != 0 || nt != w[k].n_tok || w[k].tok_begin != tokens)) {
        fprintf(stderr, "split case %d word %d: '%s' (%d) vs '%s' (%d)\n", cases, k, w[k].word,
                w[k].n_tok, ws, nt);
        ok = 0;
      }
      tokens += nt;
      free(ws);
    }
    if (!ok) {
      fprintf(stderr, "split case %d (%s %s): %d words vs %d\n", cases, lang, vocab, nw, want_n);
      bad++;
    }
    cases++;
    wd_timing_words_free(w, nw);
    free(ids);
  }
  free(r.buf);
  WD_CHECK(cases >= 80);
  WD_CHECK_EQ_INT(bad, 0);
}

/* ----------------------------------------------------- merge_punctuations */

static wd_timing_word_t hw(const char *word, int tok_begin, int n_tok, double start, double end) {
  return (wd_timing_word_t){ .word = strdup(word), .tok_begin = tok_begin, .n_tok = n_tok,
                             .start = start, .end = end, .probability = 0.9 };
}

WD_TEST(merge_hand) {
  /* openai: ' "' joins " Hello" (prepend), then "," and "!" and '"' join
   * the word before them (append); merged words become "". */
  wd_timing_word_t w[6] = { hw(" \"", 0, 1, 0, 0), hw(" Hello", 1, 1, 0, 0), hw(",", 2, 1, 0, 0),
                            hw(" world", 3, 2, 0, 0), hw("!", 5, 1, 0, 0), hw("\"", 6, 1, 0, 0) };
  WD_CHECK_EQ_INT(wd_timing_merge_punctuations(w, 6, WD_TIMING_PREPEND, WD_TIMING_APPEND), 0);
  const char *const want[6] = { "", " \" Hello,", "", " world!\"", "", "" };
  const int want_begin[6] = { 0, 0, 2, 3, 5, 6 }, want_n[6] = { 0, 3, 0, 4, 0, 0 };
  for (int i = 0; i < 6; i++) {
    WD_CHECK_EQ_STR(w[i].word, want[i]);
    WD_CHECK_EQ_INT(w[i].n_tok, want_n[i]);
    if (want_n[i])
      WD_CHECK_EQ_INT(w[i].tok_begin, want_begin[i]);
    free(w[i].word);
  }
  /* A word ending in a space takes nothing; "" (a merged word) counts as
   * appended punctuation, as Python's `"" in appended` is true. */
  wd_timing_word_t v[3] = { hw(" a ", 0, 1, 0, 0), hw(".", 1, 1, 0, 0), hw(" b", 2, 1, 0, 0) };
  WD_CHECK_EQ_INT(wd_timing_merge_punctuations(v, 3, WD_TIMING_PREPEND, WD_TIMING_APPEND), 0);
  WD_CHECK_EQ_STR(v[0].word, " a ");
  WD_CHECK_EQ_STR(v[1].word, ".");
  for (int i = 0; i < 3; i++)
    free(v[i].word);
}

WD_TEST(merge_golden) {
  rd_t r;
  WD_CHECK(rd_open(&r, "timing/merge.txt") == 0);
  int cases = 0, bad = 0;
  while (rd_case(&r)) {
    const int n = rd_int(&r);
    wd_timing_word_t *w = calloc((size_t)n, sizeof *w);
    int tok = 0;
    for (int k = 0; k < n; k++) {
      w[k].word = rd_hex(&r);
      w[k].n_tok = rd_int(&r);
      w[k].tok_begin = tok;
      tok += w[k].n_tok;
    }
    WD_CHECK_EQ_INT(wd_timing_merge_punctuations(w, n, WD_TIMING_PREPEND, WD_TIMING_APPEND), 0);
    int ok = 1;
    for (int k = 0; k < n; k++) {
      char *ws = rd_hex(&r);
      const int first = rd_int(&r), nt = rd_int(&r);
      if (strcmp(ws, w[k].word) != 0 || nt != w[k].n_tok || (nt > 0 && first != w[k].tok_begin))
        ok = 0;
      free(ws);
    }
    if (!ok)
      bad++;
    cases++;
    wd_timing_words_free(w, n);
  }
  free(r.buf);
  WD_CHECK(cases >= 100);
  WD_CHECK_EQ_INT(bad, 0);
}

/* ----------------------------------------------------- add_word_timestamps */

/* A segment with timestamp tokens around n_text text tokens (ids 100..). */
static wd_segment_t seg_make(int seek, double start, double end, int n_text) {
  wd_segment_t s = { .seek = seek, .start = start, .end = end, .n_tokens = n_text + 2 };
  s.tokens = malloc((size_t)s.n_tokens * sizeof *s.tokens);
  s.tokens[0] = 50364;
  for (int i = 0; i < n_text; i++)
    s.tokens[1 + i] = 100 + i;
  s.tokens[n_text + 1] = 50364 + 50;
  return s;
}

static void segs_free(wd_segment_t *s, int n) {
  for (int i = 0; i < n; i++) {
    free(s[i].tokens);
    wd_words_free(s[i].words, s[i].n_words);
  }
}

WD_TEST(heuristics_first_word_after_pause) {
  /* Durations 3.0, 0.2, 0.2: median 0.2, max_duration 0.4. The first word
   * ends 3.0 s after the last speech (> 4 * median) and is too long, so it
   * starts max_duration before its end; the segment start follows it. */
  wd_timing_word_t a[3] = { hw(" Hello", 0, 1, 0.0, 3.0), hw(" big", 1, 1, 3.0, 3.2),
                            hw(" world", 2, 1, 3.2, 3.4) };
  wd_segment_t s = seg_make(0, 0.0, 3.4, 3);
  WD_CHECK_EQ_INT(wd_timing_add_word_timestamps(a, 3, NULL, 50257, &s, 1, 0.0), 0);
  WD_CHECK_EQ_INT(s.n_words, 3);
  WD_CHECK_NEAR(s.words[0].start, 2.6, 1e-12);
  WD_CHECK_NEAR(s.words[0].end, 3.0, 1e-12);
  WD_CHECK_NEAR(s.start, 2.6, 1e-12);
  WD_CHECK_NEAR(s.end, 3.4, 1e-12);
  WD_CHECK_NEAR(s.words[2].probability, 0.9, 1e-6);
  segs_free(&s, 1);
  wd_timing_words_free(NULL, 0);
  for (int i = 0; i < 3; i++)
    free(a[i].word);
}

WD_TEST(heuristics_sentence_end_and_segment_bounds) {
  /* "." lasting 1.8 s is cut to max_duration (0.4 s) and then merged into
   * " Hi" (which keeps its own times); " Yes" after a sentence end too
   * long would start max_duration before its end. Segments: the first
   * gets " Hi." (2 tokens), the second " Yes" and " sir". The second
   * segment's end (5.0) is over 0.5 s before the last word's end (6.0), so
   * the word is pulled to max(start + median, segment end). The window
   * starts at seek 1500 (15 s). */
  wd_timing_word_t a[4] = { hw(" Hi", 0, 1, 0.0, 0.2), hw(".", 1, 1, 0.2, 2.0),
                            hw(" Yes", 2, 1, 2.0, 2.2), hw(" sir", 3, 1, 2.2, 6.0) };
  wd_segment_t s[2] = { seg_make(1500, 15.0, 17.0, 2), seg_make(1500, 17.0, 20.0, 2) };
  WD_CHECK_EQ_INT(wd_timing_add_word_timestamps(a, 4, NULL, 50257, s, 2, 15.0), 0);
  WD_CHECK_EQ_INT(s[0].n_words, 1);
  WD_CHECK_EQ_STR(s[0].words[0].word, " Hi.");
  WD_CHECK_NEAR(s[0].words[0].start, 15.0, 1e-12);
  WD_CHECK_NEAR(s[0].words[0].end, 15.2, 1e-12);
  WD_CHECK_NEAR(s[0].start, 15.0, 1e-12);
  WD_CHECK_NEAR(s[0].end, 15.2, 1e-12);
  WD_CHECK_EQ_INT(s[1].n_words, 2);
  /* durations 0.2, 1.8, 0.2, 3.8: median (0.2 + 1.8) / 2 = 1.0, capped 0.7. */
  WD_CHECK_NEAR(s[1].words[1].end, 20.0, 1e-12); /* max(17.2 + 0.7, 20.0) */
  WD_CHECK_NEAR(s[1].end, 20.0, 1e-12);
  WD_CHECK_NEAR(s[1].start, 17.0, 1e-12);
  segs_free(s, 2);
  for (int i = 0; i < 4; i++)
    free(a[i].word);
}

WD_TEST(rounding) {
  WD_CHECK(wd_timing_round2(0.125) == 0.12); /* exact tie: half to even */
  WD_CHECK(wd_timing_round2(0.375) == 0.38);
  WD_CHECK(wd_timing_round2(2.675) == 2.67); /* 2.67499999... in binary */
  WD_CHECK(wd_timing_round2(15.0 + 0.18) == 15.18);
}

/* Reads a segment list as gen_timing_golden.py's dump_segments_in. */
static wd_segment_t *rd_segments(rd_t *r, int seek, int *ret_n) {
  const int n = rd_int(r);
  wd_segment_t *s = calloc((size_t)n + 1, sizeof *s);
  for (int i = 0; i < n; i++) {
    s[i].seek = seek;
    s[i].start = rd_dbl(r);
    s[i].end = rd_dbl(r);
    s[i].n_tokens = rd_int(r);
    s[i].tokens = malloc((size_t)s[i].n_tokens * sizeof *s[i].tokens + 1);
    for (int k = 0; k < s[i].n_tokens; k++)
      s[i].tokens[k] = rd_int(r);
  }
  *ret_n = n;
  return s;
}

/* Compares segments with dump_segments_out; returns 1 when all match. */
static int check_segments(rd_t *r, const wd_segment_t *s, int n, int case_no) {
  int ok = 1;
  for (int i = 0; i < n; i++) {
    const double start = rd_dbl(r), end = rd_dbl(r);
    const int nw = rd_int(r);
    if (start != s[i].start || end != s[i].end || nw != s[i].n_words) {
      fprintf(stderr, "case %d seg %d: [%.17g %.17g] %d words vs [%.17g %.17g] %d\n", case_no, i,
              s[i].start, s[i].end, s[i].n_words, start, end, nw);
      ok = 0;
    }
    for (int k = 0; k < nw; k++) {
      char *w = rd_hex(r);
      const double ws = rd_dbl(r), we = rd_dbl(r), p = rd_dbl(r);
      if (ok && (strcmp(w, s[i].words[k].word) != 0 || ws != s[i].words[k].start ||
                 we != s[i].words[k].end || fabs(p - s[i].words[k].probability) > 1e-6)) {
        fprintf(stderr, "case %d seg %d word %d: '%s' [%.17g %.17g] vs '%s' [%.17g %.17g]\n",
                case_no, i, k, s[i].words[k].word, s[i].words[k].start, s[i].words[k].end, w, ws,
                we);
        ok = 0;
      }
      free(w);
    }
  }
  return ok;
}

WD_TEST(add_word_timestamps_golden) {
  rd_t r;
  WD_CHECK(rd_open(&r, "timing/words.txt") == 0);
  int cases = 0, bad = 0;
  while (rd_case(&r)) {
    const int eot = rd_int(&r), seek = rd_int(&r);
    const double last_speech = rd_dbl(&r);
    const int na = rd_int(&r);
    wd_timing_word_t *a = calloc((size_t)na + 1, sizeof *a);
    int tok = 0;
    for (int k = 0; k < na; k++) {
      a[k].word = rd_hex(&r);
      a[k].n_tok = rd_int(&r);
      a[k].tok_begin = tok;
      tok += a[k].n_tok;
      a[k].start = rd_dbl(&r);
      a[k].end = rd_dbl(&r);
      a[k].probability = rd_dbl(&r);
    }
    int ns = 0;
    wd_segment_t *s = rd_segments(&r, seek, &ns);
    WD_CHECK_EQ_INT(wd_timing_add_word_timestamps(a, na, NULL, eot, s, ns, last_speech), 0);
    if (!check_segments(&r, s, ns, cases))
      bad++;
    cases++;
    wd_timing_words_free(a, na);
    segs_free(s, ns);
    free(s);
  }
  free(r.buf);
  WD_CHECK(cases >= 100);
  WD_CHECK_EQ_INT(bad, 0);
}

/* ------------------------------------------------------ the whole window */

WD_TEST(window_golden) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  rd_t r;
  WD_CHECK(rd_open(&r, "timing/align.txt") == 0);
  int cases = 0, bad = 0;
  while (rd_case(&r)) {
    const char *lang = rd_tok(&r), *vocab = rd_tok(&r);
    const wd_tokenizer_t *t = vocab_tok(vocab);
    const int n_sot = rd_int(&r), T = rd_int(&r);
    int32_t *tokens = malloc((size_t)T * sizeof *tokens);
    for (int k = 0; k < T; k++)
      tokens[k] = rd_int(&r);
    const int H = rd_int(&r), n_ctx = rd_int(&r), num_frames = rd_int(&r);
    const double last_speech = rd_dbl(&r);
    const int seek = rd_int(&r);
    float *qk = malloc((size_t)H * (size_t)T * (size_t)n_ctx * sizeof *qk);
    for (size_t k = 0; k < (size_t)H * (size_t)T * (size_t)n_ctx; k++)
      qk[k] = (float)((double)rd_int(&r) * 0.01); /* numpy: int64 * 0.01 -> float32 */
    float *probs = malloc((size_t)(T - 1) * sizeof *probs);
    for (int k = 0; k < T - 1; k++)
      probs[k] = (float)rd_dbl(&r);
    const char *language = strcmp(lang, "-") ? lang : NULL;

    /* find_alignment */
    wd_timing_word_t *a = NULL;
    int na = 0, ok = 1;
    WD_CHECK_EQ_INT(wd_timing_find_alignment(t, language, tokens, T, n_sot, qk, H, n_ctx,
                                             num_frames, probs, NULL, &a, &na),
                    0);
    const int want_na = rd_int(&r);
    if (na != want_na)
      ok = 0;
    for (int k = 0; k < want_na; k++) {
      char *w = rd_hex(&r);
      const int nt = rd_int(&r);
      const double ws = rd_dbl(&r), we = rd_dbl(&r), p = rd_dbl(&r);
      if (ok && (strcmp(w, a[k].word) != 0 || nt != a[k].n_tok || ws != a[k].start ||
                 we != a[k].end || fabs(p - a[k].probability) > 1e-9)) {
        fprintf(stderr, "window case %d word %d: '%s' %d [%g %g] %.9g vs '%s' %d [%g %g] %.9g\n",
                cases, k, a[k].word, a[k].n_tok, a[k].start, a[k].end, a[k].probability, w, nt,
                ws, we, p);
        ok = 0;
      }
      free(w);
    }
    wd_timing_words_free(a, na);

    /* add_word_timestamps through the one-call entry */
    int ns = 0;
    wd_segment_t *s = rd_segments(&r, seek, &ns);
    int32_t sot_seq[3];
    memcpy(sot_seq, tokens, (size_t)n_sot * sizeof *sot_seq);
    int32_t again[512];
    int n_again = 0;
    WD_CHECK_EQ_INT(wd_timing_align_tokens(t, sot_seq, n_sot, s, ns, again, 512, &n_again), 0);
    WD_CHECK(n_again == T && memcmp(again, tokens, (size_t)T * sizeof *tokens) == 0);
    WD_CHECK_EQ_INT(wd_timing_window(t, language, tokens, T, n_sot, qk, H, n_ctx, num_frames,
                                     probs, NULL, s, ns, last_speech),
                    0);
    if (!check_segments(&r, s, ns, cases))
      ok = 0;
    if (!ok) {
      fprintf(stderr, "window case %d (%s %s) differs\n", cases, lang, vocab);
      bad++;
    }
    cases++;
    segs_free(s, ns);
    free(s);
    free(tokens);
    free(qk);
    free(probs);
  }
  free(r.buf);
  WD_CHECK(cases >= 5);
  WD_CHECK_EQ_INT(bad, 0);
}

WD_TEST(window_without_text) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  /* No text tokens: openai runs no model and adds no words; the segment
   * keeps its times. */
  const wd_special_tokens_t *sp = wd_tokenizer_special(g_en);
  wd_segment_t s = { .seek = 0, .start = 1.0, .end = 2.0, .n_tokens = 2 };
  int32_t st[2] = { sp->ts_begin + 50, sp->ts_begin + 100 };
  s.tokens = st;
  int32_t tokens[8];
  int n = 0;
  WD_CHECK_EQ_INT(wd_timing_align_tokens(g_en, &sp->sot, 1, &s, 1, tokens, 8, &n), 0);
  WD_CHECK_EQ_INT(n, 3);
  WD_CHECK_EQ_INT(tokens[1], sp->notimestamps);
  WD_CHECK_EQ_INT(tokens[2], sp->eot);
  WD_CHECK_EQ_INT(wd_timing_align_tokens(g_en, &sp->sot, 1, &s, 1, tokens, 2, &n), WD_ERANGE);
  WD_CHECK_EQ_INT(wd_timing_window(g_en, NULL, tokens, 3, 1, NULL, 0, 1500, 3000, NULL, NULL, &s,
                                   1, 0.0),
                  0);
  WD_CHECK_EQ_INT(s.n_words, 0);
  WD_CHECK(s.start == 1.0 && s.end == 2.0);
}

/* ------------------------------------------------- hallucination helpers */

static wd_word_t ww(const char *word, double start, double end, float p) {
  return (wd_word_t){ .word = (char *)(uintptr_t)word, .start = start, .end = end,
                      .probability = p };
}

WD_TEST(anomaly_score) {
  wd_word_t w = ww(" a", 1.0, 1.05, 0.1f);
  WD_CHECK_NEAR(wd_timing_word_anomaly_score(&w), 1.0 + (0.133 - 0.05) * 15, 1e-9);
  w = ww(" a", 1.0, 4.0, 0.5f);
  WD_CHECK_NEAR(wd_timing_word_anomaly_score(&w), 1.0, 1e-9);
  w = ww(" a", 1.0, 1.5, 0.5f);
  WD_CHECK_NEAR(wd_timing_word_anomaly_score(&w), 0.0, 1e-12);
  /* Normal words: not anomalous. */
  wd_word_t good[3] = { ww(" Hello", 0, 0.4, 0.9f), ww(" there", 0.4, 0.8, 0.8f),
                        ww(".", 0.8, 0.8, 0.1f) };
  WD_CHECK(!wd_timing_segment_is_anomaly(good, 3));
  /* Two short improbable words: score 2 * (1 + 0.133 * 15) >= 3. */
  wd_word_t bad[2] = { ww(" uh", 5, 5, 0.01f), ww(" um", 5, 5, 0.01f) };
  WD_CHECK(wd_timing_segment_is_anomaly(bad, 2));
  /* One word of score 0.995: score + 0.01 >= 1 word. */
  wd_word_t one[1] = { ww(" so", 1, 1.067, 0.5f) };
  WD_CHECK(wd_timing_segment_is_anomaly(one, 1));
  /* Only punctuation: no word left, 0 + 0.01 >= 0 (as openai). */
  wd_word_t punct[1] = { ww("!", 1, 2, 0.9f) };
  WD_CHECK(wd_timing_segment_is_anomaly(punct, 1));
  WD_CHECK(!wd_timing_segment_is_anomaly(NULL, 0));
}

WD_TEST(window_seek_rules) {
  wd_word_t w1[2] = { ww(" Hello", 30.5, 31.0, 0.9f), ww(" world", 31.0, 42.345, 0.9f) };
  wd_segment_t s[2] = { { .seek = 3000, .start = 30.5, .end = 42.345, .words = w1, .n_words = 2 },
                        { .seek = 3000, .start = 45.0, .end = 46.0 } };
  wd_timing_seek_in_t in = { .previous_seek = 3000, .segment_size = 3000,
                             .content_frames = 10000, .single_timestamp_ending = 0,
                             .last_speech_timestamp = 30.0,
                             .hallucination_silence_threshold = -1 };
  /* The last word ends at 42.345: seek = round(4234.5) = 4234 (half to even). */
  int seek = 5000, keep = -1, skip = -1;
  wd_timing_window_seek(s, 2, &in, &seek, &keep, &skip);
  WD_CHECK_EQ_INT(seek, 4234);
  WD_CHECK_EQ_INT(keep, 2);
  WD_CHECK_EQ_INT(skip, 0);
  /* A single timestamp ending keeps the segmenting's seek. */
  in.single_timestamp_ending = 1;
  seek = 6000;
  wd_timing_window_seek(s, 2, &in, &seek, &keep, &skip);
  WD_CHECK_EQ_INT(seek, 6000);
  WD_CHECK_NEAR(wd_timing_last_speech(s, 2, 0.0), 42.345, 0);
  WD_CHECK_NEAR(wd_timing_last_speech(s + 1, 1, 7.0), 46.0, 0);
  WD_CHECK_NEAR(wd_timing_last_speech(s, 0, 7.0), 7.0, 0);

  /* Threshold 2 s: the first segment with words is anomalous and starts
   * 5 s into the window: skip the window up to it. */
  wd_word_t hal[2] = { ww(" uh", 35.0, 35.0, 0.01f), ww(" um", 35.0, 35.0, 0.01f) };
  wd_segment_t h[1] = { { .seek = 3000, .start = 35.0, .end = 35.0, .words = hal, .n_words = 2 } };
  in.single_timestamp_ending = 1;
  in.hallucination_silence_threshold = 2.0;
  seek = 6000;
  wd_timing_window_seek(h, 1, &in, &seek, &keep, &skip);
  WD_CHECK_EQ_INT(skip, 1);
  WD_CHECK_EQ_INT(keep, 0);
  WD_CHECK_EQ_INT(seek, 3500);

  /* A normal segment, then an anomalous one with silence on both sides:
   * the window is kept up to it and seek moves to its start. */
  wd_word_t ok[2] = { ww(" Hello", 30.0, 30.4, 0.9f), ww(" there", 30.4, 30.8, 0.9f) };
  wd_segment_t m[2] = { { .seek = 3000, .start = 30.0, .end = 30.8, .words = ok, .n_words = 2 },
                        { .seek = 3000, .start = 40.0, .end = 40.0, .words = hal, .n_words = 2 } };
  seek = 6000;
  wd_timing_window_seek(m, 2, &in, &seek, &keep, &skip);
  WD_CHECK_EQ_INT(skip, 0);
  WD_CHECK_EQ_INT(keep, 1);
  WD_CHECK_EQ_INT(seek, 4000);
  /* Near the end of the content: seek jumps to the end. */
  in.content_frames = 4100;
  seek = 6000;
  wd_timing_window_seek(m, 2, &in, &seek, &keep, &skip);
  WD_CHECK_EQ_INT(seek, 4100);
}

/* ------------------------------------------------------- alignment heads */

WD_TEST(heads_fallback_and_table) {
  /* A synthetic model with shapes no OpenAI model has: openai's default,
   * every head of the last half of the decoder layers. */
  char dir[] = "/tmp/wd_test_timing.XXXXXX";
  WD_CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/syn.bin", dir);
  wd_hparams_t hp = wd_synth_engine_hparams(1);
  hp.n_text_layer = 3;
  hp.n_text_head = 2;
  WD_CHECK_EQ_INT(wd_synth_write(path, &hp), 0);
  wd_model_t *m = NULL;
  WD_CHECK_EQ_INT(wd_model_load(path, &m, NULL, 0), 0);
  unlink(path);
  rmdir(dir);
  if (!m)
    return;
  WD_CHECK_EQ_STR(wd_model_name(m), "custom");
  int n = -1;
  WD_CHECK_EQ_INT(wd_timing_heads(m, NULL, 0, &n), WD_ERANGE);
  WD_CHECK_EQ_INT(n, 4);
  int pairs[8][2];
  WD_CHECK_EQ_INT(wd_timing_heads(m, pairs, 8, &n), 0);
  const int want[4][2] = { { 1, 0 }, { 1, 1 }, { 2, 0 }, { 2, 1 } };
  for (int i = 0; i < 4; i++) {
    WD_CHECK_EQ_INT(pairs[i][0], want[i][0]);
    WD_CHECK_EQ_INT(pairs[i][1], want[i][1]);
  }
  wd_model_free(m);

  /* A released model uses openai's table (only when the file is here). */
  const char *tiny = WD_SOURCE_DIR "/models/ggml-tiny.en.bin";
  if (access(tiny, R_OK) != 0) {
    fprintf(stderr, "note: %s not present, table case not run\n", tiny);
    return;
  }
  WD_CHECK_EQ_INT(wd_model_load(tiny, &m, NULL, 0), 0);
  WD_CHECK_EQ_INT(wd_timing_heads(m, pairs, 8, &n), 0);
  WD_CHECK_EQ_INT(n, 8);
  WD_CHECK_EQ_INT(pairs[0][0], 1);
  WD_CHECK_EQ_INT(pairs[0][1], 0);
  WD_CHECK_EQ_INT(pairs[7][0], 3);
  WD_CHECK_EQ_INT(pairs[7][1], 4);
  wd_model_free(m);
}

int main(void) {
  const int rc = wd_test_main();
  wd_tokenizer_free(g_en);
  wd_tokenizer_free(g_ml);
  wd_tiktoken_free(&g_gpt2);
  wd_tiktoken_free(&g_multi);
  return rc;
}
