/*
 * vad_job.h - the VAD filter in front of the sequential decoder (issue #25):
 * a job decodes only the speech of its audio, and its segments and words
 * come back on the original timeline.
 *
 * As faster-whisper's vad_filter and whisper.cpp's --vad: the speech spans
 * (vad.h, silero-vad's rules) are cut out and joined end to end, openai's
 * seek loop runs over the joined signal unchanged, and every time it reports
 * (segment and word starts and ends, progress) is mapped back: a time inside
 * the k-th span moves by that span's offset, and an end that falls exactly
 * on the join between two spans stays at the end of the first; a word moves
 * whole, by the span its middle lies in, and a segment with words spans its
 * first word's start to its last word's end (faster-whisper's
 * restore_speech_timestamps). Mapped times are rounded to the millisecond. Silence and noise cost no model time and
 * produce no text; a file without speech gives an empty transcript at once.
 */
#ifndef WD_VAD_JOB_H
#define WD_VAD_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "transcript.h"
#include "vad.h"
#include "workers.h"

/* The spans kept, for mapping times back. */
typedef struct {
  wd_vad_span_t *spans; /* original samples */
  size_t *joined;       /* joined[k]: where span k starts in the joined signal */
  size_t n;
  size_t n_samples;     /* the original signal's length */
} wd_vad_map_t;

/* Keeps the speech of pcm[0..n): *ret_pcm (malloc'd, NULL when there is
 * none) holds the spans joined, *ret_n samples, and map says where they came
 * from (wd_vad_map_free). 0 or WD_ENOMEM. */
int wd_vad_keep_speech(const wd_vad_model_t *m, const wd_vad_params_t *p, const int16_t *pcm,
                       size_t n, int16_t **ret_pcm, size_t *ret_n, wd_vad_map_t *map);
void wd_vad_map_free(wd_vad_map_t *map);

/* A time in seconds on the joined signal, on the original one. is_end: a
 * time at a join is the end of the span before it. */
double wd_vad_map_time(const wd_vad_map_t *map, double t, int is_end);

/* Every segment's and word's times mapped, and the duration the original's. */
void wd_vad_map_transcript(const wd_vad_map_t *map, wd_transcript_t *t);

/* Ends a job whose audio holds no speech without running it: p->cb.on_done
 * with an empty transcript of the file's duration (it owns it). 0 or
 * WD_ENOMEM. */
int wd_vad_no_speech(const wd_job_params_t *p, size_t n_samples);

/* wd_workers_submit with the filter when vad is not NULL (p's callbacks see
 * original times); without it, exactly wd_workers_submit. Takes samples in
 * every case. Runs the VAD on the calling thread (about 1 ms per second of
 * audio per 1,000: vad.h). When there is no speech, p->cb.on_done runs
 * before this returns, with an empty transcript, and *ret_id is 0. */
int wd_vad_submit(wd_workers_t *g, const wd_vad_model_t *vad, const wd_vad_params_t *vp,
                  int16_t *samples, size_t n_samples, const wd_job_params_t *p,
                  uint64_t *ret_id);

#endif
