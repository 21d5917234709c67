/*
 * vad_job.c - the VAD filter in front of a job (see vad_job.h).
 */
#include "vad_job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

int wd_vad_keep_speech(const wd_vad_model_t *m, const wd_vad_params_t *p, const int16_t *pcm,
                       size_t n, int16_t **ret_pcm, size_t *ret_n, wd_vad_map_t *map) {
  *ret_pcm = NULL;
  *ret_n = 0;
  memset(map, 0, sizeof *map);
  map->n_samples = n;
  int rc = wd_vad_spans_s16(m, p, pcm, n, &map->spans, &map->n);
  size_t total = 0;
  if (!rc && map->n) {
    map->joined = malloc(map->n * sizeof *map->joined);
    for (size_t k = 0; map->joined && k < map->n; k++) {
      map->joined[k] = total;
      total += map->spans[k].end - map->spans[k].start;
    }
    *ret_pcm = map->joined ? malloc(total * sizeof **ret_pcm) : NULL;
    if (!*ret_pcm)
      rc = WD_ENOMEM;
  }
  if (rc) {
    wd_vad_map_free(map);
    return rc;
  }
  for (size_t k = 0; k < map->n; k++)
    memcpy(*ret_pcm + map->joined[k], pcm + map->spans[k].start,
           (map->spans[k].end - map->spans[k].start) * sizeof *pcm);
  *ret_n = total;
  return 0;
}

void wd_vad_map_free(wd_vad_map_t *map) {
  free(map->spans);
  free(map->joined);
  memset(map, 0, sizeof *map);
}

/* The span a joined time t (s) lies in: the last that starts at or before
 * it; is_end: a time at a join belongs to the span before it. */
static size_t span_of(const wd_vad_map_t *map, double t, int is_end) {
  const double x = t * WD_VAD_SAMPLE_RATE;
  size_t k = 0;
  while (k + 1 < map->n && (double)map->joined[k + 1] <= x)
    k++;
  if (is_end && k > 0 && (double)map->joined[k] == x)
    k--;
  return k;
}

/* t moved by span k's offset, to the millisecond. */
static double in_span(const wd_vad_map_t *map, double t, size_t k) {
  const double orig = t * WD_VAD_SAMPLE_RATE - (double)map->joined[k] + (double)map->spans[k].start;
  return round(orig / WD_VAD_SAMPLE_RATE * 1000.0) / 1000.0;
}

double wd_vad_map_time(const wd_vad_map_t *map, double t, int is_end) {
  return map->n ? in_span(map, t, span_of(map, t, is_end)) : t;
}

/* A word's start and end both by the span of its middle (a word Whisper
 * starts a little before a join is the next span's word); a segment with
 * words from its first word's start to its last word's end, one without
 * by its own times (faster-whisper's restore_speech_timestamps). */
static void map_words(const wd_vad_map_t *map, wd_word_t *w, int n) {
  for (int i = 0; i < n && map->n; i++) {
    const size_t k = span_of(map, (w[i].start + w[i].end) / 2, 0);
    w[i].start = in_span(map, w[i].start, k);
    w[i].end = in_span(map, w[i].end, k);
  }
}

static void map_segment(const wd_vad_map_t *map, wd_segment_t *s, wd_word_t *words, int n_words) {
  map_words(map, words, n_words);
  if (n_words > 0) {
    s->start = words[0].start;
    s->end = words[n_words - 1].end;
  } else {
    s->start = wd_vad_map_time(map, s->start, 0);
    s->end = wd_vad_map_time(map, s->end, 1);
  }
}

void wd_vad_map_transcript(const wd_vad_map_t *map, wd_transcript_t *t) {
  for (int i = 0; i < t->n_segments; i++)
    map_segment(map, &t->segments[i], t->segments[i].words, t->segments[i].n_words);
  t->duration = (double)map->n_samples / WD_VAD_SAMPLE_RATE;
}

/* A filtered job: the caller's callbacks and the map. */
typedef struct {
  wd_job_cb_t cb;
  wd_vad_map_t map;
} vad_job_t;

static void vj_segment(void *ud, const wd_segment_t *seg, double done_s, double total_s) {
  vad_job_t *j = ud;
  (void)total_s;
  wd_segment_t s = *seg;
  wd_word_t *words = NULL;
  if (seg->n_words > 0 && (words = malloc((size_t)seg->n_words * sizeof *words)) != NULL)
    memcpy(words, seg->words, (size_t)seg->n_words * sizeof *words);
  s.words = words;
  s.n_words = words ? seg->n_words : 0;
  map_segment(&j->map, &s, s.words, s.n_words);
  j->cb.on_segment(j->cb.ud, &s, wd_vad_map_time(&j->map, done_s, 1),
                   (double)j->map.n_samples / WD_VAD_SAMPLE_RATE);
  free(words); /* the strings stay the worker's */
}

static void vj_done(void *ud, int rc, wd_transcript_t *t) {
  vad_job_t *j = ud;
  if (rc == 0 && t)
    wd_vad_map_transcript(&j->map, t);
  j->cb.on_done(j->cb.ud, rc, t);
  wd_vad_map_free(&j->map);
  free(j);
}

int wd_vad_no_speech(const wd_job_params_t *p, size_t n_samples) {
  wd_transcript_t t = { 0 };
  t.text = strdup("");
  if (!t.text)
    return WD_ENOMEM;
  const char *lang = p->decode.language && strcmp(p->decode.language, "auto") != 0
                         ? p->decode.language
                         : "en";
  strncpy(t.language, lang, sizeof t.language - 1);
  t.language_prob = p->decode.language ? 1.0f : 0.0f;
  t.duration = (double)n_samples / WD_VAD_SAMPLE_RATE;
  p->cb.on_done(p->cb.ud, 0, &t); /* it owns t's contents now */
  return 0;
}

int wd_vad_submit(wd_workers_t *g, const wd_vad_model_t *vad, const wd_vad_params_t *vp,
                  int16_t *samples, size_t n_samples, const wd_job_params_t *p,
                  uint64_t *ret_id) {
  if (!vad)
    return wd_workers_submit(g, samples, n_samples, p, ret_id);
  if (ret_id)
    *ret_id = 0;
  vad_job_t *j = calloc(1, sizeof *j);
  int16_t *kept = NULL;
  size_t n_kept = 0;
  int rc = j ? wd_vad_keep_speech(vad, vp, samples, n_samples, &kept, &n_kept, &j->map)
             : WD_ENOMEM;
  free(samples);
  if (rc || !n_kept) {
    if (j)
      wd_vad_map_free(&j->map);
    free(j);
    free(kept);
    return rc ? rc : wd_vad_no_speech(p, n_samples);
  }
  j->cb = p->cb;
  wd_job_params_t q = *p;
  q.cb.ud = j;
  q.cb.on_segment = p->cb.on_segment ? vj_segment : NULL;
  q.cb.on_done = vj_done;
  q.cb.on_language = NULL; /* ud is ours now: the caller's would get the wrong one */
  rc = wd_workers_submit(g, kept, n_kept, &q, ret_id);
  if (rc < 0) { /* on_done never runs for a refused job */
    wd_vad_map_free(&j->map);
    free(j);
  }
  return rc;
}
