/*
 * render.h - a transcript as text, SRT, WebVTT or OpenAI JSON.
 *
 * Shared by `whisperd transcribe` and the HTTP API so both print the same
 * bytes. Pure functions; the returned string is malloc'd, caller frees.
 */
#ifndef WD_RENDER_H
#define WD_RENDER_H

#include "decode.h"

typedef enum {
  WD_FMT_TEXT = 0,      /* the text alone (OpenAI response_format=text) */
  WD_FMT_SEGMENTS,      /* "[00:00:00.000 --> 00:00:07.740]  text" per segment */
  WD_FMT_SRT,
  WD_FMT_VTT,
  WD_FMT_JSON,          /* {"text": ...} */
  WD_FMT_VERBOSE_JSON,  /* task, language, duration, text, segments */
} wd_format_t;

/* Parses "text", "txt" (segments), "srt", "vtt", "json", "verbose_json". */
int wd_format_parse(const char *s, wd_format_t *ret);

/* task: "transcribe" or "translate" (verbose_json only). */
int wd_render(const wd_transcript_t *t, wd_format_t fmt, const char *task, char **ret_text);

#endif
