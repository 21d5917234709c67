/*
 * fallback.h - openai's decode_with_fallback for one window, as groups of
 * attempts that may run side by side.
 *
 * openai decodes a window at temperature t[0]; when the result fails its
 * tests (compression ratio too high, average log-probability too low, and
 * not silence) it decodes again at t[1], and so on; it keeps the first
 * attempt that passes, or the last one. Here a group is the attempts at
 * t[lo], t[lo + 1], ..., t[lo + n - 1], each its own search (search.h) over
 * its own rows with its own random stream, stepped together:
 *
 *   rows   attempt i of the group owns rows i * rows_per .. + rows_per - 1
 *          of the decoder (rows_per: best_of, or beam_size at temperature
 *          0); the decoder's rows map to engine slots in the worker.
 *   feed   the initial tokens go into row 0 once (the decoder's FEED); the
 *          first update gives every attempt row 0's logits, and the copies
 *          that follow fill every other row of the group from row 0.
 *   keep   attempt i is kept once it passes and every attempt before it
 *          failed; attempts after a passing one stop at once (their result
 *          could never be kept). All failed: the next group starts at
 *          t[lo + n], or, past the schedule's end, the last is kept.
 *
 *   spare  at temperature index 0, with spare rows and one row an attempt
 *          (no beams, no best_of), the group holds every temperature: the
 *          first runs, the others wait (dormant; their rows get row 0's
 *          state with the first copies, and the first logits are kept).
 *          They wake when the first fails, or earlier once its text so far
 *          looks like failing (every 16 tokens from the 32nd: compression
 *          ratio above the threshold, or average log-probability below it
 *          where the window is not silence), and then run beside it: a
 *          window whose greedy decode loops to its 224th token no longer
 *          waits for that before its fallbacks start. The kept attempt is
 *          the same either way: waking changes when an attempt runs, not
 *          what it computes.
 *
 * The random stream of an attempt is seeded by (seed, seek, temperature
 * index) alone, so a group of one attempt after another (no spare rows)
 * and a group of several give the same attempts, and so the same kept
 * result, bit for bit, on an engine whose rows do not depend on the batch.
 * ref: openai/whisper transcribe.py (decode_with_fallback), v20250625.
 */
#ifndef WD_FALLBACK_H
#define WD_FALLBACK_H

#include <stdint.h>

#include "decode.h"
#include "decoder.h"
#include "filters.h"
#include "search.h"
#include "tokenizer.h"

/* Window-wide values every segment of a window shares. */
typedef struct {
  float temperature, avg_logprob, compression_ratio, no_speech_prob;
} wd_window_stats_t;

typedef enum { WD_ATT_RUNNING, WD_ATT_PASS, WD_ATT_FAIL, WD_ATT_STOPPED } wd_att_verdict_t;

typedef struct {
  wd_search_t search;
  uint64_t rng;                /* its own sampling state */
  wd_att_verdict_t verdict;
  int dormant;                 /* spare: not updated or stepped until woken */
  const wd_hyp_t *best;        /* decided: its result, and the stats of it */
  wd_window_stats_t ws;
} wd_attempt_t;

typedef struct {
  const wd_decode_opts_t *opts; /* the schedule, thresholds, search options */
  const wd_tokenizer_t *tok;
  int lo, n, rows_per;         /* the group: temperatures lo .. lo + n - 1 */
  int first;                   /* the next update is the group's first */
  int from_row0;               /* the next work's copies read row 0 */
  wd_attempt_t *att;           /* [n] of [cap] */
  int cap;
  int n_dormant;               /* spare attempts not woken yet */
  int next_check;              /* tokens of attempt 0 at the next look */
  float *spare_lg;             /* the group's first logits, for spares */
  int spare_cap;
} wd_fallback_t;

/* Rows one attempt at temperature index t_idx uses. */
int wd_fallback_rows_per(const wd_decode_opts_t *o, int t_idx);

/* Rows a group starting at lo could use side by side: every temperature
 * left, when lo follows a failed attempt, or at lo 0 where the others can
 * wait as spares (see above); at most max_rows. */
int wd_fallback_rows_wanted(const wd_decode_opts_t *o, int lo, int max_rows);

/* Starts the group at temperature index lo over n_rows rows (as many
 * attempts as they hold, at least one; at lo == 0 the first alone, or
 * with the others as spares). seed:
 * the options' seed; seek: the window's, for the attempts' streams;
 * max_len: tokens an attempt may sample. Returns 0 or WD_ENOMEM. */
int wd_fallback_begin(wd_fallback_t *f, int lo, int n_rows, int seek, int max_len);

/* Rows the running group uses (0 before the first begin). */
int wd_fallback_rows_used(const wd_fallback_t *f);

/* The group's slot copies and rows for the next step, into w. */
void wd_fallback_work(const wd_fallback_t *f, wd_dec_work_t *w);

/* Takes the logits of the last step (every row of the last work in order,
 * or one row at the first update) with no_speech_prob of the window.
 * Returns 0 (more steps), 1 (attempt *ret_keep is kept: its result by
 * wd_fallback_result), 2 (every attempt failed and the schedule goes on:
 * begin the group at lo + n), or WD_ENOMEM. */
int wd_fallback_update(wd_fallback_t *f, const wd_filter_t *filt, float *work,
                       const float *const *logits, float no_speech_prob, int *ret_keep);

/* Gives back the rows of attempts that may never be needed: the group
 * shrinks to its lowest running attempt (those before it failed; those
 * after it run again later, one after another, if it fails too), whose
 * rows keep[0 .. rows_per) were; it becomes attempt 0 at rows 0 ...
 * Attempt 0 may keep its rows while the group's first copies are pending
 * (row 0 was fed, and its own copies read row 0); a later attempt may not
 * (its rows are not filled yet). Nor when nothing would be given back.
 * Returns the rows kept (rows_per), or 0 when the group stays as it is. */
int wd_fallback_shed(wd_fallback_t *f, int *keep);

/* Decided attempt i's result and its window stats. */
const wd_hyp_t *wd_fallback_result(const wd_fallback_t *f, int i, wd_window_stats_t *ws);

void wd_fallback_free(wd_fallback_t *f);

#endif
