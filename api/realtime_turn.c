/*
 * realtime_turn.c - a Realtime session's turns (see realtime_internal.h):
 * a committed turn goes to its model's workers at once, or is held while
 * the model loads on demand; partial transcripts of the open turn in the
 * workers' idle time; the worker's callbacks, which only queue events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_error.h"
#include "clock.h"
#include "decode.h"
#include "error.h"
#include "log.h"
#include "realtime_internal.h"
#include "render.h"
#include "served.h"
#include "workers.h"

static void turn_end(turn_t *t) {
  session_t *se = t->se;
  pthread_mutex_lock(&se->mu);
  for (turn_t **pp = &se->turns; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  pthread_mutex_unlock(&se->mu);
  wd_served_release(t->rec);
  free(t);
  wd__rt_wake(se);
  wd__rt_session_unref(se);
}

/* A JSON string of model text: a character split between segments is
 * repaired as the HTTP answers repair it (jansson refuses invalid UTF-8,
 * and the event would be lost). */
static json_t *text_json(const char *s) {
  char *fixed = wd_render_utf8_dup(s ? s : "", s ? strlen(s) : 0);
  json_t *j = json_string(fixed ? fixed : "");
  free(fixed);
  return j;
}

/* Worker thread: a segment of the turn is final. */
static void turn_segment(void *ud, const wd_segment_t *seg, double done_s, double total_s) {
  (void)done_s, (void)total_s;
  turn_t *t = ud;
  if (t->partial)
    return;
  json_t *ev = json_pack("{s:s, s:s, s:i, s:o}", "type",
                         "conversation.item.input_audio_transcription.delta", "item_id", t->item,
                         "content_index", 0, "delta", text_json(seg->text));
  if (ev && t->logprobs)
    json_object_set_new(ev, "logprobs", wd_render_logprobs(seg, 1, t->rec->m.tok));
  wd__rt_send_event(t->se, ev);
}

/* Worker thread: the turn is transcribed, or failed. */
static void turn_done(void *ud, int rc, wd_transcript_t *tr) {
  turn_t *t = ud;
  session_t *se = t->se;
  wd_realtime_t *h = se->hub;
  if (t->partial) {
    if (rc == 0 && tr)
      wd__rt_send_event_if(se, json_pack("{s:s, s:s, s:i, s:o}", "type",
                                         "conversation.item.input_audio_transcription.partial",
                                         "item_id", t->item, "content_index", 0, "transcript",
                                         text_json(tr->text)),
                           t->item);
    pthread_mutex_lock(&se->mu);
    se->partial_busy = 0;
    pthread_mutex_unlock(&se->mu);
  } else if (rc == 0 && tr) {
    json_t *ev = json_pack("{s:s, s:s, s:i, s:o, s:{s:s, s:f}}", "type",
                           "conversation.item.input_audio_transcription.completed", "item_id",
                           t->item, "content_index", 0, "transcript", text_json(tr->text),
                           "usage", "type", "duration", "seconds", tr->duration);
    if (ev && t->logprobs)
      json_object_set_new(ev, "logprobs",
                          wd_render_logprobs(tr->segments, tr->n_segments, t->rec->m.tok));
    wd__rt_send_event(se, ev);
    atomic_fetch_add(&h->lat_us, (unsigned long long)((wd_now_s() - t->t_stop) * 1e6));
  } else {
    atomic_fetch_add(&h->turns_failed, 1);
    wd__rt_send_event(se, json_pack("{s:s, s:s, s:i, s:{s:s, s:s, s:s}}", "type",
                                    "conversation.item.input_audio_transcription.failed", "item_id",
                                    t->item, "content_index", 0, "error", "type",
                                    wd_err_openai_type(rc), "code", wd_err_name(rc), "message",
                                    wd_strerror(rc)));
  }
  if (tr)
    wd_transcript_free(tr);
  turn_end(t);
}

void wd__rt_held_free(held_t *hd) {
  if (hd) {
    free(hd->prompt);
    free(hd->pcm);
    free(hd);
  }
}

static void send_failed(session_t *se, const char *item, const char *type, const char *code,
                        const char *message) {
  atomic_fetch_add(&se->hub->turns_failed, 1);
  wd__rt_send_event(se, json_pack("{s:s, s:s, s:i, s:{s:s, s:s, s:s}}", "type",
                                  "conversation.item.input_audio_transcription.failed",
                                  "item_id", item, "content_index", 0, "error", "type", type,
                                  "code", code, "message", message));
}

/* A turn of a loaded model to its workers (rec referenced, now the
 * turn's); hd stays the caller's, but a committed turn's samples (its own
 * copy, made at the commit) go to the job as they are. partial: a partial
 * transcript of the open turn, which fails silently; its samples are the
 * session's, copied here. */
static void start_turn(session_t *se, held_t *hd, wd_served_t *rec, int partial) {
  turn_t *t = calloc(1, sizeof *t);
  int16_t *pcm = partial ? malloc(hd->n * sizeof *pcm) : hd->pcm;
  if (!t || !pcm) {
    free(t);
    if (partial)
      free(pcm);
    wd_served_release(rec);
    if (!partial)
      send_failed(se, hd->item, "server_error", "server_error", "Out of memory.");
    return;
  }
  if (partial)
    memcpy(pcm, hd->pcm, hd->n * sizeof *pcm);
  else
    hd->pcm = NULL; /* the job's now */
  *t = (turn_t){ .se = se, .rec = rec, .t_stop = hd->t_stop, .logprobs = hd->logprobs,
                 .partial = partial };
  snprintf(t->item, sizeof t->item, "%s", hd->item);
  wd_job_params_t p = { .timeout_s = se->hub->s->o.job_timeout_s,
                        .cb = { .ud = t, .on_segment = turn_segment, .on_done = turn_done } };
  if (rec->m.decode)
    p.decode = *rec->m.decode;
  else
    wd_decode_opts_default(&p.decode);
  p.decode.language = hd->language[0] ? hd->language : NULL;
  p.decode.word_timestamps = 0;
  int32_t *ids = NULL;
  int n_ids = 0;
  if (hd->prompt && wd_decode_encode_text(rec->m.tok, hd->prompt, &ids, &n_ids) == 0) {
    p.decode.prompt = ids;
    p.decode.n_prompt = n_ids;
  }
  pthread_mutex_lock(&se->mu);
  se->refs++;
  t->next = se->turns;
  se->turns = t;
  if (partial) {
    se->partial_busy = 1;
    snprintf(se->partial_item, sizeof se->partial_item, "%s", hd->item);
  }
  pthread_mutex_unlock(&se->mu);
  uint64_t id = 0;
  const int rc = wd_workers_submit(rec->m.workers, pcm, hd->n, &p, &id);
  free(ids);
  if (rc < 0) {
    /* never queued: its on_done will not come */
    wd_rt_error_t fe = { .code = wd_err_name(rc) };
    snprintf(fe.message, sizeof fe.message, "The turn could not be queued: %s.", wd_strerror(rc));
    if (partial) {
      pthread_mutex_lock(&se->mu);
      se->partial_busy = 0;
      pthread_mutex_unlock(&se->mu);
    } else {
      send_failed(se, hd->item, wd_err_openai_type(rc), fe.code, fe.message);
    }
    turn_end(t);
    return;
  }
  /* on_done may have run already (the turn is then gone): only a turn
   * still listed takes its id (turns are made on this thread alone, so no
   * other one can have its address meanwhile) */
  pthread_mutex_lock(&se->mu);
  for (turn_t *x = se->turns; x; x = x->next)
    if (x == t)
      x->job = id;
  pthread_mutex_unlock(&se->mu);
}


/* The slot of the served model called name, or -1. */
static int model_slot(session_t *se, const char *name) {
  wd_served_t *recs[WD_SERVER_MAX_MODELS];
  const int n = wd_served_snapshot(&se->hub->s->served, recs);
  int slot = -1;
  for (int k = 0; k < n; k++) {
    for (int i = 0; slot < 0 && i < recs[k]->m.n_names; i++)
      if (recs[k]->m.names[i] && strcmp(recs[k]->m.names[i], name) == 0)
        slot = k;
    wd_served_release(recs[k]);
  }
  return slot;
}

/* The served model called name, referenced: 1; 0 while it is loaded on
 * demand (the load asked for; *wait its on_demand answer, and e's message
 * the load's error when it failed; *ret_slot its slot, *ret_gen the slot's
 * change count read before its state was looked at, *ret_seen the record
 * looked at, not referenced: for wd_served_wait); -1 with e set
 * where there is none. */
static int find_model_at(session_t *se, const char *name, wd_served_t **ret, int *wait,
                         wd_rt_error_t *e, int *ret_slot, unsigned *ret_gen,
                         const wd_served_t **ret_seen) {
  const int slot = model_slot(se, name);
  const unsigned gen = slot >= 0 ? wd_served_gen(&se->hub->s->served, slot) : 0;
  wd_served_t *recs[WD_SERVER_MAX_MODELS], *got = NULL;
  const int n = wd_served_snapshot(&se->hub->s->served, recs);
  for (int k = 0; k < n; k++) {
    for (int i = 0; !got && i < recs[k]->m.n_names; i++)
      if (recs[k]->m.names[i] && strcmp(recs[k]->m.names[i], name) == 0)
        got = recs[k];
    if (got != recs[k])
      wd_served_release(recs[k]);
  }
  if (ret_slot)
    *ret_slot = slot, *ret_gen = gen, *ret_seen = got;
  *ret = NULL;
  if (!got) {
    *e = (wd_rt_error_t){ .code = "model_not_found",
                          .param = "session.audio.input.transcription.model" };
    snprintf(e->message, sizeof e->message, "The model `%.64s` does not exist here.", name);
    return -1;
  }
  if (!got->m.workers) {
    *wait = got->m.on_demand ? got->m.on_demand(got->m.demand_ud) : WD_EBUSY;
    if (*wait < 0 && *wait != WD_EBUSY)
      snprintf(e->message, sizeof e->message, "The model `%.32s` could not be loaded: %.180s",
               name, got->m.load_error ? got->m.load_error : wd_strerror(*wait));
    wd_served_release(got);
    return 0;
  }
  *ret = got;
  return 1;
}

static int find_model(session_t *se, const char *name, wd_served_t **ret, int *wait,
                      wd_rt_error_t *e) {
  return find_model_at(se, name, ret, wait, e, NULL, NULL, NULL);
}

/* The table's callback once the parked session's model slot changed
 * (loaded, failed, refused, or the server stopping): from the thread that
 * changed it. The waiter's reference on the session goes last. */
static void on_model_changed(void *ud) {
  session_t *se = ud;
  atomic_store(&se->fired, 1);
  wd__rt_wake(se);
  wd__rt_session_unref(se);
}

/* Parks the session until slot changes since gen: 0; 1 when it already
 * has (look again now); WD_ESHUTDOWN when the server is stopping. */
static int park(session_t *se, int slot, unsigned gen, const wd_served_t *seen) {
  pthread_mutex_lock(&se->mu);
  se->refs++; /* the waiter's */
  pthread_mutex_unlock(&se->mu);
  atomic_store(&se->fired, 0);
  se->waiter = (wd_model_waiter_t){ .cb = on_model_changed, .ud = se };
  const int rc = wd_served_wait(&se->hub->s->served, slot, gen, seen, &se->waiter);
  if (rc == 0) {
    se->parked = 1;
    return 0;
  }
  wd__rt_session_unref(se); /* not parked: never the last (the thread holds one) */
  return rc;
}

void wd__rt_unpark(session_t *se) {
  if (se->parked && wd_served_unwait(&se->hub->s->served, &se->waiter))
    wd__rt_session_unref(se); /* unlinked before its callback: its reference back */
  /* else the callback has run or runs now, and drops its own */
  se->parked = 0;
}

/* Submits a held turn, or fails it: 1 (the caller frees hd); 0 while its
 * model loads and final is 0 (the session parked until the model's slot
 * changes). final: the wait is over (deadline, or the server stopping). */
static int try_start(session_t *se, held_t *hd, int final) {
  wd_rt_error_t e = { 0 };
  wd_served_t *rec = NULL;
  int wait = 0, found = -1;
  for (int tries = 0; tries < 4; tries++) {
    int slot = -1;
    unsigned gen = 0;
    const wd_served_t *seen = NULL;
    found = find_model_at(se, hd->model, &rec, &wait, &e, &slot, &gen, &seen);
    if (found != 0 || wait < 0 || final)
      break;
    if (se->parked) /* parked already: this wake was not for the model */
      return 0;
    const int rc = park(se, slot, gen, seen);
    if (rc == 0)
      return 0;
    if (rc < 0) { /* the server stops: fail it now */
      final = 1;
      break;
    }
  }
  if (found < 0) {
    send_failed(se, hd->item, "invalid_request_error", e.code, e.message);
  } else if (found == 0 && wait >= 0 && !final) {
    return 0; /* the slot kept changing: the next wake looks again */
  } else if (found == 0 && wait < 0 && wait != WD_EBUSY) { /* its load failed */
    send_failed(se, hd->item, "server_error", "model_load_failed", e.message);
  } else if (found == 0) {
    char msg[256];
    snprintf(msg, sizeof msg,
             wait == WD_EBUSY ? "The model `%.64s` is not loaded, and loading it would pass the "
                                "server's memory budget while its other models are in use."
                              : "The model `%.64s` did not finish loading in time.",
             hd->model);
    send_failed(se, hd->item, "server_error",
                wait == WD_EBUSY ? "model_over_memory_budget" : "model_loading", msg);
  } else {
    start_turn(se, hd, rec, 0);
  }
  return 1;
}

/* The held turns whose model is loaded now go, in order. */
void wd__rt_retry_held(session_t *se) {
  if (se->parked && atomic_load(&se->fired))
    se->parked = 0; /* the callback has run: the model's slot changed */
  const int stopping = atomic_load(&se->hub->stopping);
  while (se->held && try_start(se, se->held, stopping || wd_now_s() >= se->held->deadline)) {
    held_t *hd = se->held;
    se->held = hd->next;
    se->n_held--;
    wd__rt_held_free(hd);
    wd__rt_unpark(se); /* the next one parks on its own model's slot */
  }
}

double wd__rt_held_wait_ms(const session_t *se) {
  if (!se->held)
    return -1;
  const double left = (se->held->deadline - wd_now_s()) * 1e3;
  return left > 0 ? left : 0;
}

/* The open turn is committed: no more partials of it; one in flight is
 * cancelled (its result would come after the commit), through its model's
 * record referenced here: once the lock is released the partial may end
 * and drop the last reference to a record a reload retired. */
void wd__rt_end_partials(session_t *se) {
  uint64_t job = 0;
  wd_served_t *rec = NULL;
  pthread_mutex_lock(&se->mu);
  se->partial_item[0] = 0;
  for (turn_t *t = se->turns; t && !rec; t = t->next)
    if (t->partial && t->job && !t->cancelled) { /* one at a time per session */
      t->cancelled = 1;
      job = t->job;
      rec = t->rec;
      wd_served_ref(rec);
    }
  pthread_mutex_unlock(&se->mu);
  if (rec) {
    wd_workers_cancel(rec->m.workers, job);
    wd_served_release(rec);
  }
}

/* --realtime-partials-ms: the open turn (server_vad, speech going on) is
 * transcribed as it stands once every partial_every samples of new speech,
 * only while the model's workers have nothing else queued or running (a
 * partial takes idle time; a committed turn arriving waits at most for
 * the partial's encode), one at a time per session. */
void wd__rt_maybe_partial(session_t *se) {
  wd_realtime_t *h = se->hub;
  if (!h->partial_every || !se->cfg.vad || !se->in_speech || se->closing || se->held ||
      atomic_load(&h->stopping))
    return;
  const uint64_t end = se->base + se->n16;
  const uint64_t from = se->partial_end > se->turn_start ? se->partial_end : se->turn_start;
  if (end - from < h->partial_every || se->turn_start < se->base)
    return;
  pthread_mutex_lock(&se->mu);
  const int busy = se->partial_busy;
  pthread_mutex_unlock(&se->mu);
  wd_served_t *rec = NULL;
  wd_rt_error_t e;
  int wait = 0;
  if (busy || find_model(se, se->cfg.model, &rec, &wait, &e) != 1)
    return;
  wd_worker_stats_t st;
  wd_workers_stats(rec->m.workers, &st);
  if (st.queued + st.running > 0) {
    wd_served_release(rec);
    return;
  }
  held_t hd = { .pcm = se->a16 + (se->turn_start - se->base), .n = (size_t)(end - se->turn_start),
                .prompt = se->cfg.prompt, .t_stop = wd_now_s() };
  snprintf(hd.item, sizeof hd.item, "%s", se->speech_item);
  snprintf(hd.language, sizeof hd.language, "%s", se->cfg.language);
  se->partial_end = end;
  start_turn(se, &hd, rec, 1);
}

/* Audio samples [from, to) (the session's timeline) become a turn: sent
 * to the model's workers now, or held while the model loads. */
void wd__rt_commit(session_t *se, uint64_t from, uint64_t to, const char *item) {
  wd__rt_end_partials(se);
  json_t *ev = json_pack("{s:s, s:s, s:s}", "type", "input_audio_buffer.committed", "item_id", item,
                         "previous_item_id", se->prev_item);
  if (ev && !se->prev_item[0])
    json_object_set_new(ev, "previous_item_id", json_null());
  wd__rt_send_event(se, ev);
  snprintf(se->prev_item, sizeof se->prev_item, "%s", item);
  atomic_fetch_add(&se->hub->turns_total, 1);
  if (se->n_held >= RT_MAX_HELD) {
    char msg[200];
    snprintf(msg, sizeof msg, "%d turns of this session already wait for model `%.64s` to load.",
             se->n_held, se->held->model);
    send_failed(se, item, "server_error", "model_loading", msg);
    return;
  }
  held_t *hd = calloc(1, sizeof *hd);
  if (hd && (hd->pcm = malloc((size_t)(to - from) * sizeof *hd->pcm)) != NULL &&
      (!se->cfg.prompt || (hd->prompt = strdup(se->cfg.prompt)) != NULL)) {
    memcpy(hd->pcm, se->a16 + (from - se->base), (size_t)(to - from) * sizeof *hd->pcm);
    hd->n = (size_t)(to - from);
    snprintf(hd->item, sizeof hd->item, "%s", item);
    snprintf(hd->model, sizeof hd->model, "%s", se->cfg.model);
    snprintf(hd->language, sizeof hd->language, "%s", se->cfg.language);
    hd->logprobs = se->cfg.logprobs;
    hd->t_stop = wd_now_s();
    hd->deadline = hd->t_stop + RT_MODEL_WAIT_S;
  } else {
    wd__rt_held_free(hd);
    send_failed(se, item, "server_error", "server_error", "Out of memory.");
    return;
  }
  held_t **tail = &se->held;
  while (*tail)
    tail = &(*tail)->next;
  if (se->held || !try_start(se, hd, 0)) { /* behind a waiting turn, or its model loads */
    *tail = hd;
    se->n_held++;
    wd_log_info("api: realtime turn %s waits for model %s to load", hd->item, hd->model);
  } else {
    wd__rt_held_free(hd);
  }
}
