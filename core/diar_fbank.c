/*
 * diar_fbank.c - Kaldi's log mel filterbank for CAM++ (see diar_fbank.h).
 * ref: torchaudio.compliance.kaldi.fbank (the options 3D-Speaker leaves at
 * their defaults), 3D-Speaker speakerlab/process/processor.py FBank.
 *
 * Per frame of 400 samples: subtract the frame's mean; pre-emphasis
 * y[j] = x[j] - 0.97 x[j-1] with x[-1] taken as x[0] (so y[0] = 0.03 x[0]);
 * times the Povey window (a symmetric Hann window to the power 0.85); zero
 * padded to 512; the power spectrum |X[k]|^2 of bins 0..255 (Kaldi's mel
 * banks give the Nyquist bin no weight); 80 triangular mel bands; natural
 * log of max(energy, FLT_EPSILON). Then each band's mean over the frames
 * is subtracted.
 *
 * The FFT is our own: a 512-point real transform as a 256-point complex one
 * (even samples real, odd imaginary) and the usual split. FFTW's planner is
 * not thread-safe and this module has no object to hold a plan made once
 * under core/mel.c's lock; the transform is ~2% of an embedding's time, so
 * a plain radix-2 loop over tables made once (pthread_once) does. Its
 * rounding is that of any float FFT (~1e-7 relative), far below the log's
 * sensitivity to the energy of a band.
 */
#include "diar_fbank.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define N_FFT 512
#define N_HALF 256 /* complex points of the half-size transform */
#define N_BINS 256 /* bins with a mel weight: 0 .. 255 */
#define PREEMPH 0.97f
#define LOW_HZ 20.0
#define RATE 16000.0

static struct {
  float window[WD_DIAR_FBANK_WIN];
  float cos_half[N_HALF / 2], sin_half[N_HALF / 2]; /* e^{-2 pi i k / 256} */
  float cos_full[N_HALF + 1], sin_full[N_HALF + 1]; /* e^{-2 pi i k / 512} */
  unsigned short bitrev[N_HALF];
  float mel[WD_DIAR_FBANK_BINS][N_BINS];
  int lo[WD_DIAR_FBANK_BINS], hi[WD_DIAR_FBANK_BINS]; /* non-zero span [lo, hi) */
} g_t;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static double mel_of(double hz) { return 1127.0 * log(1.0 + hz / 700.0); }

static void init_tables(void) {
  /* Povey: (0.5 - 0.5 cos(2 pi n / (N - 1)))^0.85, torch.hann_window with
   * periodic=False. */
  for (int n = 0; n < WD_DIAR_FBANK_WIN; n++)
    g_t.window[n] = (float)pow(0.5 - 0.5 * cos(2.0 * M_PI * n / (WD_DIAR_FBANK_WIN - 1)), 0.85);
  for (int k = 0; k < N_HALF / 2; k++) {
    g_t.cos_half[k] = (float)cos(2.0 * M_PI * k / N_HALF);
    g_t.sin_half[k] = (float)-sin(2.0 * M_PI * k / N_HALF);
  }
  for (int k = 0; k <= N_HALF; k++) {
    g_t.cos_full[k] = (float)cos(2.0 * M_PI * k / N_FFT);
    g_t.sin_full[k] = (float)-sin(2.0 * M_PI * k / N_FFT);
  }
  for (unsigned i = 0; i < N_HALF; i++) {
    unsigned r = 0;
    for (unsigned b = 0; b < 8; b++)
      r |= ((i >> b) & 1u) << (7 - b);
    g_t.bitrev[i] = (unsigned short)r;
  }
  /* Kaldi's mel banks: 82 points equally spaced in mel from 20 Hz to 8 kHz;
   * band b rises from point b to b + 1 and falls to b + 2, each FFT bin
   * weighted by where its frequency's mel value lies (zero outside). */
  const double lo = mel_of(LOW_HZ), hi = mel_of(RATE / 2), d = (hi - lo) / (WD_DIAR_FBANK_BINS + 1);
  for (int b = 0; b < WD_DIAR_FBANK_BINS; b++) {
    const double l = lo + b * d, c = lo + (b + 1) * d, r = lo + (b + 2) * d;
    g_t.lo[b] = N_BINS, g_t.hi[b] = 0;
    for (int k = 0; k < N_BINS; k++) {
      const double m = mel_of(RATE / N_FFT * k);
      const double up = (m - l) / (c - l), down = (r - m) / (r - c);
      const double w = fmax(0.0, fmin(up, down));
      g_t.mel[b][k] = (float)w;
      if (w > 0.0) {
        if (k < g_t.lo[b])
          g_t.lo[b] = k;
        g_t.hi[b] = k + 1;
      }
    }
  }
}

size_t wd_diar_fbank_frames(size_t n) {
  return n < WD_DIAR_FBANK_WIN ? 0 : 1 + (n - WD_DIAR_FBANK_WIN) / WD_DIAR_FBANK_HOP;
}

/* In-place radix-2 FFT of 256 complex points (re, im), e^{-i...} sign. */
static void fft256(float *re, float *im) {
  for (int i = 0; i < N_HALF; i++) {
    const int j = g_t.bitrev[i];
    if (j > i) {
      float t = re[i];
      re[i] = re[j], re[j] = t;
      t = im[i];
      im[i] = im[j], im[j] = t;
    }
  }
  for (int len = 2; len <= N_HALF; len <<= 1) {
    const int half = len / 2, step = N_HALF / len;
    for (int s = 0; s < N_HALF; s += len)
      for (int k = 0; k < half; k++) {
        const float wr = g_t.cos_half[k * step], wi = g_t.sin_half[k * step];
        const int a = s + k, b = a + half;
        const float tr = re[b] * wr - im[b] * wi, ti = re[b] * wi + im[b] * wr;
        re[b] = re[a] - tr, im[b] = im[a] - ti;
        re[a] += tr, im[a] += ti;
      }
  }
}

/* power[0..255] = |X[k]|^2 of the 512 real samples x (zero padded past
 * 400 by the caller). With z[n] = x[2n] + i x[2n+1] and Z its transform:
 * X[k] = E[k] + e^{-2 pi i k / 512} O[k], E = (Z[k] + conj Z[-k]) / 2,
 * O = (Z[k] - conj Z[-k]) / 2i. */
static void power_spectrum(const float *x, float *power) {
  float re[N_HALF], im[N_HALF];
  for (int n = 0; n < N_HALF; n++)
    re[n] = x[2 * n], im[n] = x[2 * n + 1];
  fft256(re, im);
  for (int k = 0; k < N_BINS; k++) {
    const int nk = (N_HALF - k) & (N_HALF - 1);
    const float er = 0.5f * (re[k] + re[nk]), ei = 0.5f * (im[k] - im[nk]);
    const float or_ = 0.5f * (im[k] + im[nk]), oi = -0.5f * (re[k] - re[nk]);
    const float wr = g_t.cos_full[k], wi = g_t.sin_full[k];
    const float xr = er + or_ * wr - oi * wi, xi = ei + or_ * wi + oi * wr;
    power[k] = xr * xr + xi * xi;
  }
}

int wd_diar_fbank(const float *pcm, size_t n, float *feats) {
  pthread_once(&g_once, init_tables);
  const size_t T = wd_diar_fbank_frames(n);
  if (T == 0)
    return 0;
  double *sum = calloc(WD_DIAR_FBANK_BINS, sizeof *sum);
  if (!sum)
    return WD_ENOMEM;
  float frame[N_FFT], power[N_BINS];
  for (size_t t = 0; t < T; t++) {
    const float *x = pcm + t * WD_DIAR_FBANK_HOP;
    double mean = 0.0;
    for (int j = 0; j < WD_DIAR_FBANK_WIN; j++)
      mean += x[j];
    const float m = (float)(mean / WD_DIAR_FBANK_WIN);
    /* DC removal, pre-emphasis (from the unfiltered previous sample) and window. */
    float prev = x[0] - m;
    frame[0] = (prev - PREEMPH * prev) * g_t.window[0];
    for (int j = 1; j < WD_DIAR_FBANK_WIN; j++) {
      const float cur = x[j] - m;
      frame[j] = (cur - PREEMPH * prev) * g_t.window[j];
      prev = cur;
    }
    memset(frame + WD_DIAR_FBANK_WIN, 0, sizeof(float) * (N_FFT - WD_DIAR_FBANK_WIN));
    power_spectrum(frame, power);
    float *row = feats + t * WD_DIAR_FBANK_BINS;
    for (int b = 0; b < WD_DIAR_FBANK_BINS; b++) {
      float e = 0.0f;
      for (int k = g_t.lo[b]; k < g_t.hi[b]; k++)
        e += g_t.mel[b][k] * power[k];
      row[b] = logf(fmaxf(e, FLT_EPSILON));
      sum[b] += row[b];
    }
  }
  for (int b = 0; b < WD_DIAR_FBANK_BINS; b++) {
    const float mean = (float)(sum[b] / (double)T);
    for (size_t t = 0; t < T; t++)
      feats[t * WD_DIAR_FBANK_BINS + b] -= mean;
  }
  free(sum);
  return 0;
}
