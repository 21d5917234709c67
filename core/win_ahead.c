/*
 * win_ahead.c - the next window's log-mel computed ahead (see win_ahead.h).
 */
#include "win_ahead.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define WIN WD_MEL_N_PAD_FRAMES /* frames per window, and per block ahead */

struct wd_win_ahead {
  const wd_mel_pcm_t *audio;
  wd_taskq_t *q;
  int n_mels;
  int seek, size;   /* the window last noted; size -1: none */
  int from, n;      /* the block ahead: frames [from, from + n); n 0: none */
  int rc;           /* the block's wd_mel_pcm_window result */
  float *block;     /* (n_mels, WIN), allocated at the first note */
  int running;      /* a task is computing the block */
  int served, started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

int wd_win_ahead_new(const wd_mel_pcm_t *audio, wd_taskq_t *q, wd_win_ahead_t **ret) {
  *ret = NULL;
  if (!audio || !q)
    return WD_EINVAL;
  wd_win_ahead_t *a = calloc(1, sizeof *a);
  if (!a)
    return WD_ENOMEM;
  a->audio = audio;
  a->q = q;
  a->n_mels = wd_mel_pcm_n_mels(audio);
  a->size = -1;
  if (pthread_mutex_init(&a->mu, NULL) != 0) {
    free(a);
    return WD_ENOMEM;
  }
  if (pthread_cond_init(&a->cv, NULL) != 0) {
    pthread_mutex_destroy(&a->mu);
    free(a);
    return WD_ENOMEM;
  }
  *ret = a;
  return 0;
}

static void wait_idle(wd_win_ahead_t *a) {
  pthread_mutex_lock(&a->mu);
  while (a->running)
    pthread_cond_wait(&a->cv, &a->mu);
  pthread_mutex_unlock(&a->mu);
}

void wd_win_ahead_free(wd_win_ahead_t *a) {
  if (!a)
    return;
  wait_idle(a);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
  free(a->block);
  free(a);
}

/* The queue's task: the block, then the decoder may read it. */
static void compute_block(void *arg) {
  wd_win_ahead_t *a = arg;
  const int rc = wd_mel_pcm_window(a->audio, a->from, a->n, a->block);
  pthread_mutex_lock(&a->mu);
  a->rc = rc;
  a->running = 0;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

void wd_win_ahead_note(wd_win_ahead_t *a, int seek, int size, int limit) {
  if (!a)
    return;
  wait_idle(a); /* a block nobody took may still be in the making */
  a->seek = seek;
  a->size = size;
  a->n = 0;
  const int n_frames = wd_mel_pcm_n_frames(a->audio);
  const int from = seek + size;
  if (limit > n_frames)
    limit = n_frames;
  if (size < 0 || from >= limit)
    return;
  if (!a->block && !(a->block = malloc((size_t)a->n_mels * WIN * sizeof *a->block)))
    return;
  a->from = from;
  a->n = limit - from < WIN ? limit - from : WIN;
  a->running = 1; /* no task runs now: set before the push, cleared by the task */
  if (wd_taskq_push(a->q, compute_block, a) < 0) {
    a->running = 0;
    a->n = 0;
    return;
  }
  a->started++;
}

int wd_win_ahead_take(wd_win_ahead_t *a, int seek, int size, float *win) {
  if (!a || a->size < 0 || size < 0 || size > WIN || seek < a->seek)
    return 0;
  /* from and n are this thread's (note's); the block's rc is the task's. */
  const int have = a->seek + a->size;          /* win holds [a->seek, have) */
  const int end = a->n > 0 ? a->from + a->n : have; /* ...and the block up to end */
  if (seek + size > end)
    return 0; /* not covered: no need to wait for the block (note will) */
  wait_idle(a);
  if (seek + size > have && a->rc != 0)
    return 0;
  /* Per row: the part of the old window first (left, in place), then the
   * block's part, then the padding. */
  const int keep = seek < have ? (seek + size < have ? seek + size : have) - seek : 0;
  const int b0 = seek > have ? seek - have : 0; /* the block's first column used */
  for (int m = 0; m < a->n_mels; m++) {
    float *row = win + (size_t)m * WIN;
    if (keep > 0)
      memmove(row, row + (seek - a->seek), (size_t)keep * sizeof *row);
    if (size > keep)
      memcpy(row + keep, a->block + (size_t)m * WIN + b0, (size_t)(size - keep) * sizeof *row);
    memset(row + size, 0, (size_t)(WIN - size) * sizeof *row);
  }
  a->served++;
  return 1;
}

void wd_win_ahead_counts(const wd_win_ahead_t *a, int *served, int *computed) {
  *served = a ? a->served : 0;
  *computed = a ? a->started : 0;
}
