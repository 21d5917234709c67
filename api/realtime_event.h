/*
 * realtime_event.h - the client events of an OpenAI Realtime transcription
 * session (GET /v1/realtime), parsed from their JSON, and the session's
 * configuration as session.update changes it and session.created and
 * session.updated show it.
 *
 * Handled: session.update (type "transcription"; audio.input.format
 * audio/pcm at 24 kHz, audio/pcmu, audio/pcma; audio.input.transcription
 * model, language (a code of Whisper's table; whether the model speaks it
 * is the session's check), prompt; audio.input.turn_detection server_vad with
 * threshold, prefix_padding_ms, silence_duration_ms, semantic_vad taken as
 * server_vad with its defaults, or null for commits by the client;
 * audio.input.noise_reduction accepted and not applied; include
 * "item.input_audio_transcription.logprobs"), input_audio_buffer.append
 * (base64 audio), .commit and .clear. Anything else is an error the session
 * answers with an `error` event and survives.
 * ref: ../shared/reference/openai-realtime-transcription.md; the OpenAI SDKs'
 * realtime types.
 */
#ifndef WD_REALTIME_EVENT_H
#define WD_REALTIME_EVENT_H

#include <stddef.h>

#include <jansson.h>

typedef enum { WD_RT_PCM24 = 0, WD_RT_PCMU, WD_RT_PCMA } wd_rt_format_t;

typedef struct {
  wd_rt_format_t format;
  char model[64];              /* the served model's name; whisper-1 by default */
  char language[16];           /* an ISO-639-1 code of Whisper's table, lower case; "": detected */
  char *prompt;                /* malloc'd, or NULL */
  int vad;                     /* server_vad (1) or commits by the client (0) */
  float threshold;
  int prefix_padding_ms, silence_duration_ms;
  int noise_reduction;         /* asked for (near_field, far_field); not applied */
  int logprobs;                /* include item.input_audio_transcription.logprobs */
} wd_rt_config_t;

/* OpenAI's defaults: audio/pcm, whisper-1, server_vad 0.5 / 300 / 500. */
void wd_rt_config_default(wd_rt_config_t *c);
void wd_rt_config_free(wd_rt_config_t *c);
/* The session object of session.created and session.updated. */
json_t *wd_rt_config_json(const wd_rt_config_t *c);
/* Input samples per second of the format. */
int wd_rt_format_rate(wd_rt_format_t f);

typedef enum {
  WD_RT_SESSION_UPDATE, WD_RT_APPEND, WD_RT_COMMIT, WD_RT_CLEAR,
} wd_rt_event_type_t;

typedef struct {
  wd_rt_event_type_t type;
  char event_id[128];          /* the client's, "" when none */
  unsigned char *audio;        /* APPEND: the decoded bytes, malloc'd */
  size_t audio_len;
  wd_rt_config_t cfg;          /* SESSION_UPDATE: the session with the update applied */
} wd_rt_event_t;

/* What an error event says. */
typedef struct {
  const char *code, *param;    /* NULL when none */
  char message[256];
} wd_rt_error_t;

/* Parses one client message (n bytes, not NUL-terminated) against the
 * current configuration. Returns 0 with *ev filled (free it with
 * wd_rt_event_clear), or a negative code with *err set (and ev->event_id
 * when the message had one). */
int wd_rt_event_parse(const char *json, size_t n, const wd_rt_config_t *cur, wd_rt_event_t *ev,
                      wd_rt_error_t *err);
void wd_rt_event_clear(wd_rt_event_t *ev);

#endif
