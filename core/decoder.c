/*
 * decoder.c - openai/whisper's transcribe() for one file as a state machine
 * (see decoder.h).
 *
 * Phases, in order:
 *   DETECT_ENCODE, DETECT_STEP   language detection (multilingual models
 *                                without a language): encode pad_or_trim of
 *                                the whole padded mel, one SOT step.
 *   ENCODE                       the window at seek needs encoding.
 *   FEED                         the initial tokens go into row 0: a prefill
 *                                of [<|startofprev|> prompt] SOT (its logits
 *                                give no_speech_prob), a prefill of the rest
 *                                of the SOT sequence and the prefix; or one
 *                                step per token on an engine without prefill.
 *   SAMPLE                       the attempts' searches step their rows
 *                                until one is kept (fallback.h: after a
 *                                failure at temperature 0, the temperatures
 *                                left run side by side in the rows the
 *                                holder lends; if every one fails and the
 *                                schedule goes on, FEED again).
 * After a kept attempt: the no-speech rule, segmenting at consecutive
 * timestamps, the seek update and the carried context, and the next window.
 *
 * Ownership: the decoder owns the audio (its windows' log-mel is made as
 * each is encoded), its copies of the options, and the
 * transcript until wd_decoder_take_result() moves it out.
 * ref: openai/whisper decoding.py (DecodingTask, detect_language) and
 * transcribe.py (decode_with_fallback, the seek loop, segmenting), v20250625.
 */
#include "decoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fallback.h"
#include "fault.h"
#include "filters.h"
#include "pystr.h"
#include "timing.h"
#include "win_ahead.h"

#define WD_N_FRAMES 3000        /* mel frames per 30 s window */
#define WD_PROMPT_MAX 223       /* n_text_ctx / 2 - 1 */
#define WD_TIME_PRECISION 0.02  /* seconds per timestamp token */
#define WD_INPUT_STRIDE 2       /* mel frames per audio token */
#define WD_SUPPRESS_MAX 512
#define WD_MAX_CLIPS 64

typedef enum { PH_DETECT_ENCODE, PH_DETECT_STEP, PH_ENCODE, PH_FEED, PH_SAMPLE, PH_ALIGN,
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

/* t's tokens from index i on; NULL while t has none (NULL + 0 is
 * undefined behaviour in C, and clang's UBSan says so). */
static const int32_t *toks_from(const wd_toks_t *t, int i) {
  return t->v ? t->v + i : NULL;
}

static int toks_append(wd_toks_t *t, const int32_t *ids, int n) {
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++)
    rc = toks_push(t, ids[i]);
  return rc;
}

/* A decoded window between its segmenting and its commit (word timing may
 * come between them and move the seek). */
typedef struct {
  int n_seg_before;            /* its segments are out.segments[n_seg_before..] */
  int next_seek;               /* where the next window starts */
  int single_ts_ending;
  double time_offset;          /* seconds */
  float temperature;
} wd_window_end_t;

struct wd_decoder {
  const wd_tokenizer_t *tok;
  const wd_special_tokens_t *sp;
  wd_decode_opts_t opts;       /* pointers cleared: the copies live below */
  int32_t *prefix;
  int n_prefix;
  int clip[WD_MAX_CLIPS][2];   /* seek clips in frames: [start, end) */
  int n_clips, clip_idx;
  int n_mels, n_text_ctx, max_prefill, n_rows;
  int n_held;                  /* rows the worker holds for us: n_rows, more for attempts */
  wd_mel_pcm_t *audio;         /* the file, owned; windows of its log-mel */
  int n_frames, content_frames;
  float *window;               /* (n_mels, 3000) the window to encode */
  int win_seek, win_size;      /* what window holds: frames [win_seek, win_seek + win_size) */
  int win_limit;               /* the end of what the next window may read */
  wd_win_ahead_t *ahead;       /* the next window's frames made ahead, or NULL (win_ahead.h) */
  float *work;                 /* (n_vocab) filter scratch */
  int32_t suppress[WD_SUPPRESS_MAX]; /* SuppressTokens("-1") ids */
  wd_filter_t filt;
  int32_t sot_seq[3];
  int n_sot;

  wd_phase_t phase;
  int window0_encoded;         /* detection's encode is the first window's */
  int did_detect;              /* detection has run: out.language is its answer */
  /* the seek loop (transcribe.py) */
  int seek, segment_size;
  wd_toks_t all;               /* the initial prompt, then every segment's tokens */
  int n_initial_prompt;
  int prompt_reset_since;
  /* the window being decoded (DecodingTask) */
  wd_toks_t init;              /* initial tokens */
  int sot_index, fed;          /* init[fed] is fed next */
  int reset;                   /* the next work starts row 0 afresh */
  float no_speech_prob;
  int t_lo;                    /* the attempts' first temperature in opts.temperatures */
  wd_fallback_t fb;            /* the window's attempts (fallback.h) */
  wd_window_end_t win;         /* the window's result, until committed */
  int n_committed;             /* segments final (reported, never changed again) */
  /* word timestamps */
  int (*heads)[2];
  int n_heads, n_audio_ctx, can_align;
  int32_t *align_tok;          /* the window's alignment tokens */
  int n_align;
  float *qk, *probs;           /* align() output, while aligning */
  double last_speech;          /* openai's last_speech_timestamp */

  wd_transcript_t out;
};

/* ---- text and segments ------------------------------------------------- */

/* [*b, *e) is s.strip() (Python's, Unicode white space included). */
static void strip_span(const char *s, const char **b, const char **e) {
  size_t n;
  *b = wd_py_strip(s, strlen(s), &n);
  *e = *b + n;
}

static int add_segment(wd_decoder_t *d, double start, double end, const int32_t *ids,
                       const float *lps, int n, const wd_window_stats_t *w) {
  wd_transcript_t *t = &d->out;
  if (wd__fault_oom()) /* tests: this store fails as out of memory (fault.h) */
    return WD_ENOMEM;
  wd_segment_t *segs = realloc(t->segments, ((size_t)t->n_segments + 1) * sizeof *segs);
  if (!segs)
    return WD_ENOMEM;
  t->segments = segs;
  wd_segment_t *s = &segs[t->n_segments];
  *s = (wd_segment_t){
    .id = t->n_segments, .seek = d->seek, .start = start, .end = end,
    .temperature = w->temperature, .avg_logprob = w->avg_logprob,
    .compression_ratio = w->compression_ratio, .no_speech_prob = w->no_speech_prob,
  };
  s->tokens = malloc(((size_t)n + 1) * sizeof *s->tokens);
  s->logprobs = malloc(((size_t)n + 1) * sizeof *s->logprobs);
  s->text = wd_tokenizer_decode_alloc(d->tok, ids, n);
  if (!s->tokens || !s->logprobs || !s->text) {
    free(s->tokens);
    free(s->logprobs);
    free(s->text);
    return WD_ENOMEM;
  }
  memcpy(s->tokens, ids, (size_t)n * sizeof *ids);
  memcpy(s->logprobs, lps, (size_t)n * sizeof *lps);
  s->n_tokens = n;
  t->n_segments++;
  return 0;
}

static int next_window(wd_decoder_t *d);

/* The window's segments are final (word times included): an instantaneous
 * segment, or one without text, is kept but blanked (no text, no tokens, so
 * none in the next prompt either); their tokens join the context; the seek
 * moves on. */
static int commit_window(wd_decoder_t *d) {
  int rc = 0;
  for (int i = d->win.n_seg_before; i < d->out.n_segments && rc == 0; i++) {
    wd_segment_t *s = &d->out.segments[i];
    const char *b, *e;
    strip_span(s->text, &b, &e);
    if (s->start == s->end || b == e) {
      s->text[0] = '\0';
      s->n_tokens = 0;
      wd_words_free(s->words, s->n_words);
      s->words = NULL;
      s->n_words = 0;
    }
    rc = toks_append(&d->all, s->tokens, s->n_tokens);
  }
  if (rc < 0)
    return rc;
  /* A hot window (temperature > 0.5) is not trusted as context. */
  if (!d->opts.condition_on_previous_text || d->win.temperature > 0.5f)
    d->prompt_reset_since = d->all.n;
  d->seek = d->win.next_seek;
  d->n_committed = d->out.n_segments;
  return next_window(d);
}

/* Drops segments [from, n_segments) of the window. */
static void drop_segments(wd_decoder_t *d, int from) {
  for (int i = from; i < d->out.n_segments; i++) {
    wd_segment_t *s = &d->out.segments[i];
    free(s->text);
    free(s->tokens);
    free(s->logprobs);
    wd_words_free(s->words, s->n_words);
  }
  if (from < d->out.n_segments)
    d->out.n_segments = from;
}

/* After the words (or without text to time): transcribe.py's seek to the
 * last word and the hallucination_silence_threshold rules, then the commit
 * (or, when openai `continue`s, nothing of the window but the seek). */
static int words_done(wd_decoder_t *d) {
  wd_segment_t *segs = d->out.segments + d->win.n_seg_before;
  const int n = d->out.n_segments - d->win.n_seg_before;
  const wd_timing_seek_in_t in = {
    .previous_seek = d->seek, .segment_size = d->segment_size,
    .content_frames = d->content_frames, .single_timestamp_ending = d->win.single_ts_ending,
    .last_speech_timestamp = d->last_speech,
    .hallucination_silence_threshold = d->opts.hallucination_silence_threshold,
  };
  int seek = d->win.next_seek, n_keep = n, skip = 0;
  wd_timing_window_seek(segs, n, &in, &seek, &n_keep, &skip);
  d->win.next_seek = seek;
  if (skip) {
    drop_segments(d, d->win.n_seg_before);
    d->seek = seek;
    return next_window(d);
  }
  drop_segments(d, d->win.n_seg_before + n_keep);
  d->last_speech = wd_timing_last_speech(segs, n_keep, d->last_speech);
  return commit_window(d);
}

/* Word timestamps for the window's segments: the alignment tokens, then an
 * engine align() (PH_ALIGN) unless there is no text. */
static int start_words(wd_decoder_t *d) {
  const wd_segment_t *segs = d->out.segments + d->win.n_seg_before;
  const int n = d->out.n_segments - d->win.n_seg_before;
  int total = 0;
  int rc = wd_timing_align_tokens(d->tok, d->sot_seq, d->n_sot, segs, n, NULL, 0, &total);
  if (rc < 0 && rc != WD_ERANGE)
    return rc;
  if (total - d->n_sot - 2 <= 0)
    return words_done(d); /* nothing to align */
  free(d->align_tok);
  if (!(d->align_tok = malloc((size_t)total * sizeof *d->align_tok)))
    return WD_ENOMEM;
  if ((rc = wd_timing_align_tokens(d->tok, d->sot_seq, d->n_sot, segs, n, d->align_tok, total,
                                   &d->n_align)) < 0)
    return rc;
  const size_t nq = (size_t)d->n_heads * (size_t)d->n_align * (size_t)d->n_audio_ctx;
  free(d->qk);
  free(d->probs);
  d->qk = malloc(nq * sizeof *d->qk);
  d->probs = malloc((size_t)d->n_align * sizeof *d->probs);
  if (!d->qk || !d->probs)
    return WD_ENOMEM;
  d->phase = PH_ALIGN;
  return 0;
}

/* The engine filled qk and probs: words into the window's segments. */
static int aligned(wd_decoder_t *d) {
  wd_segment_t *segs = d->out.segments + d->win.n_seg_before;
  const int n = d->out.n_segments - d->win.n_seg_before;
  const char *lang = wd_tokenizer_is_multilingual(d->tok) ? d->out.language : NULL;
  int rc = wd_timing_window(d->tok, lang, d->align_tok, d->n_align, d->n_sot, d->qk, d->n_heads,
                            d->n_audio_ctx, d->segment_size, d->probs, NULL, segs, n,
                            d->last_speech);
  free(d->qk);
  free(d->probs);
  d->qk = d->probs = NULL;
  return rc < 0 ? rc : words_done(d);
}

/* mel[:, seek:seek+size] into the 3000-frame window, zero-padded
 * (pad_or_trim pads with 0.0 in normalised log-mel units): from the last
 * window and the frames made ahead where they cover it, else computed
 * here. Then the frames after it, up to limit (the end of what the next
 * window may read), are made ahead. */
static int extract_window(wd_decoder_t *d, int seek, int size, int limit) {
  if (!wd_win_ahead_take(d->ahead, seek, size, d->window)) {
    const int rc = wd_mel_pcm_window(d->audio, seek, size, d->window);
    if (rc < 0)
      return rc;
  }
  d->win_seek = seek;
  d->win_size = size;
  d->win_limit = limit;
  wd_win_ahead_note(d->ahead, seek, size, limit);
  return 0;
}

void wd_decoder_ahead_counts(const wd_decoder_t *d, int *served, int *computed) {
  wd_win_ahead_counts(d ? d->ahead : NULL, served, computed);
}

int wd_decoder_set_ahead(wd_decoder_t *d, wd_taskq_t *q) {
  if (!d || !q || d->ahead)
    return 0;
  const int rc = wd_win_ahead_new(d->audio, q, &d->ahead);
  if (rc == 0 && d->win_size >= 0)
    wd_win_ahead_note(d->ahead, d->win_seek, d->win_size, d->win_limit);
  return rc;
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

/* Moves to the window at seek within the clips (encoding it unless
 * detection already did), or finishes at the end of the last clip. */
static int next_window(wd_decoder_t *d) {
  for (;;) {
    if (d->clip_idx >= d->n_clips)
      return finish(d);
    const int start = d->clip[d->clip_idx][0], end = d->clip[d->clip_idx][1];
    if (d->seek < start)
      d->seek = start;
    if (d->seek >= end) {
      if (++d->clip_idx < d->n_clips)
        d->seek = d->clip[d->clip_idx][0];
      continue;
    }
    break;
  }
  const int end = d->clip[d->clip_idx][1];
  int size = d->content_frames - d->seek;
  if (end - d->seek < size)
    size = end - d->seek;
  const int limit = d->seek + size; /* this clip's windows end there */
  d->segment_size = size < WD_N_FRAMES ? size : WD_N_FRAMES;
  if (d->seek == 0 && d->segment_size == WD_N_FRAMES && d->window0_encoded) {
    d->window0_encoded = 0;
    /* The detection window's frames are this one's: make the next ahead. */
    d->win_limit = limit;
    wd_win_ahead_note(d->ahead, 0, WD_N_FRAMES, limit);
    return wd_decoder_encoded(d); /* the audio slot still holds detection's encoding */
  }
  d->window0_encoded = 0;
  const int rc = extract_window(d, d->seek, d->segment_size, limit);
  d->phase = PH_ENCODE;
  return rc;
}

/* The window's result: the no-speech rule, segments, seek, context. */
static int end_window(wd_decoder_t *d, const wd_hyp_t *best, const wd_window_stats_t *ws) {
  const wd_decode_opts_t *o = &d->opts;
  const int32_t *tk = best->tok;
  const float *lp = best->lp;
  const int n = best->n, tb = d->sp->ts_begin;
  /* The no-speech rule: skip a silent window unless its text is confident. */
  if (!isnan(o->no_speech_threshold) && ws->no_speech_prob > o->no_speech_threshold &&
      (isnan(o->logprob_threshold) || !(ws->avg_logprob > o->logprob_threshold))) {
    d->seek += d->segment_size;
    return next_window(d);
  }
  const double time_offset = d->seek * 0.01;
  const int single_ts_ending = n >= 2 && tk[n - 2] < tb && tk[n - 1] >= tb;
  const int n_seg_before = d->out.n_segments;
  int next_seek = d->seek + d->segment_size;
  int last_slice = 0, any_consecutive = 0, rc = 0;
  for (int i = 1; i < n && rc == 0; i++) {
    if (!(tk[i - 1] >= tb && tk[i] >= tb))
      continue;
    /* A pair of timestamps closes one segment and opens the next. */
    any_consecutive = 1;
    rc = add_segment(d, time_offset + (tk[last_slice] - tb) * WD_TIME_PRECISION,
                     time_offset + (tk[i - 1] - tb) * WD_TIME_PRECISION, tk + last_slice,
                     lp + last_slice, i - last_slice, ws);
    last_slice = i;
  }
  if (rc == 0 && any_consecutive) {
    if (single_ts_ending) {
      rc = add_segment(d, time_offset + (tk[last_slice] - tb) * WD_TIME_PRECISION,
                       time_offset + (tk[n - 1] - tb) * WD_TIME_PRECISION, tk + last_slice,
                       lp + last_slice, n - last_slice, ws);
    } else {
      /* Resume at the last closed timestamp; the tail is decoded again. */
      const int advance = (tk[last_slice - 1] - tb) * WD_INPUT_STRIDE;
      /* Never stall: a window that closes no time moves on entirely. */
      if (advance > 0)
        next_seek = d->seek + advance;
    }
  } else if (rc == 0) {
    double duration = d->segment_size * 0.01;
    for (int i = n - 1; i >= 0; i--)
      if (tk[i] >= tb) {
        if (tk[i] != tb)
          duration = (tk[i] - tb) * WD_TIME_PRECISION;
        break;
      }
    rc = add_segment(d, time_offset, time_offset + duration, tk, lp, n, ws);
  }
  if (rc < 0)
    return rc;
  d->win = (wd_window_end_t){ .n_seg_before = n_seg_before, .next_seek = next_seek,
                              .single_ts_ending = single_ts_ending,
                              .time_offset = time_offset, .temperature = ws->temperature };
  return o->word_timestamps ? start_words(d) : commit_window(d);
}

/* Starts decoding the encoded window from temperature index lo: row 0 is
 * fed the initial tokens, then the attempts of a group search (fallback.h;
 * their number is settled when sampling starts, by the rows held then). */
static void begin_attempts(wd_decoder_t *d, int lo) {
  d->t_lo = lo;
  d->fed = 0;
  d->reset = 1;
  d->no_speech_prob = 0.0f;
  d->phase = PH_FEED;
}

/* The initial tokens are in: the group's searches start. openai stops
 * once the whole sequence exceeds n_text_ctx, and samples at most
 * sample_len tokens. */
static int begin_sampling(wd_decoder_t *d) {
  d->phase = PH_SAMPLE;
  return wd_fallback_begin(&d->fb, d->t_lo, d->n_held, d->seek, d->n_text_ctx + 1 - d->init.n);
}

/* A search step's logits: decode_with_fallback's keep, or a next group. */
static int sampled(wd_decoder_t *d, const float *const *logits) {
  int keep = 0;
  const int rc = wd_fallback_update(&d->fb, &d->filt, d->work, logits, d->no_speech_prob, &keep);
  if (rc == 2)
    begin_attempts(d, d->fb.lo + d->fb.n);
  if (rc != 1)
    return rc < 0 ? rc : 0;
  wd_window_stats_t ws;
  const wd_hyp_t *best = wd_fallback_result(&d->fb, keep, &ws);
  return end_window(d, best, &ws);
}

/* ---- public ------------------------------------------------------------ */

static int copy_tokens(const int32_t *src, int n, int32_t **ret) {
  *ret = NULL;
  if (n <= 0)
    return 0;
  if (!(*ret = malloc((size_t)n * sizeof **ret)))
    return WD_ENOMEM;
  memcpy(*ret, src, (size_t)n * sizeof **ret);
  return 0;
}

/* Validates the search options and counts the rows they need. */
static int check_search(const wd_decode_opts_t *o, int can_copy, int *ret_rows) {
  if (o->n_temperatures < 1 || o->n_temperatures > WD_DECODE_MAX_TEMPS || o->beam_size < 0 ||
      o->best_of < 0 || o->beam_size > WD_DECODE_MAX_ROWS || o->best_of > WD_DECODE_MAX_ROWS ||
      o->patience < 0 || o->patience > 2.0f ||
      (!isnan(o->length_penalty) && (o->length_penalty < 0 || o->length_penalty > 1)))
    return WD_EINVAL;
  int any_zero = 0, any_hot = 0;
  for (int i = 0; i < o->n_temperatures; i++) {
    const float t = o->temperatures[i];
    if (!(t >= 0.0f && t <= 1.0f))
      return WD_EINVAL;
    any_zero |= t == 0.0f;
    any_hot |= t > 0.0f;
  }
  /* openai: best_of needs sampling, patience needs beams. */
  if ((o->best_of > 1 && !any_hot) || (o->patience > 0 && o->beam_size <= 1))
    return WD_EINVAL;
  int rows = 1;
  if (any_zero && o->beam_size > rows)
    rows = o->beam_size;
  if (any_hot && o->best_of > rows)
    rows = o->best_of;
  if (rows > 1 && !can_copy)
    return WD_EUNSUP;
  *ret_rows = rows;
  return 0;
}

/* clip_timestamps in seconds -> [start, end) pairs of frames. */
static int set_clips(wd_decoder_t *d, const float *clips, int n) {
  int pts[2 * WD_MAX_CLIPS], np = 0;
  if (n < 0 || n > 2 * WD_MAX_CLIPS || (n > 0 && !clips))
    return WD_EINVAL;
  for (int i = 0; i < n; i++) {
    if (!(clips[i] >= 0.0f) || clips[i] > 1e6f)
      return WD_EINVAL;
    pts[np++] = (int)lround((double)clips[i] * 100.0);
  }
  if (np == 0)
    pts[np++] = 0;
  if (np % 2 == 1) {
    if (np == 2 * WD_MAX_CLIPS)
      return WD_EINVAL;
    pts[np++] = d->content_frames;
  }
  d->n_clips = np / 2;
  for (int i = 0; i < d->n_clips; i++) {
    d->clip[i][0] = pts[2 * i];
    d->clip[i][1] = pts[2 * i + 1] < d->content_frames ? pts[2 * i + 1] : d->content_frames;
  }
  return 0;
}

int wd_decoder_new(const wd_tokenizer_t *tok, const wd_engine_t *e, wd_mel_pcm_t *audio,
                   const wd_decode_opts_t *opts, wd_decoder_t **ret) {
  *ret = NULL;
  if (!tok || !e || !audio || !opts || e->n_mels <= 0 || wd_mel_pcm_n_mels(audio) != e->n_mels ||
      e->n_text_ctx <= 0 || opts->n_prompt < 0 || (opts->n_prompt > 0 && !opts->prompt) ||
      opts->n_prefix < 0 || (opts->n_prefix > 0 && !opts->prefix)) {
    wd_mel_pcm_free(audio);
    return WD_EINVAL;
  }
  int n_rows = 1;
  int rc = check_search(opts, e->seq_copy != NULL, &n_rows);
  if (rc < 0) {
    wd_mel_pcm_free(audio);
    return rc;
  }
  wd_decoder_t *d = calloc(1, sizeof *d);
  if (!d) {
    wd_mel_pcm_free(audio);
    return WD_ENOMEM;
  }
  const int n_frames = wd_mel_pcm_n_frames(audio);
  d->audio = audio;
  d->tok = tok;
  d->sp = wd_tokenizer_special(tok);
  d->opts = *opts;
  d->n_mels = e->n_mels;
  d->n_text_ctx = e->n_text_ctx;
  d->max_prefill = e->prefill ? e->max_prefill : 0;
  d->n_rows = n_rows;
  d->n_frames = n_frames;
  d->content_frames = n_frames - WD_N_FRAMES;
  d->out.duration = d->content_frames * 160.0 / 16000.0;
  d->n_held = n_rows;
  d->fb = (wd_fallback_t){ .opts = &d->opts, .tok = tok };
  d->window = malloc((size_t)d->n_mels * WD_N_FRAMES * sizeof *d->window);
  d->win_size = -1; /* no window yet */
  d->work = malloc((size_t)d->sp->n_vocab * sizeof *d->work);
  if (!d->window || !d->work) {
    rc = WD_ENOMEM;
    goto fail;
  }
  int n_suppress = 0;
  if ((rc = wd_tokenizer_suppress_tokens(tok, d->suppress, WD_SUPPRESS_MAX, &n_suppress)) < 0)
    goto fail;
  d->filt = (wd_filter_t){
    .sp = d->sp, .suppress = d->suppress, .n_suppress = n_suppress,
    .suppress_blank = opts->suppress_blank, .without_timestamps = opts->without_timestamps,
    .max_initial_index = opts->max_initial_timestamp > 0
                             ? (int)lround(opts->max_initial_timestamp / WD_TIME_PRECISION)
                             : -1,
  };
  if ((rc = set_clips(d, opts->clips, opts->n_clips)) < 0)
    goto fail;
  if (opts->word_timestamps) {
    /* Word timing needs the heads and an engine that can run an alignment. */
    if (!e->align || e->max_prefill < 256 || opts->n_align_heads < 1 || !opts->align_heads) {
      rc = opts->n_align_heads < 1 ? WD_EINVAL : WD_EUNSUP;
      goto fail;
    }
    d->n_heads = opts->n_align_heads;
    d->n_audio_ctx = e->n_audio_ctx > 0 ? e->n_audio_ctx : 1500;
    if (!(d->heads = malloc((size_t)d->n_heads * sizeof *d->heads))) {
      rc = WD_ENOMEM;
      goto fail;
    }
    memcpy(d->heads, opts->align_heads, (size_t)d->n_heads * sizeof *d->heads);
  }
  d->opts.align_heads = NULL;
  /* The initial prompt comes first in the context of every window. */
  if ((rc = toks_append(&d->all, opts->prompt, opts->n_prompt)) < 0)
    goto fail;
  d->n_initial_prompt = opts->n_prompt;
  /* openai keeps the last n_text_ctx / 2 - sample_len tokens of the prefix,
   * which Python's [-0:] makes all of them; at most a prompt's worth here. */
  const int n_prefix = opts->n_prefix > WD_PROMPT_MAX ? WD_PROMPT_MAX : opts->n_prefix;
  if ((rc = copy_tokens(n_prefix > 0 ? opts->prefix + (opts->n_prefix - n_prefix) : NULL,
                        n_prefix, &d->prefix)) < 0) /* no arithmetic on a NULL prefix */
    goto fail;
  d->n_prefix = n_prefix;
  d->opts.prompt = NULL;
  d->opts.n_prompt = 0;
  d->opts.prefix = NULL;
  d->opts.n_prefix = 0;
  d->opts.clips = NULL;
  d->opts.n_clips = 0;

  /* The SOT sequence: [SOT] for English-only models, else [SOT, lang, task]. */
  const char *lang = opts->language;
  const int detect = !lang || !lang[0] || strcmp(lang, "auto") == 0;
  d->opts.language = NULL;
  d->sot_seq[d->n_sot++] = d->sp->sot;
  if (wd_tokenizer_is_multilingual(tok)) {
    if (detect) {
      d->phase = PH_DETECT_ENCODE;
      /* pad_or_trim(mel, 3000) of the whole padded mel: real padding frames. */
      if ((rc = extract_window(d, 0, WD_N_FRAMES, WD_N_FRAMES)) < 0)
        goto fail;
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
  wd_win_ahead_free(d->ahead); /* waits for its task, which reads the audio */
  wd_mel_pcm_free(d->audio);
  free(d->window);
  free(d->work);
  free(d->prefix);
  free(d->all.v);
  free(d->init.v);
  free(d->heads);
  free(d->align_tok);
  free(d->qk);
  free(d->probs);
  wd_fallback_free(&d->fb);
  wd_transcript_free(&d->out);
  free(d);
}

int wd_decoder_n_rows(const wd_decoder_t *d) { return d->n_rows; }

int wd_decoder_rows_wanted(const wd_decoder_t *d) {
  int want = d->n_rows;
  if (d->phase == PH_FEED)
    want = wd_fallback_rows_wanted(&d->opts, d->t_lo, WD_DECODER_MAX_ROWS);
  else if (d->phase == PH_SAMPLE)
    want = wd_fallback_rows_used(&d->fb);
  return want > d->n_rows ? want : d->n_rows;
}

void wd_decoder_rows_held(wd_decoder_t *d, int n) { d->n_held = n; }

int wd_decoder_rows_shed(wd_decoder_t *d, int *keep) {
  int m = 0;
  if (d->n_held <= d->n_rows)
    return 0;
  if (d->phase == PH_SAMPLE) {
    if ((m = wd_fallback_shed(&d->fb, keep)) == 0)
      return 0;
  }
  /* PH_FEED (no group yet) or any other phase: rows 0 .. n_rows are the
   * decoder's own; after a shed, its kept attempt's rows first */
  for (int r = 0; m < d->n_rows && r < d->n_held; r++) {
    int used = 0;
    for (int k = 0; k < m; k++)
      used |= keep[k] == r;
    if (!used)
      keep[m++] = r;
  }
  d->n_held = m;
  return m;
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
  /* initial tokens: [<|startofprev|> prompt[-223:]] sot_seq [<|notimestamps|>] [prefix] */
  const wd_special_tokens_t *sp = d->sp;
  wd_toks_t prompt = { 0 };
  int rc = 0;
  if (d->opts.carry_initial_prompt) {
    /* the initial prompt, then the newest context that fits beside it */
    const int skip = d->n_initial_prompt > d->prompt_reset_since ? d->n_initial_prompt
                                                                   : d->prompt_reset_since;
    int room = WD_PROMPT_MAX - d->n_initial_prompt;
    const int avail = d->all.n - skip;
    room = room < 0 ? 0 : room > avail ? avail : room;
    rc = toks_append(&prompt, d->all.v, d->n_initial_prompt);
    if (!rc)
      rc = toks_append(&prompt, toks_from(&d->all, d->all.n - room), room);
  } else {
    rc = toks_append(&prompt, toks_from(&d->all, d->prompt_reset_since),
                     d->all.n - d->prompt_reset_since);
  }
  d->init.n = 0;
  if (!rc && prompt.n > 0) {
    const int from = prompt.n > WD_PROMPT_MAX ? prompt.n - WD_PROMPT_MAX : 0;
    rc = toks_push(&d->init, sp->startofprev);
    if (!rc)
      rc = toks_append(&d->init, prompt.v + from, prompt.n - from);
  }
  free(prompt.v);
  d->sot_index = d->init.n;
  if (!rc)
    rc = toks_append(&d->init, d->sot_seq, d->n_sot);
  if (d->opts.without_timestamps && !rc)
    rc = toks_push(&d->init, sp->notimestamps);
  if (!rc)
    rc = toks_append(&d->init, d->prefix, d->n_prefix);
  if (rc < 0)
    return rc;
  begin_attempts(d, 0);
  return 0;
}

/* FEED: how many initial tokens the next work feeds. The chunk up to and
 * including SOT ends where no_speech_prob is read, the rest ends where
 * sampling starts; a chunk of two or more goes in one prefill. */
static int feed_count(const wd_decoder_t *d) {
  const int end = d->fed <= d->sot_index ? d->sot_index + 1 : d->init.n;
  const int m = end - d->fed;
  return m >= 2 && m <= d->max_prefill ? m : 1;
}

void wd_decoder_work(const wd_decoder_t *d, wd_dec_work_t *w) {
  memset(w, 0, sizeof *w);
  w->reset = d->reset;
  switch (d->phase) {
  case PH_DETECT_STEP:
    w->rows[0] = 0;
    w->tokens[0] = d->sp->sot;
    w->n = 1;
    break;
  case PH_FEED: {
    const int m = feed_count(d);
    if (m > 1) {
      w->prefill = d->init.v + d->fed;
      w->n_prefill = m;
    } else {
      w->rows[0] = 0;
      w->tokens[0] = d->init.v[d->fed];
      w->n = 1;
    }
    break;
  }
  case PH_SAMPLE:
    wd_fallback_work(&d->fb, w);
    break;
  case PH_ALIGN:
    w->reset = 0;
    w->align = d->align_tok;
    w->n_align = d->n_align;
    w->align_n_text = d->sp->eot;
    w->heads = (const int (*)[2])d->heads;
    w->n_heads = d->n_heads;
    w->qk = d->qk;
    w->probs = d->probs;
    break;
  default:
    break;
  }
}

/* detect_language: the logits after [SOT] alone, over language tokens. */
static int detected(wd_decoder_t *d, const float *lg) {
  const wd_special_tokens_t *sp = d->sp;
  const int a = sp->lang_begin, b = sp->lang_begin + sp->n_langs;
  int32_t best = a;
  for (int i = a; i < b; i++)
    if (lg[i] > lg[best])
      best = i;
  const double lse = wd_logsumexp(lg + a, b - a);
  const char *code = wd_tokenizer_lang_code(d->tok, best);
  snprintf(d->out.language, sizeof d->out.language, "%s", code ? code : "en");
  d->out.language_prob = (float)exp((double)lg[best] - lse);
  /* the five likeliest, for verbose output */
  const int k_max = (int)(sizeof d->out.language_probs / sizeof d->out.language_probs[0]);
  int32_t top[8];
  int k = 0;
  for (int i = a; i < b; i++) {
    if (k == k_max && !(lg[i] > lg[top[k - 1]]))
      continue;
    int p = k < k_max ? k++ : k - 1;
    while (p > 0 && lg[i] > lg[top[p - 1]]) {
      top[p] = top[p - 1];
      p--;
    }
    top[p] = i;
  }
  for (int i = 0; i < k; i++) {
    const char *c = wd_tokenizer_lang_code(d->tok, top[i]);
    snprintf(d->out.language_probs[i].code, sizeof d->out.language_probs[i].code, "%s",
             c ? c : "?");
    d->out.language_probs[i].prob = (float)exp((double)lg[top[i]] - lse);
  }
  d->out.n_language_probs = k;
  d->did_detect = 1;
  d->sot_seq[d->n_sot++] = best;
  d->sot_seq[d->n_sot++] = d->opts.translate ? sp->translate : sp->transcribe;
  /* The seek loop pads window 0 with zeros where detection read real
   * padding frames: the same encoding only when the audio fills it. */
  d->window0_encoded = d->content_frames >= WD_N_FRAMES;
  return next_window(d);
}

int wd_decoder_advance(wd_decoder_t *d, const float *const *logits) {
  const wd_special_tokens_t *sp = d->sp;
  int rc = 0;
  d->reset = 0;
  switch (d->phase) {
  case PH_DETECT_STEP:
    return detected(d, logits[0]);
  case PH_FEED:
    d->fed += feed_count(d);
    if (d->fed == d->sot_index + 1) /* no_speech_prob: softmax at SOT, before filters */
      d->no_speech_prob =
          (float)exp((double)logits[0][sp->nospeech] - wd_logsumexp(logits[0], sp->n_vocab));
    if (d->fed < d->init.n)
      return 0;
    /* the last initial token's logits are the first sample's */
    if ((rc = begin_sampling(d)) < 0)
      return rc;
    return sampled(d, logits);
  case PH_SAMPLE:
    return sampled(d, logits);
  case PH_ALIGN:
    return aligned(d);
  default:
    return WD_EINVAL;
  }
}

const wd_segment_t *wd_decoder_segments(const wd_decoder_t *d, int *ret_n) {
  *ret_n = d->n_committed;
  return d->out.segments;
}

double wd_decoder_done_s(const wd_decoder_t *d) {
  const int f = d->phase == PH_DONE ? d->content_frames : d->seek;
  return (f < d->content_frames ? f : d->content_frames) * 0.01;
}

double wd_decoder_total_s(const wd_decoder_t *d) { return d->content_frames * 0.01; }

const char *wd_decoder_detected(const wd_decoder_t *d, float *ret_prob) {
  if (!d->did_detect)
    return NULL;
  if (ret_prob)
    *ret_prob = d->out.language_prob;
  return d->out.language;
}

int wd_decoder_take_result(wd_decoder_t *d, wd_transcript_t *out) {
  memset(out, 0, sizeof *out);
  if (d->phase != PH_DONE)
    return WD_EINVAL;
  *out = d->out;
  memset(&d->out, 0, sizeof d->out);
  return 0;
}
