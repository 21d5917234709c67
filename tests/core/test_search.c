/*
 * test_search.c - the logit filters and the window search on hand-built
 * logits: every filter rule of openai's decoding.py on a small vocabulary,
 * greedy choice and its log-probability, seeded sampling (reproducible, and
 * distributed as softmax(logits / T)), beam search bookkeeping (candidates,
 * finished sequences, patience, the slot copies of a reorder, finalize) and
 * the ranking with and without a length penalty.
 *
 * The vocabulary: text ids 0..249, EOT 250, SOT 251, two languages,
 * translate 254, transcribe 255, startoflm 256, startofprev 257, nospeech
 * 258, notimestamps 259, timestamps 260..360 (0.00 .. 2.00 s).
 */
#include <math.h>
#include <string.h>

#include "filters.h"
#include "search.h"
#include "wd_test.h"

enum { NV = 361, EOT = 250, TB = 260, NOTS = 259 };

static const wd_special_tokens_t SP = {
  .eot = EOT, .sot = 251, .lang_begin = 252, .n_langs = 2, .translate = 254,
  .transcribe = 255, .startoflm = 256, .startofprev = 257, .nospeech = 258,
  .notimestamps = NOTS, .ts_begin = TB, .n_vocab = NV,
};

static const int32_t SUPPRESS[] = { 7, 251, 255 };

static wd_filter_t filter(int blank, int without_ts) {
  return (wd_filter_t){ .sp = &SP, .suppress = SUPPRESS, .n_suppress = 3,
                        .suppress_blank = blank, .without_timestamps = without_ts,
                        .max_initial_index = 50 };
}

static void fill(float *lg, float v) {
  for (int i = 0; i < NV; i++)
    lg[i] = v;
}

static int is_ninf(float x) { return isinf(x) && x < 0; }

WD_TEST(blank_and_suppress_tokens) {
  float lg[NV];
  const wd_filter_t f = filter(1, 1);
  fill(lg, 0.0f);
  const int32_t one[] = { 5 };
  (void)wd_filter_apply(&f, lg, one, 0);
  WD_CHECK(is_ninf(lg[220]) && is_ninf(lg[EOT])); /* first sampled step only */
  WD_CHECK(is_ninf(lg[7]) && is_ninf(lg[251]) && is_ninf(lg[255]));
  WD_CHECK(!is_ninf(lg[5]) && !is_ninf(lg[NOTS])); /* without timestamps: kept */
  fill(lg, 0.0f);
  (void)wd_filter_apply(&f, lg, one, 1);
  WD_CHECK(!is_ninf(lg[220]) && !is_ninf(lg[EOT]));
  WD_CHECK(is_ninf(lg[7]));
  /* suppress_blank off: EOT may come first */
  const wd_filter_t g = filter(0, 1);
  fill(lg, 0.0f);
  (void)wd_filter_apply(&g, lg, one, 0);
  WD_CHECK(!is_ninf(lg[EOT]) && !is_ninf(lg[220]));
}

WD_TEST(first_token_is_an_early_timestamp) {
  float lg[NV];
  const wd_filter_t f = filter(1, 0);
  fill(lg, 1.0f);
  (void)wd_filter_apply(&f, lg, NULL, 0);
  for (int i = 0; i < TB; i++)
    WD_CHECK(is_ninf(lg[i]));
  for (int i = TB; i <= TB + 50; i++)
    WD_CHECK(!is_ninf(lg[i]));
  for (int i = TB + 51; i < NV; i++)
    WD_CHECK(is_ninf(lg[i]));
}

WD_TEST(timestamp_pairs_and_monotonicity) {
  float lg[NV];
  const wd_filter_t f = filter(1, 0);
  /* Text tokens dominate, so the "timestamps likelier" rule stays out. */
  /* [ts5 text]: timestamps from ts6 on, text allowed */
  const int32_t a[] = { TB + 5, 10 };
  fill(lg, -5.0f);
  lg[11] = 5.0f;
  (void)wd_filter_apply(&f, lg, a, 2);
  WD_CHECK(!is_ninf(lg[11]) && !is_ninf(lg[EOT]));
  WD_CHECK(is_ninf(lg[TB + 5]) && !is_ninf(lg[TB + 6]));
  WD_CHECK(is_ninf(lg[NOTS]));
  /* [ts5 text ts9]: an open pair must close: no text; ts9 itself allowed */
  const int32_t b[] = { TB + 5, 10, TB + 9 };
  fill(lg, -5.0f);
  lg[EOT] = 5.0f; /* EOT counts as text for the last rule: keep it ahead */
  (void)wd_filter_apply(&f, lg, b, 3);
  for (int i = 0; i < EOT; i++)
    WD_CHECK(is_ninf(lg[i]));
  WD_CHECK(!is_ninf(lg[EOT]) && is_ninf(lg[TB + 8]) && !is_ninf(lg[TB + 9]));
  /* [ts5 text ts9 ts9]: a pair closed: text or EOT, no timestamp */
  const int32_t c[] = { TB + 5, 10, TB + 9, TB + 9 };
  fill(lg, -5.0f);
  lg[11] = 5.0f;
  (void)wd_filter_apply(&f, lg, c, 4);
  for (int i = TB; i < NV; i++)
    WD_CHECK(is_ninf(lg[i]));
  WD_CHECK(!is_ninf(lg[11]) && !is_ninf(lg[EOT]));
}

WD_TEST(timestamps_together_likelier_than_any_text) {
  float lg[NV];
  const wd_filter_t f = filter(1, 0);
  const int32_t a[] = { TB, 10 };
  /* every text token at 0, every allowed timestamp at -2: 100 of them sum
   * to more than one text token, so text is masked */
  fill(lg, -2.0f);
  for (int i = 0; i < TB; i++)
    lg[i] = 0.0f;
  const double lse = wd_filter_apply(&f, lg, a, 2);
  WD_CHECK(is_ninf(lg[10]) && is_ninf(lg[EOT]) && !is_ninf(lg[TB + 1]));
  /* the returned normaliser is that of the filtered logits */
  WD_CHECK_NEAR(lse, -2.0 + log(100.0), 1e-5);
  /* one text token far ahead: timestamps stay possible, text stays */
  fill(lg, -2.0f);
  lg[10] = 10.0f;
  (void)wd_filter_apply(&f, lg, a, 2);
  WD_CHECK(!is_ninf(lg[10]) && !is_ninf(lg[TB + 1]));
}

/* A "model" of the logits after a history: a function of the history only,
 * as a real decoder's are. Without timestamps and with no suppression in
 * the way, the scores below are the log-probabilities by construction. */
typedef void (*model_fn)(const int32_t *hist, int n, float *lg);

static void set_probs(float *lg, const int32_t *ids, const double *p, int k) {
  fill(lg, -INFINITY);
  for (int i = 0; i < k; i++)
    lg[ids[i]] = (float)log(p[i]);
}

/* The logits after each history (probabilities, the rest impossible). */
static void model_beam(const int32_t *h, int n, float *lg) {
  if (n == 0) {
    set_probs(lg, (const int32_t[]){ 1, 2, 4 }, (const double[]){ 0.55, 0.40, 0.05 }, 3);
  } else if (h[0] == 1 && n == 1) {
    set_probs(lg, (const int32_t[]){ 3, EOT, 5 }, (const double[]){ 0.5, 0.2, 0.3 }, 3);
  } else if (h[0] == 2 && n == 1) {
    set_probs(lg, (const int32_t[]){ EOT, 6, 5 }, (const double[]){ 0.9, 0.06, 0.04 }, 3);
  } else {
    set_probs(lg, (const int32_t[]){ EOT, 8 }, (const double[]){ 0.7, 0.3 }, 2);
  }
}

/* Drives a search to the end with model m; returns the steps taken. Each
 * step's rows get the model's logits for their own history. */
static int run_search(wd_search_t *s, const wd_filter_t *f, model_fn m, int check_copies) {
  float work[NV], rows_lg[WD_DECODE_MAX_ROWS][NV];
  const float *lgp[WD_DECODE_MAX_ROWS];
  int steps = 0;
  /* first update: row 0 alone, empty history */
  m(NULL, 0, rows_lg[0]);
  lgp[0] = rows_lg[0];
  int done = wd_search_update(s, f, work, lgp);
  while (!done && steps < 300) {
    int rows[WD_DECODE_MAX_ROWS];
    int32_t toks[WD_DECODE_MAX_ROWS];
    int dst[WD_DECODE_MAX_ROWS], src[WD_DECODE_MAX_ROWS];
    const int nc = wd_search_copies(s, dst, src);
    if (check_copies)
      for (int i = 0; i < nc; i++) /* a copy never targets its own source */
        WD_CHECK(dst[i] != src[i]);
    const int n = wd_search_rows(s, rows, toks);
    WD_CHECK(n > 0);
    for (int i = 0; i < n; i++) {
      const wd_hyp_t *h = &s->hyp[rows[i]];
      WD_CHECK_EQ_INT(toks[i], h->tok[h->n - 1]);
      m(h->tok, h->n, rows_lg[i]);
      lgp[i] = rows_lg[i];
    }
    done = wd_search_update(s, f, work, lgp);
    steps++;
  }
  return steps;
}

WD_TEST(greedy_takes_the_argmax_and_sums_its_logprobs) {
  uint64_t rng = 1;
  wd_search_t s;
  const wd_filter_t f = filter(0, 1);
  wd_search_begin(&s, WD_SEARCH_GREEDY, 1, 0.0f, 0.0f, NAN, 224, &rng);
  run_search(&s, &f, model_beam, 0);
  const wd_hyp_t *h = wd_search_best(&s);
  WD_CHECK_EQ_INT(h->n, 2);
  WD_CHECK_EQ_INT(h->tok[0], 1);
  WD_CHECK_EQ_INT(h->tok[1], 3);
  /* EOT's own log-probability counts, once */
  WD_CHECK_NEAR(h->sum_logprob, log(0.55) + log(0.5) + log(0.7), 1e-5);
}

/* Runs one update of s with each live row's model logits. */
static int step_rows(wd_search_t *s, const wd_filter_t *f, float *work) {
  static float l[WD_DECODE_MAX_ROWS][NV];
  const float *lgp[WD_DECODE_MAX_ROWS];
  int rows[WD_DECODE_MAX_ROWS];
  int32_t toks[WD_DECODE_MAX_ROWS];
  const int n = wd_search_rows(s, rows, toks);
  for (int i = 0; i < n; i++) {
    model_beam(s->hyp[rows[i]].tok, s->hyp[rows[i]].n, l[i]);
    lgp[i] = l[i];
  }
  return wd_search_update(s, f, work, lgp);
}

/* Scores (log-probabilities), by hand:
 *   update 1: [1] -0.598, [2] -0.916, [4]: the beams are [1], [2]; row 1
 *             starts as a copy of row 0.
 *   update 2: [2 EOT] -1.021 finishes; [1 3] -1.291 and [1 5] -1.802 are the
 *             beams (both from beam 0: row 1 copies row 0); [1 EOT] -2.207
 *             ranks after them and is not kept.
 *   update 3: [1 3 EOT] -1.648 finishes: two finished, done.
 * Per token, [1 3] (-0.824) beats [2] (-1.021); by raw sum [2] wins. */
WD_TEST(beam_search_bookkeeping) {
  uint64_t rng = 1;
  wd_search_t s;
  const wd_filter_t f = filter(0, 1);
  float work[NV], lg[NV];
  wd_search_begin(&s, WD_SEARCH_BEAM, 2, 0.0f, 0.0f, NAN, 224, &rng);
  model_beam(NULL, 0, lg);
  const float *lgp[1] = { lg };
  WD_CHECK_EQ_INT(wd_search_update(&s, &f, work, lgp), 0);
  int dst[8], src[8];
  WD_CHECK_EQ_INT(wd_search_copies(&s, dst, src), 1);
  WD_CHECK(dst[0] == 1 && src[0] == 0);
  WD_CHECK(s.hyp[0].n == 1 && s.hyp[0].tok[0] == 1 && s.hyp[1].tok[0] == 2);

  WD_CHECK_EQ_INT(step_rows(&s, &f, work), 0);
  WD_CHECK_EQ_INT(s.n_fin, 1);
  WD_CHECK(s.fin[0].n == 1 && s.fin[0].tok[0] == 2);
  WD_CHECK_NEAR(s.fin[0].sum_logprob, log(0.40) + log(0.9), 1e-5);
  WD_CHECK_EQ_INT(wd_search_copies(&s, dst, src), 1);
  WD_CHECK(dst[0] == 1 && src[0] == 0);
  WD_CHECK(s.hyp[0].n == 2 && s.hyp[0].tok[1] == 3 && s.hyp[1].tok[1] == 5);

  WD_CHECK_EQ_INT(step_rows(&s, &f, work), 1);
  WD_CHECK_EQ_INT(s.n_fin, 2);
  WD_CHECK(s.fin[1].n == 2 && s.fin[1].tok[0] == 1 && s.fin[1].tok[1] == 3);
  const wd_hyp_t *h = wd_search_best(&s);
  WD_CHECK(h == &s.fin[1]);
  WD_CHECK_NEAR(h->sum_logprob, log(0.55) + log(0.5) + log(0.7), 1e-5);
  s.length_penalty = 0.0f; /* ((5 + len) / 6)^0 = 1: the raw sum */
  WD_CHECK(wd_search_best(&s) == &s.fin[0]);
}

WD_TEST(beam_patience_waits_for_more_finished) {
  uint64_t rng = 1;
  wd_search_t s;
  const wd_filter_t f = filter(0, 1);
  float work[NV], lg[NV];
  /* patience 2: four finished sequences end the search */
  wd_search_begin(&s, WD_SEARCH_BEAM, 2, 0.0f, 2.0f, NAN, 224, &rng);
  WD_CHECK_EQ_INT(s.max_candidates, 4);
  /* round() as Python's, halves to even (issue #23): 5 * 0.5 keeps 2, 3 * 0.5 keeps 2,
   * 7 * 0.5 keeps 4. */
  const struct { int beams; float patience; int want; } halves[] = { { 5, 0.5f, 2 },
                                                                       { 3, 0.5f, 2 },
                                                                       { 7, 0.5f, 4 } };
  for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++) {
    wd_search_t h;
    wd_search_begin(&h, WD_SEARCH_BEAM, halves[i].beams, 0.0f, halves[i].patience, NAN, 224, &rng);
    WD_CHECK_EQ_INT(h.max_candidates, halves[i].want);
  }
  model_beam(NULL, 0, lg);
  const float *lgp[1] = { lg };
  WD_CHECK_EQ_INT(wd_search_update(&s, &f, work, lgp), 0);
  WD_CHECK_EQ_INT(step_rows(&s, &f, work), 0);
  /* update 3: [1 3 EOT] and [1 5 EOT] finish (3 of 4); beams [1 3 8], [1 5 8] */
  WD_CHECK_EQ_INT(step_rows(&s, &f, work), 0);
  WD_CHECK_EQ_INT(s.n_fin, 3);
  int dst[8], src[8];
  WD_CHECK_EQ_INT(wd_search_copies(&s, dst, src), 0); /* each beam kept its own */
  WD_CHECK(s.hyp[0].tok[2] == 8 && s.hyp[1].tok[1] == 5);
  /* update 4: [1 3 8 EOT] is the fourth */
  WD_CHECK_EQ_INT(step_rows(&s, &f, work), 1);
  WD_CHECK_EQ_INT(s.n_fin, 4);
  /* per token: [1 3] -0.824 beats [1 3 8] -0.951, [2] -1.021, [1 5] -1.079 */
  const wd_hyp_t *h = wd_search_best(&s);
  WD_CHECK(h->n == 2 && h->tok[1] == 3);
}

/* Never ends: 60% on token 9, 40% on 10, forever. */
static void model_loop(const int32_t *h, int n, float *lg) {
  (void)h;
  (void)n;
  set_probs(lg, (const int32_t[]){ 9, 10 }, (const double[]){ 0.6, 0.4 }, 2);
}

WD_TEST(max_len_ends_unfinished_rows_and_finalize_tops_up) {
  uint64_t rng = 1;
  wd_search_t s;
  const wd_filter_t f = filter(0, 1);
  wd_search_begin(&s, WD_SEARCH_GREEDY, 1, 0.0f, 0.0f, NAN, 7, &rng);
  WD_CHECK_EQ_INT(run_search(&s, &f, model_loop, 0), 6);
  WD_CHECK_EQ_INT(wd_search_best(&s)->n, 7);
  /* beams: nothing ever finishes, finalize takes the live beams */
  wd_search_begin(&s, WD_SEARCH_BEAM, 3, 0.0f, 0.0f, NAN, 5, &rng);
  run_search(&s, &f, model_loop, 1);
  WD_CHECK_EQ_INT(s.n_fin, 0);
  const wd_hyp_t *h = wd_search_best(&s);
  WD_CHECK_EQ_INT(s.n_fin, 3);
  WD_CHECK_EQ_INT(h->n, 5);
  for (int i = 0; i < 5; i++)
    WD_CHECK_EQ_INT(h->tok[i], 9);
}

WD_TEST(sampling_is_seeded_and_follows_the_tempered_softmax) {
  const wd_filter_t f = filter(0, 1);
  float lg[NV], work[NV];
  const float *lgp[1] = { lg };
  /* p(9) = 0.25, p(10) = 0.75 at T = 1; at T = 0.5: 0.1, 0.9 */
  set_probs(lg, (const int32_t[]){ 9, 10 }, (const double[]){ 0.25, 0.75 }, 2);
  const float temps[] = { 1.0f, 0.5f };
  const double expect[] = { 0.25, 0.1 };
  for (int k = 0; k < 2; k++) {
    uint64_t rng = 42;
    int nine = 0;
    const int N = 4000;
    for (int i = 0; i < N; i++) {
      wd_search_t s;
      wd_search_begin(&s, WD_SEARCH_SAMPLE, 1, temps[k], 0.0f, NAN, 224, &rng);
      (void)wd_search_update(&s, &f, work, lgp);
      nine += s.hyp[0].tok[0] == 9;
      /* the log-probability is of the untempered logits */
      const double lp = s.hyp[0].tok[0] == 9 ? log(0.25) : log(0.75);
      WD_CHECK_NEAR(s.hyp[0].sum_logprob, lp, 1e-5);
    }
    WD_CHECK_NEAR((double)nine / N, expect[k], 0.025);
  }
  /* best_of rows draw independently from row 0's logits, then copy it */
  uint64_t a = 7, b = 7, c = 8;
  wd_search_t s1, s2, s3;
  wd_search_begin(&s1, WD_SEARCH_SAMPLE, 5, 1.0f, 0.0f, NAN, 224, &a);
  wd_search_begin(&s2, WD_SEARCH_SAMPLE, 5, 1.0f, 0.0f, NAN, 224, &b);
  wd_search_begin(&s3, WD_SEARCH_SAMPLE, 5, 1.0f, 0.0f, NAN, 224, &c);
  int same = 1, differ = 0;
  for (int step = 0; step < 20; step++) {
    (void)wd_search_update(&s1, &f, work, (const float *[]){ lg, lg, lg, lg, lg });
    (void)wd_search_update(&s2, &f, work, (const float *[]){ lg, lg, lg, lg, lg });
    (void)wd_search_update(&s3, &f, work, (const float *[]){ lg, lg, lg, lg, lg });
    if (step == 0) {
      int dst[8], src[8];
      WD_CHECK_EQ_INT(wd_search_copies(&s1, dst, src), 4);
      for (int i = 0; i < 4; i++)
        WD_CHECK(dst[i] == i + 1 && src[i] == 0);
    }
  }
  for (int r = 0; r < 5; r++) {
    same &= s1.hyp[r].n == s2.hyp[r].n &&
            memcmp(s1.hyp[r].tok, s2.hyp[r].tok, (size_t)s1.hyp[r].n * 4) == 0;
    differ |= s1.hyp[r].n != s3.hyp[r].n ||
              memcmp(s1.hyp[r].tok, s3.hyp[r].tok, (size_t)s1.hyp[r].n * 4) != 0;
  }
  WD_CHECK(same);   /* the same seed, the same samples */
  WD_CHECK(differ); /* another seed, other samples */
}

WD_TEST(ranking_by_length_penalty) {
  uint64_t rng = 1;
  wd_search_t s;
  wd_search_begin(&s, WD_SEARCH_SAMPLE, 2, 1.0f, 0.0f, NAN, 224, &rng);
  s.done = 1;
  /* row 0: 2 tokens, -2.0 (-1.0 per token); row 1: 6 tokens, -4.8 (-0.8) */
  s.hyp[0].n = 2;
  s.hyp[0].sum_logprob = -2.0;
  s.hyp[1].n = 6;
  s.hyp[1].sum_logprob = -4.8;
  WD_CHECK(wd_search_best(&s) == &s.hyp[1]); /* per token */
  /* penalty 0: ((5+len)/6)^0 = 1, the raw sum wins */
  s.length_penalty = 0.0f;
  WD_CHECK(wd_search_best(&s) == &s.hyp[0]);
  /* penalty 1: -2/(7/6) = -1.71 vs -4.8/(11/6) = -2.62 */
  s.length_penalty = 1.0f;
  WD_CHECK(wd_search_best(&s) == &s.hyp[0]);
}

int main(void) { return wd_test_main(); }
