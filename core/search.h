/*
 * search.h - one window's token search over a group of rows: greedy
 * decoding, best_of sampling or beam search, then ranking.
 *
 * The rows are the window's sequences; each is a sequence slot of the
 * engine. Before the first update every row would hold the same initial
 * tokens, so only row 0 is fed them (prefill or steps) and the first update
 * takes row 0's logits alone; the other rows start as copies of row 0
 * (wd_search_copies). After that, each update takes the logits of the rows
 * wd_search_rows() named, in that order.
 *
 *   greedy  (temperature 0, 1 row): argmax of the filtered logits.
 *   sample  (temperature > 0, best_of rows): each row samples its own
 *           sequence from softmax(logits / T); the likeliest is kept.
 *   beam    (temperature 0, beam_size rows): openai's BeamSearchDecoder:
 *           the top beam_size + 1 tokens of each beam are candidates; the
 *           best beam_size unfinished ones become the next beams (a beam may
 *           take another's history: a copy of its slot), finished ones are
 *           collected until round(beam_size * patience) exist.
 * Log-probabilities come from the filtered, untempered logits. The ranking
 * is sum_logprob / length, or / ((5 + length) / 6)^length_penalty.
 * ref: openai/whisper decoding.py (GreedyDecoder, BeamSearchDecoder,
 * MaximumLikelihoodRanker), v20250625.
 */
#ifndef WD_SEARCH_H
#define WD_SEARCH_H

#include <stdint.h>

#include "decode.h"
#include "filters.h"

#define WD_SEARCH_MAX_LEN 224 /* sample_len: n_text_ctx / 2 */
#define WD_SEARCH_MAX_FIN (3 * WD_DECODE_MAX_ROWS)

typedef enum { WD_SEARCH_GREEDY, WD_SEARCH_SAMPLE, WD_SEARCH_BEAM } wd_search_mode_t;

/* One row's sequence: the sampled tokens, without the final EOT. */
typedef struct {
  int32_t tok[WD_SEARCH_MAX_LEN + 1];
  float lp[WD_SEARCH_MAX_LEN + 1]; /* lp[i]: log-probability of tok[i] (filtered,
                                    * untempered: the terms of sum_logprob) */
  int n;
  double sum_logprob;
  int done;                    /* greedy and sample rows: ended with EOT */
} wd_hyp_t;

typedef struct {
  wd_search_mode_t mode;
  int n_group;                 /* rows */
  float temperature;
  int max_candidates;          /* beam: finished sequences that end the search */
  float length_penalty;        /* NAN: divide by length */
  int max_len;                 /* tokens sampled at most */
  int first;                   /* no update yet: only row 0 has a state */
  int done;
  wd_hyp_t hyp[WD_DECODE_MAX_ROWS];
  wd_hyp_t fin[WD_SEARCH_MAX_FIN]; /* beam: finished sequences, in the order found */
  int n_fin;
  int copy_dst[WD_DECODE_MAX_ROWS], copy_src[WD_DECODE_MAX_ROWS];
  int n_copy;                  /* slot copies due before the next step */
  uint64_t *rng;               /* the decoder's sampling state */
} wd_search_t;

/* Starts a search. n_group: 1 for greedy, best_of, or beam_size; max_len:
 * the tokens that may be sampled (sample_len, less when the prompt leaves
 * less of the context). */
void wd_search_begin(wd_search_t *s, wd_search_mode_t mode, int n_group, float temperature,
                     float patience, float length_penalty, int max_len, uint64_t *rng);

/* The rows the next step feeds and the token each feeds; returns their
 * count (0 when done). */
int wd_search_rows(const wd_search_t *s, int *rows, int32_t *tokens);

/* The slot copies to make before the next step: slot of row dst[i] becomes
 * a copy of the slot of row src[i]. Returns the count. */
int wd_search_copies(const wd_search_t *s, int *dst, int *src);

/* Takes the logits of the rows of the last wd_search_rows() (or row 0 alone
 * at the first update), filters them with f (work: n_vocab floats of
 * scratch) and extends the rows. Returns 0, or 1 when the search is done. */
int wd_search_update(wd_search_t *s, const wd_filter_t *f, float *work,
                     const float *const *logits);

/* After done: the winning sequence (beam: finished ones first, topped up
 * with the best unfinished). */
const wd_hyp_t *wd_search_best(wd_search_t *s);

/* Uniform double in [0, 1) from a splitmix64 state. */
double wd_search_uniform(uint64_t *state);

#endif
