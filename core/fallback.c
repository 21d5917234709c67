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

int wd_fallback_rows_wanted(const wd_decode_opts_t *o, int lo, int max_rows) {
  const int per = wd_fallback_rows_per(o, lo);
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
  if (lo > 0 && o->temperatures[lo] > 0.0f) {
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
    a->best = NULL;
    wd_search_begin(&a->search, mode, per, t, o->patience, o->length_penalty, max_len, &a->rng);
  }
  f->lo = lo;
  f->n = n;
  f->rows_per = per;
  f->first = 1;
  f->from_row0 = 0;
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
    int rows[WD_DECODE_MAX_ROWS];
    int32_t toks[WD_DECODE_MAX_ROWS];
    const int nr = wd_search_rows(s, rows, toks);
    for (int r = 0; r < nr; r++) {
      w->rows[w->n] = base + rows[r];
      w->tokens[w->n++] = toks[r];
    }
  }
}

/* A finished attempt: its stats, and whether it passes openai's tests. */
static int judge(const wd_fallback_t *f, wd_attempt_t *a, float no_speech_prob) {
  const wd_decode_opts_t *o = f->opts;
  const wd_hyp_t *best = wd_search_best(&a->search);
  char *text = wd_tokenizer_decode_alloc(f->tok, best->tok, best->n);
  if (!text)
    return WD_ENOMEM;
  size_t len = 0;
  const char *b = wd_py_strip(text, strlen(text), &len);
  a->ws = (wd_window_stats_t){
    .temperature = a->search.temperature,
    .avg_logprob = (float)(best->sum_logprob / (best->n + 1)),
    .compression_ratio = wd_compression_ratio(b, len),
    .no_speech_prob = no_speech_prob,
  };
  free(text);
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

int wd_fallback_update(wd_fallback_t *f, const wd_filter_t *filt, float *work,
                       const float *const *logits, float no_speech_prob, int *ret_keep) {
  int off = 0;
  for (int i = 0; i < f->n; i++) {
    wd_attempt_t *a = &f->att[i];
    if (a->search.done)
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
  return decide(f, ret_keep);
}

int wd_fallback_shed(wd_fallback_t *f, int *keep) {
  if (f->n <= 1 || f->first || f->from_row0)
    return 0;
  int i = 0;
  while (i < f->n && f->att[i].verdict != WD_ATT_RUNNING)
    i++;
  if (i == f->n)
    return 0; /* decided: the group ends with this step's update */
  for (int r = 0; r < f->rows_per; r++)
    keep[r] = i * f->rows_per + r;
  if (i > 0) {
    f->att[0] = f->att[i];
    f->att[0].search.rng = &f->att[0].rng; /* the copy's own stream */
  }
  f->lo += i;
  f->n = 1;
  return f->rows_per;
}

const wd_hyp_t *wd_fallback_result(const wd_fallback_t *f, int i, wd_window_stats_t *ws) {
  *ws = f->att[i].ws;
  return f->att[i].best;
}

void wd_fallback_free(wd_fallback_t *f) {
  free(f->att);
  f->att = NULL;
  f->cap = f->n = 0;
}
