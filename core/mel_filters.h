/*
 * mel_filters.h - Whisper's mel filterbank, computed.
 *
 * ggml model files carry the filterbank; CTranslate2 directories do not, so
 * it is computed here exactly as openai/whisper's assets/mel_filters.npz was
 * made: librosa.filters.mel(sr, n_fft, n_mels) with librosa's defaults, i.e.
 * fmin = 0, fmax = sr / 2, the Slaney mel scale (htk = False) and Slaney area
 * normalisation. Arithmetic in double, result rounded to float.
 */
#ifndef WD_MEL_FILTERS_H
#define WD_MEL_FILTERS_H

/*
 * Fills out (n_mels, n_fft / 2 + 1), row-major: one row per mel band over the
 * one-sided FFT bins. Returns 0, or WD_EINVAL for out-of-range sizes.
 */
int wd_mel_filters_slaney(int n_mels, int n_fft, int sample_rate, float *out);

#endif
