/*
 * decoder.c - greedy Whisper decoding of one file as a state machine (see
 * decoder.h).
 *
 * Phases, in order:
 *   DETECT_ENCODE, DETECT_STEP   language detection (multilingual models
 *                                without a language): encode pad_or_trim of
 *                                the whole padded mel, one SOT step.
 *   WINDOW                       pick the next window at seek; done at the
 *                                end of the audio.
 *   ENCODE                       the window needs encoding.
 *   FEED                         initial tokens, one per step (init[fed]).
 *   SAMPLE                       the last step's logits choose the next token.
 * After a window's last token: the no-speech rule, segmenting at consecutive
 * timestamps, the seek update and the carried context, then WINDOW again.
 *
 * Ownership: the decoder owns the mel, its copies of the options, and the
 * transcript until wd_decoder_take_result() moves it out.
 * ref: openai/whisper decoding.py (DecodingTask, ApplyTimestampRules,
 * SuppressBlank, SuppressTokens, GreedyDecoder, detect_language) and
 * transcribe.py (the seek loop and segmenting), v20250625.
 */
#include "decoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define WD_N_FRAMES 3000        /* mel frames per 30 s window */
#define WD_SAMPLE_LEN 224       /* n_text_ctx / 2: most tokens sampled per window */
#define WD_PROMPT_MAX 223       /* n_text_ctx / 2 - 1 */
#define WD_TIME_PRECISION 0.02  /* seconds per timestamp token */
#define WD_INPUT_STRIDE 2       /* mel frames per audio token */
#define WD_SUPPRESS_MAX 512

typedef enum { PH_DETECT_ENCODE, PH_DETECT_STEP, PH_WINDOW, PH_ENCODE, PH_FEED, PH_SAMPLE,
               PH_DONE } wd_phase_t;

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

struct wd_decoder {
  const wd_tokenizer_t *tok;
  const wd_special_tokens_t *sp;
  wd_decode_opts_t opts;       /* language and prompt point into the copies below */
  char language[16];
  int32_t *prompt;
  int n_mels, n_text_ctx;
  float *mel;                  /* (n_mels, n_frames), owned */
  int n_frames, content_frames;
  float *window;               /* (n_mels, 3000) the window to encode */
  float *logits;               /* (n_vocab) working copy, filtered in place */
  int32_t suppress[WD_SUPPRESS_MAX]; /* SuppressTokens("-1") ids */
  int n_suppress;
  int32_t sot_seq[3];
  int n_sot;

  wd_phase_t phase;
  int window0_encoded;         /* detection's encode is the first window's */
  /* the seek loop (transcribe.py) */
  int seek, segment_size;
  wd_toks_t all;               /* the initial prompt, then every segment's tokens */
  int prompt_reset_since;
  /* the window being decoded (DecodingTask) */
  wd_toks_t init;              /* initial tokens */
  int sot_index, fed;          /* init[fed] is fed next */
  wd_toks_t tokens;            /* sampled, without the final EOT */
  double sum_logprob;
  float no_speech_prob;
  int32_t next;                /* SAMPLE: the token fed at the next step */
  int reset;                   /* the next step starts a sequence */

  wd_transcript_t out;
};

/* ---- filters (decoding.py) -------------------------------------------- */

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

/* ApplyTimestampRules on d->logits for the sampled tokens seq[0..n).
 * Returns logsumexp of the filtered logits when the last rule left them as
 * they were when it computed it (the caller's log-probability reuses it:
 * one pass of 52k exp() per row and step instead of two), else NAN. */
static double apply_timestamp_rules(wd_decoder_t *d, const int32_t *seq, int n) {
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
    if (d->opts.max_initial_timestamp > 0) {
      const int idx = (int)lround(d->opts.max_initial_timestamp / WD_TIME_PRECISION);
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
  if (!(ts_lp > (double)max_text - lse_all))
    return lse_all;
  for (int i = 0; i < tb; i++)
    lg[i] = -INFINITY;
  return NAN;
}

/* The filters, then the greedy choice; adds its log-probability. */
static int32_t sample_greedy(wd_decoder_t *d, const float *lg) {
  const wd_special_tokens_t *sp = d->sp;
  const int nv = sp->n_vocab;
  memcpy(d->logits, lg, (size_t)nv * sizeof *d->logits);
  if (d->opts.suppress_blank && d->tokens.n == 0) {
    d->logits[220] = -INFINITY; /* encode(" ") is [220] in both vocabularies */
    d->logits[sp->eot] = -INFINITY;
  }
  for (int i = 0; i < d->n_suppress; i++)
    d->logits[d->suppress[i]] = -INFINITY;
  double lse = NAN;
  if (!d->opts.without_timestamps)
    lse = apply_timestamp_rules(d, d->tokens.v, d->tokens.n);
  int32_t best = 0;
  for (int i = 1; i < nv; i++)
    if (d->logits[i] > d->logits[best])
      best = i;
  d->sum_logprob += (double)d->logits[best] - (isnan(lse) ? logsumexp(d->logits, nv) : lse);
  return best;
}

/* ---- text and segments ------------------------------------------------- */

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

/* Window-wide values every segment of a window shares. */
typedef struct {
  float avg_logprob, compression_ratio, no_speech_prob;
} wd_window_stats_t;

static int add_segment(wd_decoder_t *d, double start, double end, const int32_t *ids, int n,
                       const wd_window_stats_t *w) {
  wd_transcript_t *t = &d->out;
  wd_segment_t *segs = realloc(t->segments, ((size_t)t->n_segments + 1) * sizeof *segs);
  if (!segs)
    return WD_ENOMEM;
  t->segments = segs;
  wd_segment_t *s = &segs[t->n_segments];
  *s = (wd_segment_t){
    .id = t->n_segments, .seek = d->seek, .start = start, .end = end,
    .temperature = 0.0f, .avg_logprob = w->avg_logprob,
    .compression_ratio = w->compression_ratio, .no_speech_prob = w->no_speech_prob,
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
static void extract_window(wd_decoder_t *d, int seek, int size) {
  for (int b = 0; b < d->n_mels; b++) {
    float *dst = d->window + (size_t)b * WD_N_FRAMES;
    const float *src = d->mel + (size_t)b * (size_t)d->n_frames + (size_t)seek;
    memcpy(dst, src, (size_t)size * sizeof *dst);
    memset(dst + size, 0, (size_t)(WD_N_FRAMES - size) * sizeof *dst);
  }
}

/* The full text, every segment's text in order; the decoder is done. */
static int finish(wd_decoder_t *d) {
  wd_transcript_t *t = &d->out;
  size_t total = 1;
  for (int i = 0; i < t->n_segments; i++)
    total += strlen(t->segments[i].text);
  if (!(t->text = malloc(total)))
    return WD_ENOMEM;
  size_t pos = 0;
  t->text[0] = '\0';
  for (int i = 0; i < t->n_segments; i++) {
    size_t l = strlen(t->segments[i].text);
    memcpy(t->text + pos, t->segments[i].text, l + 1);
    pos += l;
  }
  d->phase = PH_DONE;
  return 0;
}

/* ---- the seek loop (transcribe.py) ------------------------------------ */

/* Moves to the window at seek (encoding it unless detection already did),
 * or finishes at the end of the audio. */
static int next_window(wd_decoder_t *d) {
  if (d->seek >= d->content_frames)
    return finish(d);
  const int left = d->content_frames - d->seek;
  d->segment_size = left < WD_N_FRAMES ? left : WD_N_FRAMES;
  if (d->seek == 0 && d->window0_encoded) {
    d->window0_encoded = 0;
    return wd_decoder_encoded(d); /* the audio slot still holds detection's encoding */
  }
  extract_window(d, d->seek, d->segment_size);
  d->phase = PH_ENCODE;
  return 0;
}

/* The window's tokens are sampled: the no-speech rule, segments, seek. */
static int end_window(wd_decoder_t *d) {
  const wd_decode_opts_t *o = &d->opts;
  const int32_t *tk = d->tokens.v;
  const int n = d->tokens.n, tb = d->sp->ts_begin;
  const wd_window_stats_t w = {
    .avg_logprob = (float)(d->sum_logprob / (n + 1)), .no_speech_prob = d->no_speech_prob,
  };
  /* The no-speech rule: skip a silent window unless its text is confident. */
  if (w.no_speech_prob > o->no_speech_threshold && !(w.avg_logprob > o->logprob_threshold)) {
    d->seek += d->segment_size;
    return next_window(d);
  }
  char *wtext = tokens_text(d->tok, tk, n, d->sp->eot);
  if (!wtext)
    return WD_ENOMEM;
  wd_window_stats_t ws = w;
  ws.compression_ratio = wd_compression_ratio(wtext, strlen(wtext));
  free(wtext);

  const double time_offset = d->seek * 0.01;
  const int single_ts_ending = n >= 2 && tk[n - 2] < tb && tk[n - 1] >= tb;
  const int n_seg_before = d->out.n_segments;
  int last_slice = 0, any_consecutive = 0, rc = 0;
  for (int i = 1; i < n && rc == 0; i++) {
    if (!(tk[i - 1] >= tb && tk[i] >= tb))
      continue;
    /* A pair of timestamps closes one segment and opens the next. */
    any_consecutive = 1;
    rc = add_segment(d, time_offset + (tk[last_slice] - tb) * WD_TIME_PRECISION,
                     time_offset + (tk[i - 1] - tb) * WD_TIME_PRECISION, tk + last_slice,
                     i - last_slice, &ws);
    last_slice = i;
  }
  if (rc == 0 && any_consecutive) {
    if (single_ts_ending) {
      rc = add_segment(d, time_offset + (tk[last_slice] - tb) * WD_TIME_PRECISION,
                       time_offset + (tk[n - 1] - tb) * WD_TIME_PRECISION, tk + last_slice,
                       n - last_slice, &ws);
      d->seek += d->segment_size;
    } else {
      /* Resume at the last closed timestamp; the tail is decoded again. */
      const int advance = (tk[last_slice - 1] - tb) * WD_INPUT_STRIDE;
      /* Never stall: a window that closes no time moves on entirely. */
      d->seek += advance > 0 ? advance : d->segment_size;
    }
  } else if (rc == 0) {
    double duration = d->segment_size * 0.01;
    for (int i = n - 1; i >= 0; i--)
      if (tk[i] >= tb) {
        if (tk[i] != tb)
          duration = (tk[i] - tb) * WD_TIME_PRECISION;
        break;
      }
    rc = add_segment(d, time_offset, time_offset + duration, tk, n, &ws);
    d->seek += d->segment_size;
  }
  if (rc < 0)
    return rc;
  for (int s = n_seg_before; s < d->out.n_segments; s++)
    for (int i = 0; i < d->out.segments[s].n_tokens; i++)
      if ((rc = toks_push(&d->all, d->out.segments[s].tokens[i])) < 0)
        return rc;
  if (!o->condition_on_previous_text)
    d->prompt_reset_since = d->all.n;
  return next_window(d);
}

/* ---- public ------------------------------------------------------------ */

int wd_decoder_new(const wd_tokenizer_t *tok, int n_mels, int n_text_ctx, float *mel,
                   int n_frames, const wd_decode_opts_t *opts, wd_decoder_t **ret) {
  *ret = NULL;
  if (!tok || !mel || !opts || n_frames < WD_N_FRAMES || n_mels <= 0 || n_text_ctx <= 0 ||
      opts->n_prompt < 0 || (opts->n_prompt > 0 && !opts->prompt)) {
    free(mel);
    return WD_EINVAL;
  }
  wd_decoder_t *d = calloc(1, sizeof *d);
  if (!d) {
    free(mel);
    return WD_ENOMEM;
  }
  d->mel = mel;
  d->tok = tok;
  d->sp = wd_tokenizer_special(tok);
  d->opts = *opts;
  d->n_mels = n_mels;
  d->n_text_ctx = n_text_ctx;
  d->n_frames = n_frames;
  d->content_frames = n_frames - WD_N_FRAMES;
  d->out.duration = d->content_frames * 160.0 / 16000.0;
  int rc = 0;
  d->window = malloc((size_t)n_mels * WD_N_FRAMES * sizeof *d->window);
  d->logits = malloc((size_t)d->sp->n_vocab * sizeof *d->logits);
  if (!d->window || !d->logits) {
    rc = WD_ENOMEM;
    goto fail;
  }
  if ((rc = wd_tokenizer_suppress_tokens(tok, d->suppress, WD_SUPPRESS_MAX, &d->n_suppress)) < 0)
    goto fail;
  /* The initial prompt comes first in the context of every window. */
  for (int i = 0; i < opts->n_prompt; i++)
    if ((rc = toks_push(&d->all, opts->prompt[i])) < 0)
      goto fail;
  d->opts.prompt = NULL;
  d->opts.n_prompt = 0;

  /* The SOT sequence: [SOT] for English-only models, else [SOT, lang, task]. */
  const char *lang = opts->language;
  const int detect = !lang || !lang[0] || strcmp(lang, "auto") == 0;
  d->opts.language = NULL;
  d->sot_seq[d->n_sot++] = d->sp->sot;
  if (wd_tokenizer_is_multilingual(tok)) {
    if (detect) {
      d->phase = PH_DETECT_ENCODE;
      /* pad_or_trim(mel, 3000) of the whole padded mel: real padding frames. */
      extract_window(d, 0, n_frames < WD_N_FRAMES ? n_frames : WD_N_FRAMES);
      return *ret = d, 0;
    }
    const int32_t id = wd_tokenizer_lang_id(tok, lang);
    if (id < 0) {
      rc = WD_EINVAL;
      goto fail;
    }
    snprintf(d->out.language, sizeof d->out.language, "%s", wd_tokenizer_lang_code(tok, id));
    d->out.language_prob = 1.0f;
    d->sot_seq[d->n_sot++] = id;
    d->sot_seq[d->n_sot++] = opts->translate ? d->sp->translate : d->sp->transcribe;
  } else {
    /* English-only models know one language and cannot translate. */
    if (opts->translate || (!detect && strcmp(lang, "en") != 0)) {
      rc = WD_EINVAL;
      goto fail;
    }
    snprintf(d->out.language, sizeof d->out.language, "en");
    d->out.language_prob = 1.0f;
  }
  if ((rc = next_window(d)) < 0)
    goto fail;
  return *ret = d, 0;
fail:
  wd_decoder_free(d);
  return rc;
}

void wd_decoder_free(wd_decoder_t *d) {
  if (!d)
    return;
  free(d->mel);
  free(d->window);
  free(d->logits);
  free(d->all.v);
  free(d->init.v);
  free(d->tokens.v);
  wd_transcript_free(&d->out);
  free(d);
}

wd_dec_need_t wd_decoder_need(const wd_decoder_t *d) {
  switch (d->phase) {
  case PH_DETECT_ENCODE:
  case PH_ENCODE:
    return WD_DEC_ENCODE;
  case PH_DONE:
    return WD_DEC_DONE;
  default:
    return WD_DEC_STEP;
  }
}

const float *wd_decoder_window(const wd_decoder_t *d) { return d->window; }

int wd_decoder_encoded(wd_decoder_t *d) {
  if (d->phase == PH_DETECT_ENCODE) {
    d->phase = PH_DETECT_STEP;
    d->reset = 1;
    return 0;
  }
  /* initial tokens: [<|startofprev|> prompt[-223:]] sot_seq [<|notimestamps|>] */
  const wd_special_tokens_t *sp = d->sp;
  const int32_t *prompt = d->all.v + d->prompt_reset_since;
  const int n_prompt = d->all.n - d->prompt_reset_since;
  d->init.n = 0;
  d->tokens.n = 0;
  d->sum_logprob = 0.0;
  d->no_speech_prob = 0.0f;
  int rc = 0;
  if (n_prompt > 0) {
    rc = toks_push(&d->init, sp->startofprev);
    for (int i = n_prompt > WD_PROMPT_MAX ? n_prompt - WD_PROMPT_MAX : 0; i < n_prompt && !rc; i++)
      rc = toks_push(&d->init, prompt[i]);
  }
  d->sot_index = d->init.n;
  for (int i = 0; i < d->n_sot && !rc; i++)
    rc = toks_push(&d->init, d->sot_seq[i]);
  if (d->opts.without_timestamps && !rc)
    rc = toks_push(&d->init, sp->notimestamps);
  d->fed = 0;
  d->reset = 1;
  d->phase = PH_FEED;
  return rc;
}

int wd_decoder_rows(const wd_decoder_t *d, int32_t *tokens, int *reset) {
  *reset = d->reset;
  switch (d->phase) {
  case PH_DETECT_STEP:
    tokens[0] = d->sp->sot;
    return 1;
  case PH_FEED:
    tokens[0] = d->init.v[d->fed];
    return 1;
  case PH_SAMPLE:
    tokens[0] = d->next;
    return 1;
  default:
    return 0;
  }
}

/* After a step: the logits of the last fed position choose the next token. */
static int sample_next(wd_decoder_t *d, const float *lg) {
  const int32_t best = sample_greedy(d, lg);
  if (best == d->sp->eot)
    return end_window(d);
  int rc = toks_push(&d->tokens, best);
  if (rc < 0)
    return rc;
  /* openai stops once the whole sequence exceeds n_text_ctx, and samples at
   * most sample_len tokens. */
  if (d->init.n + d->tokens.n > d->n_text_ctx || d->tokens.n >= WD_SAMPLE_LEN)
    return end_window(d);
  d->next = best;
  d->phase = PH_SAMPLE;
  return 0;
}

int wd_decoder_advance(wd_decoder_t *d, const float *const *logits) {
  const float *lg = logits[0];
  const wd_special_tokens_t *sp = d->sp;
  const int nv = sp->n_vocab;
  d->reset = 0;
  int rc = 0;
  switch (d->phase) {
  case PH_DETECT_STEP: {
    /* detect_language: the logits after [SOT] alone, over language tokens. */
    const int a = sp->lang_begin, b = sp->lang_begin + sp->n_langs;
    int32_t best = a;
    for (int i = a; i < b; i++)
      if (lg[i] > lg[best])
        best = i;
    const char *code = wd_tokenizer_lang_code(d->tok, best);
    snprintf(d->out.language, sizeof d->out.language, "%s", code ? code : "en");
    d->out.language_prob = (float)exp((double)lg[best] - logsumexp(lg + a, b - a));
    d->sot_seq[d->n_sot++] = best;
    d->sot_seq[d->n_sot++] = d->opts.translate ? sp->translate : sp->transcribe;
    /* The seek loop pads window 0 with zeros where detection read real
     * padding frames: the same encoding only when the audio fills it. */
    d->window0_encoded = d->content_frames >= WD_N_FRAMES;
    rc = next_window(d);
    break;
  }
  case PH_FEED:
    if (d->fed == d->sot_index) /* no_speech_prob: softmax at SOT, before filters */
      d->no_speech_prob = (float)exp((double)lg[sp->nospeech] - logsumexp(lg, nv));
    if (++d->fed < d->init.n)
      break;
    rc = sample_next(d, lg);
    break;
  case PH_SAMPLE:
    rc = sample_next(d, lg);
    break;
  default:
    rc = WD_EINVAL;
  }
  return rc;
}

const wd_segment_t *wd_decoder_segments(const wd_decoder_t *d, int *ret_n) {
  *ret_n = d->out.n_segments > 0 ? d->out.n_segments : 0;
  return d->out.segments;
}

double wd_decoder_done_s(const wd_decoder_t *d) {
  const int f = d->phase == PH_DONE ? d->content_frames : d->seek;
  return (f < d->content_frames ? f : d->content_frames) * 0.01;
}

double wd_decoder_total_s(const wd_decoder_t *d) { return d->content_frames * 0.01; }

int wd_decoder_take_result(wd_decoder_t *d, wd_transcript_t *out) {
  memset(out, 0, sizeof *out);
  if (d->phase != PH_DONE)
    return WD_EINVAL;
  *out = d->out;
  memset(&d->out, 0, sizeof d->out);
  return 0;
}
