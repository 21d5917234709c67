/*
 * realtime.c - Realtime transcription sessions over WebSocket (see
 * realtime.h).
 *
 * Ownership: a session is refcounted: its thread holds one reference and
 * every turn in flight one (the worker's on_done drops it), so callbacks
 * that arrive after the client left find the session still there; the hub
 * counts live sessions and wd_realtime_drain waits for none. The socket is
 * the session thread's alone, handed back to MHD (MHD_upgrade_action) when
 * the thread ends. Under se->mu: the outgoing queue, the turn list, dead.
 * A session's turns are realtime_turn.c's.
 */
#include "realtime.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "api_error.h"
#include "clock.h"
#include "error.h"
#include "languages.h"
#include "log.h"
#include "realtime_internal.h"
#include "render.h"
#include "response.h"
#include "served.h"
#include "workers.h"

/* ---- the hub ------------------------------------------------------------ */

wd_realtime_t *wd_realtime_new(struct wd_server *s, int max_sessions) {
  wd_realtime_t *h = calloc(1, sizeof *h);
  if (!h)
    return NULL;
  h->s = s;
  h->max_sessions = max_sessions > 0 ? max_sessions : 32;
  h->partial_every = s->o.realtime_partial_ms > 0
                         ? (uint64_t)s->o.realtime_partial_ms * RT_RATE / 1000 : 0;
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  return h;
}

void wd_realtime_stats(wd_realtime_t *h, wd_realtime_stats_t *ret) {
  *ret = (wd_realtime_stats_t){ 0 };
  if (!h)
    return;
  ret->sessions_total = atomic_load(&h->sessions_total);
  ret->turns_total = atomic_load(&h->turns_total);
  ret->turns_failed = atomic_load(&h->turns_failed);
  ret->turn_latency_s_sum = (double)atomic_load(&h->lat_us) * 1e-6;
  pthread_mutex_lock(&h->mu);
  ret->sessions_open = h->n_open;
  pthread_mutex_unlock(&h->mu);
}

void wd__rt_wake(session_t *se) {
  const uint64_t one = 1;
  if (write(se->wake, &one, sizeof one) < 0) { /* the counter is full: it wakes anyway */
  }
}

void wd_realtime_stop(wd_realtime_t *h) {
  if (!h || atomic_exchange(&h->stopping, 1))
    return;
  pthread_mutex_lock(&h->mu);
  for (session_t *se = h->list; se; se = se->next)
    wd__rt_wake(se);
  pthread_mutex_unlock(&h->mu);
}

static void wait_hub(wd_realtime_t *h, const int *count, double deadline) {
  while (*count > 0 && wd_now_s() < deadline) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&h->cv, &h->mu, &ts);
  }
}

void wd_realtime_drain(wd_realtime_t *h, double wait_s) {
  if (!h)
    return;
  wd_realtime_stop(h);
  pthread_mutex_lock(&h->mu);
  wait_hub(h, &h->n_open, wd_now_s() + wait_s);
  if (h->n_open > 0) {
    wd_log_warning("api: %d realtime session%s still open at shutdown: closing them", h->n_open,
                   h->n_open == 1 ? "" : "s");
    atomic_store(&h->forced, 1);
    for (session_t *se = h->list; se; se = se->next)
      wd__rt_wake(se);
  }
  /* their threads end at once now; their turns end with the workers */
  wait_hub(h, &h->n_live, wd_now_s() + 30.0);
  pthread_mutex_unlock(&h->mu);
}

void wd_realtime_free(wd_realtime_t *h) {
  if (!h)
    return;
  /* A handshake answered while the server stopped may have become a
   * session since the drain (MHD completes upgrades until it stops). */
  wd_realtime_drain(h, 0);
  pthread_mutex_lock(&h->mu);
  const int left = h->n_live;
  pthread_mutex_unlock(&h->mu);
  if (left > 0) { /* turns that never ended still point here: leave it */
    wd_log_error("api: %d realtime session%s never ended", left, left == 1 ? "" : "s");
    return;
  }
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

/* ---- sending -------------------------------------------------------------- */

/* A session as its handshake makes it: one reference (the handshake's),
 * no socket yet, not counted in the hub. NULL when out of memory. */
static session_t *session_new(wd_realtime_t *h) {
  session_t *se = calloc(1, sizeof *se);
  if (!se)
    return NULL;
  if ((se->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    free(se);
    return NULL;
  }
  se->hub = h;
  se->fd = MHD_INVALID_SOCKET;
  se->refs = 1;
  pthread_mutex_init(&se->mu, NULL);
  wd_ws_parser_init(&se->parser, WD_RT_MAX_MESSAGE);
  wd_rt_config_default(&se->cfg);
  wd_vad_stream_init(&se->vst);
  return se;
}

static void session_free(session_t *se) {
  wd_ws_parser_free(&se->parser);
  free(se->early);
  wd_rt_config_free(&se->cfg);
  wd_live_audio_free(se->res);
  free(se->a16);
  free(se->probs);
  free(se->out);
  close(se->wake);
  pthread_mutex_destroy(&se->mu);
  free(se);
}

void wd__rt_session_unref(session_t *se) {
  pthread_mutex_lock(&se->mu);
  const int left = --se->refs;
  pthread_mutex_unlock(&se->mu);
  if (left > 0)
    return;
  wd_realtime_t *h = se->hub;
  session_free(se);
  pthread_mutex_lock(&h->mu);
  h->n_live--;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

void wd_realtime_request_done(wd_rt_session_t *se) {
  if (se)
    wd__rt_session_unref(se);
}

/* Queues one frame; any thread. A client that has not read
 * WD_RT_MAX_QUEUED bytes is cut off. */
static void queue_frame_if(session_t *se, int opcode, const void *data, size_t n,
                           const char *partial_of) {
  unsigned char hdr[10];
  const size_t hn = wd_ws_frame_header(opcode, n, hdr);
  pthread_mutex_lock(&se->mu);
  if ((partial_of && strcmp(partial_of, se->partial_item) != 0) || /* its turn was committed */
      se->close_queued) { /* nothing follows a Close frame (RFC 6455 5.5.1) */
    pthread_mutex_unlock(&se->mu);
    return;
  }
  if (opcode == WD_WS_CLOSE)
    se->close_queued = 1;
  if (!se->dead && se->out_len - se->out_off + hn + n > WD_RT_MAX_QUEUED) {
    wd_log_warning("api: realtime client not reading (%zu bytes queued): cut off",
                   se->out_len - se->out_off);
    se->dead = 1;
  }
  if (!se->dead) {
    if (se->out_off > 0 && se->out_off == se->out_len)
      se->out_off = se->out_len = 0;
    size_t need = se->out_len + hn + n;
    if (need > se->out_cap) {
      size_t cap = se->out_cap ? se->out_cap : 8192;
      while (cap < need)
        cap *= 2;
      unsigned char *g = realloc(se->out, cap);
      if (!g) {
        se->dead = 1;
      } else {
        se->out = g;
        se->out_cap = cap;
      }
    }
    if (!se->dead) {
      memcpy(se->out + se->out_len, hdr, hn);
      memcpy(se->out + se->out_len + hn, data, n);
      se->out_len += hn + n;
    }
  }
  pthread_mutex_unlock(&se->mu);
  wd__rt_wake(se);
}

static void queue_frame(session_t *se, int opcode, const void *data, size_t n) {
  queue_frame_if(se, opcode, data, n, NULL);
}

/* Sends a server event: ev gets its event_id; ev is consumed. partial_of:
 * only while that turn is open (a partial never follows its commit). */
void wd__rt_send_event_if(session_t *se, json_t *ev, const char *partial_of) {
  if (!ev)
    return;
  char id[40];
  pthread_mutex_lock(&se->mu);
  const unsigned long long k = ++se->event_seq;
  pthread_mutex_unlock(&se->mu);
  snprintf(id, sizeof id, "event_%llx%06llu", (unsigned long long)(uintptr_t)se & 0xffffff, k);
  json_object_set_new(ev, "event_id", json_string(id));
  char *text = json_dumps(ev, JSON_COMPACT);
  json_decref(ev);
  if (text)
    queue_frame_if(se, WD_WS_TEXT, text, strlen(text), partial_of);
  free(text);
}

void wd__rt_send_event(session_t *se, json_t *ev) {
  wd__rt_send_event_if(se, ev, NULL);
}

static void send_error(session_t *se, const wd_rt_error_t *e, const char *client_event_id,
                       const char *type) {
  /* repaired should a character ever be cut: jansson refuses invalid UTF-8,
   * and the event would be lost */
  char *msg = wd_render_utf8_dup(e->message, strlen(e->message));
  json_t *err = json_pack("{s:s, s:s}", "type", type ? type : "invalid_request_error", "message",
                          msg ? msg : "");
  free(msg);
  if (!err)
    return;
  json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
  json_object_set_new(err, "param", e->param ? json_string(e->param) : json_null());
  json_object_set_new(err, "event_id",
                      client_event_id && client_event_id[0] ? json_string(client_event_id)
                                                            : json_null());
  wd__rt_send_event(se, json_pack("{s:s, s:o}", "type", "error", "error", err));
}

static void send_close(session_t *se, int code, const char *why) {
  unsigned char b[125];
  const size_t n = strlen(why) < 120 ? strlen(why) : 120;
  b[0] = (unsigned char)(code >> 8);
  b[1] = (unsigned char)code;
  memcpy(b + 2, why, n);
  queue_frame(se, WD_WS_CLOSE, b, n + 2);
  se->closing = 1;
}

/* ---- audio ------------------------------------------------------------------ */

static void next_item(session_t *se, char *out, size_t n) {
  snprintf(out, n, "item_%llx%05u", (unsigned long long)(uintptr_t)se & 0xffffff, ++se->item_seq);
}

/* Drops the buffered audio before sample `to` (the session's timeline). */
static void drop_before(session_t *se, uint64_t to) {
  if (to <= se->base)
    return;
  const size_t k = to - se->base < se->n16 ? (size_t)(to - se->base) : se->n16;
  memmove(se->a16, se->a16 + k, (se->n16 - k) * sizeof *se->a16);
  se->n16 -= k;
  se->base += k;
  /* After a long turn (up to WD_RT_MAX_BUFFER_S of audio: ~10 MB) the
   * buffer shrinks back to what it holds, with room to grow. */
  if (se->cap16 * sizeof *se->a16 > RT_KEEP_BYTES && se->n16 < se->cap16 / 4) {
    const size_t cap = se->n16 * 2 > RT_RATE ? se->n16 * 2 : RT_RATE;
    int16_t *g = realloc(se->a16, cap * sizeof *g);
    if (g) {
      se->a16 = g;
      se->cap16 = cap;
    }
  }
}

static json_t *speech_event(const char *type, const char *key, uint64_t sample, const char *item) {
  return json_pack("{s:s, s:I, s:s}", "type", type, key, (json_int_t)(sample * 1000 / RT_RATE),
                   "item_id", item);
}

/* server_vad over the chunks the new audio completed. */
static void detect(session_t *se, const wd_vad_model_t *vad) {
  const size_t complete = (size_t)((se->base + se->n16) / WD_VAD_CHUNK);
  if (complete <= se->vst.next)
    return; /* no new complete chunk */
  const size_t room = complete - se->vst.next;
  if (room > se->probs_cap) {
    float *g = realloc(se->probs, room * sizeof *g);
    if (!g)
      return;
    se->probs = g;
    se->probs_cap = room;
  }
  const size_t first = se->vst.next;
  const int k = wd_vad_stream_probs(vad, &se->vst, se->a16, se->n16, se->base, se->probs);
  if (k == WD_EINVAL) { /* the next chunk's context is gone: start after it */
    se->vst.next = (size_t)((se->base + WD_VAD_CONTEXT + WD_VAD_CHUNK - 1) / WD_VAD_CHUNK);
    return;
  }
  const float neg = se->cfg.threshold - 0.15f > 0.01f ? se->cfg.threshold - 0.15f : 0.01f;
  const uint64_t pad = (uint64_t)se->cfg.prefix_padding_ms * RT_RATE / 1000,
                 quiet = (uint64_t)se->cfg.silence_duration_ms * RT_RATE / 1000;
  for (int i = 0; i < k; i++) {
    const uint64_t c0 = (uint64_t)(first + (size_t)i) * WD_VAD_CHUNK, c1 = c0 + WD_VAD_CHUNK;
    const float p = se->probs[i];
    if (!se->in_speech) {
      if (p < se->cfg.threshold)
        continue;
      se->in_speech = 1;
      se->silence = 0;
      se->turn_start = c0 > se->base + pad ? c0 - pad : se->base;
      next_item(se, se->speech_item, sizeof se->speech_item);
      wd__rt_send_event(se, speech_event("input_audio_buffer.speech_started", "audio_start_ms",
                                         se->turn_start, se->speech_item));
      continue;
    }
    se->silence = p < neg ? se->silence + WD_VAD_CHUNK : p >= se->cfg.threshold ? 0 : se->silence;
    const int cut = c1 - se->turn_start >= (uint64_t)WD_RT_TURN_MAX_S * RT_RATE;
    if (se->silence < quiet && !cut)
      continue;
    const uint64_t end = cut ? c1 : c1 - se->silence + quiet / 2; /* a little of the silence */
    wd__rt_send_event(se, speech_event("input_audio_buffer.speech_stopped", "audio_end_ms", end,
                                       se->speech_item));
    wd__rt_commit(se, se->turn_start, end, se->speech_item);
    se->in_speech = 0;
    drop_before(se, end);
  }
  /* Outside speech only the prefix padding and the next chunk's context
   * are kept. */
  if (!se->in_speech) {
    const uint64_t next = (uint64_t)se->vst.next * WD_VAD_CHUNK;
    const uint64_t keep = pad + WD_VAD_CONTEXT;
    if (next > se->base + keep)
      drop_before(se, next - keep);
  }
}

static int append(session_t *se, const unsigned char *b, size_t n, wd_rt_error_t *e) {
  const int rate = wd_rt_format_rate(se->cfg.format);
  const size_t ns = se->cfg.format == WD_RT_PCM24 ? n / 2 : n;
  if (se->cfg.format == WD_RT_PCM24 && n % 2) {
    *e = (wd_rt_error_t){ .code = "invalid_value", .param = "audio" };
    snprintf(e->message, sizeof e->message, "audio/pcm is 16-bit samples: an odd byte count.");
    return WD_EINVAL;
  }
  if (!se->res || se->res_rate != rate) {
    wd_live_audio_free(se->res);
    se->res = NULL;
    if (wd_live_audio_new(rate, &se->res) < 0)
      return WD_ENOMEM;
    se->res_rate = rate;
  }
  int16_t *in = malloc((ns ? ns : 1) * sizeof *in);
  if (!in)
    return WD_ENOMEM;
  for (size_t i = 0; i < ns; i++)
    in[i] = se->cfg.format == WD_RT_PCMU   ? wd_g711_ulaw(b[i])
            : se->cfg.format == WD_RT_PCMA ? wd_g711_alaw(b[i])
                                           : (int16_t)(uint16_t)(b[2 * i] | (unsigned)b[2 * i + 1] << 8);
  const size_t room = wd_live_audio_room(se->res, ns);
  if (se->n16 + room > (size_t)WD_RT_MAX_BUFFER_S * RT_RATE) {
    free(in);
    *e = (wd_rt_error_t){ .code = "input_audio_buffer_full", .param = "audio" };
    snprintf(e->message, sizeof e->message,
             "The input audio buffer holds %d s at most: commit or clear it.", WD_RT_MAX_BUFFER_S);
    return WD_ETOOBIG;
  }
  if (se->n16 + room > se->cap16) {
    size_t cap = se->cap16 ? se->cap16 : RT_RATE;
    while (cap < se->n16 + room)
      cap *= 2;
    int16_t *g = realloc(se->a16, cap * sizeof *g);
    if (!g) {
      free(in);
      return WD_ENOMEM;
    }
    se->a16 = g;
    se->cap16 = cap;
  }
  const int got = wd_live_audio_push(se->res, in, ns, se->a16 + se->n16);
  free(in);
  if (got < 0)
    return got;
  se->n16 += (size_t)got;
  return 0;
}

/* ---- client events ------------------------------------------------------------ */

static void send_session(session_t *se, const char *type) {
  json_t *s = wd_rt_config_json(&se->cfg);
  if (s) {
    char id[40];
    snprintf(id, sizeof id, "sess_%llx", (unsigned long long)(uintptr_t)se & 0xffffffffffull);
    json_object_set_new(s, "id", json_string(id));
  }
  wd__rt_send_event(se, json_pack("{s:s, s:o}", "type", type, "session", s));
}

/* The Silero VAD the models were given (one per process), or NULL. */
static const wd_vad_model_t *server_vad(session_t *se) {
  const wd_vad_model_t *vad = NULL;
  wd_served_t *recs[WD_SERVER_MAX_MODELS];
  const int nm = wd_served_snapshot(&se->hub->s->served, recs);
  for (int k = 0; k < nm; k++) {
    if (!vad)
      vad = recs[k]->m.vad;
    wd_served_release(recs[k]);
  }
  return vad;
}

/* A session.update's language against its model, as an upload's is
 * checked: an English-only model speaks "en" alone, a multilingual one the
 * languages its vocabulary has. 0, or WD_EINVAL with e set. A model not
 * served here is left to its turns (model_not_found). */
static int check_language(session_t *se, const wd_rt_config_t *c, wd_rt_error_t *e) {
  if (!c->language[0])
    return 0;
  const int idx = wd_languages_index(c->language);
  wd_served_t *recs[WD_SERVER_MAX_MODELS];
  const int nm = wd_served_snapshot(&se->hub->s->served, recs);
  int english_only = 0, too_new = 0, found = 0;
  for (int k = 0; k < nm; k++) {
    for (int i = 0; !found && i < recs[k]->m.n_names; i++)
      if (recs[k]->m.names[i] && strcmp(recs[k]->m.names[i], c->model) == 0) {
        found = 1;
        english_only = !recs[k]->m.multilingual && strcmp(c->language, "en") != 0;
        too_new = recs[k]->m.multilingual && recs[k]->n_langs > 0 && idx >= recs[k]->n_langs;
      }
    wd_served_release(recs[k]);
  }
  if (!english_only && !too_new)
    return 0;
  *e = (wd_rt_error_t){ .code = "unsupported_language",
                        .param = "session.audio.input.transcription.language" };
  snprintf(e->message, sizeof e->message,
           english_only ? "Model `%s` is English-only; it cannot transcribe language '%s'."
                        : "Model `%s` does not support language '%s'.",
           c->model, c->language);
  return WD_EINVAL;
}

static void on_event(session_t *se, const char *json, size_t n) {
  wd_rt_event_t ev;
  wd_rt_error_t e = { 0 };
  int rc = wd_rt_event_parse(json, n, &se->cfg, &ev, &e);
  if (rc < 0) {
    send_error(se, &e, ev.event_id, rc == WD_ENOMEM ? "server_error" : NULL);
    return;
  }
  /* the process's one VAD (any model lends it), looked up only where used */
  const wd_vad_model_t *vad =
      (ev.type == WD_RT_SESSION_UPDATE && ev.cfg.vad) || (ev.type == WD_RT_APPEND && se->cfg.vad)
          ? server_vad(se)
          : NULL;
  switch (ev.type) {
  case WD_RT_SESSION_UPDATE:
    if (check_language(se, &ev.cfg, &e) < 0) { /* the session keeps its settings */
      send_error(se, &e, ev.event_id, NULL);
      break;
    }
    if (ev.cfg.vad && !vad) {
      e = (wd_rt_error_t){ .code = "unsupported_value",
                           .param = "session.audio.input.turn_detection" };
      snprintf(e.message, sizeof e.message, "server_vad needs voice activity detection, and "
               "this server has no Silero VAD model: set turn_detection to null and commit.");
      send_error(se, &e, ev.event_id, NULL);
      break;
    }
    if (ev.cfg.vad != se->cfg.vad || ev.cfg.format != se->cfg.format) {
      se->in_speech = 0; /* a new detection from the next audio on */
      wd_vad_stream_init(&se->vst);
      se->vst.next = (size_t)((se->base + se->n16) / WD_VAD_CHUNK) + 1;
    }
    wd_rt_config_free(&se->cfg);
    se->cfg = ev.cfg;
    ev.cfg.prompt = NULL;
    send_session(se, "session.updated");
    break;
  case WD_RT_APPEND:
    if (atomic_load(&se->hub->stopping)) {
      e = (wd_rt_error_t){ .code = "server_shutting_down" };
      snprintf(e.message, sizeof e.message, "The server is shutting down: no more audio.");
      send_error(se, &e, ev.event_id, "server_error");
      break;
    }
    if ((rc = append(se, ev.audio, ev.audio_len, &e)) < 0) {
      if (!e.message[0])
        snprintf(e.message, sizeof e.message, "%s", wd_strerror(rc));
      send_error(se, &e, ev.event_id, rc == WD_ENOMEM ? "server_error" : NULL);
      break;
    }
    if (se->cfg.vad && vad)
      detect(se, vad);
    break;
  case WD_RT_COMMIT: {
    if (se->n16 < RT_MIN_COMMIT) {
      e = (wd_rt_error_t){ .code = "input_audio_buffer_commit_empty" };
      snprintf(e.message, sizeof e.message, "Error committing input audio buffer: buffer too "
               "small. Expected at least 100ms of audio, but buffer only has %.2fms of audio.",
               (double)se->n16 * 1000.0 / RT_RATE);
      send_error(se, &e, ev.event_id, NULL);
      break;
    }
    char item[40];
    if (se->in_speech)
      snprintf(item, sizeof item, "%s", se->speech_item);
    else
      next_item(se, item, sizeof item);
    const uint64_t from = se->in_speech && se->turn_start > se->base ? se->turn_start : se->base;
    wd__rt_commit(se, from, se->base + se->n16, item);
    se->in_speech = 0;
    drop_before(se, se->base + se->n16);
    break;
  }
  case WD_RT_CLEAR:
    wd__rt_end_partials(se);
    drop_before(se, se->base + se->n16);
    se->in_speech = 0;
    wd__rt_send_event(se, json_pack("{s:s}", "type", "input_audio_buffer.cleared"));
    break;
  }
  wd_rt_event_clear(&ev);
}

static int on_message(void *ud, int op, const unsigned char *data, size_t n) {
  session_t *se = ud;
  switch (op) {
  case WD_WS_TEXT:
    if (!se->closing)
      on_event(se, (const char *)data, n);
    return 0;
  case WD_WS_BINARY: {
    wd_rt_error_t e = { .code = "invalid_event" };
    snprintf(e.message, sizeof e.message, "Client events are JSON text frames, not binary.");
    send_error(se, &e, NULL, NULL);
    return 0;
  }
  case WD_WS_PING:
    queue_frame(se, WD_WS_PONG, data, n);
    return 0;
  case WD_WS_CLOSE: /* the parser checked its payload: echo its code (dropped after ours) */
    queue_frame(se, WD_WS_CLOSE, data, n >= 2 ? 2 : 0);
    return 1; /* done */
  default:
    return 0;
  }
}

/* ---- the session thread --------------------------------------------------------- */

/* Writes what is queued, as far as the socket takes it. -1: gone. */
static int flush_out(session_t *se) {
  pthread_mutex_lock(&se->mu);
  int rc = 0;
  while (se->out_off < se->out_len) {
    const ssize_t w = send(se->fd, se->out + se->out_off, se->out_len - se->out_off, MSG_NOSIGNAL);
    if (w > 0) {
      se->out_off += (size_t)w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      break;
    rc = -1;
    se->dead = 1;
    break;
  }
  /* Drained after a burst (a large transcript, a backlog of events): the
   * queue gives its memory back rather than keep its largest size. */
  if (se->out_off == se->out_len && se->out_cap > RT_KEEP_BYTES) {
    free(se->out);
    se->out = NULL;
    se->out_cap = se->out_len = se->out_off = 0;
  }
  pthread_mutex_unlock(&se->mu);
  return rc;
}

static int is_dead(session_t *se) {
  pthread_mutex_lock(&se->mu);
  const int d = se->dead;
  pthread_mutex_unlock(&se->mu);
  return d;
}

static int pending_out(session_t *se) {
  pthread_mutex_lock(&se->mu);
  const int p = se->out_off < se->out_len;
  pthread_mutex_unlock(&se->mu);
  return p;
}

static int n_turns(session_t *se) {
  pthread_mutex_lock(&se->mu);
  int n = 0;
  for (turn_t *t = se->turns; t; t = t->next)
    n++;
  pthread_mutex_unlock(&se->mu);
  return n;
}

/* The client left (or was cut off): every turn in flight is cancelled,
 * the running ones too, 64 at a time (each marked under se->mu, so each is
 * taken once). Each is cancelled through its model's record referenced
 * here: once the lock is released its turn may end and drop the record,
 * which a reload may have retired (as wd_transcription_cancel_all). */
static void cancel_turns(session_t *se) {
  for (;;) {
    struct { uint64_t id; wd_served_t *rec; } jobs[64];
    int n = 0;
    pthread_mutex_lock(&se->mu);
    for (turn_t *t = se->turns; t && n < 64; t = t->next)
      if (t->job && !t->cancelled) {
        t->cancelled = 1;
        wd_served_ref(t->rec);
        jobs[n].id = t->job;
        jobs[n++].rec = t->rec;
      }
    pthread_mutex_unlock(&se->mu);
    if (n == 0)
      return;
    for (int i = 0; i < n; i++) {
      wd_workers_cancel(jobs[i].rec->m.workers, jobs[i].id);
      wd_served_release(jobs[i].rec);
    }
  }
}

/* Feeds n bytes from the client to the frame parser (its messages run as
 * they complete): sets *client_closed on the client's Close, and on a
 * protocol error queues our Close with its code and sets *discard. */
static void feed_client(session_t *se, const void *data, size_t n, int *client_closed,
                        int *discard) {
  se->last_rx = wd_now_s();
  int close_code = 0;
  const int rc = wd_ws_feed(&se->parser, data, n, on_message, se, &close_code);
  if (rc == 1) {
    *client_closed = 1;
  } else if (rc < 0) {
    wd_log_info("api: realtime client broke the protocol (%s): closing with %d", wd_strerror(rc),
                close_code);
    send_close(se, close_code,
               rc == WD_ETOOBIG                     ? "message too big"
               : close_code == WD_WS_CLOSE_BAD_DATA ? "invalid UTF-8"
                                                    : "protocol error");
    /* read no further, but drain what still comes for a while: a socket
     * closed with unread data sends a reset, which would destroy the close
     * frame before the client reads it */
    *discard = 1;
  }
}

static void *session_main(void *arg) {
  session_t *se = arg;
  wd_realtime_t *h = se->hub;
  unsigned char buf[65536];
  int client_closed = 0, discard = 0, cut = 0;
  double close_by = 0; /* the close handshake's deadline; 0: none begun */
  send_session(se, "session.created");
  if (se->n_early > 0)
    feed_client(se, se->early, se->n_early, &client_closed, &discard);
  free(se->early);
  se->early = NULL;
  se->n_early = 0;
  for (;;) {
    if (atomic_load(&h->forced))
      break;
    if (is_dead(se))
      break;
    if (se->held)
      wd__rt_retry_held(se);
    wd__rt_maybe_partial(se);
    if (atomic_load(&h->stopping) && !se->closing && !se->held && n_turns(se) == 0)
      send_close(se, WD_WS_CLOSE_GOING_AWAY, "server shutting down");
    /* A close begun by either side ends by an absolute deadline: a client
     * that reads nothing (its window closed) never lets the output drain,
     * and neither a queue nor a silent client may hold the session. */
    if ((se->closing || client_closed) && !close_by)
      close_by = wd_now_s() + WD_RT_CLOSE_S;
    if (client_closed && !pending_out(se))
      break; /* the handshake done: the client's close, and ours written */
    if (close_by && wd_now_s() >= close_by) {
      if (pending_out(se)) {
        wd_log_info("api: realtime client did not read our close within %d s: cut off",
                    WD_RT_CLOSE_S);
        cut = 1;
      }
      break; /* (or the client never answered ours) */
    }
    struct pollfd pf[2] = { { .fd = se->fd, .events = POLLIN | (pending_out(se) ? POLLOUT : 0) },
                            { .fd = se->wake, .events = POLLIN } };
    /* A held turn waits for its model's slot to change (the session is
     * parked in the server, which wakes it) or for its deadline. */
    const double held_ms = wd__rt_held_wait_ms(se);
    const int pr = poll(pf, 2, held_ms >= 0 && held_ms < 250 ? (int)held_ms + 1 : 250);
    if (pr < 0 && errno != EINTR)
      break;
    if (pf[1].revents & POLLIN) {
      uint64_t v;
      if (read(se->wake, &v, sizeof v) < 0) { /* nothing to read: fine */
      }
    }
    if (pf[0].revents & POLLOUT && flush_out(se) < 0)
      break;
    if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t r = recv(se->fd, buf, sizeof buf, 0);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        break; /* the client is gone */
      if (r > 0 && !discard)
        feed_client(se, buf, (size_t)r, &client_closed, &discard);
    }
    if (pending_out(se) && flush_out(se) < 0)
      break;
    if (!se->closing && wd_now_s() - se->last_rx > WD_RT_IDLE_S)
      send_close(se, WD_WS_CLOSE_NORMAL, "idle");
  }
  cancel_turns(se); /* nobody reads their events any more */
  wd__rt_unpark(se);
  while (se->held) {
    held_t *hd = se->held;
    se->held = hd->next;
    wd__rt_held_free(hd);
  }
  se->n_held = 0;
  pthread_mutex_lock(&se->mu);
  se->dead = 1;
  pthread_mutex_unlock(&se->mu);
  if (cut) { /* a reset, not a close that the kernel would try to deliver behind the queue */
    const struct linger lg = { .l_onoff = 1, .l_linger = 0 };
    setsockopt(se->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  MHD_upgrade_action(se->urh, MHD_UPGRADE_ACTION_CLOSE);
  pthread_mutex_lock(&h->mu);
  for (session_t **pp = &h->list; *pp; pp = &(*pp)->next)
    if (*pp == se) {
      *pp = se->next;
      break;
    }
  h->n_open--;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  wd_log_info("api: realtime session ended (%u turn%s)", se->item_seq,
              se->item_seq == 1 ? "" : "s");
  wd__rt_session_unref(se);
  return NULL;
}

/* MHD: the 101 went out and the socket is ours; cls is the session its
 * handshake made (and still holds: wd_realtime_request_done comes after). */
static void on_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
                        size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh) {
  (void)c, (void)con_cls;
  session_t *se = cls;
  wd_realtime_t *h = se->hub;
  se->fd = sock;
  se->urh = urh;
  pthread_mutex_lock(&se->mu);
  se->refs++; /* the thread's, beside the handshake's */
  pthread_mutex_unlock(&se->mu);
  se->last_rx = wd_now_s();
  const int fl = fcntl(sock, F_GETFL);
  if (fl >= 0)
    fcntl(sock, F_SETFL, fl | O_NONBLOCK);
  /* What came behind the handshake is the session thread's to parse, after
   * its session.created (events answered before it, or a Close in that
   * packet left unhandled, broke the protocol). MHD bounds it by its read
   * buffer; without memory for a copy the session ends at once. */
  if (extra_in_size > 0) {
    se->early = malloc(extra_in_size);
    if (se->early) {
      memcpy(se->early, extra_in, extra_in_size);
      se->n_early = extra_in_size;
    } else {
      se->closing = 1;
    }
  }
  pthread_mutex_lock(&h->mu);
  h->n_open++;
  se->next = h->list;
  h->list = se;
  pthread_mutex_unlock(&h->mu);
  atomic_fetch_add(&h->sessions_total, 1);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&se->thread, &at, session_main, se) != 0) {
    pthread_attr_destroy(&at);
    MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
    pthread_mutex_lock(&h->mu);
    for (session_t **pp = &h->list; *pp; pp = &(*pp)->next)
      if (*pp == se) {
        *pp = se->next;
        break;
      }
    h->n_open--;
    pthread_mutex_unlock(&h->mu);
    wd__rt_session_unref(se);
    return;
  }
  pthread_attr_destroy(&at);
  wd_log_info("api: realtime session started");
}

/* ---- the handshake ------------------------------------------------------------- */

static const char *header(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* The browser's way to pass a key (it cannot set Authorization): a
 * subprotocol openai-insecure-api-key.KEY beside `realtime`. */
const char *wd_realtime_subprotocol_key(struct MHD_Connection *c, size_t *ret_len) {
  return wd_ws_token_after(header(c, "Sec-WebSocket-Protocol"), "openai-insecure-api-key.",
                           ret_len);
}

static enum MHD_Result http_error(struct MHD_Connection *c, int status, const char *code,
                                  const char *msg, int *ret_status) {
  wd_api_error_t e;
  wd_api_error_set(&e, status, NULL, code, "%s", msg);
  if (status == 503)
    e.retry_after_s = 5;
  *ret_status = status;
  return wd_response_error(c, &e, NULL);
}

enum MHD_Result wd_realtime_upgrade(wd_realtime_t *h, struct MHD_Connection *c, int *ret_status,
                                    wd_rt_session_t **ret_session) {
  *ret_session = NULL;
  const char *key = header(c, "Sec-WebSocket-Key"), *ver = header(c, "Sec-WebSocket-Version");
  char accept[29];
  if (!wd_ws_has_token(header(c, "Upgrade"), "websocket", 1) ||
      !wd_ws_has_token(header(c, "Connection"), "upgrade", 1) || !ver || strcmp(ver, "13") != 0 ||
      wd_ws_accept_key(key, accept) < 0)
    return http_error(c, 426, "upgrade_required", /* with the version we speak (RFC 6455 4.4) */
                      "/v1/realtime is a WebSocket (RFC 6455, version 13): connect with a "
                      "WebSocket client such as the OpenAI SDKs' realtime clients.",
                      ret_status);
  /* Subprotocols: `realtime` is what we speak and what OpenAI's browser
   * clients offer (beside openai-insecure-api-key.KEY and
   * openai-beta.realtime-v1, which only carry headers). Offered, it is
   * answered. Protocols offered without it get a refusal that says so:
   * answering none, as RFC 6455 allows, makes browsers fail the handshake
   * with no reason given, and answering one not offered fails it too. */
  const char *protos = header(c, "Sec-WebSocket-Protocol");
  size_t n_tok = 0;
  const int offered = wd_ws_token_after(protos, "", &n_tok) != NULL; /* any token */
  if (offered && !wd_ws_has_token(protos, "realtime", 0))
    return http_error(c, 400, "unsupported_subprotocol",
                      "/v1/realtime speaks the `realtime` subprotocol: offer it (from a browser: "
                      "new WebSocket(url, [\"realtime\", \"openai-insecure-api-key.\" + key])), "
                      "or offer none.",
                      ret_status);
  if (!h || atomic_load(&h->stopping))
    return http_error(c, 503, "server_shutting_down", "The server is shutting down.", ret_status);
  /* The session is made and counted here, at the handshake: counted once
   * its 101 is written (on_upgraded), many handshakes at once would all
   * pass the check before any of them counts. */
  session_t *se = session_new(h);
  if (!se)
    return MHD_NO;
  pthread_mutex_lock(&h->mu);
  const int full = h->n_live >= h->max_sessions;
  if (!full)
    h->n_live++;
  pthread_mutex_unlock(&h->mu);
  if (full) {
    session_free(se);
    return http_error(c, 503, "too_many_sessions",
                      "Every realtime session this server runs at once is in use; retry later.",
                      ret_status);
  }
  struct MHD_Response *r = MHD_create_response_for_upgrade(on_upgraded, se);
  if (!r) {
    wd__rt_session_unref(se);
    return MHD_NO;
  }
  *ret_session = se; /* MHD completes the request whether or not it upgrades */
  MHD_add_response_header(r, MHD_HTTP_HEADER_UPGRADE, "websocket");
  MHD_add_response_header(r, "Sec-WebSocket-Accept", accept);
  if (offered)
    MHD_add_response_header(r, "Sec-WebSocket-Protocol", "realtime");
  const enum MHD_Result q = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, r);
  MHD_destroy_response(r);
  *ret_status = 101;
  return q;
}
