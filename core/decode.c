/*
 * decode.c - the decoding options' defaults, the prompt's tail and the
 * compression ratio (decoder.c holds the policy, worker.c runs it; the
 * single-file driver the tests use is tests/wd_transcribe.h).
 *
 * Threading: called on the thread that owns the engine; no globals.
 * Ownership: the transcript owns its segments' text and token arrays.
 */
#include "decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "error.h"
#include "pystr.h"

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
    .temperature_inc = 0.2f,
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
  /* openai: tokenizer.encode(" " + prompt.strip()), Python's strip. */
  size_t n = strlen(text);
  const char *tail = text + wd_decode_text_tail(text, n);
  const char *s = wd_py_strip(tail, strlen(tail), &n);
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

