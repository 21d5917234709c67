/*
 * mel_filters.c - the Slaney-scale, Slaney-normalised mel filterbank.
 * ref: librosa/filters.py mel(), librosa/core/convert.py hz_to_mel/mel_to_hz.
 * Pure function, thread-safe.
 */
#include "mel_filters.h"

#include <math.h>
#include <stdlib.h>

#include "error.h"

/* Slaney's scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above. */
#define WD_MEL_F_SP (200.0 / 3.0)
#define WD_MEL_MIN_LOG_HZ 1000.0
#define WD_MEL_MIN_LOG_MEL (WD_MEL_MIN_LOG_HZ / WD_MEL_F_SP) /* = 15 */

static double wd_mel_logstep(void) { return log(6.4) / 27.0; }

static double wd_hz_to_mel(double hz) {
  if (hz >= WD_MEL_MIN_LOG_HZ)
    return WD_MEL_MIN_LOG_MEL + log(hz / WD_MEL_MIN_LOG_HZ) / wd_mel_logstep();
  return hz / WD_MEL_F_SP;
}

static double wd_mel_to_hz(double mel) {
  if (mel >= WD_MEL_MIN_LOG_MEL)
    return WD_MEL_MIN_LOG_HZ * exp(wd_mel_logstep() * (mel - WD_MEL_MIN_LOG_MEL));
  return WD_MEL_F_SP * mel;
}

int wd_mel_filters_slaney(int n_mels, int n_fft, int sample_rate, float *out) {
  if (n_mels < 1 || n_mels > 512 || n_fft < 2 || n_fft > 65536 || sample_rate < 1 || !out)
    return WD_EINVAL;
  const int n_bins = n_fft / 2 + 1;
  /* n_mels + 2 band edges evenly spaced in mel between 0 Hz and Nyquist. */
  double *edges = malloc(sizeof(double) * (size_t)(n_mels + 2));
  if (!edges)
    return WD_ENOMEM;
  const double mel_lo = wd_hz_to_mel(0.0);
  const double mel_hi = wd_hz_to_mel(sample_rate / 2.0);
  for (int i = 0; i < n_mels + 2; i++)
    edges[i] = wd_mel_to_hz(mel_lo + (mel_hi - mel_lo) * i / (n_mels + 1));

  for (int m = 0; m < n_mels; m++) {
    const double lo = edges[m], mid = edges[m + 1], hi = edges[m + 2];
    const double enorm = 2.0 / (hi - lo); /* Slaney: constant area per band */
    for (int k = 0; k < n_bins; k++) {
      /* FFT bin k sits at k * sr / n_fft Hz (numpy linspace(0, sr/2, n_bins)). */
      const double f = (double)sample_rate / 2.0 * k / (n_bins - 1);
      const double lower = (f - lo) / (mid - lo);
      const double upper = (hi - f) / (hi - mid);
      double w = lower < upper ? lower : upper;
      if (w < 0.0)
        w = 0.0;
      out[(size_t)m * (size_t)n_bins + (size_t)k] = (float)(w * enorm);
    }
  }
  free(edges);
  return 0;
}
