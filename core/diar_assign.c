/*
 * diar_assign.c - words and segments attributed to speakers (see
 * diar_assign.h). ref: WhisperX whisperx/diarize.py assign_word_speakers
 * (the intersection of a word with each speaker's turns, summed per
 * speaker; the largest wins).
 *
 * Work is O(words x turns): an hour of speech (~10k words, ~1k turns) is
 * ten million interval tests, a few milliseconds.
 */
#include "diar_assign.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* A word (or segment) not yet given to anyone. Speaker -1 is the one
 * speaker of a diarization without turns. */
#define NOBODY (-2)

/* Seconds [a0, a1] and [b0, b1] share (0 when disjoint). */
static double overlap(double a0, double a1, double b0, double b1) {
  const double o = fmin(a1, b1) - fmax(a0, b0);
  return o > 0 ? o : 0;
}

/* The speaker whose turns overlap [a0, a1] longest, summed over the
 * speaker's turns, or NOBODY when none does; its overlap in *ret_o.
 * acc: (n_spk) scratch. */
static int best_overlap(const wd_diar_result_t *r, int n_spk, double a0, double a1, double *acc,
                        double *ret_o) {
  memset(acc, 0, (size_t)n_spk * sizeof *acc);
  for (size_t i = 0; i < r->n_turns; i++) {
    const wd_diar_turn_t *u = &r->turns[i];
    if (u->start >= a1)
      break; /* sorted by start: no later turn reaches [a0, a1] */
    acc[u->speaker] += overlap(a0, a1, u->start, u->end);
  }
  int best = NOBODY;
  double bo = 0;
  for (int k = 0; k < n_spk; k++)
    if (acc[k] > bo) {
      bo = acc[k];
      best = k;
    }
  if (ret_o)
    *ret_o = bo;
  return best;
}

/* The speaker of the turn nearest to [a0, a1] (the first of equals), or
 * NOBODY when it is farther than max_gap seconds (or there is none). */
static int nearest(const wd_diar_result_t *r, double a0, double a1, double max_gap) {
  int best = NOBODY;
  double bg = max_gap;
  for (size_t i = 0; i < r->n_turns; i++) {
    const wd_diar_turn_t *u = &r->turns[i];
    const double gap = fmax(0.0, fmax(u->start - a1, a0 - u->end));
    if (gap <= bg && (best == NOBODY || gap < bg)) {
      bg = gap;
      best = u->speaker;
    }
  }
  return best;
}

/* The speaker of a whole segment: overlap, then the nearest turn. */
static int segment_speaker(const wd_diar_result_t *r, int n_spk, const wd_segment_t *s,
                           double *acc) {
  const int k = best_overlap(r, n_spk, s->start, s->end, acc, NULL);
  return k != NOBODY ? k : nearest(r, s->start, s->end, INFINITY);
}

/* Each word's speaker into spk[0..n_words) (a segment with words). */
static void word_speakers(const wd_diar_result_t *r, int n_spk, const wd_segment_t *s, int *spk,
                          double *acc, int *count) {
  int unresolved = 0;
  for (int i = 0; i < s->n_words; i++) {
    const wd_word_t *w = &s->words[i];
    spk[i] = best_overlap(r, n_spk, w->start, w->end, acc, NULL);
    if (spk[i] == NOBODY)
      spk[i] = nearest(r, w->start, w->end, WD_DIAR_ASSIGN_NEAR_S);
    unresolved += spk[i] == NOBODY;
  }
  if (!unresolved)
    return;
  /* The segment's majority among its attributed words; ties to the
   * speaker whose turns overlap the segment longest. */
  memset(count, 0, (size_t)n_spk * sizeof *count);
  for (int i = 0; i < s->n_words; i++)
    if (spk[i] != NOBODY)
      count[spk[i]]++;
  best_overlap(r, n_spk, s->start, s->end, acc, NULL);
  int major = NOBODY;
  for (int k = 0; k < n_spk; k++)
    if (count[k] > 0 && (major == NOBODY || count[k] > count[major] ||
                         (count[k] == count[major] && acc[k] > acc[major])))
      major = k;
  if (major == NOBODY) /* no word attributed: the segment's own speaker */
    major = segment_speaker(r, n_spk, s, acc);
  for (int i = 0; i < s->n_words; i++)
    if (spk[i] == NOBODY)
      spk[i] = major;
}

/* Appends a piece; takes text. A piece without text (Whisper's empty
 * segments: nothing was said there) is dropped: it has nobody to name.
 * 0 or WD_ENOMEM (text freed). */
static int push(wd_diar_segs_t *out, int *cap, double start, double end, int speaker,
                char *text) {
  if (!text)
    return WD_ENOMEM;
  if (text[strspn(text, " \t\n\r")] == '\0') {
    free(text);
    return 0;
  }
  if (out->n_segs == *cap) {
    const int nc = *cap ? *cap * 2 : 16;
    wd_diar_seg_t *g = realloc(out->segs, (size_t)nc * sizeof *g);
    if (!g) {
      free(text);
      return WD_ENOMEM;
    }
    out->segs = g;
    *cap = nc;
  }
  out->segs[out->n_segs++] = (wd_diar_seg_t){ start, end, speaker, text };
  return 0;
}

/* words[a..b)'s text joined as it is. */
static char *join_words(const wd_word_t *w, int a, int b) {
  size_t n = 0;
  for (int i = a; i < b; i++)
    n += w[i].word ? strlen(w[i].word) : 0;
  char *s = malloc(n + 1);
  if (!s)
    return NULL;
  size_t k = 0;
  for (int i = a; i < b; i++)
    if (w[i].word) {
      const size_t l = strlen(w[i].word);
      memcpy(s + k, w[i].word, l);
      k += l;
    }
  s[k] = '\0';
  return s;
}

static char *dup_text(const char *s) { return strdup(s ? s : ""); }

int wd_diar_assign(const wd_transcript_t *t, const wd_diar_result_t *r, wd_diar_segs_t *out) {
  memset(out, 0, sizeof *out);
  const wd_diar_result_t none = { 0 };
  if (!r)
    r = &none;
  /* Speakers as the turns number them (n_speakers, or more if a turn says
   * so: never index past the scratch). */
  int n_spk = r->n_speakers;
  for (size_t i = 0; i < r->n_turns; i++)
    if (r->turns[i].speaker >= n_spk)
      n_spk = r->turns[i].speaker + 1;
  int max_words = 0;
  for (int i = 0; i < t->n_segments; i++)
    if (t->segments[i].n_words > max_words)
      max_words = t->segments[i].n_words;
  double *acc = malloc((size_t)(n_spk + 1) * sizeof *acc);
  int *count = malloc((size_t)(n_spk + 1) * sizeof *count);
  int *spk = malloc((size_t)(max_words + 1) * sizeof *spk);
  int *order = malloc((size_t)(n_spk + 2) * sizeof *order); /* diar speaker + 1 -> ours */
  int cap = 0, rc = 0;
  if (!acc || !count || !spk || !order) {
    rc = WD_ENOMEM;
    goto out;
  }
  for (int k = 0; k < n_spk + 1; k++)
    order[k] = -1;
  for (int i = 0; i < t->n_segments && !rc; i++) {
    const wd_segment_t *s = &t->segments[i];
    if (r->n_turns == 0) {
      rc = push(out, &cap, s->start, s->end, -1, dup_text(s->text));
      continue;
    }
    if (s->n_words <= 0 || !s->words) {
      rc = push(out, &cap, s->start, s->end, segment_speaker(r, n_spk, s, acc),
                dup_text(s->text));
      continue;
    }
    word_speakers(r, n_spk, s, spk, acc, count);
    int a = 0;
    while (a < s->n_words && !rc) {
      int b = a + 1;
      while (b < s->n_words && spk[b] == spk[a])
        b++;
      const int whole = a == 0 && b == s->n_words;
      const double start = a == 0 ? s->start : s->words[a].start;
      const double end = b == s->n_words ? s->end : s->words[b - 1].end;
      rc = push(out, &cap, start, fmax(start, end), spk[a],
                whole ? dup_text(s->text) : join_words(s->words, a, b));
      a = b;
    }
  }
  if (rc)
    goto out;
  /* Our numbering: order of first appearance in the pieces. */
  int n = 0;
  for (int i = 0; i < out->n_segs; i++) {
    int *o = &order[out->segs[i].speaker + 1];
    if (*o < 0)
      *o = n++;
  }
  out->n_speakers = n;
  out->turn_speaker = malloc((size_t)(n + 1) * sizeof *out->turn_speaker);
  if (!out->turn_speaker) {
    rc = WD_ENOMEM;
    goto out;
  }
  for (int k = 0; k < n_spk + 1; k++)
    if (order[k] >= 0)
      out->turn_speaker[order[k]] = k - 1;
  for (int i = 0; i < out->n_segs; i++)
    out->segs[i].speaker = order[out->segs[i].speaker + 1];
out:
  free(acc);
  free(count);
  free(spk);
  free(order);
  if (rc)
    wd_diar_segs_free(out);
  return rc;
}

void wd_diar_segs_free(wd_diar_segs_t *s) {
  if (!s)
    return;
  for (int i = 0; i < s->n_segs; i++)
    free(s->segs[i].text);
  free(s->segs);
  free(s->turn_speaker);
  memset(s, 0, sizeof *s);
}

void wd_diar_match_known(const float *centroids, int n_speakers, const float *refs, int n_refs,
                         float min_cos, int *known) {
  for (int k = 0; k < n_speakers; k++)
    known[k] = -1;
  if (n_refs <= 0 || n_refs > WD_DIAR_MAX_KNOWN || !centroids || !refs)
    return;
  int used[WD_DIAR_MAX_KNOWN] = { 0 };
  /* At most n_refs rounds, each taking the best pair left (a greedy
   * matching: small n, and what "best pairs first" means to a reader). */
  for (int round = 0; round < n_refs; round++) {
    int bk = -1, bj = -1;
    float bc = min_cos;
    for (int k = 0; k < n_speakers; k++) {
      if (known[k] >= 0)
        continue;
      for (int j = 0; j < n_refs; j++) {
        if (used[j])
          continue;
        float c = 0;
        for (int d = 0; d < WD_DIAR_EMB_DIM; d++)
          c += centroids[(size_t)k * WD_DIAR_EMB_DIM + (size_t)d] *
               refs[(size_t)j * WD_DIAR_EMB_DIM + (size_t)d];
        if (c >= bc && (bk < 0 || c > bc)) {
          bc = c;
          bk = k;
          bj = j;
        }
      }
    }
    if (bk < 0)
      return;
    known[bk] = bj;
    used[bj] = 1;
  }
}

/* The letters of the i-th unnamed speaker: A..Z, then AA, AB, ... */
static void letters(int i, char *buf, size_t len) {
  char tmp[16];
  int n = 0;
  i++;
  while (i > 0 && n < (int)sizeof tmp) {
    i--;
    tmp[n++] = (char)('A' + i % 26);
    i /= 26;
  }
  size_t k = 0;
  while (n > 0 && k + 1 < len)
    buf[k++] = tmp[--n];
  buf[k] = '\0';
}

int wd_diar_labels(const wd_diar_segs_t *s, const int *known, const char *const *names,
                   char **labels) {
  int n_letters = 0;
  for (int k = 0; k < s->n_speakers; k++) {
    const int ts = s->turn_speaker[k];
    const int j = known && names && ts >= 0 ? known[ts] : -1;
    char buf[16];
    const char *src = buf;
    if (j >= 0)
      src = names[j];
    else
      letters(n_letters++, buf, sizeof buf);
    if (!(labels[k] = strdup(src))) {
      while (k-- > 0) { /* the labels made so far */
        free(labels[k]);
        labels[k] = NULL;
      }
      return WD_ENOMEM;
    }
  }
  return 0;
}

void wd_diar_labels_free(char **labels, int n) {
  for (int k = 0; labels && k < n; k++) {
    free(labels[k]);
    labels[k] = NULL;
  }
}
