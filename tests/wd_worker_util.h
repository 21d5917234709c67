/*
 * wd_worker_util.h - what the worker tests share (tests/core/test_worker.c
 * on the reference engine, tests/gpu/test_worker.c on the Vulkan engine):
 * loading clips, submitting them, collecting each job's outcome from the
 * worker thread, and comparing transcripts bit for bit.
 */
#ifndef WD_WORKER_UTIL_H
#define WD_WORKER_UTIL_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "decode.h"
#include "error.h"
#include "wd_test.h"
#include "worker.h"

/* 16 kHz samples of a test file, played `repeat` times back to back. */
static inline int16_t *load_audio(const char *name, int repeat, size_t *ret_n) {
  int16_t *pcm = NULL;
  size_t n = 0;
  char err[256] = "";
  if (wd_audio_decode_file(wd_test_data(name), NULL, &pcm, &n, err, sizeof err) < 0) {
    fprintf(stderr, "%s: %s\n", name, err);
    return NULL;
  }
  int16_t *out = malloc(n * (size_t)repeat * sizeof *out);
  for (int i = 0; out && i < repeat; i++)
    memcpy(out + n * (size_t)i, pcm, n * sizeof *pcm);
  free(pcm);
  *ret_n = n * (size_t)repeat;
  return out;
}

/* One job's outcome, filled by the callbacks on the worker thread. */
typedef struct {
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  int done, rc;
  wd_transcript_t t;
  int n_streamed;       /* on_segment calls */
  int stream_order_ok;  /* segment ids arrived 0, 1, 2, ... */
  double last_done_s;
} outcome_t;

static inline void on_segment(void *ud, const wd_segment_t *s, double done_s, double total_s) {
  outcome_t *o = ud;
  pthread_mutex_lock(o->mu);
  if (s->id != o->n_streamed || done_s < o->last_done_s || done_s > total_s + 1e-9)
    o->stream_order_ok = 0;
  o->n_streamed++;
  o->last_done_s = done_s;
  pthread_mutex_unlock(o->mu);
}

static inline void on_done(void *ud, int rc, wd_transcript_t *t) {
  outcome_t *o = ud;
  pthread_mutex_lock(o->mu);
  o->rc = rc;
  if (t)
    o->t = *t;
  o->done++;
  pthread_cond_broadcast(o->cv);
  pthread_mutex_unlock(o->mu);
}

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static inline void outcome_init(outcome_t *o) {
  memset(o, 0, sizeof *o);
  o->mu = &g_mu;
  o->cv = &g_cv;
  o->stream_order_ok = 1;
}

static inline void wait_done(outcome_t *o, int n) {
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < n; i++)
    while (!o[i].done)
      pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
}

/* Submits with decoding options d (NULL: openai's defaults). */
static inline int submit_opts(wd_worker_t *w, const char *name, int repeat,
                              const wd_decode_opts_t *d, double timeout_s, outcome_t *o,
                              uint64_t *ret_id) {
  size_t n = 0;
  int16_t *pcm = load_audio(name, repeat, &n);
  if (!pcm)
    return WD_EAUDIO;
  wd_job_params_t p = { .timeout_s = timeout_s,
                        .cb = { .ud = o, .on_segment = on_segment, .on_done = on_done } };
  wd_decode_opts_default(&p.decode);
  if (d)
    p.decode = *d;
  uint64_t id = 0;
  const int rc = wd_worker_submit(w, pcm, n, &p, &id);
  if (ret_id)
    *ret_id = id;
  return rc;
}

static inline int submit(wd_worker_t *w, const char *name, int repeat, const char *language,
                  double timeout_s, outcome_t *o, uint64_t *ret_id) {
  wd_decode_opts_t d;
  wd_decode_opts_default(&d);
  d.language = language;
  return submit_opts(w, name, repeat, &d, timeout_s, o, ret_id);
}

/* Exactly equal text, tokens, times and window statistics. */
static inline int same_transcript(const wd_transcript_t *a, const wd_transcript_t *b) {
  if (!a->text || !b->text || strcmp(a->text, b->text) != 0 || a->n_segments != b->n_segments ||
      strcmp(a->language, b->language) != 0)
    return 0;
  for (int i = 0; i < a->n_segments; i++) {
    const wd_segment_t *x = &a->segments[i], *y = &b->segments[i];
    if (x->n_tokens != y->n_tokens || x->start != y->start || x->end != y->end ||
        x->seek != y->seek || strcmp(x->text, y->text) != 0 ||
        memcmp(x->tokens, y->tokens, (size_t)x->n_tokens * sizeof *x->tokens) != 0 ||
        x->avg_logprob != y->avg_logprob || x->no_speech_prob != y->no_speech_prob ||
        x->compression_ratio != y->compression_ratio)
      return 0;
  }
  return 1;
}

static inline int have(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f)
    fclose(f);
  return f != NULL;
}

typedef struct {
  const char *name;
  int repeat;
  int beam_size;      /* 0: greedy at temperature 0 */
  int best_of;        /* with temperature > 0: samples per window */
  float temperature;  /* the schedule starts here (0: openai's default) */
} clip_t;

static inline void clip_opts(const clip_t *c, wd_decode_opts_t *d) {
  wd_decode_opts_default(d);
  d->beam_size = c->beam_size;
  d->best_of = c->best_of;
  d->seed = 1234;
  if (c->temperature > 0)
    wd_decode_set_temperature(d, c->temperature, 0.2f);
}

/* Sequence slots the clips need at once. */
static inline int clips_rows(const clip_t *clips, int n) {
  int rows = 0;
  for (int i = 0; i < n; i++) {
    const int r = clips[i].beam_size > clips[i].best_of ? clips[i].beam_size : clips[i].best_of;
    rows += r > 1 ? r : 1;
  }
  return rows > 16 ? 16 : rows;
}

/* Runs every clip alone, then all at once on the same worker, and checks
 * that each job's transcript is bit-for-bit the same and that some steps
 * really carried several rows. */
static inline void wd_check_identity(wd_worker_t *w, const clip_t *clips, int n,
                                     const char *label) {
  outcome_t alone[8], together[8];
  for (int i = 0; i < n; i++) {
    outcome_init(&alone[i]);
    wd_decode_opts_t d;
    clip_opts(&clips[i], &d);
    WD_CHECK_EQ_INT(submit_opts(w, clips[i].name, clips[i].repeat, &d, 0, &alone[i], NULL), 0);
    wait_done(&alone[i], 1);
    WD_CHECK_EQ_INT(alone[i].rc, 0);
  }
  wd_worker_stats_t st0, st;
  wd_worker_stats(w, &st0);
  for (int i = 0; i < n; i++) {
    outcome_init(&together[i]);
    wd_decode_opts_t d;
    clip_opts(&clips[i], &d);
    WD_CHECK_EQ_INT(submit_opts(w, clips[i].name, clips[i].repeat, &d, 0, &together[i], NULL),
                    0);
  }
  wait_done(together, n);
  wd_worker_stats(w, &st);
  uint64_t multi = 0;
  for (int r = 2; r <= 16; r++)
    multi += st.steps_by_rows[r] - st0.steps_by_rows[r];
  fprintf(stderr, "%s: %d jobs together: %llu steps, %llu with 2+ rows, mean %.2f rows\n", label,
          n, (unsigned long long)(st.steps - st0.steps), (unsigned long long)multi,
          (double)(st.rows - st0.rows) / (double)(st.steps - st0.steps));
  WD_CHECK(multi > 0); /* they really were batched */
  for (int i = 0; i < n; i++) {
    WD_CHECK_EQ_INT(together[i].rc, 0);
    const int same = same_transcript(&alone[i].t, &together[i].t);
    if (!same)
      fprintf(stderr, "%s x%d differs:\n  alone:    %s\n  together: %s\n", clips[i].name,
              clips[i].repeat, alone[i].t.text ? alone[i].t.text : "(null)",
              together[i].t.text ? together[i].t.text : "(null)");
    WD_CHECK(same);
    WD_CHECK(together[i].stream_order_ok);
    WD_CHECK_EQ_INT(together[i].n_streamed, together[i].t.n_segments);
    fprintf(stderr, "  %-28s x%d beam %d best_of %d T %.1f: %d segments (T %.1f), '%s'\n",
            clips[i].name, clips[i].repeat, clips[i].beam_size, clips[i].best_of,
            (double)clips[i].temperature, alone[i].t.n_segments,
            alone[i].t.n_segments > 0 ? (double)alone[i].t.segments[0].temperature : 0.0,
            alone[i].t.text ? alone[i].t.text : "");
    wd_transcript_free(&alone[i].t);
    wd_transcript_free(&together[i].t);
  }
}

#endif
