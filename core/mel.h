/*
 * mel.h - Whisper's log-mel spectrogram on the CPU (FFTW, single precision).
 *
 * A wd_mel_t owns the FFTW plan, the periodic Hann window and a copy of the
 * mel filterbank. It is built once per model (n_mels is 80, or 128 for
 * large-v3 and large-v3-turbo) and is immutable afterwards: any number of
 * threads may call wd_mel_compute() on one wd_mel_t at the same time.
 *
 * Two ways to use it: wd_mel_compute() gives a whole file's spectrogram at
 * once (tests, benchmarks, the encoder checks); a wd_mel_pcm_t holds a
 * file's samples and gives one 30 s window of the same spectrogram at a
 * time, bit for bit the same columns, so that a queued job holds its audio
 * as 16-bit samples (32 kB a second) rather than its log-mel (32 kB at 80
 * bins, 51 kB at 128) plus the float samples it came from (64 kB) while the
 * mel is made.
 *
 * ref: openai/whisper audio.py log_mel_spectrogram(audio, n_mels,
 * padding=N_SAMPLES), as called by transcribe().
 */
#ifndef WD_MEL_H
#define WD_MEL_H

#include <stddef.h>
#include <stdint.h>

/* Whisper's front-end constants (ref: openai/whisper audio.py). */
#define WD_MEL_SAMPLE_RATE 16000
#define WD_MEL_N_FFT 400
#define WD_MEL_HOP 160
#define WD_MEL_N_BINS (WD_MEL_N_FFT / 2 + 1) /* 201 one-sided FFT bins */
#define WD_MEL_N_PAD_SAMPLES 480000          /* 30 s of zeros appended */
#define WD_MEL_N_PAD_FRAMES 3000             /* frames those 30 s add */
/* The longest input accepted: 12 hours (the output is then about 2.2 GB at
 * 128 bins). Longer input is rejected as WD_EINVAL. */
#define WD_MEL_MAX_SAMPLES ((size_t)WD_MEL_SAMPLE_RATE * 3600u * 12u)

/* Samples beyond this magnitude (full scale is 1.0) are rejected: below it
 * every intermediate value of the FFT and the filterbank stays finite. */
#define WD_MEL_MAX_ABS_SAMPLE 1.0e6f
/* wd_mel_compute() never starts more threads than this. */
#define WD_MEL_MAX_THREADS 64

typedef struct wd_mel wd_mel_t;

/*
 * Creates a mel front end for n_mels bands (80 or 128). filters is
 * (n_mels, 201) row-major, from the model file or wd_mel_filters_slaney();
 * it is copied, so the caller keeps ownership. Every value must be finite.
 * Returns 0, WD_EINVAL (bad n_mels, NULL or non-finite filters) or WD_ENOMEM.
 */
int wd_mel_new(int n_mels, const float *filters, wd_mel_t **ret);
/* Frees m; NULL is allowed. No wd_mel_compute() call may be running on m. */
void wd_mel_free(wd_mel_t *m);

int wd_mel_n_mels(const wd_mel_t *m);

/* The n_frames wd_mel_compute() gives for n_samples: n_samples / 160 + 3000,
 * or WD_EINVAL when n_samples > WD_MEL_MAX_SAMPLES. */
int wd_mel_n_frames(size_t n_samples);

/*
 * Computes openai/whisper's log_mel_spectrogram(audio, n_mels,
 * padding=N_SAMPLES) of 16 kHz mono samples: 480000 zeros appended, periodic
 * Hann(400), hop 160, center=True with reflect padding of 200, |STFT|^2, the
 * last frame dropped, filters @ power, log10(max(x, 1e-10)),
 * max(x, global_max - 8), (x + 4) / 4.
 *
 * Output: *ret_mel is (n_mels, n_frames) row-major, malloc'd; the caller
 * frees it with free(). n_frames = n_samples / 160 + 3000: the content
 * frames, then the frames of the 30 s of padding.
 *
 * Short inputs: the reflect padding is applied after the 30 s of zeros are
 * appended, as in openai/whisper, so it is well defined for every length,
 * including n_samples < 201 and n_samples == 0 (samples may then be NULL;
 * the result is 3000 frames of silence, every value (log10(1e-10)+4)/4 = -1.5).
 *
 * Samples are expected in [-1, 1]; a NaN, an infinity or a magnitude above
 * WD_MEL_MAX_ABS_SAMPLE is rejected, so the output is always finite.
 *
 * n_threads >= 1 splits the frames over that many threads (1 = run in the
 * calling thread; at most WD_MEL_MAX_THREADS are used, and fewer for short
 * input); the result is bit-identical for every n_threads. The threads
 * inherit the caller's signal mask.
 * Returns 0, WD_EINVAL (NULL arguments, n_samples > WD_MEL_MAX_SAMPLES, a bad
 * sample, n_threads < 1) or WD_ENOMEM; on error *ret_mel is untouched.
 */
int wd_mel_compute(const wd_mel_t *m, const float *samples, size_t n_samples, int n_threads,
                   float **ret_mel, int *ret_n_frames);

/*
 * A file's samples, from which the log-mel of any window is computed on
 * demand. wd_mel_pcm_new takes 16-bit samples (the value is s / 32768, what
 * core/audio.h gives), wd_mel_pcm_new_f32 floats as wd_mel_compute does;
 * either takes ownership of the array (freed on error too). Making one runs
 * the file's spectrogram once, storing nothing, for the global max that
 * openai/whisper clamps every value against (n_threads as in
 * wd_mel_compute). m must outlive the object. Returns 0, WD_EINVAL
 * (as wd_mel_compute) or WD_ENOMEM.
 *
 * Threading: after creation the object is read-only; windows may be
 * computed from any thread.
 */
typedef struct wd_mel_pcm wd_mel_pcm_t;
int wd_mel_pcm_new(const wd_mel_t *m, int16_t *samples, size_t n_samples, int n_threads,
                   wd_mel_pcm_t **ret);
int wd_mel_pcm_new_f32(const wd_mel_t *m, float *samples, size_t n_samples, int n_threads,
                       wd_mel_pcm_t **ret);
void wd_mel_pcm_free(wd_mel_pcm_t *p); /* NULL is allowed */

/* wd_mel_compute's n_frames for these samples, and the model's n_mels. */
int wd_mel_pcm_n_frames(const wd_mel_pcm_t *p);
int wd_mel_pcm_n_mels(const wd_mel_pcm_t *p);

/*
 * dst (n_mels, 3000) row-major: columns [0, size) are wd_mel_compute's
 * columns [seek, seek + size), bit for bit; the rest are 0.0 (openai's
 * pad_or_trim). 0 <= size <= 3000 and seek + size <= n_frames, else
 * WD_EINVAL. Runs in the calling thread: about 3 ms for a full window.
 */
int wd_mel_pcm_window(const wd_mel_pcm_t *p, int seek, int size, float *dst);

#endif
