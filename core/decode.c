/*
 * decode.c - the decoding options' defaults, the transcript type, the
 * compression ratio, and wd_decode_transcribe(): one file through one
 * wd_decoder_t (decoder.c holds the policy) on one engine slot.
 *
 * Threading: called on the thread that owns the engine; no globals.
 * Ownership: the transcript owns its segments' text and token arrays.
 */
#include "decode.h"

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
  };
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

/* Runs one decoder alone on sequence slot 0 and audio slot 0: the worker's
 * loop (worker.c) for a single job, without threads. */
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
  int rc = wd_decoder_new(tok, e->n_mels, e->n_text_ctx, copy, n_frames, opts, &d);
  const int seq0 = 0;
  for (wd_dec_need_t need; rc == 0 && (need = wd_decoder_need(d)) != WD_DEC_DONE;) {
    if (need == WD_DEC_ENCODE) {
      if ((rc = e->encode(e->self, 0, wd_decoder_window(d))) == 0)
        rc = wd_decoder_encoded(d);
      continue;
    }
    int32_t tokens[WD_DECODER_MAX_ROWS];
    int reset = 0;
    const float *lg = NULL;
    if (wd_decoder_rows(d, tokens, &reset) != 1) {
      rc = WD_EINTERNAL;
      break;
    }
    if (reset && (rc = e->seq_reset(e->self, 0, 0)) < 0)
      break;
    if ((rc = e->step(e->self, 1, &seq0, tokens, &lg)) == 0)
      rc = wd_decoder_advance(d, &lg);
  }
  if (rc == 0)
    rc = wd_decoder_take_result(d, out);
  wd_decoder_free(d);
  return rc;
}
