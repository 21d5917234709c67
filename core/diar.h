/*
 * diar.h - speaker diarization ("who spoke when"): pyannote's
 * speaker-diarization-3.1 pipeline in C, with 3D-Speaker's CAM++ as the
 * speaker embedding (where 3.1 uses WeSpeaker's ResNet34).
 *
 * Two model files, made by scripts/fetch-diarization.sh (whisperd's
 * safetensors layout, __metadata__ format "whisperd-diarization"):
 *   models/diar-segmentation-3.0.safetensors  pyannote segmentation-3.0
 *   models/diar-campplus-zh-en.safetensors    CAM++ zh_en common, 192-d
 *
 * The pipeline over a 16 kHz mono signal:
 *  1. segmentation (diar_seg.h) over 10 s windows every 1 s (as pyannote's
 *     Inference slides them: where the signal goes on past the last whole
 *     window, one more starts a step after it, zero-padded; a signal
 *     shorter than a window is one zero-padded window):
 *     589 frames x 7 powerset classes per window, decoded to the hard
 *     activity of 3 local speakers per frame;
 *  2. one embedding per (window, active local speaker) (diar_campp.h), from
 *     the frames where that speaker alone is active (overlapped frames
 *     excluded, as 3.1 does);
 *  3. agglomerative clustering of the embeddings (diar_cluster.h: centroid
 *     linkage on cosine distance, a threshold and a minimum cluster size),
 *     then each (window, local speaker) assigned to a cluster;
 *  4. reconstruction: the windows' activities aggregated over the overlap,
 *     the per-frame speaker count kept, and the turns of each speaker.
 * Speakers are numbered 0, 1, ... in order of first appearance.
 *
 * Everything here runs on the calling thread (a decode thread of the
 * daemon, never the HTTP threads or the worker), and a model may be shared
 * by any number of threads at once: it is read-only after loading.
 */
#ifndef WD_DIAR_H
#define WD_DIAR_H

#include <stddef.h>

#define WD_DIAR_SAMPLE_RATE 16000
#define WD_DIAR_EMB_DIM 192

typedef struct wd_diar wd_diar_t; /* both networks */

/* Loads both files. WD_ENOENT (err names the file) when one is missing,
 * WD_EMODEL (err says what is wrong) for a file that is not ours. */
int wd_diar_load(const char *seg_path, const char *emb_path, wd_diar_t **ret, char *err,
                 size_t err_len);
void wd_diar_free(wd_diar_t *d); /* accepts NULL */

typedef struct {
  float threshold;      /* clustering: merge while the closest centroids' cosine
                         * distance is below this (tuned for CAM++) */
  int min_cluster_size; /* smaller clusters are merged into the nearest large one */
  int min_speakers;     /* 0: no bound; else at least this many clusters (if there
                         * are that many embeddings) */
  int max_speakers;     /* 0: no bound; else at most this many */
  float step_s;         /* segmentation window step [1.0] */
} wd_diar_params_t;

void wd_diar_params_default(wd_diar_params_t *p);

typedef struct {
  double start, end; /* seconds */
  int speaker;       /* 0, 1, ... in order of first appearance */
} wd_diar_turn_t;

typedef struct {
  wd_diar_turn_t *turns; /* sorted by start; a speaker's turns never overlap each
                          * other, two speakers' may (overlapped speech) */
  size_t n_turns;
  int n_speakers;
  float *centroids;      /* n_speakers x WD_DIAR_EMB_DIM, L2-normalized: each
                          * speaker's mean embedding (known-speaker matching) */
} wd_diar_result_t;

/* Diarizes pcm (n samples, 16 kHz mono, float in [-1, 1]). A signal with no
 * speech gives no turns and 0 speakers. should_stop (may be NULL) is polled
 * between windows: when it returns nonzero the run ends with WD_ECANCELED.
 * Memory grows with n by about 4 KB per second (each window's activity and
 * embeddings); the networks' buffers are per batch of windows.
 * 0, WD_ENOMEM, WD_ECANCELED, WD_EINVAL (step_s not in (0, 10], a
 * threshold not finite, negative or crossed speaker bounds). */
int wd_diar_run(const wd_diar_t *d, const float *pcm, size_t n, const wd_diar_params_t *p,
                int (*should_stop)(void *), void *stop_arg, wd_diar_result_t *out);
void wd_diar_result_free(wd_diar_result_t *r); /* the arrays; accepts zeroed */

/* The L2-normalized embedding of a whole clip (a known speaker's reference:
 * 1.2-10 s of one voice), into emb[WD_DIAR_EMB_DIM]. 0 or WD_ENOMEM, or
 * WD_EINVAL for a clip shorter than 0.5 s. */
int wd_diar_embed_clip(const wd_diar_t *d, const float *pcm, size_t n, float *emb);

#endif
