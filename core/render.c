/*
 * render.c - transcript renderers (see render.h).
 * ref: openai/whisper utils.py (WriteSRT, WriteVTT: text stripped, "-->"
 * replaced by "->"), OpenAI's verbose_json shape (reference/openai-audio-api.md).
 */
#define _GNU_SOURCE /* memmem */
#include "render.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "languages.h"
#include "pystr.h"

int wd_format_parse(const char *s, wd_format_t *ret) {
  static const struct { const char *name; wd_format_t f; } names[] = {
    { "text", WD_FMT_TEXT }, { "txt", WD_FMT_SEGMENTS }, { "srt", WD_FMT_SRT },
    { "vtt", WD_FMT_VTT },   { "json", WD_FMT_JSON },    { "verbose_json", WD_FMT_VERBOSE_JSON },
    { "diarized_json", WD_FMT_DIARIZED_JSON },
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (s && strcmp(s, names[i].name) == 0) {
      *ret = names[i].f;
      return 0;
    }
  return WD_EINVAL;
}

/* A growing string; on allocation failure it stays NULL and sticky. */
typedef struct {
  char *s;
  size_t len, cap;
  int err;
} wd_sb_t;

static void sb_printf(wd_sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(wd_sb_t *b, const char *fmt, ...) {
  if (b->err)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->err = 1;
      return;
    }
    if (b->s && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
    char *s = realloc(b->s, cap);
    if (!s) {
      b->err = 1;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
}

/* Appends s[0..n) as it is (no format: text may hold '%'). */
static void sb_put(wd_sb_t *b, const char *s, size_t n) {
  if (b->err)
    return;
  if (!b->s || b->len + n + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 1024) + n + 1;
    char *p = realloc(b->s, cap);
    if (!p) {
      b->err = 1;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

/* The document built in b as *ret_text (b's buffer freed): empty when
 * nothing was written, and, since plain-text formats are served as UTF-8
 * too, with split characters repaired. WD_ENOMEM when b ran out. */
static int sb_finish(wd_sb_t *b, char **ret_text) {
  if (b->err) {
    free(b->s);
    return WD_ENOMEM;
  }
  char *fixed = wd_render_utf8_dup(b->s ? b->s : "", b->len);
  free(b->s);
  if (!fixed)
    return WD_ENOMEM;
  *ret_text = fixed;
  return 0;
}

/* HH:MM:SS<sep>mmm, rounding to the millisecond. */
static void sb_time(wd_sb_t *b, double t, char sep) {
  long ms = lround(t * 1000.0);
  if (ms < 0)
    ms = 0;
  sb_printf(b, "%02ld:%02ld:%02ld%c%03ld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep,
            ms % 1000);
}

/* Segment text stripped of surrounding white space, with "-->" as "->". */
static void sb_cue_text(wd_sb_t *b, const char *text) {
  while (*text == ' ' || *text == '\t' || *text == '\n')
    text++;
  size_t n = strlen(text);
  while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\n'))
    n--;
  /* Runs between the "-->"s are copied whole. */
  size_t i = 0;
  while (i < n) {
    const char *arrow = n - i >= 3 ? memmem(text + i, n - i, "-->", 3) : NULL;
    const size_t run = arrow ? (size_t)(arrow - (text + i)) : n - i;
    sb_put(b, text + i, run);
    i += run;
    if (arrow) {
      sb_put(b, "->", 2);
      i += 3;
    }
  }
}

long wd_render_usage_seconds(double duration_s) {
  return duration_s > 0 && isfinite(duration_s) ? (long)ceil(duration_s - 1e-9) : 0;
}

char *wd_render_utf8_dup(const char *s, size_t n) {
  /* Each replaced byte grows by at most 2 (1 byte -> 3-byte U+FFFD). */
  char *out = malloc(n * 3 + 1);
  if (!out)
    return NULL;
  const unsigned char *p = (const unsigned char *)s;
  size_t k = 0, i = 0;
  while (i < n) {
    const long l = wd_utf8_seq(p + i, n - i);
    if (l > 0) {
      memcpy(out + k, p + i, (size_t)l);
      k += (size_t)l;
      i += (size_t)l;
    } else {
      memcpy(out + k, "\xEF\xBF\xBD", 3);
      k += 3;
      i += (size_t)-l;
    }
  }
  out[k] = '\0';
  return out;
}

/* A JSON string of s repaired to valid UTF-8 (NULL on OOM). */
static json_t *json_text(const char *s, size_t n) {
  char *fixed = wd_render_utf8_dup(s, n);
  json_t *j = fixed ? json_string(fixed) : NULL;
  free(fixed);
  return j;
}

/* A word as JSON: {"word", "start", "end"[, "probability"]}. */
static json_t *word_json(const wd_word_t *w, int api) {
  const char *s = w->word ? w->word : "";
  size_t n = strlen(s);
  if (api) /* OpenAI's words carry no leading space and no probability */
    s = wd_py_strip(s, n, &n);
  json_t *o = json_pack("{s:o?, s:f, s:f}", "word", json_text(s, n), "start", w->start, "end",
                        w->end);
  if (o && !api)
    json_object_set_new(o, "probability", json_real((double)w->probability));
  return o;
}

json_t *wd_render_logprobs(const wd_segment_t *segs, int n, const wd_tokenizer_t *tok) {
  json_t *arr = json_array();
  const int32_t eot = wd_tokenizer_special(tok)->eot;
  for (int s = 0; arr && s < n; s++) {
    const wd_segment_t *g = &segs[s];
    for (int i = 0; g->logprobs && i < g->n_tokens; i++) {
      if (g->tokens[i] >= eot)
        continue;
      char buf[512];
      if (wd_tokenizer_token_text(tok, g->tokens[i], buf, sizeof buf) < 0)
        continue;
      const size_t len = strlen(buf);
      char *token = wd_render_utf8_dup(buf, len);
      json_t *bytes = json_array();
      for (size_t b = 0; bytes && b < len; b++)
        json_array_append_new(bytes, json_integer((unsigned char)buf[b]));
      json_t *o = token && bytes ? json_pack("{s:s, s:f, s:o}", "token", token, "logprob",
                                            (double)g->logprobs[i], "bytes", bytes)
                                 : NULL;
      if (!o)
        json_decref(bytes);
      free(token);
      if (!o || json_array_append_new(arr, o) < 0) {
        json_decref(arr);
        return NULL;
      }
    }
  }
  return arr;
}

static int render_json(const wd_transcript_t *t, int verbose, const char *task, unsigned flags,
                       const wd_tokenizer_t *lp_tok, char **ret) {
  json_t *root = json_object();
  int rc = root ? 0 : WD_ENOMEM;
  /* The API's "text" has no surrounding space (openai's library keeps it). */
  size_t tn;
  const char *text = t->text ? wd_py_strip(t->text, strlen(t->text), &tn) : "";
  if (!t->text)
    tn = 0;
  if (verbose && !rc) {
    const int li = wd_languages_index(t->language);
    const char *name = li >= 0 ? wd_languages_name(li) : NULL;
    rc |= json_object_set_new(root, "task", json_string(task ? task : "transcribe"));
    rc |= json_object_set_new(root, "language", json_text(name ? name : t->language,
                                                          strlen(name ? name : t->language)));
    rc |= json_object_set_new(root, "duration", json_real(t->duration));
    /* Detected, not given: how sure, and the runners-up (not in OpenAI's
     * schema; clients ignore fields they do not know). */
    if (t->n_language_probs > 0) {
      json_t *probs = json_object();
      for (int i = 0; probs && i < t->n_language_probs; i++)
        json_object_set_new(probs, t->language_probs[i].code,
                            json_real((double)t->language_probs[i].prob));
      rc |= json_object_set_new(root, "language_probability", json_real((double)t->language_prob));
      rc |= probs ? json_object_set_new(root, "language_probabilities", probs) : -1;
    }
  }
  if (!rc)
    rc |= json_object_set_new(root, "text", json_text(text, tn));
  if (!rc && lp_tok) {
    json_t *lp = wd_render_logprobs(t->segments, t->n_segments, lp_tok);
    rc |= lp ? json_object_set_new(root, "logprobs", lp) : -1;
  }
  if (verbose && !rc) {
    json_t *segs = json_array();
    for (int i = 0; segs && i < t->n_segments; i++) {
      const wd_segment_t *s = &t->segments[i];
      json_t *toks = json_array();
      for (int k = 0; toks && k < s->n_tokens; k++)
        json_array_append_new(toks, json_integer(s->tokens[k]));
      json_t *stext = json_text(s->text ? s->text : "", s->text ? strlen(s->text) : 0);
      json_t *o = json_pack("{s:i, s:i, s:f, s:f, s:o?, s:o, s:f, s:f, s:f, s:f}", "id", s->id,
                            "seek", s->seek, "start", s->start, "end", s->end, "text", stext,
                            "tokens", toks ? toks : json_array(), "temperature",
                            (double)s->temperature, "avg_logprob", (double)s->avg_logprob,
                            "compression_ratio", (double)s->compression_ratio, "no_speech_prob",
                            (double)s->no_speech_prob);
      if (o && (flags & WD_RENDER_SEGMENT_WORDS) && s->n_words > 0) {
        json_t *words = json_array();
        for (int k = 0; words && k < s->n_words; k++)
          json_array_append_new(words, word_json(&s->words[k], 0));
        if (!words || json_object_set_new(o, "words", words) < 0)
          rc = -1;
      }
      if (!stext || !o || json_array_append_new(segs, o) < 0)
        rc = -1;
    }
    if (!(flags & WD_RENDER_SEGMENTS))
      json_decref(segs);
    else if (!segs || json_object_set_new(root, "segments", segs) < 0)
      rc = -1;
  }
  if (verbose && !rc && (flags & WD_RENDER_WORDS)) {
    json_t *words = json_array();
    for (int i = 0; words && i < t->n_segments; i++)
      for (int k = 0; k < t->segments[i].n_words; k++)
        json_array_append_new(words, word_json(&t->segments[i].words[k], 1));
    if (!words || json_object_set_new(root, "words", words) < 0)
      rc = -1;
  }
  if (!rc) {
    json_t *usage = json_pack("{s:s, s:I}", "type", "duration", "seconds",
                              (json_int_t)wd_render_usage_seconds(t->duration));
    if (!usage || json_object_set_new(root, "usage", usage) < 0)
      rc = -1;
  }
  char *s = rc ? NULL : json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(15));
  json_decref(root);
  if (!s)
    return WD_ENOMEM;
  /* json_dumps' memory comes from jansson's allocator (malloc by default). */
  *ret = s;
  return 0;
}

int wd_render(const wd_transcript_t *t, wd_format_t fmt, const char *task, char **ret_text) {
  if (fmt == WD_FMT_JSON || fmt == WD_FMT_VERBOSE_JSON)
    return render_json(t, fmt == WD_FMT_VERBOSE_JSON, task,
                       WD_RENDER_SEGMENTS | WD_RENDER_SEGMENT_WORDS, NULL, ret_text);
  wd_sb_t b = { 0 };
  switch (fmt) {
  case WD_FMT_TEXT: {
    size_t n = 0;
    const char *text = t->text ? wd_py_strip(t->text, strlen(t->text), &n) : "";
    sb_printf(&b, "%.*s\n", (int)n, text);
    break;
  }
  case WD_FMT_SEGMENTS:
    for (int i = 0; i < t->n_segments; i++) {
      sb_printf(&b, "[");
      sb_time(&b, t->segments[i].start, '.');
      sb_printf(&b, " --> ");
      sb_time(&b, t->segments[i].end, '.');
      sb_printf(&b, "]  ");
      sb_cue_text(&b, t->segments[i].text);
      sb_printf(&b, "\n");
    }
    break;
  case WD_FMT_SRT:
  case WD_FMT_VTT:
    if (fmt == WD_FMT_VTT)
      sb_printf(&b, "WEBVTT\n\n");
    for (int i = 0; i < t->n_segments; i++) {
      const char sep = fmt == WD_FMT_SRT ? ',' : '.';
      if (fmt == WD_FMT_SRT)
        sb_printf(&b, "%d\n", i + 1);
      sb_time(&b, t->segments[i].start, sep);
      sb_printf(&b, " --> ");
      sb_time(&b, t->segments[i].end, sep);
      sb_printf(&b, "\n");
      sb_cue_text(&b, t->segments[i].text);
      sb_printf(&b, "\n\n");
    }
    break;
  default:
    return WD_EINVAL;
  }
  return sb_finish(&b, ret_text);
}

int wd_render_verbose_json(const wd_transcript_t *t, const char *task, unsigned flags,
                           char **ret_text) {
  return render_json(t, 1, task, flags, NULL, ret_text);
}

int wd_render_with_logprobs(const wd_transcript_t *t, wd_format_t fmt, const char *task,
                            unsigned verbose_flags, const wd_tokenizer_t *tok, char **ret_text) {
  if (fmt != WD_FMT_JSON && fmt != WD_FMT_VERBOSE_JSON)
    return WD_EINVAL;
  return render_json(t, fmt == WD_FMT_VERBOSE_JSON, task, verbose_flags, tok, ret_text);
}

/* The top-level "text": stripped, repaired. */
static json_t *top_text(const wd_transcript_t *t) {
  size_t n = 0;
  const char *text = t->text ? wd_py_strip(t->text, strlen(t->text), &n) : "";
  return json_text(text, n);
}

static int render_diarized_json(const wd_transcript_t *t, const wd_diar_segs_t *d,
                                const char *const *labels, const char *task, char **ret) {
  json_t *segs = json_array();
  for (int i = 0; segs && i < d->n_segs; i++) {
    const wd_diar_seg_t *g = &d->segs[i];
    char id[32];
    snprintf(id, sizeof id, "seg_%d", i);
    const char *who = labels[g->speaker];
    json_t *o = json_pack("{s:s, s:s, s:f, s:f, s:o?, s:o?}", "type", "transcript.text.segment",
                          "id", id, "start", g->start, "end", g->end, "speaker",
                          json_text(who, strlen(who)), "text",
                          json_text(g->text ? g->text : "", g->text ? strlen(g->text) : 0));
    if (!o || json_array_append_new(segs, o) < 0) {
      json_decref(segs);
      segs = NULL;
    }
  }
  json_t *root =
      segs ? json_pack("{s:s, s:f, s:o?, s:o, s:{s:s, s:I}}", "task", task ? task : "transcribe",
                       "duration", t->duration, "text", top_text(t), "segments", segs, "usage",
                       "type", "duration", "seconds",
                       (json_int_t)wd_render_usage_seconds(t->duration))
           : NULL;
  char *s = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
  json_decref(root);
  if (!s)
    return WD_ENOMEM;
  *ret = s;
  return 0;
}

int wd_render_diarized(const wd_transcript_t *t, const wd_diar_segs_t *d,
                       const char *const *labels, wd_format_t fmt, const char *task,
                       char **ret_text) {
  if (fmt == WD_FMT_DIARIZED_JSON)
    return render_diarized_json(t, d, labels, task, ret_text);
  if (fmt == WD_FMT_JSON)
    return wd_render(t, fmt, task, ret_text);
  wd_sb_t b = { 0 };
  const char sep = fmt == WD_FMT_SRT ? ',' : '.';
  if (fmt == WD_FMT_VTT)
    sb_printf(&b, "WEBVTT\n\n");
  for (int i = 0; i < d->n_segs; i++) {
    const wd_diar_seg_t *g = &d->segs[i];
    const char *who = labels[g->speaker];
    const char *text = g->text ? g->text : "";
    switch (fmt) {
    case WD_FMT_TEXT: {
      size_t n = 0;
      const char *s = wd_py_strip(text, strlen(text), &n);
      const int same = i > 0 && d->segs[i - 1].speaker == g->speaker;
      if (n == 0)
        break;
      if (same && b.len > 0 && b.s[b.len - 1] == '\n') {
        b.len--; /* the turn goes on: this text on the same line */
        sb_put(&b, " ", 1);
      } else {
        sb_put(&b, who, strlen(who));
        sb_put(&b, ": ", 2);
      }
      sb_put(&b, s, n);
      sb_put(&b, "\n", 1);
      break;
    }
    case WD_FMT_SEGMENTS:
      sb_printf(&b, "[");
      sb_time(&b, g->start, '.');
      sb_printf(&b, " --> ");
      sb_time(&b, g->end, '.');
      sb_printf(&b, "]  ");
      sb_put(&b, who, strlen(who));
      sb_put(&b, ": ", 2);
      sb_cue_text(&b, text);
      sb_printf(&b, "\n");
      break;
    case WD_FMT_SRT:
    case WD_FMT_VTT:
      if (fmt == WD_FMT_SRT)
        sb_printf(&b, "%d\n", i + 1);
      sb_time(&b, g->start, sep);
      sb_printf(&b, " --> ");
      sb_time(&b, g->end, sep);
      sb_printf(&b, "\n");
      if (fmt == WD_FMT_SRT) {
        sb_put(&b, who, strlen(who));
        sb_put(&b, ": ", 2);
      } else {
        sb_put(&b, "<v ", 3);
        sb_put(&b, who, strlen(who));
        sb_put(&b, ">", 1);
      }
      sb_cue_text(&b, text);
      sb_printf(&b, "\n\n");
      break;
    default:
      free(b.s);
      return WD_EINVAL;
    }
  }
  if (fmt == WD_FMT_TEXT && b.len == 0)
    sb_put(&b, "\n", 1); /* as wd_render's text: one line, empty */
  return sb_finish(&b, ret_text);
}
