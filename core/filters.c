/*
 * filters.c - SuppressBlank, SuppressTokens and ApplyTimestampRules (see
 * filters.h).
 */
#include "filters.h"

#include <math.h>

/* ApplyTimestampRules for the sampled tokens seq[0..n). Returns the
 * logsumexp of the filtered logits when the last rule left them as they were
 * when it computed it (the caller reuses it: one pass of exp() over the
 * vocabulary per row and step instead of two), else NAN. */
static double timestamp_rules(const wd_filter_t *f, float *lg, const int32_t *seq, int n) {
  const wd_special_tokens_t *sp = f->sp;
  const int nv = sp->n_vocab, tb = sp->ts_begin;
  lg[sp->notimestamps] = -INFINITY;
  const int last_ts = n >= 1 && seq[n - 1] >= tb;
  const int penult_ts = n < 2 || seq[n - 2] >= tb;
  if (last_ts) {
    if (penult_ts) /* a pair just closed: text (or EOT) must follow */
      for (int i = tb; i < nv; i++)
        lg[i] = -INFINITY;
    else /* an opening timestamp needs its closing one: no text */
      for (int i = 0; i < sp->eot; i++)
        lg[i] = -INFINITY;
  }
  /* Timestamps never decrease, and a segment has non-zero length. */
  int32_t ts_last = -1;
  for (int i = n - 1; i >= 0; i--)
    if (seq[i] >= tb) {
      ts_last = seq[i];
      break;
    }
  if (ts_last >= 0) {
    const int32_t upto = (last_ts && !penult_ts) ? ts_last : ts_last + 1;
    for (int i = tb; i < upto && i < nv; i++)
      lg[i] = -INFINITY;
  }
  if (n == 0) {
    /* The first token is a timestamp, at most max_initial_timestamp in. */
    for (int i = 0; i < tb; i++)
      lg[i] = -INFINITY;
    if (f->max_initial_index >= 0)
      for (int i = tb + f->max_initial_index + 1; i < nv; i++)
        lg[i] = -INFINITY;
  }
  /* If timestamps together are likelier than any single text token, take one. */
  const double lse_all = wd_logsumexp(lg, nv);
  const double ts_lp = wd_logsumexp(lg + tb, nv - tb) - lse_all;
  float max_text = -INFINITY;
  for (int i = 0; i < tb; i++)
    if (lg[i] > max_text)
      max_text = lg[i];
  if (!(ts_lp > (double)max_text - lse_all))
    return lse_all;
  for (int i = 0; i < tb; i++)
    lg[i] = -INFINITY;
  return NAN;
}

double wd_filter_apply(const wd_filter_t *f, float *lg, const int32_t *seq, int n) {
  const wd_special_tokens_t *sp = f->sp;
  if (f->suppress_blank && n == 0) {
    lg[220] = -INFINITY; /* encode(" ") is [220] in both vocabularies */
    lg[sp->eot] = -INFINITY;
  }
  for (int i = 0; i < f->n_suppress; i++)
    lg[f->suppress[i]] = -INFINITY;
  double lse = NAN;
  if (!f->without_timestamps)
    lse = timestamp_rules(f, lg, seq, n);
  return isnan(lse) ? wd_logsumexp(lg, sp->n_vocab) : lse;
}
