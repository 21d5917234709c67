/*
 * filters.h - openai/whisper's logit filters for one row of one step.
 *
 * A row's logits are filtered in place, in openai's order: SuppressBlank
 * (first sampled step only), SuppressTokens("-1"), ApplyTimestampRules
 * (unless without_timestamps). Greedy decoding, sampling and beam search all
 * take their log-probabilities from the filtered logits.
 * ref: openai/whisper decoding.py (LogitFilter subclasses), v20250625.
 */
#ifndef WD_FILTERS_H
#define WD_FILTERS_H

#include <stdint.h>

#include "tokenizer.h"

typedef struct {
  const wd_special_tokens_t *sp;
  const int32_t *suppress;      /* SuppressTokens ids */
  int n_suppress;
  int suppress_blank;
  int without_timestamps;
  int max_initial_index;        /* timestamp tokens the first may be past ts_begin; < 0 none */
} wd_filter_t;

/* log(sum(exp(x))) over x[0..n), -inf entries allowed (-inf when all are);
 * in double, four lanes at a time on AVX2 hosts (logsumexp.c). */
double wd_logsumexp(const float *x, int n);

/* Tests: the scalar path on every host (on != 0) or the CPU's again. */
void wd_logsumexp_force_portable(int on);

/* Filters lg (n_vocab logits) for a row whose sampled tokens so far are
 * seq[0..n) and returns the logsumexp of the filtered logits, so that
 * log_softmax(lg)[i] = lg[i] - return. */
double wd_filter_apply(const wd_filter_t *f, float *lg, const int32_t *seq, int n);

#endif
