/*
 * chunk_job.h - a long file's speech decoded side by side (issue #25,
 * OpenAI's chunking_strategy): the speech spans Silero VAD finds are merged
 * into chunks of at most 30 s, and every chunk is a job of its own on the
 * workers, so the chunks of one file are rows of the same batched decoder
 * steps, beside every other request's (faster-whisper's batched pipeline;
 * no text is carried from one chunk to the next).
 *
 * Shapes: a chunk is the original audio from its first span's start to its
 * last span's end (the short pauses between merged spans stay in it), so
 * its times move back by one offset. At most max_batch of a file's chunks
 * are queued or running at once; each one that ends submits the next (from
 * the worker's callback, which may submit), so a three-hour file does not
 * fill the queue ahead of other requests.
 *
 * Admission: the first chunk is submitted like any request, and its
 * refusal (a full queue, the audio budget) is the job's answer. Every
 * later chunk is submitted as admitted (worker.h): it holds the place the
 * first one won, so a job once accepted is never refused part-way by a
 * queue that other requests keep full; only a drain or an error can end it
 * early. The queue stays bounded: a job has at most max_batch chunks
 * queued or running at once, and new requests still meet queue_max with
 * those chunks counted among the queued.
 *
 * Of p->cb, on_segment and on_done are called (on_language is not: the
 * chunks' own callbacks are chunk_job.c's).
 *
 * Language: a request that names none, on a multilingual model, has it
 * detected once, by the first chunk (openai's detect_language on its first
 * 30 s); the later chunks wait for that answer (on_language, worker.h) and
 * are decoded in it, as openai/whisper's transcribe() and faster-whisper's
 * batched pipeline detect once a file. A chunk that detected for itself
 * would be encoded twice (detection reads real padding frames past a short
 * chunk's end, its window zeros).
 *
 * Streams: where the caller passes on_segment, the later chunks wait for
 * the first one to end, so that its segments reach the client first (a
 * stream's first delta), then run side by side.
 *
 * Segments reach on_segment in time
 * order, a chunk's once every chunk before it has ended; on_done gets one
 * transcript, segments renumbered, times, seeks and words on the original
 * timeline, the language of the first chunk. A chunk that fails ends the
 * whole job with its error once the chunks in flight have ended.
 */
#ifndef WD_CHUNK_JOB_H
#define WD_CHUNK_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "vad.h"
#include "workers.h"

#define WD_CHUNK_MAX_S 30.0 /* the decoder's window */

/* Chunks of at most max_s seconds from speech spans (original samples):
 * consecutive spans are merged while the merged chunk stays within max_s;
 * a span longer than max_s is cut into max_s pieces. *ret malloc'd. */
int wd_chunks_merge(const wd_vad_span_t *spans, size_t n, double max_s, wd_vad_span_t **ret,
                    size_t *ret_n);

/* Submits samples as chunked jobs (see above); takes samples in every case.
 * vp's max_speech_s is replaced by WD_CHUNK_MAX_S. *ret_id (not 0) cancels
 * it with wd_chunk_cancel. A file without speech: on_done with an empty
 * transcript before this returns, *ret_id 0. Returns 0, WD_ENOMEM, or the
 * first chunk's refusal (WD_EBUSY, WD_ESHUTDOWN, WD_EINVAL, ...); once it
 * has returned 0, on_done gets the job's end, never WD_EBUSY. */
int wd_chunk_submit(wd_workers_t *g, const wd_vad_model_t *vad, const wd_vad_params_t *vp,
                    int16_t *samples, size_t n_samples, const wd_job_params_t *p,
                    uint64_t *ret_id);

/* Cancels the job with this id: a chunked job's chunks, or (any other id)
 * wd_workers_cancel's job. */
void wd_chunk_cancel(wd_workers_t *g, uint64_t id);

#endif
