/*
 * transcription.c - the audio routes (see transcription.h).
 *
 * Phases, all driven from the connection's MHD thread:
 *
 *   RECEIVING   headers checked (model attached, not shutting down, a
 *               multipart Content-Type, Content-Length within max_body);
 *               body chunks appended up to max_body; a chunked body over it
 *               gets its 413 at once, and one slower than body_timeout_s a
 *               408, written mid-body (answer_early), and the connection is
 *               closed after a short linger.
 *   (end of body) parse form, validate, tokenize the prompt; 429 at once
 *               when the workers' queue (jobs queued plus uploads being
 *               decoded) has no room or their audio budget is spent (the
 *               worker checks the new job's seconds at submit); else the audio goes to the server's
 *               decode threads (s->decoders) and the connection is suspended.
 *   DECODING    resumed by decode_task with the samples or an error: answer
 *               the error, or submit the job.
 *   WAITING     non-streaming: the connection is suspended until on_done.
 *   STREAMING   the SSE response is queued at once; its reader suspends the
 *               connection whenever no event is pending, and the worker's
 *               callbacks resume it.
 *   ANSWERED    a response is queued; nothing left to do.
 *
 * The suspend/resume race. on_done (and on_segment) run on the worker
 * thread and may run before wd_worker_submit() has even returned. MHD
 * requires that a connection is resumed only after it was suspended, and
 * it must be suspended from its own thread. So both sides go through
 * t->mu and the flag t->suspended: the MHD thread suspends (and sets the
 * flag) under the lock only if no result is waiting; the worker sets its
 * result under the lock and resumes only if the flag is set, clearing it.
 * A result that arrives first is therefore seen by the MHD thread, which
 * answers without suspending; a result that arrives later resumes a
 * connection that is certainly suspended. The decode thread is simpler:
 * the MHD thread queues its task and suspends under t->mu, so the task's
 * resume (under t->mu too) always follows the suspend.
 *
 * Speaker diarization (a request with req.diarize). The decode thread
 * that decoded the upload also decodes the known speakers' reference clips
 * (400 for one that is not 1.2-10 s of audio), submits the transcription
 * (with word timestamps: they decide where a segment is cut) and then
 * pushes the diarization (wd_diar_run, and the references' embeddings) as
 * a task of its own on the diarization threads (s->diarizers, not the
 * decode threads: a long one would hold up every other upload), so that
 * it runs beside the transcription on the worker; it rides on the
 * transcription's admission
 * (the audio budget counted the upload's seconds once). t->diar_pending is
 * set under t->mu before the job is submitted, so that on_done, however
 * early, sees it: the request is answered (or its stream finished) only
 * when both have ended (ready_locked). The diarization polls
 * diar_should_stop between windows: the client gone, the transcription
 * failed or cancelled, the job's deadline passed, or the server's drain
 * deadline (wd_server_drain_by) passed. Attribution and rendering (cheap:
 * milliseconds) run on the MHD thread, as every render.
 *
 * A diarized request stays in the server's in-flight list (s->live, and
 * s->n_jobs) until both halves have ended, whichever ends last removing it
 * (under t->mu each sees whether the other has): a client that hangs up
 * after its transcription ended is still found by the watcher's serial,
 * and its diarization stopped (t->hung_up) rather than run to its end.
 *
 * The audio budget. The worker holds a job's seconds until on_done; a
 * diarization that outlives its job holds them from there until it ends
 * (t->diar_holds, wd__server_diar_hold), and admission (diar_room) counts
 * them beside the workers' jobs: each upload's seconds counted once, and
 * no flood of uploads quickly transcribed (silence) can pile up
 * diarizations, with their samples, past the budget.
 *
 * The hang-up watch is registered under the same lock right after
 * suspending and removed right before resuming, so the watcher never
 * polls a connection that MHD may close and whose fd may be reused.
 *
 * Lock order: t->mu, then MHD's internal locks (suspend/resume), the
 * watcher's lock, s->mu, the served-model table's lock (a park,
 * wd_served_wait). Nothing takes t->mu while holding those: the table
 * calls a parked request back with its lock released.
 */
#include "transcription.h"

#include <inttypes.h>
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "clock.h"
#include "diar.h"
#include "diar_assign.h"
#include "error.h"
#include "log.h"
#include "taskq.h"
#include "pystr.h"
#include "render.h"
#include "response.h"
#include "served.h"
#include "chunk_job.h"
#include "vad_job.h"

enum { PH_RECEIVING = 0, PH_MODEL_WAIT, PH_DECODING, PH_WAITING, PH_STREAMING, PH_ANSWERED };

/* Times a request for a model loaded on demand is parked for a load
 * before it is answered 503 (a model unloaded again as soon as loaded). */
#define WD_MODEL_WAITS_MAX 3

/* After answering a body early (413 over the cap, 408 too slow), the rest
 * is read and dropped for at most this many bytes or seconds so that the
 * client reads the answer before the close resets the connection. The
 * bytes must cover what was already in flight when the answer went out: on
 * loopback the client's send buffer and our receive buffer autotune to
 * 4 + 6 MiB, and a client that the scheduler starved (curl under load in
 * CI) had filled them, so 1 MiB cut it off before it read the 413. Reading
 * and dropping 16 MiB costs no memory and milliseconds of CPU. */
#define WD_LINGER_BYTES (16u << 20)
/* Whisper's encoder positions per second of audio (1,500 per 30 s). */
#define WD_API_AUDIO_TOKENS_PER_S 50.0
#define WD_LINGER_S 2.0
#define WD_BODY_TIMEOUT_DEFAULT_S 300

struct wd_transcription {
  wd_server_t *s;
  wd_served_t *rec;           /* the request's model, referenced (once parsed) */
  const wd_server_model_t *m; /* &rec->m */
  uint64_t serial;            /* the hang-up watch's token */
  struct MHD_Connection *conn;
  wd_request_task_t task;
  atomic_int refs;

  /* MHD thread only. */
  int phase;
  int status;                /* the HTTP status answered, 0 before */
  double t_start;
  char *content_type;
  uint8_t *body;             /* (len) bytes of the body so far, cap allocated */
  size_t len, cap;
  uint64_t seen;             /* body bytes received, kept or discarded */
  int answered_early;        /* a response went out mid-body (see on_data) */
  uint64_t early_seen;       /* seen, and the time, when it went */
  double early_t;
  wd_format_t format;
  unsigned verbose_parts;    /* verbose_json: WD_RENDER_SEGMENTS / WD_RENDER_WORDS */
  int stream;
  int segment_events;        /* stream with timestamp_granularities[]=segment:
                              * transcript.text.segment events too */
  int logprobs;              /* include[]=logprobs */
  double audio_s;
  /* PH_DECODING: what the decode thread reads (the form holds the file
   * that req points into), kept for the submit after it. */
  wd_multipart_t *form;
  wd_request_t req;
  int has_req;
  int32_t *prompt;
  int n_prompt;

  /* Shared with the worker and the watcher: under mu. */
  pthread_mutex_t mu;
  uint64_t job_id;           /* 0 until wd_worker_submit returned */
  int done;                  /* on_done ran; rc and result are set */
  int rc;
  wd_transcript_t result;    /* moved out of on_done's transcript */
  int suspended;             /* the connection is suspended (by us) */
  uint64_t watch;            /* hang-up watch token while suspended */
  int conn_gone;             /* MHD completed the request */
  char *ev;                  /* SSE bytes not yet read: ev[ev_off..ev_len) */
  size_t ev_len, ev_cap, ev_off;
  int ev_finished;           /* the last event is in ev: end after it */
  int n_deltas;
  int n_segment_events;      /* transcript.text.segment events so far (ids) */
  int decoding;              /* decode_task owns the connection's resume: the
                              * job it submits may end (on_done) before it
                              * resumes, and must not resume it instead */
  int decoded;               /* decode_task ran: n_pcm, decode_rc, decode_msg */
  /* PH_MODEL_WAIT: parked in the served-model table until its model's
   * slot changes (the waiter holds a reference to t); how many times so
   * far. */
  wd_model_waiter_t waiter;
  int n_model_waits;
  int submit_rc;             /* decode_task's submit: 0, or why it failed */
  size_t n_pcm;              /* samples decoded */
  int decode_rc;
  char decode_msg[256];

  /* Diarization (req.diarize; see the header comment). diarize is set by
   * the MHD thread before the decode; diar_pcm and the references' samples
   * belong to the decode thread, then to the diarization task. */
  int diarize;
  float *diar_pcm;           /* (diar_n) the upload, 16 kHz mono */
  size_t diar_n;
  float *known_pcm[WD_DIAR_MAX_KNOWN]; /* (known_n[k]) each reference clip */
  size_t known_n[WD_DIAR_MAX_KNOWN];
  int n_known;
  int has_diar_err;          /* decode thread: a reference refused (diar_err) */
  wd_api_error_t diar_err;
  /* Under mu. */
  int diar_pending;          /* the diarization has not ended */
  int diar_refused;          /* decode thread: its queue refused it (rc) */
  int diar_holds;            /* the budget holds audio_s for the diarization */
  /* Set by the watcher's thread (under s->mu, so not t->mu): the client
   * hung up while its connection was suspended. */
  atomic_int hung_up;
  int diar_rc;
  wd_diar_result_t diar;     /* its result (diar_rc 0) */
  float known_emb[WD_DIAR_MAX_KNOWN][WD_DIAR_EMB_DIM]; /* the references' embeddings */

  /* The server's list of jobs in flight: under s->mu. */
  wd_transcription_t *live_prev, *live_next;
  int in_live;
  uint64_t live_job_id;
};

static enum MHD_Result on_body_complete(wd_transcription_t *t);

static void tr_unref(wd_transcription_t *t) {
  if (atomic_fetch_sub(&t->refs, 1) != 1)
    return;
  /* Last reference: nobody else can see t. It never touches the server
   * here, which may already be gone when the job's reference is last. */
  wd_transcript_free(&t->result);
  wd_diar_result_free(&t->diar);
  free(t->diar_pcm);
  for (int k = 0; k < WD_DIAR_MAX_KNOWN; k++)
    free(t->known_pcm[k]);
  wd_served_release(t->rec);
  if (t->has_req)
    wd_request_clear(&t->req);
  wd_multipart_free(t->form);
  free(t->prompt);
  pthread_mutex_destroy(&t->mu);
  free(t->content_type);
  free(t->body);
  free(t->ev);
  free(t);
}

wd_transcription_t *wd_transcription_new(wd_server_t *s, struct MHD_Connection *c,
                                         wd_request_task_t task, double t_start) {
  wd_transcription_t *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->s = s;
  t->conn = c;
  t->task = task;
  t->t_start = t_start;
  t->serial = atomic_fetch_add(&s->next_serial, 1) + 1;
  atomic_init(&t->refs, 1);
  pthread_mutex_init(&t->mu, NULL);
  return t;
}

/* Queues an error and records its status. */
static enum MHD_Result answer_error(wd_transcription_t *t, const wd_api_error_t *e) {
  t->phase = PH_ANSWERED;
  t->status = e->status;
  return wd_response_error(t->conn, e, NULL);
}

static int body_timeout_s(const wd_server_t *s) {
  return s->o.body_timeout_s > 0 ? s->o.body_timeout_s : WD_BODY_TIMEOUT_DEFAULT_S;
}

/* First call: everything that can be refused before reading the body. */
static enum MHD_Result on_headers(wd_transcription_t *t) {
  wd_server_t *s = t->s;
  wd_api_error_t e;
  if (wd_served_count(&s->served) == 0) {
    wd_api_error_set(&e, 503, NULL, "model_not_ready",
                     "The model is still loading; retry in a few seconds.");
    e.retry_after_s = 5;
    return answer_error(t, &e);
  }
  if (atomic_load(&s->quiescing)) {
    wd_api_error_from_job(&e, WD_ESHUTDOWN, 1, 0, 5);
    return answer_error(t, &e);
  }
  const char *ct = MHD_lookup_connection_value(t->conn, MHD_HEADER_KIND, "Content-Type");
  char boundary[WD_MULTIPART_MAX_BOUNDARY + 1];
  const int brc = ct ? wd_multipart_boundary(ct, boundary, sizeof boundary) : WD_EUNSUP;
  if (brc == WD_EUNSUP) {
    wd_api_error_set(&e, 400, NULL, "invalid_content_type",
                     "Content-Type must be multipart/form-data (got '%.100s').", ct ? ct : "");
    return answer_error(t, &e);
  }
  if (brc < 0) {
    wd_api_error_set(&e, 400, NULL, "invalid_content_type",
                     "Content-Type multipart/form-data needs a boundary parameter.");
    return answer_error(t, &e);
  }
  const char *cl = MHD_lookup_connection_value(t->conn, MHD_HEADER_KIND, "Content-Length");
  if (cl) {
    char *end = NULL;
    const unsigned long long n = strtoull(cl, &end, 10);
    /* MHD already refused a malformed Content-Length; compare the value. */
    if (end != cl && n > s->o.max_body) {
      wd_api_error_set(&e, 413, NULL, "request_too_large",
                       "413: Maximum content size limit (%zu) exceeded (%llu bytes).",
                       s->o.max_body, n);
      return answer_error(t, &e);
    }
  }
  if (!(t->content_type = strdup(ct))) {
    wd_api_error_set(&e, 500, NULL, NULL, "The server ran out of memory.");
    return answer_error(t, &e);
  }
  return MHD_YES;
}

/* Answers e while the body is still arriving (see wd_response_error_early)
 * and starts the short linger. MHD_NO when even that write failed. */
static enum MHD_Result answer_early(wd_transcription_t *t, const wd_api_error_t *e) {
  t->status = e->status;
  if (wd_response_error_early(t->conn, e) < 0)
    return MHD_NO;
  t->answered_early = 1;
  t->early_seen = t->seen;
  t->early_t = wd_now_s();
  return MHD_YES;
}

/* A body chunk. No response can be queued while the body is arriving (MHD
 * 0.9.75 takes one only before or after it), so an early refusal is written
 * to the socket by answer_early; MHD_NO then closes the connection. */
static enum MHD_Result on_data(wd_transcription_t *t, const char *data, size_t n) {
  const wd_server_t *s = t->s;
  t->seen += n;
  if (t->answered_early) {
    /* Linger: drop what the client sent before it read the answer. */
    if (t->seen - t->early_seen <= WD_LINGER_BYTES && wd_now_s() - t->early_t < WD_LINGER_S)
      return MHD_YES;
    return MHD_NO;
  }
  wd_api_error_t e;
  if (wd_now_s() - t->t_start > body_timeout_s(s)) {
    wd_log_notice("api: request body not received within %d s (%" PRIu64 " bytes so far), "
                  "answering 408", body_timeout_s(s), t->seen);
    wd_api_error_set(&e, 408, NULL, "request_timeout",
                     "The request body was not received within %d s.", body_timeout_s(s));
    return answer_early(t, &e);
  }
  if (t->len + n > s->o.max_body) {
    /* Over the cap without a Content-Length (chunked): answer at once
     * rather than read gigabytes to answer after the last byte. */
    wd_log_notice("api: request body over the %zu-byte limit (no Content-Length), answering 413",
                  s->o.max_body);
    free(t->body);
    t->body = NULL;
    t->len = t->cap = 0;
    wd_api_error_set(&e, 413, NULL, "request_too_large",
                     "413: Maximum content size limit (%zu) exceeded (%" PRIu64 " bytes read).",
                     s->o.max_body, t->seen);
    return answer_early(t, &e);
  }
  if (t->len + n > t->cap) {
    size_t cap = t->cap ? t->cap : 65536;
    while (cap < t->len + n)
      cap *= 2;
    if (cap > s->o.max_body)
      cap = s->o.max_body;
    uint8_t *b = realloc(t->body, cap);
    if (!b) {
      wd_log_error("api: out of memory for a %zu-byte request body", cap);
      free(t->body);
      t->body = NULL;
      t->len = t->cap = 0;
      wd_api_error_set(&e, 500, NULL, NULL, "The server ran out of memory.");
      return answer_early(t, &e);
    }
    t->body = b;
    t->cap = cap;
  }
  memcpy(t->body + t->len, data, n);
  t->len += n;
  return MHD_YES;
}

/* Appends one SSE event "data: <json>\n\n" (or the raw payload when json is
 * NULL), json dumped with jansson's flags (JSON_COMPACT always). Under
 * t->mu. On OOM the event is dropped. */
static void ev_append_flags(wd_transcription_t *t, json_t *json, const char *raw, size_t flags) {
  char *payload = json ? json_dumps(json, JSON_COMPACT | flags) : NULL;
  const char *p = json ? payload : raw;
  if (!p)
    return;
  /* "data: " + p + "\n\n" and snprintf's NUL: n + 9 bytes. */
  const size_t n = strlen(p), need = t->ev_len + n + 9;
  if (need > t->ev_cap) {
    size_t cap = t->ev_cap ? t->ev_cap : 1024;
    while (cap < need)
      cap *= 2;
    char *ev = realloc(t->ev, cap);
    if (!ev) {
      free(payload);
      return;
    }
    t->ev = ev;
    t->ev_cap = cap;
  }
  t->ev_len += (size_t)snprintf(t->ev + t->ev_len, t->ev_cap - t->ev_len, "data: %s\n\n", p);
  free(payload);
}

static void ev_append(wd_transcription_t *t, json_t *json, const char *raw) {
  ev_append_flags(t, json, raw, 0);
}

/* A JSON string of s[0..n) repaired to UTF-8; NULL on OOM. */
static json_t *json_text(const char *s, size_t n) {
  char *fixed = wd_render_utf8_dup(s, n);
  json_t *j = fixed ? json_string(fixed) : NULL;
  free(fixed);
  return j;
}

/* Appends OpenAI's transcript.text.segment event for one final segment:
 * {"type":"transcript.text.segment","id":"seg_<n>","start","end","text",
 * "speaker"}. n counts the stream's segment events from 0, so that for a
 * transcription seg_<n> is verbose_json's segments[n]; text keeps whisper's
 * leading space as segments[].text does, and the times are written as
 * verbose_json writes them. speaker: a diarized segment's label, or NULL
 * for none, written as "" (the SDKs type speaker as a required string).
 * Under t->mu. */
static void ev_segment(wd_transcription_t *t, double start, double end, const char *text,
                       const char *speaker) {
  char id[32];
  snprintf(id, sizeof id, "seg_%d", t->n_segment_events++); /* a dropped one keeps its id */
  json_t *tj = json_text(text ? text : "", text ? strlen(text) : 0);
  json_t *sj = json_text(speaker ? speaker : "", speaker ? strlen(speaker) : 0);
  json_t *ev = tj && sj ? json_pack("{s:s, s:s, s:f, s:f, s:o, s:o}", "type",
                                    "transcript.text.segment", "id", id, "start", start, "end",
                                    end, "text", tj, "speaker", sj)
                        : NULL;
  if (!ev) { /* "o" steals both, on failure too */
    if (!tj || !sj) {
      json_decref(tj);
      json_decref(sj);
    }
    return;
  }
  ev_append_flags(t, ev, NULL, JSON_REAL_PRECISION(15));
  json_decref(ev);
}

/* Resumes the connection if we suspended it. Under t->mu. The watch goes
 * first: once resumed, MHD may close the socket and reuse its fd. */
static void resume_locked(wd_transcription_t *t) {
  if (!t->suspended)
    return;
  wd_watcher_remove(t->s->watcher, t->watch);
  t->watch = 0;
  t->suspended = 0;
  atomic_fetch_sub(&t->s->n_suspended, 1);
  MHD_resume_connection(t->conn);
}

/* Suspends the connection and watches it for a hang-up. Under t->mu, on
 * the connection's MHD thread. */
static void suspend_locked(wd_transcription_t *t) {
  MHD_suspend_connection(t->conn);
  t->suspended = 1;
  atomic_fetch_add(&t->s->n_suspended, 1);
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(t->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  /* While decoding there is no job to cancel: the hang-up shows when the
   * job after it is suspended. A diarization is watched too, job or not
   * (audio without speech has none: its job ended inside the submit). */
  if (ci && (t->job_id || t->diar_pending))
    t->watch = wd_watcher_add(t->s->watcher, ci->connect_fd, t->serial);
}

/* Worker thread: a final segment (streaming only): its delta, then, when
 * the request asked for segment timestamps, its segment event. */
static void on_segment(void *ud, const wd_segment_t *seg, double done_s, double total_s) {
  (void)done_s;
  (void)total_s;
  wd_transcription_t *t = ud;
  const char *text = seg->text ? seg->text : "";
  size_t n = strlen(text);
  pthread_mutex_lock(&t->mu);
  /* The first delta loses whisper's leading space, so that the deltas
   * concatenate to the done event's text. */
  if (t->n_deltas == 0)
    while (n > 0 && (*text == ' ' || *text == '\n' || *text == '\t')) {
      text++;
      n--;
    }
  int queued = 0;
  if (n > 0 && !t->conn_gone) {
    json_t *d = json_text(text, n);
    json_t *ev = d ? json_pack("{s:s, s:o}", "type", "transcript.text.delta", "delta", d) : NULL;
    if (ev && t->logprobs) { /* OpenAI's delta carries its tokens' logprobs */
      json_t *lp = wd_render_logprobs(seg, 1, t->m->tok);
      if (!lp || json_object_set_new(ev, "logprobs", lp) < 0) {
        json_decref(ev);
        ev = NULL;
      }
    }
    if (ev) {
      ev_append(t, ev, NULL);
      t->n_deltas++;
    }
    json_decref(ev);
    queued = 1;
  }
  /* Every segment has its event, an empty one too: verbose_json lists it. */
  if (t->segment_events && !t->conn_gone) {
    ev_segment(t, seg->start, seg->end, seg->text, NULL);
    queued = 1;
  }
  if (queued && !t->decoding)
    resume_locked(t);
  pthread_mutex_unlock(&t->mu);
}

/* Removes t from the server's in-flight list and counts the job ended.
 * This is the job side's last access to the server. */
static void live_remove(wd_transcription_t *t) {
  wd_server_t *s = t->s;
  pthread_mutex_lock(&s->mu);
  if (t->in_live) {
    if (t->live_prev)
      t->live_prev->live_next = t->live_next;
    else
      s->live = t->live_next;
    if (t->live_next)
      t->live_next->live_prev = t->live_prev;
    t->in_live = 0;
  }
  s->n_jobs--;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* The request can be answered: its job ended, and so did its
 * diarization, unless the job failed (then nothing waits for that). Under
 * t->mu. */
static int ready_locked(const wd_transcription_t *t) {
  return t->done && (t->rc < 0 || !t->diarize || !t->diar_pending);
}

/* Appends the stream's transcript.text.done event (and [DONE]) for a
 * finished transcript. Under t->mu. */
static void ev_done_locked(wd_transcription_t *t) {
  size_t n = 0;
  const char *text = t->result.text ? wd_py_strip(t->result.text, strlen(t->result.text), &n)
                                    : "";
  json_t *tj = json_text(text, n);
  /* OpenAI's done event carries usage as tokens (its SDKs type it so):
   * the prompt's text tokens and the audio's encoder positions (50 a
   * second, 1,500 a window) in, the tokens decoded (timestamps
   * included, as in segments[].tokens) out. */
  long out_tokens = 0;
  for (int i = 0; i < t->result.n_segments; i++)
    out_tokens += t->result.segments[i].n_tokens;
  const long audio_tokens = (long)ceil(t->audio_s * WD_API_AUDIO_TOKENS_PER_S);
  const long in_tokens = audio_tokens + t->n_prompt;
  json_t *usage = json_pack("{s:s, s:I, s:{s:I, s:I}, s:I, s:I}", "type", "tokens",
                            "input_tokens", (json_int_t)in_tokens, "input_token_details",
                            "text_tokens", (json_int_t)t->n_prompt, "audio_tokens",
                            (json_int_t)audio_tokens, "output_tokens",
                            (json_int_t)out_tokens, "total_tokens",
                            (json_int_t)(in_tokens + out_tokens));
  json_t *ev = NULL;
  if (tj && usage) /* "o" steals both, on failure too */
    ev = json_pack("{s:s, s:o, s:o}", "type", "transcript.text.done", "text", tj, "usage",
                   usage);
  else {
    json_decref(tj);
    json_decref(usage);
  }
  if (ev && t->logprobs) {
    json_t *lp = wd_render_logprobs(t->result.segments, t->result.n_segments, t->m->tok);
    if (!lp || json_object_set_new(ev, "logprobs", lp) < 0) {
      json_decref(ev);
      ev = NULL;
    }
  }
  ev_append(t, ev, NULL);
  json_decref(ev);
  ev_append(t, NULL, "[DONE]");
}

/* Appends e as the stream's error event. Under t->mu. */
static void ev_error_event_locked(wd_transcription_t *t, const wd_api_error_t *e) {
  char *body = wd_api_error_json(e);
  if (body)
    ev_append(t, NULL, body);
  free(body);
}

/* Appends an error event for a job that failed with rc. Under t->mu. */
static void ev_error_locked(wd_transcription_t *t, int rc) {
  wd_api_error_t e;
  wd_api_error_from_job(&e, rc, 0, t->s->o.job_timeout_s, 0);
  ev_error_event_locked(t, &e);
}

/* A diarization's failure (rc) as its request's answer, the transcription
 * having succeeded: a stop by the drain, the job's deadline or a cancel
 * as a job's; anything else names the diarization, since a diarized
 * answer without its speakers would be a wrong one, not a partial one. */
static void diar_error(const wd_transcription_t *t, int rc, wd_api_error_t *e) {
  if (rc == WD_ECANCELED || rc == WD_ESHUTDOWN || rc == WD_ETIMEDOUT || rc == WD_EBUSY)
    wd_api_error_from_job(e, rc, 0, t->s->o.job_timeout_s, wd__server_retry_after(t->m));
  else
    wd_api_error_set(e, 500, NULL, NULL,
                     "Speaker diarization failed (%s); the transcription itself succeeded but "
                     "is not answered without its speakers. Retry, or ask without diarization.",
                     wd_strerror(rc));
}

/* Worker thread: the job ended. */
static void on_done(void *ud, int rc, wd_transcript_t *tr) {
  wd_transcription_t *t = ud;
  pthread_mutex_lock(&t->mu);
  t->done = 1;
  /* The diarization, if still running, leaves the in-flight list, and
   * holds the upload's place in the audio budget from here. */
  const int last = !t->diar_pending;
  if (t->diar_pending) {
    t->diar_holds = 1;
    wd__server_diar_hold(t->s, t->audio_s);
  }
  t->rc = rc;
  if (rc == 0 && tr) {
    /* Take the contents; the struct itself stays the worker's. */
    t->result = *tr;
    memset(tr, 0, sizeof *tr);
  }
  /* A diarized stream's events come once the diarization has ended too
   * (diar_stream_locked, from the SSE reader). */
  if (t->stream && !(t->diarize && rc == 0)) {
    if (rc == 0)
      ev_done_locked(t);
    else
      ev_error_locked(t, rc);
    t->ev_finished = 1;
    wd_transcript_free(&t->result);
  }
  if (!t->decoding && ready_locked(t))
    resume_locked(t);
  pthread_mutex_unlock(&t->mu);
  if (last)
    live_remove(t);
  tr_unref(t);
}

/* The diarized segments of a finished request and their labels (known
 * speakers' names where their references matched, letters otherwise).
 * *labels gets d->n_speakers malloc'd strings in a malloc'd array. Any
 * thread, once ready_locked holds (nothing writes result or diar then). */
static int diar_prepare(wd_transcription_t *t, wd_diar_segs_t *d, char ***ret_labels) {
  *ret_labels = NULL;
  int rc = wd_diar_assign(&t->result, &t->diar, d);
  if (rc < 0)
    return rc;
  int *known = NULL;
  const int n_spk = t->diar.n_speakers;
  if (t->n_known > 0 && n_spk > 0) {
    if (!(known = malloc((size_t)n_spk * sizeof *known))) {
      wd_diar_segs_free(d);
      return WD_ENOMEM;
    }
    wd_diar_match_known(t->diar.centroids, n_spk, &t->known_emb[0][0], t->n_known,
                        WD_DIAR_KNOWN_MIN_COS, known);
  }
  char **labels = calloc((size_t)d->n_speakers + 1, sizeof *labels);
  rc = labels ? wd_diar_labels(d, known, (const char *const *)t->req.known_names, labels)
              : WD_ENOMEM;
  free(known);
  if (rc < 0) {
    free(labels);
    wd_diar_segs_free(d);
    return rc;
  }
  *ret_labels = labels;
  return 0;
}

static void diar_labels_release(char **labels, int n) {
  wd_diar_labels_free(labels, n);
  free(labels);
}

/* A diarized stream, both halves ended: a transcript.text.segment event
 * per diarized segment in time order, then transcript.text.done (or the
 * error event). Under t->mu (the SSE reader's). */
static void diar_stream_locked(wd_transcription_t *t) {
  int rc = t->diar_rc;
  if (rc == 0) {
    wd_diar_segs_t d;
    char **labels = NULL;
    rc = diar_prepare(t, &d, &labels);
    if (rc == 0) {
      for (int i = 0; i < d.n_segs; i++)
        ev_segment(t, d.segs[i].start, d.segs[i].end, d.segs[i].text,
                   labels[d.segs[i].speaker]);
      diar_labels_release(labels, d.n_speakers);
      wd_diar_segs_free(&d);
    }
  }
  if (rc == 0) {
    ev_done_locked(t);
  } else {
    wd_api_error_t e;
    diar_error(t, rc, &e);
    ev_error_event_locked(t, &e);
  }
  t->ev_finished = 1;
  wd_transcript_free(&t->result);
}

/* The transcript as the response, or the job's error. */
static enum MHD_Result answer_result(wd_transcription_t *t, int rc) {
  wd_server_t *s = t->s;
  if (rc < 0) {
    wd_api_error_t e;
    wd_api_error_from_job(&e, rc, 0, s->o.job_timeout_s, wd__server_retry_after(t->m));
    if (rc != WD_ECANCELED)
      wd_log_warning("api: transcription failed: %s (%s)", wd_strerror(rc), wd_err_name(rc));
    return answer_error(t, &e);
  }
  /* OpenAI's translations report the output language. */
  if (t->task == WD_REQUEST_TRANSLATE)
    snprintf(t->result.language, sizeof t->result.language, "en");
  char *text = NULL;
  const char *task = t->task == WD_REQUEST_TRANSLATE ? "translate" : "transcribe";
  if (t->diarize) {
    pthread_mutex_lock(&t->mu); /* ready: nothing writes these now; the lock for the reader */
    const int drc = t->diar_rc;
    pthread_mutex_unlock(&t->mu);
    if (drc < 0) {
      wd_transcript_free(&t->result);
      wd_api_error_t e;
      diar_error(t, drc, &e);
      return answer_error(t, &e); /* diar_task logged why */
    }
  }
  wd_diar_segs_t d = { 0 };
  char **labels = NULL;
  int r = t->diarize ? diar_prepare(t, &d, &labels) : 0;
  if (r == 0)
    r = t->diarize ? wd_render_diarized(&t->result, &d, (const char *const *)labels, t->format,
                                        task, &text)
      : t->logprobs ? wd_render_with_logprobs(&t->result, t->format, task, t->verbose_parts,
                                            t->m->tok, &text)
      : t->format == WD_FMT_VERBOSE_JSON
          ? wd_render_verbose_json(&t->result, task, t->verbose_parts, &text)
          : wd_render(&t->result, t->format, task, &text);
  if (labels)
    diar_labels_release(labels, d.n_speakers);
  wd_diar_segs_free(&d);
  wd_transcript_free(&t->result);
  if (r < 0) {
    wd_api_error_t e;
    wd_api_error_set(&e, 500, NULL, NULL, "Rendering the transcript failed (%s).",
                     wd_strerror(r));
    return answer_error(t, &e);
  }
  /* OpenAI answers text, srt and vtt all as text/plain; charset=utf-8
   * (seen from api.openai.com, 2025-09-30); the SDKs that read these
   * formats as strings expect exactly that. */
  const char *ctype = "application/json";
  if (t->format == WD_FMT_TEXT || t->format == WD_FMT_SRT || t->format == WD_FMT_VTT)
    ctype = "text/plain; charset=utf-8";
  t->phase = PH_ANSWERED;
  t->status = 200;
  return wd_response_body(t->conn, 200, ctype, text, strlen(text));
}

/* The SSE reader: MHD thread, with the response's lock held by MHD. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  wd_transcription_t *t = cls;
  pthread_mutex_lock(&t->mu);
  if (t->ev_off < t->ev_len) {
    size_t n = t->ev_len - t->ev_off;
    if (n > max)
      n = max;
    memcpy(buf, t->ev + t->ev_off, n);
    t->ev_off += n;
    if (t->ev_off == t->ev_len)
      t->ev_off = t->ev_len = 0;
    pthread_mutex_unlock(&t->mu);
    return (ssize_t)n;
  }
  if (!t->ev_finished && t->diarize && t->done && t->rc == 0 && ready_locked(t)) {
    /* Both halves of a diarized stream ended: its events, then read on. */
    diar_stream_locked(t);
    pthread_mutex_unlock(&t->mu);
    return sse_read(cls, pos, buf, max);
  }
  if (t->ev_finished) {
    pthread_mutex_unlock(&t->mu);
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  /* Nothing to send yet: wait for the worker (returning 0 without
   * suspending would make MHD spin). */
  suspend_locked(t);
  pthread_mutex_unlock(&t->mu);
  return 0;
}

static enum MHD_Result start_stream(wd_transcription_t *t) {
  struct MHD_Response *r =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, t, NULL);
  if (!r)
    return MHD_NO;
  wd_response_common_headers(r);
  MHD_add_response_header(r, "Content-Type", "text/event-stream");
  MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* proxies: do not buffer */
  t->phase = PH_STREAMING;
  t->status = 200;
  const enum MHD_Result ret = MHD_queue_response(t->conn, 200, r);
  MHD_destroy_response(r);
  return ret;
}

/* Hands the decoded audio to the worker (which computes its log-mel here,
 * on the calling decode thread); takes ownership of pcm. 0 or the
 * worker's refusal. */
static int submit_job(wd_transcription_t *t, int16_t *pcm, size_t n) {
  wd_server_t *s = t->s;
  const wd_request_t *req = &t->req;
  wd_job_params_t p = { 0 };
  if (t->m->decode)
    p.decode = *t->m->decode;
  else
    wd_decode_opts_default(&p.decode);
  /* temperature 0 (or none): the configured schedule; T > 0: from T up. */
  if (req->has_temperature && req->temperature > 0)
    (void)wd_decode_set_temperature(&p.decode, (float)req->temperature, p.decode.temperature_inc);
  /* English-only models take no language token at all. */
  p.decode.language = t->m->multilingual ? req->language : NULL;
  p.decode.translate = t->task == WD_REQUEST_TRANSLATE;
  p.decode.prompt = t->prompt;
  p.decode.n_prompt = t->n_prompt;
  /* Diarization cuts segments where their words change speaker. */
  p.decode.word_timestamps = req->timestamps_word || t->diarize;
  p.timeout_s = s->o.job_timeout_s;
  p.cb.ud = t;
  p.cb.on_done = on_done;
  /* A diarized stream sends its segments once they are attributed. */
  p.cb.on_segment = t->stream && !t->diarize ? on_segment : NULL;

  /* The job's reference and the in-flight entry exist before submit:
   * on_done may run before submit returns. */
  atomic_fetch_add(&t->refs, 1);
  pthread_mutex_lock(&s->mu);
  t->live_prev = NULL;
  t->live_next = s->live;
  if (s->live)
    s->live->live_prev = t;
  s->live = t;
  t->in_live = 1;
  s->n_jobs++;
  pthread_mutex_unlock(&s->mu);

  /* chunking_strategy (or the server's --vad): only the speech is decoded,
   * server_vad's members in place of the server's settings. */
  wd_vad_params_t vp;
  wd_vad_params_default(&vp);
  if (t->m->vad_params)
    vp = *t->m->vad_params;
  const wd_vad_model_t *vad = t->m->vad_default ? t->m->vad : NULL;
  /* A diarized request without chunking_strategy is taken as "auto" (as
   * OpenAI's diarizing model asks for it), when the server has a VAD. */
  const int chunked = req->chunking.set || (t->diarize && t->m->vad);
  if (chunked)
    vad = t->m->vad;
  if (req->chunking.set) {
    vad = t->m->vad;
    if (!req->chunking.is_auto) {
      vp.threshold = (float)req->chunking.threshold;
      vp.neg_threshold = -1.0f;
      vp.speech_pad_ms = req->chunking.prefix_padding_ms;
      vp.min_silence_ms = req->chunking.silence_duration_ms;
    }
  }
  uint64_t id = 0;
  /* chunking_strategy: the speech in chunks of up to 30 s, decoded side by
   * side (chunk_job.h); --vad alone: the sequential filter (vad_job.h). */
  const int rc = chunked ? wd_chunk_submit(t->m->workers, vad, &vp, pcm, n, &p, &id)
                                   : wd_vad_submit(t->m->workers, vad, &vp, pcm, n, &p, &id);
  if (rc < 0) {
    live_remove(t);
    atomic_fetch_sub(&t->refs, 1); /* the task's reference remains */
    return rc;
  }
  pthread_mutex_lock(&s->mu);
  if (t->in_live)
    t->live_job_id = id;
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&t->mu);
  t->job_id = id;
  pthread_mutex_unlock(&t->mu);
  return 0;
}

/* MHD thread, the job submitted (or refused): answer the refusal, start
 * the stream, answer a job that already ended, or wait for on_done. */
static enum MHD_Result after_submit(wd_transcription_t *t, int rc) {
  wd_server_t *s = t->s;
  if (rc < 0) {
    wd_api_error_t e;
    wd_api_error_from_job(&e, rc, 1, s->o.job_timeout_s, wd__server_retry_after(t->m));
    if (rc == WD_EBUSY)
      wd_log_warning("api: job queue overflow, answering 429 (retry after %d s)",
                     e.retry_after_s);
    return answer_error(t, &e);
  }
  pthread_mutex_lock(&t->mu);
  if (t->stream) {
    pthread_mutex_unlock(&t->mu);
    return start_stream(t);
  }
  if (ready_locked(t)) {
    /* The worker (and the diarization) finished first: answer now, never
     * suspend. */
    const int jrc = t->rc;
    pthread_mutex_unlock(&t->mu);
    return answer_result(t, jrc);
  }
  suspend_locked(t);
  t->phase = PH_WAITING;
  pthread_mutex_unlock(&t->mu);
  return MHD_YES;
}

/* Whether the audio budget, with the workers' jobs (st) and the
 * diarizations that outlive theirs (see the header comment), has room for
 * seconds more; seconds 0: any room at all. As the worker's own rule,
 * holding nothing admits any length (one request is bounded by
 * max_audio_s). The workers' own room is theirs to tell. */
static int diar_room(const wd_transcription_t *t, const wd_worker_stats_t *st, double seconds) {
  const double diar_s = wd__server_diar_held_s(t->s);
  if (diar_s <= 0 || st->audio_budget_s <= 0)
    return 1;
  const double held_s = st->audio_held_s + diar_s;
  return seconds > 0 ? held_s + seconds <= st->audio_budget_s : held_s < st->audio_budget_s;
}

/* The length a file's header declares, before its audio is decoded: no
 * room for that much audio is a 429 that costs no decoding. */
static int decode_room(void *ud, double seconds) {
  const wd_transcription_t *t = ud;
  if (!wd_workers_has_room(t->m->workers, seconds))
    return WD_EBUSY;
  if (wd__server_diar_held_s(t->s) <= 0)
    return 0;
  wd_worker_stats_t st;
  wd_workers_stats(t->m->workers, &st);
  return diar_room(t, &st, seconds) ? 0 : WD_EBUSY;
}

/* The diarization's stop test, polled between its windows: the client
 * left (seen by MHD or by the watcher), the transcription failed (or was
 * cancelled), the job's deadline passed, or the server's drain deadline
 * did. */
static int diar_should_stop(void *ud) {
  wd_transcription_t *t = ud;
  const double limit_s = t->s->o.job_timeout_s;
  if (limit_s > 0 && wd_now_s() - t->t_start > limit_s)
    return 1;
  if (wd__server_draining_past(t->s) || atomic_load(&t->hung_up))
    return 1;
  pthread_mutex_lock(&t->mu);
  const int stop = t->conn_gone || (t->done && t->rc < 0);
  pthread_mutex_unlock(&t->mu);
  return stop;
}

/* A decode thread: the request's diarization and its known speakers'
 * embeddings, beside its transcription on the worker. Holds a reference
 * to t. */
static void diar_task(void *arg) {
  wd_transcription_t *t = arg;
  wd_diar_result_t r = { 0 };
  float emb[WD_DIAR_MAX_KNOWN][WD_DIAR_EMB_DIM];
  const double t0 = wd_now_s();
  wd__server_diar_begun(t->s);
  int rc = t->diar_refused ? t->diar_refused
                           : wd_diar_run(t->m->diar, t->diar_pcm, t->diar_n, t->m->diar_params,
                                         diar_should_stop, t, &r);
  for (int k = 0; k < t->n_known && rc == 0; k++)
    rc = wd_diar_embed_clip(t->m->diar, t->known_pcm[k], t->known_n[k], emb[k]);
  /* Stopped by the job's deadline: the 504 a job past it gets; by the
   * drain's: the 503 of a job the drain cancels (core/worker.h). */
  const double limit_s = t->s->o.job_timeout_s;
  if (rc == WD_ECANCELED && limit_s > 0 && wd_now_s() - t->t_start > limit_s)
    rc = WD_ETIMEDOUT;
  else if (rc == WD_ECANCELED && wd__server_draining_past(t->s))
    rc = WD_ESHUTDOWN;
  const double took_s = wd_now_s() - t0;
  free(t->diar_pcm);
  t->diar_pcm = NULL;
  for (int k = 0; k < t->n_known; k++) {
    free(t->known_pcm[k]);
    t->known_pcm[k] = NULL;
  }
  if (rc == 0)
    wd_log_debug("api: diarized %.1f s of audio in %.0f ms: %d speakers, %zu turns",
                 (double)t->diar_n / WD_AUDIO_SAMPLE_RATE, took_s * 1e3, r.n_speakers,
                 r.n_turns);
  else if (rc == WD_ECANCELED || rc == WD_ESHUTDOWN)
    wd_log_info("api: diarization of %.1f s of audio stopped after %.1f s (%s)",
                (double)t->diar_n / WD_AUDIO_SAMPLE_RATE, took_s,
                rc == WD_ESHUTDOWN ? "the drain's deadline" : "its request ended");
  else
    wd_log_warning("api: diarization of %.1f s of audio failed after %.1f s: %s (%s)",
                   (double)t->diar_n / WD_AUDIO_SAMPLE_RATE, took_s, wd_strerror(rc),
                   wd_err_name(rc));
  wd__server_diar_ended(t->s, rc);
  pthread_mutex_lock(&t->mu);
  t->diar_rc = rc;
  if (rc == 0) {
    t->diar = r;
    memcpy(t->known_emb, emb, sizeof emb);
  } else {
    wd_diar_result_free(&r);
  }
  t->diar_pending = 0;
  const int last = t->done; /* the job ended: the request leaves the list here */
  if (t->diar_holds) {
    t->diar_holds = 0;
    wd__server_diar_hold(t->s, -t->audio_s);
  }
  if (!t->decoding && ready_locked(t))
    resume_locked(t);
  pthread_mutex_unlock(&t->mu);
  if (last)
    live_remove(t);
  tr_unref(t);
}

/* Decode thread, a diarized request: its samples as floats for the
 * diarization, and each known speaker's reference decoded and checked
 * (1.2 to 10 s of audio, else t->diar_err). 0, or WD_EINVAL with
 * t->diar_err set, or WD_ENOMEM. */
static int diar_prepare_audio(wd_transcription_t *t, const int16_t *pcm, size_t n) {
  wd_server_t *s = t->s;
  for (int k = 0; k < t->req.n_known; k++) {
    const wd_audio_opts_t o = { .max_seconds = 60, .timeout_s = s->o.decode_timeout_s };
    int16_t *ref = NULL;
    size_t rn = 0;
    char msg[256] = "";
    const int rc = wd_audio_decode(t->req.known_refs[k], t->req.known_ref_lens[k], &o, &ref, &rn,
                                   msg, sizeof msg);
    free(t->req.known_refs[k]); /* the bytes are no longer needed */
    t->req.known_refs[k] = NULL;
    const double secs = (double)rn / WD_AUDIO_SAMPLE_RATE;
    if (rc == WD_ENOMEM) {
      free(ref);
      return WD_ENOMEM;
    }
    if (rc < 0 || secs < WD_REQUEST_KNOWN_MIN_S || secs > WD_REQUEST_KNOWN_MAX_S) {
      free(ref);
      t->has_diar_err = 1;
      if (rc < 0 && rc != WD_ETOOBIG)
        wd_api_error_set(&t->diar_err, 400, "known_speaker_references", "invalid_value",
                         "Invalid 'known_speaker_references[%d]': the audio could not be "
                         "decoded (%.200s).", k, msg[0] ? msg : wd_strerror(rc));
      else
        wd_api_error_set(&t->diar_err, 400, "known_speaker_references", "invalid_value",
                         "Invalid 'known_speaker_references[%d]': each reference must be "
                         "between %.1f and %.0f seconds of audio; this one is %s%.2f s.", k,
                         WD_REQUEST_KNOWN_MIN_S, WD_REQUEST_KNOWN_MAX_S,
                         rc == WD_ETOOBIG ? "over " : "", rc == WD_ETOOBIG ? 60.0 : secs);
      return WD_EINVAL;
    }
    float *f = malloc(rn * sizeof *f);
    if (!f) {
      free(ref);
      return WD_ENOMEM;
    }
    for (size_t i = 0; i < rn; i++)
      f[i] = (float)ref[i] / 32768.0f;
    free(ref);
    t->known_pcm[k] = f;
    t->known_n[k] = rn;
    t->n_known = k + 1;
  }
  if (!(t->diar_pcm = malloc(n * sizeof *t->diar_pcm)))
    return WD_ENOMEM;
  /* As openai/whisper's load_audio scales s16 (and the VAD reads it). */
  for (size_t i = 0; i < n; i++)
    t->diar_pcm[i] = (float)pcm[i] / 32768.0f;
  t->diar_n = n;
  return 0;
}

/* A decode thread: the upload to samples, then back to the MHD thread.
 * Until it resumes the connection, only this thread touches t's body,
 * form and request. */
static void decode_task(void *arg) {
  wd_transcription_t *t = arg;
  wd_server_t *s = t->s;
  const wd_audio_opts_t aopts = {
    .max_seconds = (uint32_t)(s->o.max_audio_s > 0 ? s->o.max_audio_s : 0),
    .on_length = decode_room,
    .ud = t,
    .timeout_s = s->o.decode_timeout_s,
  };
  int16_t *pcm = NULL;
  size_t n = 0;
  char msg[sizeof t->decode_msg] = "";
  const int rc = wd_audio_decode(t->req.file, t->req.file_len, &aopts, &pcm, &n, msg, sizeof msg);
  /* The upload is no longer needed: a waiting request should not hold it. */
  t->req.file = NULL;
  t->req.file_len = 0;
  wd_multipart_free(t->form);
  t->form = NULL;
  free(t->body);
  t->body = NULL;
  t->len = t->cap = 0;
  /* The job goes in from here too: the pass over its log-mel for the max
   * (a twentieth of a second per 10 minutes of audio) runs inside the
   * submit, and must not run on the HTTP thread either. Audio under 0.1 s
   * is refused by the MHD thread. */
  int submit_rc = 0, submitted = 0;
  /* From here the job counts in the worker's queue, not as a decode (the
   * task itself may stay on the thread a little longer). */
  atomic_fetch_sub(&t->s->n_decoding, 1);
  int diar_go = 0;
  if (rc == 0 && n >= WD_AUDIO_SAMPLE_RATE / 10) {
    t->audio_s = (double)n / WD_AUDIO_SAMPLE_RATE;
    const int prc = t->diarize ? diar_prepare_audio(t, pcm, n) : 0;
    if (prc == 0) {
      /* Pending before the submit: on_done may run before it returns. */
      pthread_mutex_lock(&t->mu);
      t->diar_pending = t->diarize;
      pthread_mutex_unlock(&t->mu);
      submit_rc = submit_job(t, pcm, n);
      pcm = NULL;
      submitted = 1;
      diar_go = t->diarize && submit_rc == 0;
    } else if (prc == WD_ENOMEM && !t->has_diar_err) {
      t->has_diar_err = 1;
      wd_api_error_set(&t->diar_err, 500, NULL, NULL, "The server ran out of memory.");
    }
  }
  pthread_mutex_lock(&t->mu);
  t->decoded = 1;
  t->decoding = 0;
  t->decode_rc = rc;
  t->submit_rc = submitted ? submit_rc : 1; /* 1: not submitted */
  if (!diar_go)
    t->diar_pending = 0;
  free(pcm); /* not submitted */
  t->n_pcm = n;
  memcpy(t->decode_msg, msg, sizeof msg);
  resume_locked(t);
  pthread_mutex_unlock(&t->mu);
  if (diar_go) {
    /* Its own task on the diarization threads, beside the transcription.
     * Their queue holds one per connection, so a refusal means the server
     * is stopping: the task then ends here at once with that answer. */
    atomic_fetch_add(&t->refs, 1);
    wd__server_diar_started(s);
    const int prc = wd_taskq_push(s->diarizers, diar_task, t);
    if (prc < 0) {
      t->diar_refused = prc == WD_EBUSY ? WD_EBUSY : WD_ESHUTDOWN;
      diar_task(t);
    }
  }
  tr_unref(t);
}

/* The table's callback, from the thread that changed the model's slot:
 * the parked request looks again (PH_MODEL_WAIT). */
static void on_model_changed(void *ud) {
  wd_transcription_t *t = ud;
  pthread_mutex_lock(&t->mu);
  resume_locked(t);
  pthread_mutex_unlock(&t->mu);
  tr_unref(t);
}

/* The request's model (slot) is loading: the request is parked in the
 * served-model table (served.h), its connection suspended and no thread
 * held, until the slot changes (loaded, failed, refused, or the server
 * stopping); it then takes its body from the top again. Its record goes meanwhile. gen: the slot's
 * count read before its record was looked at. Parking and suspending
 * share t->mu, so the callback's resume always follows the suspend. */
static enum MHD_Result wait_for_model(wd_transcription_t *t, int slot, unsigned gen) {
  wd_server_t *s = t->s;
  const char *label = t->m->label ? t->m->label : "?";
  t->n_model_waits++;
  t->waiter = (wd_model_waiter_t){ .cb = on_model_changed, .ud = t };
  atomic_fetch_add(&t->refs, 1); /* the waiter's */
  pthread_mutex_lock(&t->mu);
  const int rc = wd_served_wait(&s->served, slot, gen, t->rec, &t->waiter);
  if (rc == 0) {
    suspend_locked(t);
    t->phase = PH_MODEL_WAIT;
  }
  pthread_mutex_unlock(&t->mu);
  if (rc == 0)
    wd_log_info("api: waiting for model %s to load", label);
  wd_served_release(t->rec);
  t->rec = NULL;
  t->m = NULL;
  if (rc == 0)
    return MHD_YES;
  atomic_fetch_sub(&t->refs, 1); /* not parked: the waiter's reference back */
  if (rc > 0) /* the slot changed meanwhile: look again now */
    return on_body_complete(t);
  wd_api_error_t e;
  wd_api_error_from_job(&e, WD_ESHUTDOWN, 1, s->o.job_timeout_s, 5);
  return answer_error(t, &e);
}

/* The whole body is here: form, validation, audio, job. */
static enum MHD_Result on_body_complete(wd_transcription_t *t) {
  wd_server_t *s = t->s;
  wd_api_error_t e;
  /* Answered mid-body and the rest arrived within the linger: done. */
  if (t->answered_early)
    return MHD_NO;
  char msg[256] = "";
  wd_multipart_t *form = NULL;
  int rc = wd_multipart_parse(t->content_type, t->body ? (const void *)t->body : "", t->len, &form,
                              msg, sizeof msg);
  if (rc < 0) {
    if (rc == WD_ENOMEM)
      wd_api_error_set(&e, 500, NULL, NULL, "The server ran out of memory.");
    else
      wd_api_error_set(&e, 400, NULL, "invalid_multipart", "Malformed multipart body: %s", msg);
    return answer_error(t, &e);
  }
  /* The request's `model` picks one of the attached models, which stays
   * with it (a SIGHUP reload after this point is for the next request). */
  wd_served_t *recs[WD_SERVER_MAX_MODELS];
  const int n_models = wd_served_snapshot(&s->served, recs);
  wd_request_model_t ms[WD_SERVER_MAX_MODELS];
  for (int i = 0; i < n_models; i++)
    ms[i] = (wd_request_model_t){ recs[i]->m.names, recs[i]->m.n_names,
                                  recs[i]->m.multilingual, recs[i]->n_langs,
                                  recs[i]->m.no_translate };
  wd_request_t req;
  rc = wd_request_parse_in(form, t->task, ms, n_models, &req, &e);
  for (int i = 0; i < n_models; i++)
    if (rc != 0 || i != req.model_idx)
      wd_served_release(recs[i]);
  if (rc != 0) {
    wd_multipart_free(form);
    return answer_error(t, &e);
  }
  t->rec = recs[req.model_idx];
  t->m = &t->rec->m;
  if (!t->m->workers) {
    /* loaded on demand: ask for it; park until its load ends (no thread
     * held), then this runs again; a failed or refused load is answered
     * at once. The slot's count goes first: a change after it, however
     * early, unparks (or never parks) the request. */
    const int slot = req.model_idx;
    const unsigned gen = wd_served_gen(&s->served, slot);
    const int wait = t->m->on_demand ? t->m->on_demand(t->m->demand_ud) : WD_EBUSY;
    wd_request_clear(&req);
    wd_multipart_free(form);
    if (wait >= 0 && t->n_model_waits < WD_MODEL_WAITS_MAX)
      return wait_for_model(t, slot, gen);
    if (wait == WD_EBUSY)
      wd_api_error_set(&e, 503, "model", "model_over_memory_budget",
                       "The model `%.200s` is not loaded, and loading it would pass the server's "
                       "memory budget while its other models are in use; retry later.",
                       t->m->label ? t->m->label : "?");
    else if (wait < 0)
      wd_api_error_set(&e, 503, "model", "model_load_failed",
                       "The model `%.200s` could not be loaded: %.400s", t->m->label ? t->m->label : "?",
                       t->m->load_error ? t->m->load_error : wd_strerror(wait));
    else
      wd_api_error_set(&e, 503, "model", "model_loading",
                       "The model `%.200s` is being loaded; retry in a few seconds.",
                       t->m->label ? t->m->label : "?");
    e.retry_after_s = wait > 0 ? wait : 10;
    return answer_error(t, &e);
  }
  if (req.chunking.set && !t->m->vad) {
    wd_request_clear(&req);
    wd_multipart_free(form);
    wd_api_error_set(&e, 400, "chunking_strategy", "unsupported_value",
                     "chunking_strategy needs voice activity detection, and this server has no "
                     "Silero VAD model (its operator can fetch one with scripts/fetch-vad.sh).");
    return answer_error(t, &e);
  }
  if (req.diarize && !t->m->diar) {
    const int fmt = req.format == WD_FMT_DIARIZED_JSON;
    const int alias = strcmp(req.model, WD_REQUEST_DIARIZE_MODEL) == 0;
    wd_request_clear(&req);
    wd_multipart_free(form);
    wd_api_error_set(&e, 400, fmt ? "response_format" : alias ? "model" : "diarize",
                     "diarization_unavailable",
                     "Speaker diarization needs its two models, and this server has none "
                     "(its operator can fetch them with scripts/fetch-diarization.sh).");
    return answer_error(t, &e);
  }
  t->diarize = req.diarize;
  t->format = req.format;
  /* OpenAI: segments unless only words were asked for; words when asked. */
  t->verbose_parts = (req.timestamps_segment || !req.timestamps_word ? WD_RENDER_SEGMENTS : 0u) |
                     (req.timestamps_word ? WD_RENDER_WORDS : 0u);
  t->stream = req.stream;
  /* Opt-in: segment events only for a stream that asked for segment
   * timestamps, so that other clients see OpenAI's events alone. */
  t->segment_events = req.stream && req.timestamps_segment;
  t->logprobs = req.logprobs;
  int32_t *prompt = NULL;
  int n_prompt = 0;
  if ((rc = wd_request_prompt_tokens(&req, t->m->tok, &prompt, &n_prompt)) < 0) {
    wd_request_clear(&req);
    wd_multipart_free(form);
    wd_api_error_set(&e, rc == WD_ENOMEM ? 500 : 400, "prompt", NULL,
                     "The prompt could not be tokenized (%s).", wd_strerror(rc));
    return answer_error(t, &e);
  }
  /* Room first: a job that could not be queued is refused before its
   * audio costs anything. Uploads being decoded count as queued jobs; as
   * in the worker's own check, jobs bound for free run slots do not. */
  wd_worker_stats_t st;
  wd_workers_stats(t->m->workers, &st);
  const int free_run = st.max_batch > st.running ? st.max_batch - st.running : 0;
  if (st.queued + atomic_load(&s->n_decoding) >= st.queue_max + free_run ||
      (st.audio_budget_s > 0 && st.audio_held_s >= st.audio_budget_s) || !diar_room(t, &st, 0)) {
    wd_request_clear(&req);
    wd_multipart_free(form);
    free(prompt);
    wd_api_error_from_job(&e, WD_EBUSY, 1, s->o.job_timeout_s, wd__server_retry_after(t->m));
    wd_log_warning("api: job queue full, answering 429 before decoding (retry after %d s)",
                   e.retry_after_s);
    return answer_error(t, &e);
  }
  t->form = form;
  t->req = req;
  t->has_req = 1;
  t->prompt = prompt;
  t->n_prompt = n_prompt;
  /* The task's reference; see the header comment for why the push and the
   * suspend share t->mu. */
  atomic_fetch_add(&t->refs, 1);
  pthread_mutex_lock(&t->mu);
  t->decoding = 1;
  atomic_fetch_add(&s->n_decoding, 1);
  rc = wd_taskq_push(s->decoders, decode_task, t);
  if (rc < 0) {
    t->decoding = 0;
    atomic_fetch_sub(&s->n_decoding, 1);
    pthread_mutex_unlock(&t->mu);
    atomic_fetch_sub(&t->refs, 1);
    wd_api_error_from_job(&e, rc == WD_EBUSY ? WD_EBUSY : WD_ESHUTDOWN, 1, s->o.job_timeout_s,
                          wd__server_retry_after(t->m));
    return answer_error(t, &e);
  }
  suspend_locked(t);
  t->phase = PH_DECODING;
  pthread_mutex_unlock(&t->mu);
  return MHD_YES;
}

/* Resumed by decode_task: refuse what did not decode, else answer its
 * submit. */
static enum MHD_Result on_decoded(wd_transcription_t *t) {
  wd_server_t *s = t->s;
  wd_api_error_t e;
  pthread_mutex_lock(&t->mu);
  const int decoded = t->decoded, rc = t->decode_rc, submit_rc = t->submit_rc;
  const size_t n = t->n_pcm;
  pthread_mutex_unlock(&t->mu);
  if (!decoded) {
    wd_log_error("api: decoding request resumed without a result");
    return MHD_NO;
  }
  if (rc == WD_EBUSY) { /* decode_room: the header declared too much */
    wd_api_error_from_job(&e, rc, 1, s->o.job_timeout_s, wd__server_retry_after(t->m));
    wd_log_warning("api: %s (the file's header says), answering 429 before decoding (retry "
                   "after %d s)", t->decode_msg, e.retry_after_s);
    return answer_error(t, &e);
  }
  if (rc < 0) {
    wd_api_error_from_audio(&e, rc, t->decode_msg, s->o.max_audio_s);
    return answer_error(t, &e);
  }
  if (t->has_diar_err) /* a known speaker's reference refused: nothing submitted */
    return answer_error(t, &t->diar_err);
  if (submit_rc > 0) { /* not submitted: what decoding gives, not what a header says */
    t->audio_s = (double)n / WD_AUDIO_SAMPLE_RATE;
    wd_api_error_set(&e, 400, "file", "audio_too_short",
                     "Audio file is too short. Minimum audio length is 0.1 seconds.");
    return answer_error(t, &e);
  }
  return after_submit(t, submit_rc);
}

enum MHD_Result wd_transcription_handle(wd_transcription_t *t, const char *data, size_t *size,
                                        int first) {
  if (first)
    return on_headers(t);
  switch (t->phase) {
  case PH_RECEIVING:
    if (*size > 0) {
      const size_t n = *size;
      *size = 0;
      return on_data(t, data, n);
    }
    return on_body_complete(t);
  case PH_MODEL_WAIT: /* resumed by on_model_changed: the body from the top */
    if (wd_served_unwait(&t->s->served, &t->waiter)) /* resumed otherwise: cannot happen */
      tr_unref(t);
    t->phase = PH_RECEIVING;
    if (atomic_load(&t->s->quiescing)) {
      wd_api_error_t e;
      wd_api_error_from_job(&e, WD_ESHUTDOWN, 1, 0, 5);
      return answer_error(t, &e);
    }
    return on_body_complete(t);
  case PH_DECODING:
    return on_decoded(t);
  case PH_WAITING: {
    /* Resumed by on_done (or the diarization's end). */
    pthread_mutex_lock(&t->mu);
    const int done = ready_locked(t), rc = t->rc;
    pthread_mutex_unlock(&t->mu);
    if (!done) {
      /* Cannot happen: only a ready request is resumed while waiting. */
      wd_log_error("api: waiting request resumed without a result");
      return MHD_NO;
    }
    return answer_result(t, rc);
  }
  default:
    *size = 0;
    return MHD_YES;
  }
}

int wd_transcription_completed(wd_transcription_t *t, double *ret_audio_s) {
  pthread_mutex_lock(&t->mu);
  t->conn_gone = 1;
  const uint64_t cancel = t->job_id && !t->done ? t->job_id : 0;
  pthread_mutex_unlock(&t->mu);
  /* A streaming client that left mid-stream: its job is of no use now. */
  if (cancel)
    wd_chunk_cancel(t->m->workers, cancel);
  const int status = t->status;
  *ret_audio_s = t->audio_s;
  tr_unref(t);
  return status;
}

void wd_transcription_cancel_all(wd_server_t *s) {
  pthread_mutex_lock(&s->mu);
  int n = 0;
  for (const wd_transcription_t *t = s->live; t; t = t->live_next)
    n++;
  /* Each job with its model, referenced: its engines stay until cancelled. */
  struct live_job {
    uint64_t id;
    wd_served_t *rec;
  } *jobs = malloc((size_t)(n ? n : 1) * sizeof *jobs);
  int k = 0;
  for (const wd_transcription_t *t = s->live; jobs && t; t = t->live_next)
    if (t->live_job_id) {
      wd_served_ref(t->rec);
      jobs[k++] = (struct live_job){ t->live_job_id, t->rec };
    }
  pthread_mutex_unlock(&s->mu);
  /* Outside s->mu: the worker may call on_done, which takes it. */
  for (int i = 0; i < k; i++) {
    wd_chunk_cancel(jobs[i].rec->m.workers, jobs[i].id);
    wd_served_release(jobs[i].rec);
  }
  free(jobs);
}

int wd__transcription_hung_up(wd_server_t *s, uint64_t serial, uint64_t *ret_job,
                              wd_served_t **ret_rec) {
  int found = 0;
  pthread_mutex_lock(&s->mu);
  for (wd_transcription_t *t = s->live; t && !found; t = t->live_next)
    if (t->serial == serial) {
      atomic_store(&t->hung_up, 1); /* its diarization's stop test reads it */
      wd_served_ref(t->rec);
      *ret_job = t->live_job_id;
      *ret_rec = t->rec;
      found = 1;
    }
  pthread_mutex_unlock(&s->mu);
  return found;
}
