/*
 * search.c - greedy, sampling and beam search over a window's rows (see
 * search.h).
 */
#include "search.h"

#include <math.h>
#include <string.h>

double wd_search_uniform(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

void wd_search_begin(wd_search_t *s, wd_search_mode_t mode, int n_group, float temperature,
                     float patience, float length_penalty, int max_len, uint64_t *rng) {
  if (n_group < 1)
    n_group = 1;
  if (n_group > WD_DECODE_MAX_ROWS)
    n_group = WD_DECODE_MAX_ROWS;
  if (max_len > WD_SEARCH_MAX_LEN)
    max_len = WD_SEARCH_MAX_LEN;
  s->mode = mode;
  s->n_group = mode == WD_SEARCH_GREEDY ? 1 : n_group;
  s->temperature = temperature;
  /* Python's round(beam_size * patience): halves to even (beam 5, patience
   * 0.5 keeps 2, where lround kept 3); nearbyint under the default mode. */
  int mc = (int)nearbyint((double)s->n_group * (patience > 0 ? patience : 1.0));
  s->max_candidates = mc < 1 ? 1 : mc > 2 * WD_DECODE_MAX_ROWS ? 2 * WD_DECODE_MAX_ROWS : mc;
  s->length_penalty = length_penalty;
  s->max_len = max_len < 1 ? 1 : max_len;
  s->first = 1;
  s->done = 0;
  s->n_fin = 0;
  s->n_copy = 0;
  s->rng = rng;
  for (int r = 0; r < s->n_group; r++) {
    s->hyp[r].n = 0;
    s->hyp[r].sum_logprob = 0.0;
    s->hyp[r].done = 0;
  }
}

int wd_search_rows(const wd_search_t *s, int *rows, int32_t *tokens) {
  if (s->done)
    return 0;
  int n = 0;
  for (int r = 0; r < s->n_group; r++) {
    const wd_hyp_t *h = &s->hyp[r];
    if (h->done || h->n == 0)
      continue;
    rows[n] = r;
    tokens[n++] = h->tok[h->n - 1];
  }
  return n;
}

int wd_search_copies(const wd_search_t *s, int *dst, int *src) {
  memcpy(dst, s->copy_dst, (size_t)s->n_copy * sizeof *dst);
  memcpy(src, s->copy_src, (size_t)s->n_copy * sizeof *src);
  return s->n_copy;
}

/* Categorical(logits / T).sample() over the filtered logits. */
static int32_t sample_token(const float *lg, int nv, float t, uint64_t *rng) {
  float mx = -INFINITY;
  for (int i = 0; i < nv; i++)
    if (lg[i] > mx)
      mx = lg[i];
  double total = 0.0;
  for (int i = 0; i < nv; i++)
    if (lg[i] > -INFINITY)
      total += exp(((double)lg[i] - mx) / t);
  const double u = wd_search_uniform(rng) * total;
  double acc = 0.0;
  int32_t last = 0;
  for (int i = 0; i < nv; i++) {
    if (!(lg[i] > -INFINITY))
      continue;
    acc += exp(((double)lg[i] - mx) / t);
    last = i;
    if (u < acc)
      return i;
  }
  return last; /* rounding at the very end of the cumulative sum */
}

static int32_t argmax(const float *lg, int nv) {
  int32_t best = 0;
  for (int i = 1; i < nv; i++)
    if (lg[i] > lg[best])
      best = i;
  return best;
}

/* Greedy and sample rows: each row extends itself. At the first update all
 * rows draw from row 0's logits and then copy row 0's slot. */
static int update_rows(wd_search_t *s, const wd_filter_t *f, float *work,
                       const float *const *logits) {
  const int nv = f->sp->n_vocab, eot = f->sp->eot;
  int li = 0, live = 0;
  s->n_copy = 0;
  for (int r = 0; r < s->n_group; r++) {
    wd_hyp_t *h = &s->hyp[r];
    if (h->done)
      continue;
    const float *lg = s->first ? logits[0] : logits[li++];
    if (s->first && r > 0) {
      /* every row starts from row 0's initial tokens */
      s->copy_dst[s->n_copy] = r;
      s->copy_src[s->n_copy++] = 0;
    }
    memcpy(work, lg, (size_t)nv * sizeof *work);
    const double lse = wd_filter_apply(f, work, h->tok, h->n);
    const int32_t t = s->mode == WD_SEARCH_GREEDY || s->temperature <= 0.0f
                          ? argmax(work, nv)
                          : sample_token(work, nv, s->temperature, s->rng);
    h->sum_logprob += (double)work[t] - lse;
    if (t == eot) {
      h->done = 1;
      continue;
    }
    h->lp[h->n] = (float)((double)work[t] - lse);
    h->tok[h->n++] = t;
    if (h->n >= s->max_len)
      h->done = 1; /* unfinished: finalize appends EOT */
    else
      live++;
  }
  if (s->first) {
    /* rows that ended at once need no copy */
    int k = 0;
    for (int i = 0; i < s->n_copy; i++)
      if (!s->hyp[s->copy_dst[i]].done)
        s->copy_dst[k] = s->copy_dst[i], s->copy_src[k++] = 0;
    s->n_copy = k;
  }
  s->first = 0;
  return live == 0;
}

typedef struct {
  int src;       /* beam (row) it extends */
  int32_t tok;
  double score;  /* cumulative log-probability */
} cand_t;

/* Adds h's tokens (EOT implied, not stored) with score to the finished
 * list, or updates the score of an equal sequence already there (openai
 * keys a dict by the token tuple). */
static void add_finished(wd_search_t *s, const wd_hyp_t *h, double score) {
  for (int i = 0; i < s->n_fin; i++) {
    wd_hyp_t *g = &s->fin[i];
    if (g->n == h->n && memcmp(g->tok, h->tok, (size_t)h->n * sizeof *h->tok) == 0) {
      g->sum_logprob = score;
      return;
    }
  }
  if (s->n_fin == WD_SEARCH_MAX_FIN)
    return;
  wd_hyp_t *g = &s->fin[s->n_fin++];
  memcpy(g->tok, h->tok, (size_t)h->n * sizeof *h->tok);
  g->n = h->n;
  g->sum_logprob = score;
  g->done = 1;
}

/* Top k (value desc, lower id first on ties) of x[0..nv) into idx. */
static int top_k(const float *x, int nv, int k, int32_t *idx) {
  int n = 0;
  for (int i = 0; i < nv; i++) {
    if (n == k && !(x[i] > x[idx[n - 1]]))
      continue;
    int p = n < k ? n++ : k - 1;
    while (p > 0 && x[i] > x[idx[p - 1]]) {
      idx[p] = idx[p - 1];
      p--;
    }
    idx[p] = i;
  }
  return n;
}

static int update_beam(wd_search_t *s, const wd_filter_t *f, float *work,
                       const float *const *logits) {
  const int nv = f->sp->n_vocab, eot = f->sp->eot, B = s->n_group;
  cand_t cand[WD_DECODE_MAX_ROWS * (WD_DECODE_MAX_ROWS + 1)];
  int nc = 0;
  /* Step 1: the cumulative log-probability of each beam's top B + 1. At the
   * first update the beams are equal: row 0 stands for all of them. */
  const int n_src = s->first ? 1 : B;
  for (int j = 0; j < n_src; j++) {
    const wd_hyp_t *h = &s->hyp[j];
    memcpy(work, logits[j], (size_t)nv * sizeof *work);
    const double lse = wd_filter_apply(f, work, h->tok, h->n);
    int32_t top[WD_DECODE_MAX_ROWS + 1];
    const int k = top_k(work, nv, B + 1, top);
    for (int i = 0; i < k; i++)
      cand[nc++] = (cand_t){ .src = j, .tok = top[i],
                             .score = h->sum_logprob + ((double)work[top[i]] - lse) };
  }
  /* Step 2: rank them (a stable sort, best first). */
  for (int i = 1; i < nc; i++) {
    const cand_t c = cand[i];
    int p = i;
    while (p > 0 && cand[p - 1].score < c.score) {
      cand[p] = cand[p - 1];
      p--;
    }
    cand[p] = c;
  }
  wd_hyp_t next[WD_DECODE_MAX_ROWS];
  int src[WD_DECODE_MAX_ROWS], saved = 0;
  cand_t fin_new[WD_DECODE_MAX_ROWS * (WD_DECODE_MAX_ROWS + 1)];
  int n_fin_new = 0;
  for (int i = 0; i < nc && saved < B; i++) {
    if (cand[i].tok == eot) {
      fin_new[n_fin_new++] = cand[i];
      continue;
    }
    const wd_hyp_t *h = &s->hyp[cand[i].src];
    wd_hyp_t *g = &next[saved];
    memcpy(g->tok, h->tok, (size_t)h->n * sizeof *h->tok);
    memcpy(g->lp, h->lp, (size_t)h->n * sizeof *h->lp);
    g->tok[h->n] = cand[i].tok;
    g->lp[h->n] = (float)(cand[i].score - h->sum_logprob);
    g->n = h->n + 1;
    g->sum_logprob = cand[i].score;
    g->done = 0;
    src[saved++] = cand[i].src;
  }
  /* Newly finished sequences join until max_candidates (already sorted). */
  for (int i = 0; i < n_fin_new && s->n_fin < s->max_candidates; i++)
    add_finished(s, &s->hyp[fin_new[i].src], fin_new[i].score);
  /* The next beams; row k takes the slot history of its source row. */
  s->n_copy = 0;
  for (int k = 0; k < saved; k++) {
    s->hyp[k] = next[k];
    if (src[k] != k) {
      s->copy_dst[s->n_copy] = k;
      s->copy_src[s->n_copy++] = src[k];
    }
  }
  for (int k = saved; k < B; k++)
    s->hyp[k].done = 1; /* cannot happen with B + 1 candidates per beam */
  s->first = 0;
  return s->n_fin >= s->max_candidates || saved == 0 || s->hyp[0].n >= s->max_len;
}

int wd_search_update(wd_search_t *s, const wd_filter_t *f, float *work,
                     const float *const *logits) {
  if (s->done)
    return 1;
  const int r = s->mode == WD_SEARCH_BEAM ? update_beam(s, f, work, logits)
                                          : update_rows(s, f, work, logits);
  if (r)
    s->done = 1, s->n_copy = 0;
  return r;
}

static double rank_score(const wd_search_t *s, const wd_hyp_t *h) {
  const int len = h->n;
  const double penalty = isnan(s->length_penalty)
                             ? (double)len
                             : pow((5.0 + len) / 6.0, (double)s->length_penalty);
  return penalty > 0 ? h->sum_logprob / penalty : -INFINITY;
}

const wd_hyp_t *wd_search_best(wd_search_t *s) {
  const wd_hyp_t *set = s->hyp;
  int n = s->n_group;
  if (s->mode == WD_SEARCH_BEAM) {
    /* finalize: too few finished, so the likeliest live beams join them */
    int order[WD_DECODE_MAX_ROWS], m = 0;
    for (int k = 0; k < s->n_group; k++)
      if (!s->hyp[k].done)
        order[m++] = k;
    for (int i = 1; i < m; i++) {
      const int o = order[i];
      int p = i;
      while (p > 0 && s->hyp[order[p - 1]].sum_logprob < s->hyp[o].sum_logprob) {
        order[p] = order[p - 1];
        p--;
      }
      order[p] = o;
    }
    for (int i = 0; i < m && s->n_fin < s->n_group; i++)
      add_finished(s, &s->hyp[order[i]], s->hyp[order[i]].sum_logprob);
    set = s->fin;
    n = s->n_fin;
  }
  /* np.argmax: the first of equal scores */
  int best = 0;
  double bs = -INFINITY;
  for (int i = 0; i < n; i++) {
    const double sc = rank_score(s, &set[i]);
    if (i == 0 || sc > bs)
      best = i, bs = sc;
  }
  return &set[best];
}
