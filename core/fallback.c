/*
 * fallback.c - a window's temperature attempts as groups (see fallback.h).
 */
#include "fallback.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "pystr.h"

int wd_fallback_rows_per(const wd_decode_opts_t *o, int t_idx) {
  if (o->temperatures[t_idx] > 0.0f)
    return o->best_of > 1 ? o->best_of : 1;
  return o->beam_size > 1 ? o->beam_size : 1;
}

/* Spares at lo 0 (fallback.h): one row an attempt at every temperature. */
static int spares_allowed(const wd_decode_opts_t *o) {
  if (o->n_temperatures < 2)
    return 0;
  for (int i = 0; i < o->n_temperatures; i++)
    if (wd_fallback_rows_per(o, i) != 1)
      return 0;
  return 1;
}

/* Attempt 0's text is looked at from this many tokens on, every SPARE_EVERY. */
enum { SPARE_FROM = 32, SPARE_EVERY = 16 };

int wd_fallback_rows_wanted(const wd_decode_opts_t *o, int lo, int max_rows) {
  const int per = wd_fallback_rows_per(o, lo);
  if (lo == 0 && spares_allowed(o))
    return o->n_temperatures < max_rows ? o->n_temperatures : max_rows;
  if (lo == 0 || !(o->temperatures[lo] > 0.0f))
    return per;
  const int n = o->n_temperatures - lo;
  const int fit = max_rows / per;
  return per * (n < fit ? n : fit > 0 ? fit : 1);
}

/* splitmix64's finaliser over the seed, the window and the temperature:
 * one stream per attempt, whichever group it runs in. */
static uint64_t attempt_seed(uint64_t seed, int seek, int t_idx) {
  uint64_t z = seed ^ ((uint64_t)(uint32_t)seek << 8) ^ (uint64_t)(t_idx + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int wd_fallback_begin(wd_fallback_t *f, int lo, int n_rows, int seek, int max_len) {
  const wd_decode_opts_t *o = f->opts;
  const int per = wd_fallback_rows_per(o, lo);
  int n = 1;
  const int spares = lo == 0 && spares_allowed(o);
  if ((lo > 0 && o->temperatures[lo] > 0.0f) || spares) {
    n = n_rows / per;
    n = n < 1 ? 1 : n > o->n_temperatures - lo ? o->n_temperatures - lo : n;
  }
  if (n > f->cap) {
    wd_attempt_t *a = realloc(f->att, (size_t)n * sizeof *a);
    if (!a)
      return WD_ENOMEM;
    f->att = a;
    f->cap = n;
  }
  for (int i = 0; i < n; i++) {
    wd_attempt_t *a = &f->att[i];
    const float t = o->temperatures[lo + i];
    wd_search_mode_t mode = WD_SEARCH_GREEDY;
    if (t > 0.0f)
      mode = WD_SEARCH_SAMPLE;
    else if (o->beam_size > 1)
      mode = WD_SEARCH_BEAM;
    a->rng = attempt_seed(o->seed, seek, lo + i);
    a->verdict = WD_ATT_RUNNING;
    a->dormant = spares && i > 0;
    a->best = NULL;
    wd_search_begin(&a->search, mode, per, t, o->patience, o->length_penalty, max_len, &a->rng);
  }
  f->lo = lo;
  f->n = n;
  f->rows_per = per;
  f->first = 1;
  f->from_row0 = 0;
  f->n_dormant = spares ? n - 1 : 0;
  f->next_check = SPARE_FROM;
  return 0;
}

int wd_fallback_rows_used(const wd_fallback_t *f) { return f->n * f->rows_per; }

void wd_fallback_work(const wd_fallback_t *f, wd_dec_work_t *w) {
  int dst[WD_DECODE_MAX_ROWS], src[WD_DECODE_MAX_ROWS];
  w->n_copy = w->n = 0;
  for (int i = 0; i < f->n; i++) {
    const wd_search_t *s = &f->att[i].search;
    const int base = i * f->rows_per;
    if (s->done)
      continue;
    /* The group's first copies: every row of every attempt from row 0,
     * which alone was fed the initial tokens (the engine reads all sources
     * before it writes, so a copy must name row 0 itself). */
    if (f->from_row0 && base > 0) {
      w->copy_dst[w->n_copy] = base;
      w->copy_src[w->n_copy++] = 0;
    }
    const int nc = wd_search_copies(s, dst, src);
    for (int c = 0; c < nc; c++) {
      w->copy_dst[w->n_copy] = base + dst[c];
      w->copy_src[w->n_copy++] = f->from_row0 ? 0 : base + src[c];
    }
    if (f->att[i].dormant)
      continue; /* its rows take the first copies, nothing else */
    int rows[WD_DECODE_MAX_ROWS];
    int32_t toks[WD_DECODE_MAX_ROWS];
    const int nr = wd_search_rows(s, rows, toks);
    for (int r = 0; r < nr; r++) {
      w->rows[w->n] = base + rows[r];
      w->tokens[w->n++] = toks[r];
    }
  }
}

/* openai's compression ratio of a hypothesis' text (stripped). */
static int text_ratio(const wd_fallback_t *f, const wd_hyp_t *h, float *ret) {
  char *text = wd_tokenizer_decode_alloc(f->tok, h->tok, h->n);
  if (!text)
    return WD_ENOMEM;
  size_t len = 0;
  const char *b = wd_py_strip(text, strlen(text), &len);
  *ret = wd_compression_ratio(b, len);
  free(text);
  return 0;
}

/* A finished attempt: its stats, and whether it passes openai's tests. */
static int judge(const wd_fallback_t *f, wd_attempt_t *a, float no_speech_prob) {
  const wd_decode_opts_t *o = f->opts;
  const wd_hyp_t *best = wd_search_best(&a->search);
  float ratio = 0.0f;
  if (text_ratio(f, best, &ratio) < 0)
    return WD_ENOMEM;
  a->ws = (wd_window_stats_t){
    .temperature = a->search.temperature,
    .avg_logprob = (float)(best->sum_logprob / (best->n + 1)),
    .compression_ratio = ratio,
    .no_speech_prob = no_speech_prob,
  };
  int fallback = (!isnan(o->compression_ratio_threshold) &&
                  a->ws.compression_ratio > o->compression_ratio_threshold) ||
                 (!isnan(o->logprob_threshold) && a->ws.avg_logprob < o->logprob_threshold);
  /* Silence: a low log-probability is expected, and no reason to retry. */
  if (!isnan(o->no_speech_threshold) && a->ws.no_speech_prob > o->no_speech_threshold &&
      !isnan(o->logprob_threshold) && a->ws.avg_logprob < o->logprob_threshold)
    fallback = 0;
  a->best = best;
  a->verdict = fallback ? WD_ATT_FAIL : WD_ATT_PASS;
  return 0;
}

/* Which attempt is kept, if that is known yet (see fallback.h). */
static int decide(wd_fallback_t *f, int *ret_keep) {
  int pass = -1;
  for (int i = 0; i < f->n && pass < 0; i++)
    if (f->att[i].verdict == WD_ATT_PASS)
      pass = i;
  /* Attempts after a passing one can never be kept: stop them. */
  for (int i = pass + 1; pass >= 0 && i < f->n; i++)
    if (f->att[i].verdict == WD_ATT_RUNNING) {
      f->att[i].verdict = WD_ATT_STOPPED;
      f->att[i].search.done = 1;
    }
  for (int i = 0; i < f->n; i++) {
    if (f->att[i].verdict == WD_ATT_RUNNING)
      return 0;
    if (f->att[i].verdict == WD_ATT_PASS) {
      *ret_keep = i;
      return 1;
    }
  }
  if (f->lo + f->n < f->opts->n_temperatures)
    return 2;
  *ret_keep = f->n - 1; /* all failed: openai keeps the last */
  return 1;
}

/* Whether the spares should run now: an attempt failed (openai would run
 * the next one now), or attempt 0's text so far fails a test that its end
 * is likely to fail too (a guess: it only decides when they run). */
static int spares_due(wd_fallback_t *f, float no_speech_prob, int *due) {
  const wd_decode_opts_t *o = f->opts;
  *due = 0;
  for (int i = 0; i < f->n; i++)
    if (f->att[i].verdict == WD_ATT_FAIL)
      *due = 1;
  const wd_attempt_t *a = &f->att[0];
  if (*due || a->verdict != WD_ATT_RUNNING || a->search.hyp[0].n < f->next_check)
    return 0;
  const wd_hyp_t *h = &a->search.hyp[0];
  f->next_check = h->n + SPARE_EVERY;
  const int silence = !isnan(o->no_speech_threshold) && no_speech_prob > o->no_speech_threshold;
  if (!isnan(o->logprob_threshold) && !silence &&
      h->sum_logprob / (h->n + 1) < (double)o->logprob_threshold)
    *due = 1;
  float ratio = 0.0f;
  if (!*due && !isnan(o->compression_ratio_threshold)) {
    if (text_ratio(f, h, &ratio) < 0)
      return WD_ENOMEM;
    *due = ratio > o->compression_ratio_threshold;
  }
  return 0;
}

/* The spares take their first update from the group's first logits, as
 * they would have at the group's start, and run from the next step on. */
static int wake_spares(wd_fallback_t *f, const wd_filter_t *filt, float *work,
                       float no_speech_prob) {
  const float *lg = f->spare_lg;
  for (int i = 0; i < f->n; i++) {
    wd_attempt_t *a = &f->att[i];
    if (!a->dormant)
      continue;
    a->dormant = 0;
    if (a->search.done)
      continue; /* stopped meanwhile */
    if (wd_search_update(&a->search, filt, work, &lg)) {
      const int rc = judge(f, a, no_speech_prob);
      if (rc < 0)
        return rc;
    }
  }
  f->n_dormant = 0;
  return 0;
}

int wd_fallback_update(wd_fallback_t *f, const wd_filter_t *filt, float *work,
                       const float *const *logits, float no_speech_prob, int *ret_keep) {
  if (f->first && f->n_dormant > 0) { /* the spares' first logits */
    const int nv = filt->sp->n_vocab;
    if (nv > f->spare_cap) {
      float *p = realloc(f->spare_lg, (size_t)nv * sizeof *p);
      if (!p)
        return WD_ENOMEM;
      f->spare_lg = p;
      f->spare_cap = nv;
    }
    memcpy(f->spare_lg, logits[0], (size_t)nv * sizeof *f->spare_lg);
  }
  int off = 0;
  for (int i = 0; i < f->n; i++) {
    wd_attempt_t *a = &f->att[i];
    if (a->search.done || a->dormant)
      continue;
    int rows[WD_DECODE_MAX_ROWS];
    int32_t toks[WD_DECODE_MAX_ROWS];
    /* at the first update every attempt reads row 0's logits */
    const int nr = f->first ? 0 : wd_search_rows(&a->search, rows, toks);
    if (wd_search_update(&a->search, filt, work, logits + off)) {
      const int rc = judge(f, a, no_speech_prob);
      if (rc < 0)
        return rc;
    }
    off += nr;
  }
  f->from_row0 = f->first;
  f->first = 0;
  if (f->n_dormant > 0) {
    int due = 0;
    int rc = spares_due(f, no_speech_prob, &due);
    if (rc == 0 && due)
      rc = wake_spares(f, filt, work, no_speech_prob);
    if (rc < 0)
      return rc;
  }
  return decide(f, ret_keep);
}

int wd_fallback_shed(wd_fallback_t *f, int *keep) {
  if (f->n <= 1)
    return 0;
  int i = 0;
  while (i < f->n && f->att[i].verdict != WD_ATT_RUNNING)
    i++;
  if (i == f->n)
    return 0; /* decided: the group ends with this step's update */
  /* Attempt 0 keeps rows 0 .. rows_per, whose state it has (row 0 was fed;
   * its own copies read row 0 whatever else is dropped), so it may shed
   * before the first copies too: a job queued just after a window began
   * is admitted at once, not two turns later. A later attempt's rows get
   * row 0's state only with those copies. */
  if (i > 0 && (f->first || f->from_row0))
    return 0;
  for (int r = 0; r < f->rows_per; r++)
    keep[r] = i * f->rows_per + r;
  if (i > 0) {
    f->att[0] = f->att[i];
    f->att[0].search.rng = &f->att[0].rng; /* the copy's own stream */
  }
  f->lo += i;
  f->n = 1;
  f->n_dormant = 0; /* spares go back with their rows (i is awake) */
  return f->rows_per;
}

const wd_hyp_t *wd_fallback_result(const wd_fallback_t *f, int i, wd_window_stats_t *ws) {
  *ws = f->att[i].ws;
  return f->att[i].best;
}

void wd_fallback_free(wd_fallback_t *f) {
  free(f->att);
  free(f->spare_lg);
  f->att = NULL;
  f->spare_lg = NULL;
  f->cap = f->n = f->spare_cap = f->n_dormant = 0;
}
