/*
 * diar_seg.h - pyannote's segmentation-3.0 network (PyanNet) in C.
 *
 * Input: one 10 s window, 160000 samples at 16 kHz (float in [-1, 1]).
 * The network: SincNet (instance norm of the waveform; 80 parametric sinc
 * filters of 251 taps, stride 10, |.|, max-pool 3, instance norm, leaky
 * ReLU; two convolutions of 5 taps 80 -> 60 -> 60, each with max-pool 3,
 * instance norm, leaky ReLU): 589 frames x 60; a 4-layer bidirectional LSTM
 * (128 per direction); two linear layers 256 -> 128 -> 128 with leaky ReLU;
 * the classifier 128 -> 7 and a log-softmax.
 *
 * The 7 classes are the powerset of 3 local speakers with at most 2 at once:
 * {}, {0}, {1}, {2}, {0,1}, {0,2}, {1,2}.
 *
 * Frame f of a window covers samples [f * 270, f * 270 + 991) of it (the
 * receptive field: step 270 samples = 16.875 ms, duration 991 = 61.9 ms;
 * pyannote.audio 4.0.7 gives the model num_frames(160000) = 589 and
 * receptive_field = SlidingWindow(start 0, duration 991 / 16000, step
 * 270 / 16000), checked by tests/data/diar/make_seg_reference.py).
 */
#ifndef WD_DIAR_SEG_H
#define WD_DIAR_SEG_H

#include <stddef.h>

#define WD_DIAR_SEG_WINDOW 160000 /* samples per window (10 s) */
#define WD_DIAR_SEG_FRAMES 589    /* output frames per window */
#define WD_DIAR_SEG_CLASSES 7     /* powerset classes */
#define WD_DIAR_SEG_SPEAKERS 3    /* local speakers per window */
#define WD_DIAR_SEG_FRAME_STEP 270
#define WD_DIAR_SEG_FRAME_SIZE 991

typedef struct wd_diar_seg wd_diar_seg_t;

/* WD_ENOENT, WD_EMODEL (err names the tensor and the shape expected),
 * WD_ENOMEM. The file's __metadata__ "model" must be
 * "pyannote-segmentation-3.0". */
int wd_diar_seg_load(const char *path, wd_diar_seg_t **ret, char *err, size_t err_len);
void wd_diar_seg_free(wd_diar_seg_t *m); /* accepts NULL */

/* logp[w][f][c] (n_windows x 589 x 7): the log-softmax outputs for windows
 * w of WD_DIAR_SEG_WINDOW samples each, windows[w] pointing at each one's
 * first sample. Up to 8 windows go through the LSTM together (its input
 * projections one matrix product over all their frames, its recurrence
 * one over their states); the convolutions run window by window (a
 * window's are already large products). Thread-safe for a shared model;
 * each call allocates its own scratch, about 25 MB at 8 windows or more
 * (4 MB + 2.5 MB per window). 0 or WD_ENOMEM. */
int wd_diar_seg_forward(const wd_diar_seg_t *m, const float *const *windows, size_t n_windows,
                        float *logp);

/* The powerset class's speaker set as a bit mask (bit s: local speaker s). */
unsigned wd_diar_powerset_mask(int cls);

/* Tests: the SincNet features of one window, x (589 x 60, time-major), as
 * the LSTM receives them. 0 or WD_ENOMEM. */
int wd__diar_seg_sincnet(const wd_diar_seg_t *m, const float *window, float *x);

#endif
