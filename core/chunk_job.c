/*
 * chunk_job.c - chunked jobs (see chunk_job.h).
 *
 * Locking: a chunked job's state changes under its own mutex; the worker
 * calls a chunk's on_segment and on_done without the worker's mutex, so
 * submitting the next chunk from on_done is allowed (worker.c). The
 * caller's callbacks are called with no lock of ours held. The registry of
 * live chunked jobs (for wd_chunk_cancel) has a mutex of its own.
 */
#include "chunk_job.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "transcript.h"
#include "vad_job.h"

/* Chunked job ids: the top bit set, so they never equal a worker's ids. */
#define CJ_ID_BIT (1ull << 63)
/* Chunks in flight at once that a cancel can reach (max_batch is at most
 * WD_ENGINE_MAX_SEQS per worker). */
#define WD_WORKERS_CANCEL_BATCH 256

typedef struct cjob cjob_t;

typedef struct {
  cjob_t *parent;
  size_t start, end;     /* original samples */
  uint64_t id;           /* the worker job's id, 0 until submitted */
  int done, rc;
  wd_transcript_t t;     /* when done with rc 0 */
} chunk_t;

struct cjob {
  uint64_t id;
  wd_workers_t *g;
  wd_job_params_t p;     /* the caller's; decode's buffers are our copies */
  char *language;
  char detected[16];     /* the first chunk's language, for the later ones */
  int32_t *prompt, *prefix;
  int16_t *samples;      /* the whole file, until the last chunk ends */
  size_t n_samples;
  chunk_t *chunks;
  size_t n, next_submit, next_emit, n_done;
  int in_flight, max_in_flight;
  int rc;                /* the first failure */
  int cancelled;
  int lang_wait;         /* later chunks wait for the first one's language */
  int first_wait;        /* a stream's later chunks wait for the first one to end */
  int active;            /* chunk_done calls under way */
  pthread_mutex_t emit_mu; /* on_segment calls, in time order */
  double deadline;       /* CLOCK_MONOTONIC s; 0: none */
  double duration_s;     /* the whole file's */
  pthread_mutex_t mu;
  cjob_t *next;          /* registry */
};

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static cjob_t *g_reg;
static atomic_ullong g_next_id;

int wd_chunks_merge(const wd_vad_span_t *spans, size_t n, double max_s, wd_vad_span_t **ret,
                    size_t *ret_n) {
  const size_t max = (size_t)(max_s * WD_VAD_SAMPLE_RATE);
  size_t cap = n + 1, k = 0;
  wd_vad_span_t *out = malloc(cap * sizeof *out);
  if (!out)
    return WD_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    size_t a = spans[i].start;
    const size_t b = spans[i].end;
    if (k > 0 && b - out[k - 1].start <= max && a >= out[k - 1].end) {
      out[k - 1].end = b; /* fits in the current chunk */
      continue;
    }
    while (a < b) { /* a chunk of its own, cut at max */
      if (k == cap) {
        cap *= 2;
        wd_vad_span_t *o = realloc(out, cap * sizeof *o);
        if (!o) {
          free(out);
          return WD_ENOMEM;
        }
        out = o;
      }
      const size_t e = b - a > max ? a + max : b;
      out[k++] = (wd_vad_span_t){ a, e };
      a = e;
    }
  }
  *ret = out;
  *ret_n = k;
  return 0;
}

static void cj_free(cjob_t *j) {
  for (size_t i = 0; i < j->n; i++)
    wd_transcript_free(&j->chunks[i].t);
  free(j->chunks);
  free(j->samples);
  free(j->language);
  free(j->prompt);
  free(j->prefix);
  pthread_mutex_destroy(&j->mu);
  pthread_mutex_destroy(&j->emit_mu);
  free(j);
}

static void reg_add(cjob_t *j) {
  pthread_mutex_lock(&g_reg_mu);
  j->next = g_reg;
  g_reg = j;
  pthread_mutex_unlock(&g_reg_mu);
}

static void reg_remove(cjob_t *j) {
  pthread_mutex_lock(&g_reg_mu);
  for (cjob_t **pp = &g_reg; *pp; pp = &(*pp)->next)
    if (*pp == j) {
      *pp = j->next;
      break;
    }
  pthread_mutex_unlock(&g_reg_mu);
}

static void chunk_done(void *ud, int rc, wd_transcript_t *t);
static void chunk_language(void *ud, const char *code, float prob);

/* Submits chunk c (its samples copied). Called without j->mu. Every chunk
 * but the first is submitted as admitted (worker.h): the first one's
 * acceptance was the job's, and the later ones hold the place it won, so
 * a queue that other requests keep full cannot refuse them part-way. */
static int submit_chunk(cjob_t *j, chunk_t *c) {
  const size_t n = c->end - c->start;
  int16_t *pcm = malloc(n * sizeof *pcm);
  if (!pcm)
    return WD_ENOMEM;
  memcpy(pcm, j->samples + c->start, n * sizeof *pcm);
  wd_job_params_t q = j->p;
  q.cb = (wd_job_cb_t){ .ud = c, .on_segment = NULL, .on_done = chunk_done,
                        .on_language = c == &j->chunks[0] ? chunk_language : NULL };
  q.admitted = c != &j->chunks[0];
  q.request = j->id; /* its parts take turns with other requests (worker.h) */
  if (j->deadline > 0) {
    const double left = j->deadline - wd_now_s();
    q.timeout_s = left > 0.001 ? left : 0.001;
  }
  uint64_t id = 0;
  const int rc = wd_workers_submit(j->g, pcm, n, &q, &id);
  if (rc == 0) {
    pthread_mutex_lock(&j->mu);
    /* A cancel (wd_chunk_cancel) or a failed chunk (chunk_done) that came
     * while this submit was under way found c->id still 0 and passed c
     * over: stopping it is this thread's, now that its id is known. */
    const int stop = !c->done && (j->cancelled || j->rc);
    if (!c->done)
      c->id = id;
    pthread_mutex_unlock(&j->mu);
    if (stop)
      wd_workers_cancel(j->g, id);
  }
  return rc;
}

/* Moves chunk c's segments onto the original timeline. */
static void shift(chunk_t *c) {
  const double off = (double)c->start / WD_VAD_SAMPLE_RATE;
  const int off_frames = (int)(c->start / 160); /* mel frames of 10 ms */
  for (int i = 0; i < c->t.n_segments; i++) {
    wd_segment_t *s = &c->t.segments[i];
    s->start += off;
    s->end += off;
    s->seek += off_frames;
    for (int w = 0; w < s->n_words; w++) {
      s->words[w].start += off;
      s->words[w].end += off;
    }
  }
}

/* The chunks' transcripts as one (moved out of them). */
static int merge(cjob_t *j, wd_transcript_t *out) {
  memset(out, 0, sizeof *out);
  size_t n_seg = 0, n_text = 1;
  for (size_t i = 0; i < j->n; i++) {
    n_seg += (size_t)j->chunks[i].t.n_segments;
    n_text += j->chunks[i].t.text ? strlen(j->chunks[i].t.text) : 0;
  }
  out->segments = calloc(n_seg ? n_seg : 1, sizeof *out->segments);
  out->text = malloc(n_text);
  if (!out->segments || !out->text) {
    free(out->segments);
    free(out->text);
    return WD_ENOMEM;
  }
  out->text[0] = '\0';
  size_t pos = 0;
  for (size_t i = 0; i < j->n; i++) {
    wd_transcript_t *t = &j->chunks[i].t;
    for (int s = 0; s < t->n_segments; s++) {
      out->segments[out->n_segments] = t->segments[s];
      out->segments[out->n_segments].id = out->n_segments;
      out->n_segments++;
    }
    free(t->segments);
    t->segments = NULL;
    t->n_segments = 0;
    if (t->text) {
      const size_t len = strlen(t->text);
      memcpy(out->text + pos, t->text, len + 1);
      pos += len;
    }
  }
  const wd_transcript_t *first = &j->chunks[0].t;
  memcpy(out->language, first->language, sizeof out->language);
  out->language_prob = first->language_prob;
  memcpy(out->language_probs, first->language_probs, sizeof out->language_probs);
  out->n_language_probs = first->n_language_probs;
  return 0;
}

/* Ends the chunked job: on_done with the merged transcript or the error. */
static void finish(cjob_t *j) {
  reg_remove(j);
  int rc = j->rc;
  wd_transcript_t t = { 0 };
  if (!rc)
    rc = merge(j, &t);
  t.duration = j->duration_s;
  if (rc)
    wd_transcript_free(&t);
  j->p.cb.on_done(j->p.cb.ud, rc, rc ? NULL : &t); /* it owns t's contents now */
  cj_free(j);
}

/* Emits, in order, the segments of the chunks that have ended since the
 * last call, up to the first still running. Under emit_mu, so that two
 * workers ending chunks at once cannot swap their order. */
static void emit_ready(cjob_t *j) {
  pthread_mutex_lock(&j->emit_mu);
  pthread_mutex_lock(&j->mu);
  const size_t from = j->next_emit;
  size_t to = from;
  while (to < j->n && j->chunks[to].done && !j->rc)
    to++;
  j->next_emit = to;
  pthread_mutex_unlock(&j->mu);
  for (size_t i = from; i < to; i++) {
    const chunk_t *e = &j->chunks[i];
    for (int s = 0; s < e->t.n_segments; s++)
      j->p.cb.on_segment(j->p.cb.ud, &e->t.segments[s], (double)e->end / WD_VAD_SAMPLE_RATE,
                         j->duration_s);
  }
  pthread_mutex_unlock(&j->emit_mu);
}

/* The worker ids of j's chunks in flight (under j->mu), at most max. A
 * chunk whose submit is under way has no id yet: submit_chunk cancels it
 * itself once it has one. */
static size_t ids_in_flight(const cjob_t *j, uint64_t *ids, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < j->next_submit && n < max; i++)
    if (!j->chunks[i].done && j->chunks[i].id)
      ids[n++] = j->chunks[i].id;
  return n;
}

/* A thread is done with j (called with j->mu held; returns with it
 * released). The last one out finishes: nothing in flight or under way,
 * and nothing more will be submitted. */
static void leave(cjob_t *j) {
  j->active--;
  const int last = j->active == 0 && j->in_flight == 0 &&
                   (j->rc || j->cancelled || j->next_submit == j->n);
  if (last && !j->rc && j->cancelled)
    j->rc = WD_ECANCELED;
  pthread_mutex_unlock(&j->mu);
  if (last)
    finish(j);
}

/* Submits chunks while fewer than max_in_flight are queued or running and
 * the job goes on (called without j->mu; from any thread: each chunk is
 * claimed under the lock). A failed submit (a drain, no memory) ends the
 * job through the chunks in flight. */
static void fill(cjob_t *j) {
  for (;;) {
    pthread_mutex_lock(&j->mu);
    chunk_t *next = NULL;
    if (!j->rc && !j->cancelled && !j->lang_wait && !j->first_wait && j->next_submit < j->n &&
        j->in_flight < j->max_in_flight) {
      next = &j->chunks[j->next_submit++];
      j->in_flight++;
    }
    pthread_mutex_unlock(&j->mu);
    if (!next)
      return;
    const int src = submit_chunk(j, next);
    if (src < 0) {
      pthread_mutex_lock(&j->mu);
      if (!j->rc)
        j->rc = src;
      next->done = 1;
      j->in_flight--;
      pthread_mutex_unlock(&j->mu);
      return;
    }
  }
}

/* The later chunks' language from now on (under j->mu): code, or, when
 * there is none (the first chunk failed), each chunk detects its own. No
 * chunk is being submitted while lang_wait is set, so none reads j->p as
 * it changes. */
static void use_language(cjob_t *j, const char *code) {
  j->lang_wait = 0;
  if (!code || !code[0])
    return;
  snprintf(j->detected, sizeof j->detected, "%s", code);
  j->p.decode.language = j->detected;
}

/* A chunk's job ended (a worker thread, no worker lock held). */
static void chunk_done(void *ud, int rc, wd_transcript_t *t) {
  chunk_t *c = ud;
  cjob_t *j = c->parent;
  uint64_t stop[WD_WORKERS_CANCEL_BATCH];
  size_t n_stop = 0;
  pthread_mutex_lock(&j->mu);
  j->active++;
  c->done = 1;
  c->rc = rc;
  if (rc == 0 && t) {
    c->t = *t;
    memset(t, 0, sizeof *t);
    shift(c);
  } else if (!j->rc) {
    /* The job has failed: the other chunks' work is of no use now. */
    j->rc = rc ? rc : WD_EINTERNAL;
    n_stop = ids_in_flight(j, stop, WD_WORKERS_CANCEL_BATCH);
  }
  j->in_flight--;
  if (c == &j->chunks[0] && j->lang_wait) /* it ended before telling its language */
    use_language(j, rc == 0 ? c->t.language : NULL);
  if (c == &j->chunks[0])
    j->first_wait = 0;
  pthread_mutex_unlock(&j->mu);
  for (size_t i = 0; i < n_stop; i++)
    wd_workers_cancel(j->g, stop[i]);
  if (j->p.cb.on_segment)
    emit_ready(j);
  fill(j);
  pthread_mutex_lock(&j->mu);
  leave(j);
}

/* The first chunk has detected its language (a worker thread): the later
 * chunks are decoded in it, and may start now. */
static void chunk_language(void *ud, const char *code, float prob) {
  (void)prob;
  chunk_t *c = ud;
  cjob_t *j = c->parent;
  pthread_mutex_lock(&j->mu);
  if (!j->lang_wait) {
    pthread_mutex_unlock(&j->mu);
    return;
  }
  j->active++;
  use_language(j, code);
  pthread_mutex_unlock(&j->mu);
  fill(j);
  pthread_mutex_lock(&j->mu);
  leave(j);
}

/* j->p with the decode options' buffers copied (later chunks are submitted
 * after the caller's own have gone). */
static int copy_params(cjob_t *j, const wd_job_params_t *p) {
  j->p = *p;
  wd_decode_opts_t *d = &j->p.decode;
  if (d->language && !(j->language = strdup(d->language)))
    return WD_ENOMEM;
  d->language = j->language;
  if (d->n_prompt > 0) {
    if (!(j->prompt = malloc((size_t)d->n_prompt * sizeof *j->prompt)))
      return WD_ENOMEM;
    memcpy(j->prompt, d->prompt, (size_t)d->n_prompt * sizeof *j->prompt);
  }
  d->prompt = j->prompt;
  if (d->n_prefix > 0) {
    if (!(j->prefix = malloc((size_t)d->n_prefix * sizeof *j->prefix)))
      return WD_ENOMEM;
    memcpy(j->prefix, d->prefix, (size_t)d->n_prefix * sizeof *j->prefix);
  }
  d->prefix = j->prefix;
  d->clips = NULL; /* chunks are the clips */
  d->n_clips = 0;
  return 0;
}

/* The chunks of samples: VAD, spans of at most WD_CHUNK_MAX_S, merged. */
static int make_chunks(cjob_t *j, const wd_vad_model_t *vad, const wd_vad_params_t *vp) {
  wd_vad_span_t *spans = NULL, *merged = NULL;
  size_t n_spans = 0, n_merged = 0;
  wd_vad_params_t q = *vp;
  q.max_speech_s = (float)WD_CHUNK_MAX_S;
  int rc = wd_vad_spans_s16(vad, &q, j->samples, j->n_samples, &spans, &n_spans);
  if (!rc)
    rc = wd_chunks_merge(spans, n_spans, WD_CHUNK_MAX_S, &merged, &n_merged);
  if (!rc && n_merged && !(j->chunks = calloc(n_merged, sizeof *j->chunks)))
    rc = WD_ENOMEM;
  for (size_t i = 0; !rc && i < n_merged; i++)
    j->chunks[i] = (chunk_t){ .parent = j, .start = merged[i].start, .end = merged[i].end };
  if (!rc)
    j->n = n_merged;
  free(spans);
  free(merged);
  return rc;
}

int wd_chunk_submit(wd_workers_t *g, const wd_vad_model_t *vad, const wd_vad_params_t *vp,
                    int16_t *samples, size_t n_samples, const wd_job_params_t *p,
                    uint64_t *ret_id) {
  if (ret_id)
    *ret_id = 0;
  cjob_t *j = calloc(1, sizeof *j);
  if (!j) {
    free(samples);
    return WD_ENOMEM;
  }
  pthread_mutex_init(&j->mu, NULL);
  pthread_mutex_init(&j->emit_mu, NULL);
  j->g = g;
  j->samples = samples;
  j->n_samples = n_samples;
  j->duration_s = (double)n_samples / WD_VAD_SAMPLE_RATE;
  int rc = copy_params(j, p);
  if (!rc)
    rc = make_chunks(j, vad, vp);
  if (rc || j->n == 0) {
    cj_free(j);
    return rc ? rc : wd_vad_no_speech(p, n_samples);
  }
  wd_worker_stats_t st;
  wd_workers_stats(g, &st);
  j->max_in_flight = st.max_batch > 0 ? st.max_batch : 1;
  if (p->timeout_s > 0)
    j->deadline = wd_now_s() + p->timeout_s;
  j->id = CJ_ID_BIT | (atomic_fetch_add(&g_next_id, 1) + 1);
  /* The first chunk alone decides whether the job is taken: its refusal is
   * the caller's answer (429, 503), with nothing running yet. */
  j->next_submit = 1;
  j->in_flight = 1;
  /* No language given on a multilingual model: the first chunk detects it
   * and the others are decoded in it (chunk_language), as openai/whisper's
   * transcribe() and faster-whisper's batched pipeline detect once a file.
   * A chunk that detected for itself would encode twice, its 30 s of
   * detection (real padding frames) and its window (zeros past its end). */
  const char *lang = j->p.decode.language;
  j->lang_wait = j->n > 1 && (!lang || !lang[0] || strcmp(lang, "auto") == 0) &&
                 wd_workers_multilingual(g);
  /* A stream (on_segment) gets its first chunk's segments first: the later
   * chunks wait for it to end, then run side by side. Batched from the
   * start, every chunk stepped together and the first delta came with the
   * last (base, 160 s in 8 chunks: 4.9 s into a 5.1 s request). */
  j->first_wait = j->n > 1 && p->cb.on_segment != NULL;
  j->active = 1; /* this thread, until the first batch is out */
  reg_add(j);
  const uint64_t id = j->id;
  rc = submit_chunk(j, &j->chunks[0]);
  if (rc < 0) {
    reg_remove(j);
    cj_free(j);
    return rc;
  }
  if (ret_id)
    *ret_id = id;
  /* The rest of the first batch, admitted (once the first chunk's language
   * is known, where it waits for it); a failure now (a drain, no memory)
   * ends the job through the chunks in flight (chunk_done finishes it). */
  fill(j);
  pthread_mutex_lock(&j->mu);
  leave(j);
  return 0;
}

void wd_chunk_cancel(wd_workers_t *g, uint64_t id) {
  if (!(id & CJ_ID_BIT)) {
    wd_workers_cancel(g, id);
    return;
  }
  uint64_t ids[WD_WORKERS_CANCEL_BATCH];
  size_t n = 0;
  pthread_mutex_lock(&g_reg_mu);
  for (cjob_t *j = g_reg; j; j = j->next) {
    if (j->id != id)
      continue;
    /* Under the registry's lock j cannot be freed (finish removes it
     * first). No more chunks start; those in flight are cancelled. */
    pthread_mutex_lock(&j->mu);
    j->cancelled = 1;
    n = ids_in_flight(j, ids, WD_WORKERS_CANCEL_BATCH);
    pthread_mutex_unlock(&j->mu);
    break;
  }
  pthread_mutex_unlock(&g_reg_mu);
  for (size_t i = 0; i < n; i++)
    wd_workers_cancel(g, ids[i]);
}
