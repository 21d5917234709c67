/*
 * decode.c - the decoding options' defaults, the transcript type, the
 * compression ratio, and wd_decode_transcribe(): one file through one
 * wd_decoder_t (decoder.c holds the policy) on one engine slot.
 *
 * Threading: called on the thread that owns the engine; no globals.
 * Ownership: the transcript owns its segments' text and token arrays.
 */
#include "decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "decoder.h"
#include "error.h"

void wd_decode_opts_default(wd_decode_opts_t *o) {
  *o = (wd_decode_opts_t){
    .language = NULL,
    .max_initial_timestamp = 1.0f,
    .suppress_blank = 1,
    .condition_on_previous_text = 1,
    .no_speech_threshold = 0.6f,
    .logprob_threshold = -1.0f,
    .compression_ratio_threshold = 2.4f,
    .temperatures = { 0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f },
    .n_temperatures = 6,
    .length_penalty = NAN,
    .hallucination_silence_threshold = NAN,
  };
}

int wd_decode_set_temperature(wd_decode_opts_t *o, float t, float inc) {
  if (!(t >= 0.0f && t <= 1.0f) || !(inc <= 1.0f) || isnan(inc))
    return WD_EINVAL;
  if (inc <= 0.0f) {
    o->n_temperatures = 1;
    o->temperatures[0] = t;
    return 0;
  }
  float v[WD_DECODE_MAX_TEMPS];
  int n = 0;
  for (;; n++) {
    /* computed from t each time, as arange does, not accumulated */
    const double x = (double)t + (double)n * (double)inc;
    if (x > 1.0 + 1e-6)
      break;
    if (n == WD_DECODE_MAX_TEMPS) /* a longer schedule than decoding holds: refused, */
      return WD_ERANGE;           /* not cut (each step is a whole decode of a window) */
    v[n] = (float)x;
  }
  memcpy(o->temperatures, v, (size_t)n * sizeof *v);
  o->n_temperatures = n;
  return 0;
}

size_t wd_decode_text_tail(const char *s, size_t n) {
  if (n <= 8 * 1024)
    return 0;
  const size_t lo = n > WD_DECODE_TEXT_MAX ? n - WD_DECODE_TEXT_MAX : 0;
  int cuts = 0;
  for (size_t i = n - 1; i-- > lo;)
    if (s[i] == ' ' && !strchr(" \t\n\r\v\f", s[i + 1]) && s[i + 1] != '\0' &&
        ++cuts == WD_DECODE_TEXT_TOKENS)
      return i;
  size_t at = lo;
  while (at < n && ((unsigned char)s[at] & 0xc0) == 0x80) /* not inside a character */
    at++;
  return at;
}

int wd_decode_encode_text(const wd_tokenizer_t *tok, const char *text, int32_t **ret_ids,
                          int *ret_n) {
  *ret_ids = NULL;
  *ret_n = 0;
  if (!tok || !text)
    return WD_EINVAL;
  size_t n = strlen(text);
  const char *s = text + wd_decode_text_tail(text, n);
  n = strlen(s);
  while (n > 0 && strchr(" \t\n\r\v\f", s[0])) {
    s++;
    n--;
  }
  while (n > 0 && strchr(" \t\n\r\v\f", s[n - 1]))
    n--;
  char *buf = malloc(n + 2);
  if (!buf)
    return WD_ENOMEM;
  buf[0] = ' ';
  memcpy(buf + 1, s, n);
  buf[n + 1] = '\0';
  int need = 0;
  int rc = wd_tokenizer_encode(tok, buf, n + 1, NULL, 0, &need);
  if (rc == 0 || rc == WD_ERANGE) {
    int32_t *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof *ids);
    rc = ids ? wd_tokenizer_encode(tok, buf, n + 1, ids, need, &need) : WD_ENOMEM;
    if (rc == 0) {
      if (need > WD_DECODE_TEXT_TOKENS) { /* decoding uses the last ones alone */
        memmove(ids, ids + (need - WD_DECODE_TEXT_TOKENS),
                WD_DECODE_TEXT_TOKENS * sizeof *ids);
        need = WD_DECODE_TEXT_TOKENS;
      }
      *ret_ids = ids;
      *ret_n = need;
    } else {
      free(ids);
    }
  }
  free(buf);
  return rc;
}

float wd_compression_ratio(const char *text, size_t len) {
  if (len == 0)
    return 0.0f;
  uLongf cap = compressBound((uLong)len);
  Bytef *buf = malloc(cap);
  if (!buf)
    return 0.0f;
  /* zlib.compress() uses the default level (6 via Z_DEFAULT_COMPRESSION). */
  float r = 0.0f;
  if (compress2(buf, &cap, (const Bytef *)text, (uLong)len, Z_DEFAULT_COMPRESSION) == Z_OK)
    r = (float)len / (float)cap;
  free(buf);
  return r;
}

void wd_transcript_free(wd_transcript_t *t) {
  if (!t)
    return;
  for (int i = 0; i < t->n_segments; i++) {
    free(t->segments[i].text);
    free(t->segments[i].tokens);
    wd_words_free(t->segments[i].words, t->segments[i].n_words);
  }
  free(t->segments);
  free(t->text);
  memset(t, 0, sizeof *t);
}

/* Runs one decoder alone on sequence slots 0.. and audio slot 0: the
 * worker's loop (worker.c) for a single job, without threads. */
int wd_decode_transcribe(const wd_engine_t *e, const wd_tokenizer_t *tok, const float *mel,
                         int n_frames, const wd_decode_opts_t *opts, wd_transcript_t *out) {
  memset(out, 0, sizeof *out);
  if (!e || !tok || !mel || !opts || n_frames < 3000)
    return WD_EINVAL;
  if (wd_tokenizer_special(tok)->n_vocab != e->n_vocab)
    return WD_EINVAL;
  const size_t bytes = (size_t)e->n_mels * (size_t)n_frames * sizeof *mel;
  float *copy = malloc(bytes);
  if (!copy)
    return WD_ENOMEM;
  memcpy(copy, mel, bytes);
  wd_decoder_t *d = NULL;
  int rc = wd_decoder_new(tok, e, copy, n_frames, opts, &d);
  if (rc == 0 && wd_decoder_n_rows(d) > e->max_seqs)
    rc = WD_ERANGE;
  for (wd_dec_need_t need; rc == 0 && (need = wd_decoder_need(d)) != WD_DEC_DONE;) {
    if (need == WD_DEC_ENCODE) {
      if ((rc = e->encode(e->self, 0, wd_decoder_window(d))) == 0)
        rc = wd_decoder_encoded(d);
      continue;
    }
    /* rows are slots */
    wd_dec_work_t w;
    wd_decoder_work(d, &w);
    const float *lg = NULL;
    if (w.reset && (rc = e->seq_reset(e->self, 0, 0)) < 0)
      break;
    if (w.n_copy > 0 && (rc = e->seq_copy(e->self, w.n_copy, w.copy_dst, w.copy_src)) < 0)
      break;
    if (w.n_align > 0) {
      if ((rc = e->align(e->self, 0, w.n_align, w.align, w.align_n_text, w.n_heads, w.heads,
                         w.qk, w.probs)) == 0)
        rc = wd_decoder_advance(d, NULL);
      continue;
    }
    if (w.n_prefill > 0) {
      if ((rc = e->prefill(e->self, 0, w.n_prefill, w.prefill, &lg)) == 0)
        rc = wd_decoder_advance(d, &lg);
      continue;
    }
    if (w.n < 1) {
      rc = WD_EINTERNAL;
      break;
    }
    if ((rc = e->step(e->self, w.n, w.rows, w.tokens, &lg)) < 0)
      break;
    const float *rows[WD_DECODE_MAX_ROWS];
    for (int i = 0; i < w.n; i++)
      rows[i] = lg + (size_t)i * (size_t)e->n_vocab;
    rc = wd_decoder_advance(d, rows);
  }
  if (rc == 0)
    rc = wd_decoder_take_result(d, out);
  wd_decoder_free(d);
  return rc;
}
