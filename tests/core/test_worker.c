/*
 * test_worker.c - the job queue and worker on the plain-C reference engine
 * with real tiny.en / base weights and real audio.
 *
 * The identity rule: a job's text, tokens and timestamps are bit-for-bit the
 * same whether it runs alone or batched beside others (short, long and
 * silent files at once). Then the queue's edges: queue full (WD_EBUSY),
 * cancel while queued and while running, timeouts, drain, streaming
 * segments in order.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio.h"
#include "decode.h"
#include "error.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "ref_engine.h"
#include "tokenizer.h"
#include "wd_test.h"
#include "worker.h"

#define TINY WD_SOURCE_DIR "/models/ggml-tiny.en.bin"
#define BASE WD_SOURCE_DIR "/models/ggml-base.bin"

/* A model with its tokenizer, mel front end and reference engine. */
typedef struct {
  wd_model_t *m;
  wd_tokenizer_t *tok;
  wd_mel_t *mel;
  wd_ref_engine_t *r;
} rig_t;

static int rig_open(rig_t *g, const char *path, int slots) {
  memset(g, 0, sizeof *g);
  char err[256] = "";
  int n_mel = 0, n_fft = 0, rc = wd_model_load(path, &g->m, err, sizeof err);
  if (rc == 0) rc = wd_model_tokenizer_new(g->m, &g->tok);
  if (rc == 0) rc = wd_mel_new(wd_model_hparams(g->m)->n_mels,
                               wd_model_mel_filters(g->m, &n_mel, &n_fft), &g->mel);
  if (rc == 0) rc = wd_ref_engine_new(g->m, slots, slots, &g->r);
  if (rc < 0)
    fprintf(stderr, "rig %s: %s %s\n", path, wd_strerror(rc), err);
  return rc;
}

static void rig_close(rig_t *g) {
  wd_ref_engine_free(g->r);
  wd_mel_free(g->mel);
  wd_tokenizer_free(g->tok);
  wd_model_free(g->m);
}

static wd_worker_t *rig_worker(rig_t *g, int queue_max, int max_batch) {
  const wd_worker_opts_t o = { .engine = wd_ref_engine_iface(g->r), .tok = g->tok,
                               .mel = g->mel, .queue_max = queue_max, .max_batch = max_batch };
  wd_worker_t *w = NULL;
  WD_CHECK_EQ_INT(wd_worker_new(&o, &w), 0);
  return w;
}

/* 16 kHz samples of a test file, played `repeat` times back to back. */
static float *load_audio(const char *name, int repeat, size_t *ret_n) {
  float *pcm = NULL;
  size_t n = 0;
  char err[256] = "";
  if (wd_audio_decode_file(wd_test_data(name), NULL, &pcm, &n, err, sizeof err) < 0) {
    fprintf(stderr, "%s: %s\n", name, err);
    return NULL;
  }
  float *out = malloc(n * (size_t)repeat * sizeof *out);
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

static void on_segment(void *ud, const wd_segment_t *s, double done_s, double total_s) {
  outcome_t *o = ud;
  pthread_mutex_lock(o->mu);
  if (s->id != o->n_streamed || done_s < o->last_done_s || done_s > total_s + 1e-9)
    o->stream_order_ok = 0;
  o->n_streamed++;
  o->last_done_s = done_s;
  pthread_mutex_unlock(o->mu);
}

static void on_done(void *ud, int rc, wd_transcript_t *t) {
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

static void outcome_init(outcome_t *o) {
  memset(o, 0, sizeof *o);
  o->mu = &g_mu;
  o->cv = &g_cv;
  o->stream_order_ok = 1;
}

static void wait_done(outcome_t *o, int n) {
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < n; i++)
    while (!o[i].done)
      pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
}

static int submit(wd_worker_t *w, const char *name, int repeat, const char *language,
                  double timeout_s, outcome_t *o, uint64_t *ret_id) {
  size_t n = 0;
  float *pcm = load_audio(name, repeat, &n);
  if (!pcm)
    return WD_EAUDIO;
  wd_job_params_t p = { .timeout_s = timeout_s,
                        .cb = { .ud = o, .on_segment = on_segment, .on_done = on_done } };
  wd_decode_opts_default(&p.decode);
  p.decode.language = language;
  uint64_t id = 0;
  const int rc = wd_worker_submit(w, pcm, n, &p, &id);
  if (ret_id)
    *ret_id = id;
  return rc;
}

/* Exactly equal text, tokens, times and window statistics. */
static int same_transcript(const wd_transcript_t *a, const wd_transcript_t *b) {
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

static int have(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f)
    fclose(f);
  return f != NULL;
}

typedef struct {
  const char *name;
  int repeat;
} clip_t;

/* Runs every clip alone, then all at once, and compares. */
static void check_identity(const char *model, const clip_t *clips, int n, const char *language) {
  rig_t g;
  if (rig_open(&g, model, n) < 0) {
    WD_CHECK(0);
    return;
  }
  wd_worker_t *w = rig_worker(&g, 16, n);
  outcome_t alone[8], together[8];
  for (int i = 0; i < n; i++) {
    outcome_init(&alone[i]);
    WD_CHECK_EQ_INT(submit(w, clips[i].name, clips[i].repeat, language, 0, &alone[i], NULL), 0);
    wait_done(&alone[i], 1);
    WD_CHECK_EQ_INT(alone[i].rc, 0);
  }
  wd_worker_stats_t st0;
  wd_worker_stats(w, &st0);
  for (int i = 0; i < n; i++) {
    outcome_init(&together[i]);
    WD_CHECK_EQ_INT(submit(w, clips[i].name, clips[i].repeat, language, 0, &together[i], NULL), 0);
  }
  wait_done(together, n);
  wd_worker_stats_t st;
  wd_worker_stats(w, &st);
  uint64_t multi = 0;
  for (int r = 2; r <= 16; r++)
    multi += st.steps_by_rows[r] - st0.steps_by_rows[r];
  fprintf(stderr, "%s: %d jobs together: %llu steps, %llu with 2+ rows, mean %.2f rows\n", model,
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
    fprintf(stderr, "  %-28s x%d: %d segments, '%s'\n", clips[i].name, clips[i].repeat,
            alone[i].t.n_segments, alone[i].t.text ? alone[i].t.text : "");
    wd_transcript_free(&alone[i].t);
    wd_transcript_free(&together[i].t);
  }
  wd_worker_free(w);
  rig_close(&g);
}

WD_TEST(identity_alone_vs_batched_tiny_en) {
  if (!have(TINY))
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  const clip_t clips[] = {
    { "audio/jfk.wav", 1 },             /* 11 s */
    { "audio/jfk.wav", 3 },             /* 33 s: two windows, seek and context carry */
    { "audio/synth/silence_3s.wav", 1 }, /* the no-speech rule */
    { "audio/cards/003.wav", 1 },       /* 1-4 s */
    { "audio/synth/quick_fox.wav", 1 },
  };
  check_identity(TINY, clips, 5, NULL);
}

WD_TEST(identity_alone_vs_batched_base_detects_language) {
  if (!have(BASE))
    wd_test_skip("models/ggml-base.bin not present (scripts/fetch-model.sh base)");
  const clip_t clips[] = { { "audio/jfk.wav", 1 }, { "audio/synth/silence_3s.wav", 1 } };
  check_identity(BASE, clips, 2, NULL);
}

WD_TEST(queue_full_cancel_timeout_drain) {
  if (!have(TINY))
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  rig_t g;
  if (rig_open(&g, TINY, 1) < 0) {
    WD_CHECK(0);
    return;
  }
  /* One running slot and one queue place: of three quick submits one runs,
   * one waits, and at least one is refused at once. */
  wd_worker_t *w = rig_worker(&g, 1, 1);
  outcome_t o[4];
  uint64_t id[4] = { 0 };
  int rc[4], busy = 0;
  for (int i = 0; i < 3; i++) {
    outcome_init(&o[i]);
    rc[i] = submit(w, "audio/jfk.wav", 3, NULL, 0, &o[i], &id[i]);
    busy += rc[i] == WD_EBUSY;
    WD_CHECK(rc[i] == 0 || rc[i] == WD_EBUSY);
  }
  WD_CHECK_EQ_INT(rc[0], 0);
  WD_CHECK(busy >= 1);
  WD_CHECK(id[0] != 0);
  /* Cancel everything accepted: queued or running, each ends WD_ECANCELED. */
  for (int i = 0; i < 3; i++)
    if (rc[i] == 0)
      wd_worker_cancel(w, id[i]);
  for (int i = 0; i < 3; i++)
    if (rc[i] == 0) {
      wait_done(&o[i], 1);
      WD_CHECK_EQ_INT(o[i].rc, WD_ECANCELED);
      WD_CHECK_EQ_INT(o[i].done, 1);
    }
  wd_worker_cancel(w, 999999); /* unknown ids are ignored */

  /* A deadline that passes before the job can finish. */
  outcome_init(&o[3]);
  WD_CHECK_EQ_INT(submit(w, "audio/jfk.wav", 3, NULL, 0.05, &o[3], NULL), 0);
  wait_done(&o[3], 1);
  WD_CHECK_EQ_INT(o[3].rc, WD_ETIMEDOUT);

  /* Drain: the running job finishes, the queued one is refused. */
  outcome_init(&o[0]);
  outcome_init(&o[1]);
  WD_CHECK_EQ_INT(submit(w, "audio/cards/003.wav", 1, NULL, 0, &o[0], NULL), 0);
  /* wait until the first is running so the second stays queued */
  for (int k = 0; k < 2000; k++) {
    wd_worker_stats_t st;
    wd_worker_stats(w, &st);
    if (st.running == 1)
      break;
    nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
  }
  WD_CHECK_EQ_INT(submit(w, "audio/jfk.wav", 1, NULL, 0, &o[1], NULL), 0);
  wd_worker_drain(w, 60.0);
  WD_CHECK_EQ_INT(o[0].done, 1);
  WD_CHECK_EQ_INT(o[0].rc, 0);
  WD_CHECK_EQ_INT(o[1].done, 1);
  WD_CHECK_EQ_INT(o[1].rc, WD_ESHUTDOWN);
  wd_transcript_free(&o[0].t);
  outcome_init(&o[2]);
  WD_CHECK_EQ_INT(submit(w, "audio/jfk.wav", 1, NULL, 0, &o[2], NULL), WD_ESHUTDOWN);
  WD_CHECK(wd_worker_heartbeat(w) > 0);
  wd_worker_stats_t st;
  wd_worker_stats(w, &st);
  WD_CHECK_EQ_INT(st.queued, 0);
  WD_CHECK_EQ_INT(st.running, 0);
  WD_CHECK(st.jobs_failed >= 3);
  wd_worker_free(w);
  rig_close(&g);
}

WD_TEST(bad_options_refused_at_submit) {
  if (!have(TINY))
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  rig_t g;
  if (rig_open(&g, TINY, 1) < 0) {
    WD_CHECK(0);
    return;
  }
  wd_worker_t *w = rig_worker(&g, 4, 1);
  outcome_t o;
  outcome_init(&o);
  /* English-only model: another language, or translation, is refused. */
  WD_CHECK_EQ_INT(submit(w, "audio/jfk.wav", 1, "de", 0, &o, NULL), WD_EINVAL);
  size_t n = 0;
  float *pcm = load_audio("audio/jfk.wav", 1, &n);
  wd_job_params_t p = { .cb = { .ud = &o, .on_done = on_done } };
  wd_decode_opts_default(&p.decode);
  p.decode.translate = 1;
  WD_CHECK_EQ_INT(wd_worker_submit(w, pcm, n, &p, NULL), WD_EINVAL);
  WD_CHECK_EQ_INT(o.done, 0);
  wd_worker_free(w);
  rig_close(&g);
}

int main(void) { return wd_test_main(); }
