/*
 * diar_internal.h - the pieces of the diarization pipeline (diar.h) that
 * need no network, shared by diar.c and diar_pipeline.c and exposed to
 * tests/core/test_diar_pipeline.c. Not a public interface.
 *
 * Time bases (all from pyannote.audio 4.0.7, speaker-diarization-3.1):
 *  - chunks (windows): 10 s every step_s, chunk c starts at sample
 *    c * rint(step_s * 16000); the last one, where the signal does not end on
 *    a chunk, starts after the last whole one and is zero-padded
 *    (Inference.slide);
 *  - segmentation frames: 589 per chunk, frame f of a chunk centred on
 *    sample 270 f + 495.5 of it (diar_seg.h's receptive field);
 *  - aggregated frames: the same frames over the whole signal, frame i
 *    centred at i * 270/16000 + 991/32000 s; chunk c's frame 0 lands on
 *    frame rint(c * step_s / (270/16000)) (Inference.aggregate's
 *    closest_frame);
 *  - CAM++ trunk frames: fbank frames every 160 samples (400-sample frames,
 *    centred on 160 i + 200), halved by the trunk's stride-2 layer: trunk
 *    frame j centred on fbank frame 2 j, i.e. on sample 320 j + 200 of the
 *    chunk.
 */
#ifndef WD_DIAR_INTERNAL_H
#define WD_DIAR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "diar.h"

#define WD__DIAR_FRAMES 589 /* segmentation frames per chunk (diar_seg.h) */
#define WD__DIAR_LOCAL 3    /* local speakers per chunk */
#define WD__DIAR_CHUNK 160000
#define WD__DIAR_FRAME_STEP_S (270.0 / 16000.0)
#define WD__DIAR_FRAME_DUR_S (991.0 / 16000.0)
/* A speaker's embedding uses its clean frames (no other speaker active)
 * when it has more than this many, else all its frames: pyannote's
 * min_num_frames = ceil(589 * min_num_samples / 160000), here with the
 * 880 samples of the 4 fbank frames CAM++'s trunk needs at least. */
#define WD__DIAR_MIN_CLEAN 4
/* A (chunk, speaker) embedding takes part in clustering when its clean
 * frames are at least 20% of the chunk's (filter_embeddings'
 * min_active_ratio); the others are only assigned to the clusters. */
#define WD__DIAR_TRAIN_RATIO 0.2
/* Change points inside a local speaker (issue #41): the segmentation model
 * sometimes gives one local speaker two voices of a chunk, whose one
 * embedding then sits between them. A clustered local speaker's clean
 * frames are tried split at every WD__DIAR_SPLIT_STEP-th of them into a
 * left and a right part of at least WD__DIAR_SPLIT_MIN_PART frames (~1 s)
 * each; when the two parts' embeddings are at least
 * WD__DIAR_SPLIT_DISTANCE apart (cosine distance) at the best split, the
 * local speaker becomes two embeddings: its left part in its own slot,
 * its right part in slot WD__DIAR_LOCAL + s, both clustered (cannot-link:
 * one chunk). 0.7: on the evaluation files one voice's local speakers
 * (each >= 2 s clean) reach at most 0.55 (pyannote's sample.wav) and
 * 0.47 (voxint), two real voices 0.6-1.08 (docs/diarization.md); at 0.6
 * the pipeline split sample.wav into 3 speakers, at 0.8 it left a tuning
 * file (real3spk_tune) one speaker short. */
#define WD__DIAR_SLOTS (2 * WD__DIAR_LOCAL) /* embeddings per chunk */
#define WD__DIAR_SPLIT_MIN_PART 59
#define WD__DIAR_SPLIT_STEP 10
#define WD__DIAR_SPLIT_DISTANCE 0.7

typedef struct {
  size_t n_samples; /* the signal */
  size_t step;      /* samples between chunk starts */
  double step_s;    /* the same in seconds, as pyannote's SlidingWindow keeps it */
  size_t n_chunks;
  size_t n_frames;  /* aggregated frames over all chunks */
} wd__diar_geom_t;

/* The chunks and frames of a signal of n samples, step_s > 0. */
void wd__diar_geom(size_t n, double step_s, wd__diar_geom_t *g);
/* The aggregated frame that chunk c's frame 0 lands on. */
size_t wd__diar_chunk_frame(const wd__diar_geom_t *g, size_t c);

/* Powerset decoding (pyannote's Powerset.to_multilabel, hard): the argmax
 * class of each of n frames' 7 log-probabilities (logp, n x 7) as the
 * activity of the 3 local speakers, act (n x 3, 0 or 1). The first class
 * wins a tie, as torch.argmax. */
void wd__diar_powerset_decode(const float *logp, size_t n, uint8_t *act);

/* The mask (589 frames, 0/1) an embedding of local speaker s pools, from a
 * chunk's activity act (589 x 3): its clean frames if more than
 * WD__DIAR_MIN_CLEAN, else all its frames. Returns the clean frames' count,
 * or -1 when s is never active in the chunk (mask untouched). */
int wd__diar_embed_mask(const uint8_t *act, int s, uint8_t *mask);

/* The trunk frame j's weight (T_out frames) from a 589-frame mask: the mean
 * of the mask over the segmentation frames whose nearest trunk frame is j
 * (one or two: the segmentation's 16.9 ms step is finer than the trunk's
 * 20 ms), or for a trunk frame that is no segmentation frame's nearest (at
 * the edges) the mask of its own nearest segmentation frame. So every
 * active segmentation frame weighs on some trunk frame, and the weights
 * follow time, not index ratios. */
void wd__diar_trunk_weights(const uint8_t *mask, size_t T_out, float *w);
/* The segmentation frame nearest trunk frame j, and the trunk frame
 * nearest segmentation frame f (T_out trunk frames). */
size_t wd__diar_trunk_to_seg(size_t j);
size_t wd__diar_seg_to_trunk(size_t f, size_t T_out);

/* The per-frame speaker count (pyannote's speaker_count): each chunk's
 * number of active speakers per frame, averaged over the chunks covering
 * the aggregated frame, rounded half to even. count: g->n_frames.
 * 0 or WD_ENOMEM. */
int wd__diar_count(const uint8_t *act, const wd__diar_geom_t *g, uint8_t *count);

/* wd__diar_reconstruct with split local speakers: hard is n_chunks x
 * WD__DIAR_SLOTS (slot s < 3: local speaker s, or its frames before
 * cut[c * 3 + s] when that is > 0; slot 3 + s: its frames from that cut
 * on), cut n_chunks x 3 (NULL: nothing split, slots 3.. unused). */
int wd__diar_reconstruct_split(const uint8_t *act, const uint16_t *cut, const int *hard,
                               const uint8_t *count, const wd__diar_geom_t *g, int k,
                               uint8_t *binary);

/* A split's part of an embedding mask (589 frames): the frames before
 * frame cut (side 0) or from it on (side 1). */
void wd__diar_split_part(const uint8_t *mask, int cut, int side, uint8_t *part);

/* Cosine distance of two WD_DIAR_EMB_DIM vectors (1 when either is 0). */
double wd__diar_cos_dist(const float *a, const float *b);

/* to_diarization after reconstruct: hard (n_chunks x 3) is each local
 * speaker's cluster in 0 .. k-1, or negative for none; each cluster's
 * activity in a chunk is the max over its local speakers, summed over the
 * chunks (skip_average); each frame keeps the count[i] clusters of highest
 * sum (the lower cluster first on ties; count[i] at most k). binary:
 * g->n_frames x k. 0 or WD_ENOMEM. */
int wd__diar_reconstruct(const uint8_t *act, const int *hard, const uint8_t *count,
                         const wd__diar_geom_t *g, int k, uint8_t *binary);

/* to_annotation (pyannote's Binarize at 0.5, no min durations): each
 * cluster's runs of active frames (binary: n_frames x k) as turns from the
 * first active frame's centre to the first inactive frame's centre (the
 * last frame's centre when active to the end), clipped to [0, end_s];
 * clusters renumbered in order of first appearance, those with no turn
 * dropped; centroids (k x WD_DIAR_EMB_DIM, may be NULL) reordered alike and
 * L2-normalized. out is overwritten. 0 or WD_ENOMEM. */
int wd__diar_turns(const uint8_t *binary, size_t n_frames, int k, double end_s,
                   const float *centroids, wd_diar_result_t *out);

/* What the networks leave for the rest of the pipeline: per chunk, the
 * local speakers' activity and embeddings. */
typedef struct {
  wd__diar_geom_t g;
  uint8_t *act;  /* n_chunks x 589 x 3, 0/1 */
  float *emb;    /* n_chunks x WD__DIAR_SLOTS x WD_DIAR_EMB_DIM, the
                  * network's output (not normalized); rows of inactive
                  * slots unused */
  int8_t *state; /* n_chunks x WD__DIAR_SLOTS: -1 inactive, 0 embedded
                  * (assigned only), 1 embedded and clustered */
  uint16_t *cut; /* n_chunks x 3: the first frame of local speaker s's
                  * right part (slot 3 + s), 0 when not split */
} wd__diar_acts_t;

/* Allocates a's arrays for geometry g (zeroed). 0 or WD_ENOMEM. */
int wd__diar_acts_init(wd__diar_acts_t *a, const wd__diar_geom_t *g);
void wd__diar_acts_free(wd__diar_acts_t *a);

/* Everything after the networks: the speaker count, clustering of the
 * state-1 embeddings (beyond WD_DIAR_CLUSTER_N_MAX, those of evenly spaced
 * chunks, whole),
 * every embedded (chunk, speaker) assigned to the cluster of most similar
 * centroid (the mean of its clustered embeddings), reconstruction and the
 * turns. 0, WD_ENOMEM or WD_EINVAL (bad bounds). */
int wd__diar_finish(const wd__diar_acts_t *a, const wd_diar_params_t *p, wd_diar_result_t *out);

/* dst = src (WD_DIAR_EMB_DIM floats) scaled to unit length; dst may be src. */
void wd__diar_normalize(const float *src, float *dst);

#endif
