/*
 * test_chunk_job.c - chunked jobs (core/chunk_job.c) over a fake worker:
 * only the first chunk can be refused (the later ones are admitted and
 * hold its place in a full queue), and cancellation reaches every chunk,
 * the one whose submit is under way included.
 *
 * The worker is a fake defined here (every wd_worker_* symbol workers.c
 * uses is defined in this file, so the linker never pulls worker.o from
 * libwd_core.a, as in test_workers.c). It records each submitted job's
 * callbacks and ids; the test ends chunks by calling those callbacks from a
 * thread of its own, as the worker thread would, and can hold a submit
 * half-way (as a real one is while it computes the log-mel). The chunks
 * come from the real Silero VAD over copies of jfk.wav, so the test needs
 * models/silero-vad-v6.safetensors (scripts/fetch-vad.sh) and skips
 * without it. On a multilingual model given no language, the later chunks
 * wait for the first one's detected language and are submitted in it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "chunk_job.h"
#include "error.h"
#include "wd_test.h"
#include "workers.h"

#define VAD_MODEL WD_SOURCE_DIR "/models/silero-vad-v6.safetensors"
#define FAKE_JOBS 16

/* ======================= the fake worker ================================ */

typedef struct {
  uint64_t id;
  wd_job_cb_t cb;
  int admitted;
  char lang[16];          /* the decode options' language, "" for none */
} fake_job_t;

struct wd_worker {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  wd_worker_stats_t st;   /* max_batch: a chunked job's chunks in flight */
  uint64_t next_id;
  fake_job_t jobs[FAKE_JOBS];
  int n_jobs;
  uint64_t cancelled[FAKE_JOBS];
  int n_cancelled;
  int hold;               /* submit waits until released */
  int holding;            /* a submit is waiting */
  int full_from;          /* with this many jobs the queue is full: a job not
                           * admitted gets WD_EBUSY, as from a real worker
                           * (-1: never full) */
  int multilingual;       /* the model's, as wd_worker_multilingual says */
};

static void fake_init(wd_worker_t *w, int max_batch) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->st.queue_max = 64;
  w->st.max_batch = max_batch;
  w->next_id = 1;
  w->full_from = -1;
}

static void fake_done(wd_worker_t *w) {
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
}

int wd_worker_has_room(wd_worker_t *w, double audio_s) {
  (void)w;
  (void)audio_s;
  return 1;
}

int wd_worker_multilingual(const wd_worker_t *w) { return w->multilingual; }

int wd_worker_submit(wd_worker_t *w, int16_t *samples, size_t n_samples,
                     const wd_job_params_t *p, uint64_t *ret_id) {
  (void)n_samples;
  free(samples);
  pthread_mutex_lock(&w->mu);
  w->holding += w->hold;
  pthread_cond_broadcast(&w->cv);
  while (w->hold)
    pthread_cond_wait(&w->cv, &w->mu);
  if (w->n_jobs == FAKE_JOBS || (!p->admitted && w->full_from >= 0 && w->n_jobs >= w->full_from)) {
    pthread_mutex_unlock(&w->mu);
    return WD_EBUSY;
  }
  const uint64_t id = w->next_id++;
  fake_job_t *f = &w->jobs[w->n_jobs++];
  *f = (fake_job_t){ id, p->cb, p->admitted, "" };
  if (p->decode.language)
    snprintf(f->lang, sizeof f->lang, "%s", p->decode.language);
  w->st.queued++;
  if (ret_id)
    *ret_id = id;
  pthread_mutex_unlock(&w->mu);
  return 0;
}

void wd_worker_cancel(wd_worker_t *w, uint64_t id) {
  pthread_mutex_lock(&w->mu);
  if (w->n_cancelled < FAKE_JOBS)
    w->cancelled[w->n_cancelled++] = id;
  pthread_mutex_unlock(&w->mu);
}

void wd_worker_stats(wd_worker_t *w, wd_worker_stats_t *ret) {
  pthread_mutex_lock(&w->mu);
  *ret = w->st;
  pthread_mutex_unlock(&w->mu);
}

double wd_worker_heartbeat(wd_worker_t *w) {
  (void)w;
  return 0.0;
}

void wd_worker_drain(wd_worker_t *w, double grace_s) {
  (void)w;
  (void)grace_s;
}

static int was_cancelled(wd_worker_t *w, uint64_t id) {
  pthread_mutex_lock(&w->mu);
  int found = 0;
  for (int i = 0; i < w->n_cancelled; i++)
    found |= w->cancelled[i] == id;
  pthread_mutex_unlock(&w->mu);
  return found;
}

static int n_jobs(wd_worker_t *w) {
  pthread_mutex_lock(&w->mu);
  const int n = w->n_jobs;
  pthread_mutex_unlock(&w->mu);
  return n;
}

/* ======================= a chunk ending, on a thread of its own ========== */

typedef struct {
  wd_worker_t *w;
  int index, rc;
  pthread_t thread;
} ending_t;

static void *end_chunk(void *arg) {
  ending_t *e = arg;
  pthread_mutex_lock(&e->w->mu);
  const wd_job_cb_t cb = e->w->jobs[e->index].cb;
  pthread_mutex_unlock(&e->w->mu);
  wd_transcript_t t = { 0 }; /* an empty transcript: no segments, no text */
  cb.on_done(cb.ud, e->rc, e->rc == 0 ? &t : NULL);
  return NULL;
}

static void end_chunk_async(ending_t *e, wd_worker_t *w, int index, int rc) {
  *e = (ending_t){ .w = w, .index = index, .rc = rc };
  pthread_create(&e->thread, NULL, end_chunk, e);
}

/* ======================= the chunked job's own outcome ================== */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_done, g_rc;

static void job_done(void *ud, int rc, wd_transcript_t *t) {
  (void)ud;
  if (t)
    wd_transcript_free(t);
  pthread_mutex_lock(&g_mu);
  g_done++;
  g_rc = rc;
  pthread_mutex_unlock(&g_mu);
}

/* ======================= set-up ========================================= */

static wd_vad_model_t *g_vad;

WD_TEST(setup) {
  char err[256] = "";
  FILE *f = fopen(VAD_MODEL, "rb");
  if (!f)
    wd_test_skip("models/silero-vad-v6.safetensors not present (scripts/fetch-vad.sh)");
  fclose(f);
  WD_CHECK_EQ_INT(wd_vad_model_load(VAD_MODEL, &g_vad, err, sizeof err), 0);
}

/* n copies of jfk.wav, 20 s of silence after each: n chunks (11 + 20 +
 * 11 s is more than a chunk's 30 s). */
static int16_t *copies(int n, size_t *ret_n) {
  int16_t *jfk = NULL;
  size_t n_jfk = 0;
  char err[256] = "";
  if (wd_audio_decode_file(wd_test_data("audio/jfk.wav"), NULL, &jfk, &n_jfk, err,
                           sizeof err) < 0)
    return NULL;
  const size_t gap = 20 * 16000, each = n_jfk + gap;
  int16_t *out = calloc(each * (size_t)n, sizeof *out);
  for (int i = 0; out && i < n; i++)
    memcpy(out + each * (size_t)i, jfk, n_jfk * sizeof *jfk);
  free(jfk);
  *ret_n = each * (size_t)n;
  return out;
}

static void stream_segment(void *ud, const wd_segment_t *seg, double done_s, double total_s) {
  (void)ud, (void)seg, (void)done_s, (void)total_s;
}

/* Whether the next submit streams (passes an on_segment). */
static int g_stream;

/* wd_chunk_submit of n copies in language lang (NULL: none); its return
 * code in *ret_rc. */
static uint64_t submit_lang_rc(wd_workers_t *g, int n, const char *lang, int *ret_rc) {
  size_t n_pcm = 0;
  int16_t *pcm = copies(n, &n_pcm);
  WD_CHECK(pcm != NULL);
  wd_vad_params_t vp;
  wd_vad_params_default(&vp);
  wd_job_params_t p = { 0 };
  wd_decode_opts_default(&p.decode);
  p.decode.language = lang;
  p.cb = (wd_job_cb_t){ .on_done = job_done, .on_segment = g_stream ? stream_segment : NULL };
  g_done = 0;
  g_rc = 1;
  uint64_t id = 0;
  *ret_rc = wd_chunk_submit(g, g_vad, &vp, pcm, n_pcm, &p, &id);
  return id;
}

static uint64_t submit_copies_rc(wd_workers_t *g, int n, int *ret_rc) {
  return submit_lang_rc(g, n, NULL, ret_rc);
}

static uint64_t submit_copies(wd_workers_t *g, int n) {
  int rc = 0;
  const uint64_t id = submit_copies_rc(g, n, &rc);
  WD_CHECK_EQ_INT(rc, 0);
  WD_CHECK(id != 0);
  return id;
}

/* Ends chunk index with rc, as the worker thread would. */
static void end_chunk_now(wd_worker_t *w, int index, int rc) {
  ending_t e;
  end_chunk_async(&e, w, index, rc);
  pthread_join(e.thread, NULL);
}

/* ======================= tests ========================================== */

/* The first chunk is the job's admission: a full queue refuses it, and
 * that refusal is wd_chunk_submit's answer, with nothing left running. */
WD_TEST(first_chunk_refused_is_the_answer) {
  wd_worker_t w;
  fake_init(&w, 2);
  w.full_from = 0;
  wd_worker_t *ws[1] = { &w };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 1, &g), 0);
  int rc = 0;
  const uint64_t id = submit_copies_rc(g, 3, &rc);
  WD_CHECK_EQ_INT(rc, WD_EBUSY);
  WD_CHECK_EQ_INT(id, 0);
  WD_CHECK_EQ_INT(n_jobs(&w), 0);
  WD_CHECK_EQ_INT(g_done, 0); /* no on_done for a job not taken */
  wd_workers_free(g);
  fake_done(&w);
}

/* Once the first chunk is in, the queue is full for everyone else; the
 * rest of the first batch and every chunk submitted as one ends are
 * admitted and taken, and the job ends with its whole transcript. (They
 * were submitted like new requests, and the first refusal ended the job
 * with WD_EBUSY after its work.) */
WD_TEST(later_chunks_hold_their_place_in_a_full_queue) {
  wd_worker_t w;
  fake_init(&w, 2); /* two chunks in flight */
  w.full_from = 1;  /* full once the first chunk is queued */
  wd_worker_t *ws[1] = { &w };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 1, &g), 0);
  submit_copies(g, 3);
  WD_CHECK_EQ_INT(n_jobs(&w), 2);
  WD_CHECK_EQ_INT(w.jobs[0].admitted, 0);
  WD_CHECK_EQ_INT(w.jobs[1].admitted, 1);
  end_chunk_now(&w, 0, 0); /* submits the third chunk, from the callback */
  WD_CHECK_EQ_INT(n_jobs(&w), 3);
  WD_CHECK_EQ_INT(w.jobs[2].admitted, 1);
  end_chunk_now(&w, 1, 0);
  WD_CHECK_EQ_INT(g_done, 0);
  end_chunk_now(&w, 2, 0);
  WD_CHECK_EQ_INT(g_done, 1);
  WD_CHECK_EQ_INT(g_rc, 0);
  wd_workers_free(g);
  fake_done(&w);
}

/* A cancel that arrives while the next chunk's submit is under way (its
 * worker id not known yet) still reaches that chunk once the submit
 * returns: no chunk of a cancelled job runs on to its end. */
WD_TEST(cancel_reaches_a_chunk_being_submitted) {
  wd_worker_t w;
  fake_init(&w, 1); /* one chunk in flight: the next is submitted as one ends */
  wd_worker_t *ws[1] = { &w };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 1, &g), 0);
  const uint64_t id = submit_copies(g, 3);
  WD_CHECK_EQ_INT(n_jobs(&w), 1);

  /* Chunk 0 ends; the submit of chunk 1 that follows is held half-way. */
  pthread_mutex_lock(&w.mu);
  w.hold = 1;
  pthread_mutex_unlock(&w.mu);
  ending_t e0;
  end_chunk_async(&e0, &w, 0, 0);
  pthread_mutex_lock(&w.mu);
  while (!w.holding)
    pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);

  wd_chunk_cancel(g, id); /* chunk 1 has no worker id yet */
  pthread_mutex_lock(&w.mu);
  w.hold = 0;
  pthread_cond_broadcast(&w.cv);
  pthread_mutex_unlock(&w.mu);
  pthread_join(e0.thread, NULL);

  WD_CHECK_EQ_INT(n_jobs(&w), 2);
  WD_CHECK(was_cancelled(&w, w.jobs[1].id));
  /* The worker ends the cancelled chunk; the job ends cancelled, and no
   * third chunk was submitted. */
  ending_t e1;
  end_chunk_async(&e1, &w, 1, WD_ECANCELED);
  pthread_join(e1.thread, NULL);
  WD_CHECK_EQ_INT(n_jobs(&w), 2);
  WD_CHECK_EQ_INT(g_done, 1);
  WD_CHECK_EQ_INT(g_rc, WD_ECANCELED);
  wd_workers_free(g);
  fake_done(&w);
}

/* The first chunk's on_language, called as the worker thread would. */
typedef struct {
  wd_job_cb_t cb;
  const char *code;
} telling_t;

static void *tell_language(void *arg) {
  const telling_t *t = arg;
  t->cb.on_language(t->cb.ud, t->code, 0.9f);
  return NULL;
}

static void tell_language_now(wd_worker_t *w, const char *code) {
  pthread_mutex_lock(&w->mu);
  telling_t t = { w->jobs[0].cb, code };
  pthread_mutex_unlock(&w->mu);
  WD_CHECK(t.cb.on_language != NULL);
  pthread_t th;
  pthread_create(&th, NULL, tell_language, &t);
  pthread_join(th, NULL);
}

/* A multilingual model given no language: only the first chunk starts; the
 * others follow in the language it detected (a second call changes
 * nothing), and the job ends as any other. */
WD_TEST(later_chunks_wait_for_the_first_ones_language) {
  wd_worker_t w;
  fake_init(&w, 3);
  w.multilingual = 1;
  wd_worker_t *ws[1] = { &w };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 1, &g), 0);
  submit_copies(g, 4);
  WD_CHECK_EQ_INT(n_jobs(&w), 1);
  WD_CHECK_EQ_STR(w.jobs[0].lang, "");
  tell_language_now(&w, "de");
  WD_CHECK_EQ_INT(n_jobs(&w), 3); /* the rest of the first batch */
  WD_CHECK_EQ_STR(w.jobs[1].lang, "de");
  WD_CHECK_EQ_STR(w.jobs[2].lang, "de");
  WD_CHECK_EQ_INT(w.jobs[1].admitted, 1);
  tell_language_now(&w, "fr");
  WD_CHECK_EQ_INT(n_jobs(&w), 3);
  end_chunk_now(&w, 0, 0);
  WD_CHECK_EQ_INT(n_jobs(&w), 4);
  WD_CHECK_EQ_STR(w.jobs[3].lang, "de");
  for (int i = 1; i < 4; i++)
    end_chunk_now(&w, i, 0);
  WD_CHECK_EQ_INT(g_done, 1);
  WD_CHECK_EQ_INT(g_rc, 0);
  wd_workers_free(g);
  fake_done(&w);
}

/* A stream's later chunks wait for the first one to end (its segments
 * reach the client first), then start side by side. */
WD_TEST(a_streams_first_chunk_ends_before_the_others_start) {
  wd_worker_t w;
  fake_init(&w, 3);
  wd_worker_t *ws[1] = { &w };
  wd_workers_t *g = NULL;
  WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 1, &g), 0);
  g_stream = 1;
  submit_copies(g, 4);
  g_stream = 0;
  WD_CHECK_EQ_INT(n_jobs(&w), 1);
  end_chunk_now(&w, 0, 0);
  WD_CHECK_EQ_INT(n_jobs(&w), 4); /* the next batch of three at once */
  for (int i = 1; i < 4; i++)
    end_chunk_now(&w, i, 0);
  WD_CHECK_EQ_INT(g_done, 1);
  WD_CHECK_EQ_INT(g_rc, 0);
  wd_workers_free(g);
  fake_done(&w);
}

/* A language given, or an English-only model: nothing to wait for. */
WD_TEST(a_given_language_or_an_english_model_waits_for_nothing) {
  for (int k = 0; k < 2; k++) {
    wd_worker_t w;
    fake_init(&w, 3);
    w.multilingual = k == 0;
    wd_worker_t *ws[1] = { &w };
    wd_workers_t *g = NULL;
    WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 1, &g), 0);
    int rc = 0;
    submit_lang_rc(g, 3, k == 0 ? "fr" : NULL, &rc);
    WD_CHECK_EQ_INT(rc, 0);
    WD_CHECK_EQ_INT(n_jobs(&w), 3);
    WD_CHECK_EQ_STR(w.jobs[2].lang, k == 0 ? "fr" : "");
    for (int i = 0; i < 3; i++)
      end_chunk_now(&w, i, 0);
    WD_CHECK_EQ_INT(g_done, 1);
    WD_CHECK_EQ_INT(g_rc, 0);
    wd_workers_free(g);
    fake_done(&w);
  }
}

/* The first chunk ends before it told a language: failing, it ends the
 * job with nothing else started; done (a decoder that did not detect),
 * the others start and detect for themselves. */
WD_TEST(first_chunk_ending_before_its_language) {
  for (int ok = 0; ok < 2; ok++) {
    wd_worker_t w;
    fake_init(&w, 2);
    w.multilingual = 1;
    wd_worker_t *ws[1] = { &w };
    wd_workers_t *g = NULL;
    WD_CHECK_EQ_INT(wd_workers_new(ws, NULL, 1, &g), 0);
    submit_copies(g, 3);
    WD_CHECK_EQ_INT(n_jobs(&w), 1);
    end_chunk_now(&w, 0, ok ? 0 : WD_ENOMEM);
    if (!ok) {
      WD_CHECK_EQ_INT(n_jobs(&w), 1);
      WD_CHECK_EQ_INT(g_done, 1);
      WD_CHECK_EQ_INT(g_rc, WD_ENOMEM);
    } else {
      WD_CHECK_EQ_INT(n_jobs(&w), 3);
      WD_CHECK_EQ_STR(w.jobs[1].lang, "");
      end_chunk_now(&w, 1, 0);
      end_chunk_now(&w, 2, 0);
      WD_CHECK_EQ_INT(g_done, 1);
      WD_CHECK_EQ_INT(g_rc, 0);
    }
    wd_workers_free(g);
    fake_done(&w);
  }
}

WD_TEST(teardown) { wd_vad_model_free(g_vad); }

int main(void) { return wd_test_main(); }
