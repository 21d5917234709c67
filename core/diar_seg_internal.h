/*
 * diar_seg_internal.h - what the segmentation network's loader
 * (diar_seg_load.c) and its forward pass (diar_seg.c) share: the shapes of
 * PyanNet's layers and the weights as loaded. Not an interface.
 */
#ifndef WD_DIAR_SEG_INTERNAL_H
#define WD_DIAR_SEG_INTERNAL_H

#include <stddef.h>

#include "diar_seg.h"

#define WIN WD_DIAR_SEG_WINDOW
#define N_FRAMES WD_DIAR_SEG_FRAMES
#define N_CLASSES WD_DIAR_SEG_CLASSES
#define SINC_TAPS 251
#define SINC_HALF 125          /* taps left of the centre */
#define SINC_STRIDE 10
#define N_SINC 80              /* 40 cosine (even) then 40 sine (odd) filters */
#define SINC_OUT 15975         /* (160000 - 251) / 10 + 1 */
#define POOL 3
#define P1 (SINC_OUT / POOL)   /* 5325 */
#define CONV_TAPS 5
#define CH 60                  /* channels of the two convolutions */
#define CH16 64
#define C1 (P1 - CONV_TAPS + 1) /* 5321 */
#define P2 (C1 / POOL)          /* 1773 */
#define C2 (P2 - CONV_TAPS + 1) /* 1769 */
_Static_assert(C2 / POOL == N_FRAMES, "589 frames from 160000 samples");
_Static_assert(SINC_OUT % POOL == 0, "the sinc outputs pool without a remainder");
#define HID 128
#define GATES (4 * HID)
#define BI (2 * HID) /* a bidirectional layer's output */
#define LAYERS 4
#define LIN 128
#define CLS16 16
#define SLOPE 0.01f  /* leaky ReLU */
#define NORM_EPS 1e-5 /* InstanceNorm1d */
#define MIN_LOW_HZ 50.0f
#define MIN_BAND_HZ 50.0f
#define NYQUIST 8000.0f
#define GROUP 8      /* windows through the LSTM together: 2.5 MB of scratch each */
#define SINC_BLOCK (POOL * 64) /* sinc outputs made, then pooled, at once */
/* The sinc filters' symmetry (see fold()): each half of the bank is a
 * product over SYM_K folded taps (126 used, zeros past them) into SYM_N
 * columns (40 filters, zeros past them). */
#define SYM_K 128
#define SYM_N 48
_Static_assert(SYM_K >= SINC_HALF + 1 && SYM_N >= N_SINC / 2 && SYM_N % 16 == 0, "sizes");

typedef struct {
  float *w; /* (taps cin) x CH16, k = tap * cin + i */
  float *b; /* CH16 */
} conv_t;

typedef struct {
  size_t in;
  float *wih;  /* in x GATES, packed (diar_gemm.h) */
  float *whh;  /* HID x GATES, in panels */
  float *bias; /* b_ih + b_hh */
} lstm_dir_t;

struct wd_diar_seg {
  float wav_w, wav_b;          /* the waveform's instance norm */
  float *sinc_even, *sinc_odd; /* SYM_K x SYM_N each, packed (diar_gemm.h), see fold() */
  float norm_w[3][N_SINC], norm_b[3][N_SINC];
  conv_t conv[2];
  lstm_dir_t lstm[LAYERS][2];
  float *lin_w[2], *lin_b[2];  /* 256 x 128, 128 x 128, packed */
  float *cls_w, *cls_b;        /* 128 x CLS16, packed */
};

/* The LSTM's recurrent weights (HID x GATES) are kept in panels of PANEL
 * columns, each HID x PANEL contiguous, for vad_gemm: k-major rows of 512
 * floats are 2 KB apart, a power of two that maps a 16-column slice of
 * successive rows onto the same few L1 sets. The recurrence multiplies at
 * most GROUP rows (one per window) per step: vad_gemm's 4 x 16 blocks fit
 * that better than diar_gemm's 6 x 16 (measured: a window alone ran 20-30%
 * slower through the segmentation network on diar_gemm). */
#define PANEL 64
_Static_assert(GATES % PANEL == 0, "whole panels");

#endif
