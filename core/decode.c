/*
 * decode.c - greedy Whisper decoding with timestamps over a whole file.
 *
 * Threading: called on the worker thread that owns the engine; no globals.
 * Ownership: the transcript owns its segments' text and token arrays.
 * ref: openai/whisper decoding.py (DecodingTask, ApplyTimestampRules,
 * SuppressBlank, SuppressTokens, GreedyDecoder, detect_language) and
 * transcribe.py (the seek loop and segmenting), v20250625.
 */
#include "decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "error.h"
#include "log.h"

#define WD_N_FRAMES 3000        /* mel frames per 30 s window */
#define WD_SAMPLE_LEN 224       /* n_text_ctx / 2: most tokens sampled per window */
#define WD_PROMPT_MAX 223       /* n_text_ctx / 2 - 1 */
#define WD_TIME_PRECISION 0.02  /* seconds per timestamp token */
#define WD_INPUT_STRIDE 2       /* mel frames per audio token */

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
  }
  free(t->segments);
  free(t->text);
  memset(t, 0, sizeof *t);
}

/* Growable token list. */
typedef struct {
  int32_t *v;
  int n, cap;
} wd_toks_t;

static int toks_push(wd_toks_t *t, int32_t id) {
  if (t->n == t->cap) {
    int cap = t->cap ? t->cap * 2 : 256;
    int32_t *v = realloc(t->v, (size_t)cap * sizeof *v);
    if (!v)
      return WD_ENOMEM;
    t->v = v;
    t->cap = cap;
  }
  t->v[t->n++] = id;
  return 0;
}

/* Everything one window's decode needs, allocated once per file. */
typedef struct {
  const wd_engine_t *e;
  const wd_tokenizer_t *tok;
  const wd_special_tokens_t *sp;
  const wd_decode_opts_t *opts;
  int32_t sot_seq[3];
  int n_sot;
  int32_t *suppress;   /* SuppressTokens("-1") ids */
  int n_suppress;
  float *logits;       /* (n_vocab) working copy, filtered in place */
  float *window;       /* (n_mels, 3000) current mel window */
} wd_dec_t;

/* log(sum(exp(x))) over x[0..n) with -inf entries allowed. */
static double logsumexp(const float *x, int n) {
  float mx = -INFINITY;
  for (int i = 0; i < n; i++)
    if (x[i] > mx)
      mx = x[i];
  if (mx == -INFINITY)
    return -INFINITY;
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += exp((double)x[i] - mx);
  return mx + log(s);
}

/* ApplyTimestampRules on d->logits for the sampled tokens seq[0..n). */
static void apply_timestamp_rules(wd_dec_t *d, const int32_t *seq, int n) {
  const wd_special_tokens_t *sp = d->sp;
  float *lg = d->logits;
  const int nv = sp->n_vocab, tb = sp->ts_begin;
  lg[sp->notimestamps] = -INFINITY;
  const int last_ts = n >= 1 && seq[n - 1] >= tb;
  const int penult_ts = n < 2 || seq[n - 2] >= tb;
  if (last_ts) {
    if (penult_ts) /* a pair just closed: text (or EOT) must follow */
      for (int i = tb; i < nv; i++)
        lg[i] = -INFINITY;
    else /* an opening timestamp needs its closing one: no text */
      for (int i = 0; i < sp->eot; i++)
        lg[i] = -INFINITY;
  }
  /* Timestamps never decrease, and a segment has non-zero length. */
  int32_t ts_last = -1;
  for (int i = n - 1; i >= 0; i--)
    if (seq[i] >= tb) {
      ts_last = seq[i];
      break;
    }
  if (ts_last >= 0) {
    const int32_t upto = (last_ts && !penult_ts) ? ts_last : ts_last + 1;
    for (int i = tb; i < upto && i < nv; i++)
      lg[i] = -INFINITY;
  }
  if (n == 0) {
    /* The first token is a timestamp, at most max_initial_timestamp in. */
    for (int i = 0; i < tb; i++)
      lg[i] = -INFINITY;
    if (d->opts->max_initial_timestamp > 0) {
      const int idx = (int)lround(d->opts->max_initial_timestamp / WD_TIME_PRECISION);
      for (int i = tb + idx + 1; i < nv; i++)
        lg[i] = -INFINITY;
    }
  }
  /* If timestamps together are likelier than any single text token, take one. */
  const double lse_all = logsumexp(lg, nv);
  const double ts_lp = logsumexp(lg + tb, nv - tb) - lse_all;
  float max_text = -INFINITY;
  for (int i = 0; i < tb; i++)
    if (lg[i] > max_text)
      max_text = lg[i];
  if (ts_lp > (double)max_text - lse_all)
    for (int i = 0; i < tb; i++)
      lg[i] = -INFINITY;
}

/* Result of decoding one window. */
typedef struct {
  wd_toks_t tokens;    /* sampled tokens, without the final EOT */
  double sum_logprob;
  float no_speech_prob;
  float avg_logprob;
} wd_window_result_t;

/* Feeds the initial tokens, then samples greedily until EOT or the limits. */
static int decode_window(wd_dec_t *d, const int32_t *prompt, int n_prompt,
                         wd_window_result_t *res) {
  const wd_engine_t *e = d->e;
  const wd_special_tokens_t *sp = d->sp;
  const int nv = sp->n_vocab;
  int rc;
  wd_toks_t init = { 0 };
  memset(res, 0, sizeof *res);

  /* initial tokens: [<|startofprev|> prompt[-223:]] sot_seq [<|notimestamps|>] */
  if (n_prompt > 0) {
    if ((rc = toks_push(&init, sp->startofprev)) < 0)
      goto out;
    const int from = n_prompt > WD_PROMPT_MAX ? n_prompt - WD_PROMPT_MAX : 0;
    for (int i = from; i < n_prompt; i++)
      if ((rc = toks_push(&init, prompt[i])) < 0)
        goto out;
  }
  const int sot_index = init.n;
  for (int i = 0; i < d->n_sot; i++)
    if ((rc = toks_push(&init, d->sot_seq[i])) < 0)
      goto out;
  if (d->opts->without_timestamps && (rc = toks_push(&init, sp->notimestamps)) < 0)
    goto out;
  if (init.n + 1 > e->n_text_ctx) {
    rc = WD_EINVAL;
    goto out;
  }

  if ((rc = e->seq_reset(e->self, 0, 0)) < 0)
    goto out;
  const int seq0 = 0;
  const float *lg = NULL;
  for (int i = 0; i < init.n; i++) {
    if ((rc = e->step(e->self, 1, &seq0, &init.v[i], &lg)) < 0)
      goto out;
    if (i == sot_index) {
      /* no_speech_prob = softmax(logits at SOT)[<|nospeech|>], before filters. */
      res->no_speech_prob = (float)exp((double)lg[sp->nospeech] - logsumexp(lg, nv));
    }
  }

  for (int step = 0; step < WD_SAMPLE_LEN; step++) {
    memcpy(d->logits, lg, (size_t)nv * sizeof *d->logits);
    const int n_sampled = res->tokens.n;
    if (d->opts->suppress_blank && n_sampled == 0) {
      d->logits[220] = -INFINITY; /* encode(" ") is [220] in both vocabularies */
      d->logits[sp->eot] = -INFINITY;
    }
    for (int i = 0; i < d->n_suppress; i++)
      d->logits[d->suppress[i]] = -INFINITY;
    if (!d->opts->without_timestamps)
      apply_timestamp_rules(d, res->tokens.v, n_sampled);

    int32_t best = 0;
    for (int i = 1; i < nv; i++)
      if (d->logits[i] > d->logits[best])
        best = i;
    const double lp = (double)d->logits[best] - logsumexp(d->logits, nv);
    res->sum_logprob += lp;
    if (best == sp->eot)
      break;
    if ((rc = toks_push(&res->tokens, best)) < 0)
      goto out;
    /* openai stops once the whole sequence exceeds n_text_ctx. */
    if (init.n + res->tokens.n > e->n_text_ctx)
      break;
    if ((rc = e->step(e->self, 1, &seq0, &best, &lg)) < 0)
      goto out;
  }
  res->avg_logprob = (float)(res->sum_logprob / (res->tokens.n + 1));
  rc = 0;
out:
  free(init.v);
  return rc;
}

/* Text of the tokens below EOT, malloc'd and NUL-terminated. */
static char *tokens_text(const wd_tokenizer_t *tok, const int32_t *ids, int n, int eot) {
  int32_t *text_ids = malloc(((size_t)n + 1) * sizeof *text_ids);
  int m = 0;
  if (!text_ids)
    return NULL;
  for (int i = 0; i < n; i++)
    if (ids[i] < eot)
      text_ids[m++] = ids[i];
  /* Ask for the size first (NULL, 0), then decode into a buffer that fits. */
  size_t need = 0;
  char *s = NULL;
  int rc = wd_tokenizer_decode(tok, text_ids, m, NULL, 0, &need);
  if (rc == 0 || rc == WD_ERANGE) {
    s = malloc(need + 1);
    size_t len = 0;
    if (s && wd_tokenizer_decode(tok, text_ids, m, s, need + 1, &len) < 0) {
      free(s);
      s = NULL;
    }
  }
  free(text_ids);
  return s;
}

static int add_segment(wd_transcript_t *t, const wd_dec_t *d, int seek, double start, double end,
                       const int32_t *ids, int n, const wd_window_result_t *w, float cr) {
  wd_segment_t *segs = realloc(t->segments, ((size_t)t->n_segments + 1) * sizeof *segs);
  if (!segs)
    return WD_ENOMEM;
  t->segments = segs;
  wd_segment_t *s = &segs[t->n_segments];
  *s = (wd_segment_t){
    .id = t->n_segments, .seek = seek, .start = start, .end = end,
    .temperature = 0.0f, .avg_logprob = w->avg_logprob, .compression_ratio = cr,
    .no_speech_prob = w->no_speech_prob,
  };
  s->tokens = malloc(((size_t)n + 1) * sizeof *s->tokens);
  s->text = tokens_text(d->tok, ids, n, d->sp->eot);
  if (!s->tokens || !s->text) {
    free(s->tokens);
    free(s->text);
    return WD_ENOMEM;
  }
  memcpy(s->tokens, ids, (size_t)n * sizeof *ids);
  s->n_tokens = n;
  t->n_segments++;
  return 0;
}

/* Copies mel[:, seek:seek+size] into the 3000-frame window, zero-padded
 * (pad_or_trim pads with 0.0 in normalised log-mel units). */
static void extract_window(const wd_dec_t *d, const float *mel, int n_frames, int seek, int size) {
  const int nm = d->e->n_mels;
  for (int b = 0; b < nm; b++) {
    float *dst = d->window + (size_t)b * WD_N_FRAMES;
    const float *src = mel + (size_t)b * (size_t)n_frames + (size_t)seek;
    memcpy(dst, src, (size_t)size * sizeof *dst);
    memset(dst + size, 0, (size_t)(WD_N_FRAMES - size) * sizeof *dst);
  }
}

/* detect_language: logits after [SOT] alone, restricted to language tokens. */
static int detect_language(wd_dec_t *d, const float *mel, int n_frames, int32_t *ret_lang,
                           float *ret_prob) {
  const wd_special_tokens_t *sp = d->sp;
  /* pad_or_trim(mel, 3000) of the whole padded mel: real padding frames. */
  extract_window(d, mel, n_frames, 0, n_frames < WD_N_FRAMES ? n_frames : WD_N_FRAMES);
  int rc = d->e->encode(d->e->self, 0, d->window);
  if (rc < 0)
    return rc;
  if ((rc = d->e->seq_reset(d->e->self, 0, 0)) < 0)
    return rc;
  const int seq0 = 0;
  const float *lg = NULL;
  if ((rc = d->e->step(d->e->self, 1, &seq0, &sp->sot, &lg)) < 0)
    return rc;
  const int a = sp->lang_begin, b = sp->lang_begin + sp->n_langs;
  int32_t best = a;
  for (int i = a; i < b; i++)
    if (lg[i] > lg[best])
      best = i;
  *ret_lang = best;
  *ret_prob = (float)exp((double)lg[best] - logsumexp(lg + a, b - a));
  return 0;
}

int wd_decode_transcribe(const wd_engine_t *e, const wd_tokenizer_t *tok, const float *mel,
                         int n_frames, const wd_decode_opts_t *opts, wd_transcript_t *out) {
  memset(out, 0, sizeof *out);
  if (!e || !tok || !mel || !opts || n_frames < WD_N_FRAMES)
    return WD_EINVAL;
  const wd_special_tokens_t *sp = wd_tokenizer_special(tok);
  if (sp->n_vocab != e->n_vocab)
    return WD_EINVAL;
  const int content_frames = n_frames - WD_N_FRAMES;
  out->duration = content_frames * 160.0 / 16000.0;
  int rc = 0;
  wd_toks_t all = { 0 };
  wd_dec_t d = { .e = e, .tok = tok, .sp = sp, .opts = opts };
  d.logits = malloc((size_t)sp->n_vocab * sizeof *d.logits);
  d.window = malloc((size_t)e->n_mels * WD_N_FRAMES * sizeof *d.window);
  d.suppress = malloc(512 * sizeof *d.suppress);
  if (!d.logits || !d.window || !d.suppress) {
    rc = WD_ENOMEM;
    goto out;
  }
  if ((rc = wd_tokenizer_suppress_tokens(tok, d.suppress, 512, &d.n_suppress)) < 0)
    goto out;

  /* The SOT sequence: [SOT] for English-only models, else [SOT, lang, task]. */
  const int multilingual = sp->n_vocab >= 51865;
  /* Set when language detection has already encoded the first window exactly
   * as the seek loop would: only when the audio fills it (at least 30 s), since
   * detection reads real padding frames where the loop pads with zeros. */
  int window0_encoded = 0;
  d.sot_seq[d.n_sot++] = sp->sot;
  if (multilingual) {
    int32_t lang = -1;
    float prob = 1.0f;
    if (opts->language && strcmp(opts->language, "auto") != 0) {
      lang = wd_tokenizer_lang_id(tok, opts->language);
      if (lang < 0) {
        rc = WD_EINVAL;
        goto out;
      }
    } else if ((rc = detect_language(&d, mel, n_frames, &lang, &prob)) < 0) {
      goto out;
    } else {
      window0_encoded = content_frames >= WD_N_FRAMES;
    }
    const char *code = wd_tokenizer_lang_code(tok, lang);
    snprintf(out->language, sizeof out->language, "%s", code ? code : "en");
    out->language_prob = prob;
    d.sot_seq[d.n_sot++] = lang;
    d.sot_seq[d.n_sot++] = opts->translate ? sp->translate : sp->transcribe;
  } else {
    snprintf(out->language, sizeof out->language, "en");
    out->language_prob = 1.0f;
  }

  /* The initial prompt comes first in the context of every window. */
  for (int i = 0; i < opts->n_prompt; i++)
    if ((rc = toks_push(&all, opts->prompt[i])) < 0)
      goto out;
  int prompt_reset_since = 0;

  int seek = 0;
  while (seek < content_frames) {
    const double time_offset = seek * 0.01;
    const int segment_size = content_frames - seek < WD_N_FRAMES ? content_frames - seek
                                                                 : WD_N_FRAMES;
    const double segment_duration = segment_size * 0.01;
    if (seek == 0 && window0_encoded) {
      /* the engine still holds window 0's encoding from detect_language */
    } else {
      extract_window(&d, mel, n_frames, seek, segment_size);
      if ((rc = e->encode(e->self, 0, d.window)) < 0)
        goto out;
    }
    wd_window_result_t w;
    rc = decode_window(&d, all.v + prompt_reset_since, all.n - prompt_reset_since, &w);
    if (rc < 0) {
      free(w.tokens.v);
      goto out;
    }
    /* The no-speech rule: skip a silent window unless its text is confident. */
    if (w.no_speech_prob > opts->no_speech_threshold && !(w.avg_logprob > opts->logprob_threshold)) {
      free(w.tokens.v);
      seek += segment_size;
      continue;
    }
    char *wtext = tokens_text(tok, w.tokens.v, w.tokens.n, sp->eot);
    const float cr = wtext ? wd_compression_ratio(wtext, strlen(wtext)) : 0.0f;
    free(wtext);

    const int32_t *tk = w.tokens.v;
    const int n = w.tokens.n, tb = sp->ts_begin;
    const int single_ts_ending = n >= 2 && tk[n - 2] < tb && tk[n - 1] >= tb;
    const int n_seg_before = out->n_segments;
    int last_slice = 0, any_consecutive = 0;
    for (int i = 1; i < n && rc == 0; i++) {
      if (!(tk[i - 1] >= tb && tk[i] >= tb))
        continue;
      /* A pair of timestamps closes one segment and opens the next. */
      any_consecutive = 1;
      const int cur = i;
      rc = add_segment(out, &d, seek, time_offset + (tk[last_slice] - tb) * WD_TIME_PRECISION,
                       time_offset + (tk[cur - 1] - tb) * WD_TIME_PRECISION, tk + last_slice,
                       cur - last_slice, &w, cr);
      last_slice = cur;
    }
    if (rc == 0 && any_consecutive) {
      if (single_ts_ending) {
        rc = add_segment(out, &d, seek, time_offset + (tk[last_slice] - tb) * WD_TIME_PRECISION,
                         time_offset + (tk[n - 1] - tb) * WD_TIME_PRECISION, tk + last_slice,
                         n - last_slice, &w, cr);
        seek += segment_size;
      } else {
        /* Resume at the last closed timestamp; the tail is decoded again. */
        const int advance = (tk[last_slice - 1] - tb) * WD_INPUT_STRIDE;
        /* Never stall: a window that closes no time moves on entirely. */
        seek += advance > 0 ? advance : segment_size;
      }
    } else if (rc == 0) {
      double duration = segment_duration;
      for (int i = n - 1; i >= 0; i--)
        if (tk[i] >= tb) {
          if (tk[i] != tb)
            duration = (tk[i] - tb) * WD_TIME_PRECISION;
          break;
        }
      rc = add_segment(out, &d, seek, time_offset, time_offset + duration, tk, n, &w, cr);
      seek += segment_size;
    }
    free(w.tokens.v);
    if (rc < 0)
      goto out;
    for (int s = n_seg_before; s < out->n_segments; s++)
      for (int i = 0; i < out->segments[s].n_tokens; i++)
        if ((rc = toks_push(&all, out->segments[s].tokens[i])) < 0)
          goto out;
    if (!opts->condition_on_previous_text)
      prompt_reset_since = all.n;
  }

  /* Full text: every segment's text in order. */
  size_t total = 1;
  for (int i = 0; i < out->n_segments; i++)
    total += strlen(out->segments[i].text);
  out->text = malloc(total);
  if (!out->text) {
    rc = WD_ENOMEM;
    goto out;
  }
  out->text[0] = '\0';
  size_t pos = 0;
  for (int i = 0; i < out->n_segments; i++) {
    size_t l = strlen(out->segments[i].text);
    memcpy(out->text + pos, out->segments[i].text, l + 1);
    pos += l;
  }
out:
  free(all.v);
  free(d.logits);
  free(d.window);
  free(d.suppress);
  if (rc < 0)
    wd_transcript_free(out);
  return rc;
}
