/*
 * vad_speech.c - speech spans from chunk probabilities (see vad.h).
 *
 * The rules are silero-vad's (utils_vad.get_speech_timestamps_from_probs,
 * version 6.2), kept to the sample, quirks included, because users compare
 * spans with what faster-whisper and silero itself print:
 * - a chunk at or above threshold starts speech; while in speech, chunks
 *   below neg_threshold open a silence ("temp_end", the sample where it
 *   began; 0 means none, so a silence starting at sample 0 is not one),
 *   which ends the span once it lasts min_silence samples; speech
 *   returning before that closes it again, remembering it as a possible cut
 *   point when it lasted more than min_silence_at_max;
 * - a span longer than max_speech (in samples: max_speech_s * 16000 - 512 -
 *   2 pad) is cut at its longest remembered silence and goes on after it
 *   (use_max_silence), or at the last silence long enough, or right here;
 * - spans shorter than min_speech are dropped; the last one open at the
 *   end runs to the end of the signal;
 * - padding: pad samples at each end, but a gap shorter than two pads is
 *   split between its neighbours.
 * Thresholds and durations are compared as silero compares them: chunk
 * positions as integers against sample counts computed in floating point.
 */
#include <math.h>
#include <stdlib.h>

#include "error.h"
#include "vad.h"

void wd_vad_params_default(wd_vad_params_t *p) {
  *p = (wd_vad_params_t){ .threshold = 0.5f, .neg_threshold = -1.0f, .min_speech_ms = 250,
                          .max_speech_s = 0.0f, .min_silence_ms = 100, .speech_pad_ms = 30,
                          .min_silence_at_max_ms = 98, .use_max_silence = 1 };
}

typedef struct {
  wd_vad_span_t *v;
  size_t n, cap;
} spans_t;

static int push(spans_t *s, long long start, long long end) {
  if (s->n == s->cap) {
    const size_t cap = s->cap ? 2 * s->cap : 16;
    wd_vad_span_t *v = realloc(s->v, cap * sizeof *v);
    if (!v)
      return WD_ENOMEM;
    s->v = v, s->cap = cap;
  }
  s->v[s->n++] = (wd_vad_span_t){ (size_t)start, (size_t)end };
  return 0;
}

/* A silence inside the current span that could be a cut point. */
typedef struct {
  long long at, dur;
} gap_t;

/* Python's a // b for b > 0. */
static long long floordiv(long long a, long long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int wd_vad_speech(const float *probs, size_t n_probs, size_t n_samples,
                  const wd_vad_params_t *p, wd_vad_span_t **ret, size_t *ret_n) {
  const double sr = WD_VAD_SAMPLE_RATE, win = WD_VAD_CHUNK;
  const double min_speech = sr * p->min_speech_ms / 1000.0;
  const double pad = sr * p->speech_pad_ms / 1000.0;
  const double max_speech = p->max_speech_s > 0 ? sr * p->max_speech_s - win - 2 * pad : INFINITY;
  const double min_silence = sr * p->min_silence_ms / 1000.0;
  const double min_silence_at_max = sr * p->min_silence_at_max_ms / 1000.0;
  const double neg = p->neg_threshold >= 0 ? p->neg_threshold : fmax(p->threshold - 0.15, 0.01);
  const double th = p->threshold;
  spans_t out = { 0 };
  /* A silence is remembered at most once per chunk: n_probs bounds them. */
  gap_t *gaps = malloc((n_probs ? n_probs : 1) * sizeof *gaps);
  size_t n_gaps = 0;
  int triggered = 0, have_start = 0, rc = gaps ? 0 : WD_ENOMEM;
  long long start = 0, temp_end = 0, prev_end = 0, next_start = 0;
  *ret = NULL;
  *ret_n = 0;
  for (size_t i = 0; i < n_probs && !rc; i++) {
    const long long cur = (long long)(i * WD_VAD_CHUNK);
    const double prob = probs[i];
    if (prob >= th && temp_end) {
      const long long dur = cur - temp_end;
      if (dur > min_silence_at_max && n_gaps < n_probs)
        gaps[n_gaps++] = (gap_t){ temp_end, dur };
      temp_end = 0;
      if (next_start < prev_end)
        next_start = cur;
    }
    if (prob >= th && !triggered) {
      triggered = 1, have_start = 1, start = cur;
      continue;
    }
    if (triggered && (double)(cur - start) > max_speech) {
      if (p->use_max_silence && n_gaps) {
        gap_t best = gaps[0]; /* the longest, the first of equals */
        for (size_t g = 1; g < n_gaps; g++)
          if (gaps[g].dur > best.dur)
            best = gaps[g];
        if ((rc = push(&out, start, best.at)) < 0)
          break;
        have_start = 0;
        next_start = best.at + best.dur;
        if (next_start < best.at + cur) /* silero's test, as written */
          start = next_start, have_start = 1;
        else
          triggered = 0;
        prev_end = next_start = temp_end = 0;
        n_gaps = 0;
      } else if (prev_end) {
        if ((rc = push(&out, start, prev_end)) < 0)
          break;
        have_start = 0;
        if (next_start < prev_end)
          triggered = 0;
        else
          start = next_start, have_start = 1;
        prev_end = next_start = temp_end = 0;
        n_gaps = 0;
      } else {
        if ((rc = push(&out, start, cur)) < 0)
          break;
        have_start = 0;
        prev_end = next_start = temp_end = 0;
        triggered = 0;
        n_gaps = 0;
        continue;
      }
    }
    if (prob < neg && triggered) {
      if (!temp_end)
        temp_end = cur;
      const long long dur = cur - temp_end;
      if (!p->use_max_silence && dur > min_silence_at_max)
        prev_end = temp_end;
      if ((double)dur < min_silence)
        continue;
      if ((double)(temp_end - start) > min_speech && (rc = push(&out, start, temp_end)) < 0)
        break;
      have_start = 0;
      prev_end = next_start = temp_end = 0;
      triggered = 0;
      n_gaps = 0;
    }
  }
  free(gaps);
  if (!rc && have_start && (double)((long long)n_samples - start) > min_speech)
    rc = push(&out, start, (long long)n_samples);
  if (rc) {
    free(out.v);
    return rc;
  }
  /* Padding, in silero's order: each span's end and the next one's start
   * together, the next start already moved when its turn comes. */
  const long long total = (long long)n_samples;
  for (size_t i = 0; i < out.n; i++) {
    wd_vad_span_t *s = &out.v[i];
    if (i == 0)
      s->start = (size_t)fmax(0.0, (double)s->start - pad);
    if (i + 1 < out.n) {
      wd_vad_span_t *nx = &out.v[i + 1];
      const long long gap = (long long)nx->start - (long long)s->end;
      if ((double)gap < 2 * pad) {
        s->end = (size_t)((long long)s->end + floordiv(gap, 2));
        nx->start = (size_t)fmax(0.0, (double)((long long)nx->start - floordiv(gap, 2)));
      } else {
        s->end = (size_t)fmin((double)total, (double)s->end + pad);
        nx->start = (size_t)fmax(0.0, (double)nx->start - pad);
      }
    } else {
      s->end = (size_t)fmin((double)total, (double)s->end + pad);
    }
  }
  *ret = out.v;
  *ret_n = out.n;
  return 0;
}
