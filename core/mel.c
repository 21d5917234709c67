/*
 * mel.c - Whisper's log-mel spectrogram (see mel.h).
 * ref: openai/whisper audio.py log_mel_spectrogram; torch.stft with
 * center=True, pad_mode="reflect", onesided=True.
 *
 * Threading: wd_mel_new() and wd_mel_free() create and destroy the FFTW plan
 * under one process-wide mutex, because FFTW's planner (and plan destruction)
 * is not thread-safe. After that the wd_mel_t is read-only. wd_mel_compute()
 * runs the plan with fftwf_execute_dft_r2c() on buffers it allocates per call
 * and per thread; FFTW documents the new-array execute functions as
 * thread-safe, so any number of callers may share one wd_mel_t. The plan is
 * made with FFTW_ESTIMATE: the 400-point real FFT is about a quarter of the
 * run time (perf; windowing, the filterbank and the logarithm are the rest), and
 * FFTW_MEASURE was no faster in tests/bench/bench_mel (within noise). MEASURE
 * would also time candidate algorithms at model load and may pick a different
 * one from run to run, which changes the last bits of the output; the
 * estimated plan is deterministic, so the same input gives the same bits in
 * every process.
 *
 * Alignment: a plan may use SIMD code that depends on the alignment of the
 * arrays it was planned with, and the new-array functions require arrays with
 * the same alignment. Every FFT buffer here, at planning and at execution, is
 * allocated with aligned_alloc(WD_MEL_ALIGN), so all of them are aligned
 * alike (fftwf_alignment_of() is 0 for each).
 *
 * Ownership: wd_mel_t owns its plan, window, filterbank copy and band ranges.
 * The spectrogram returned by wd_mel_compute() belongs to the caller.
 */
#include "mel.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

/* Alignment of every FFT buffer: a cache line, enough for any SIMD width. */
#define WD_MEL_ALIGN 64
/* A thread is worth starting for at least this many FFT frames (0.64 s). */
#define WD_MEL_MIN_FRAMES_PER_THREAD 64

struct wd_mel {
  int n_mels;
  fftwf_plan plan;  /* r2c, 400 real -> 201 complex, out of place */
  float *window;    /* (400) periodic Hann */
  float *filters;   /* (n_mels, 201) row-major, copied from the caller */
  int *band_lo;     /* (n_mels) first bin with a non-zero weight */
  int *band_hi;     /* (n_mels) one past the last bin with a non-zero weight */
};

/* Serialises FFTW's planner and plan destruction over the whole process. */
static pthread_mutex_t wd_mel_fftw_lock = PTHREAD_MUTEX_INITIALIZER;

/* One run over frames [t0, t1): where the samples come from (f32, or s16
 * read as s16 / 32768, exactly the float openai/whisper computes) and where
 * the log10 values go (mel column t - col0 of rows `stride` apart, or
 * nowhere when mel is NULL: only the largest value is wanted). */
typedef struct {
  const wd_mel_t *m;
  const float *f32;
  const int16_t *s16;
  size_t n_samples;
  int t0, t1;
  float *mel;
  size_t stride;
  int col0;
  float max; /* largest log10 value of the run */
  int rc;
} wd_mel_job_t;

/* Allocates n bytes rounded up to WD_MEL_ALIGN, aligned to WD_MEL_ALIGN. */
static void *wd_mel_aligned_alloc(size_t n) {
  n = (n + WD_MEL_ALIGN - 1) / WD_MEL_ALIGN * WD_MEL_ALIGN;
  return aligned_alloc(WD_MEL_ALIGN, n);
}

/* log10(x) for x >= 1e-10 as ln(x) / ln(10) in float32: glibc's log10f
 * is several times slower than its logf (it was 40% of the run time), and
 * the extra rounding (< 1e-6 in log10 units) is far below the FFT's error. */
static float wd_mel_log10(float x) { return logf(x) * (float)M_LOG10E; }

/* log10 of the clamp floor: the value of a band with no energy. */
static float wd_mel_log_floor(void) { return wd_mel_log10(1e-10f); }

int wd_mel_n_frames(size_t n_samples) {
  if (n_samples > WD_MEL_MAX_SAMPLES)
    return WD_EINVAL;
  /* torch.stft with center=True gives 1 + L / 160 frames for L padded
   * samples; L = n + 480000 and the last frame is dropped. */
  return (int)(n_samples / WD_MEL_HOP) + WD_MEL_N_PAD_FRAMES;
}

int wd_mel_n_mels(const wd_mel_t *m) { return m->n_mels; }

int wd_mel_new(int n_mels, const float *filters, wd_mel_t **ret) {
  int rc = 0;
  float *in = NULL;
  fftwf_complex *out = NULL;
  if ((n_mels != 80 && n_mels != 128) || !filters || !ret)
    return WD_EINVAL;
  const size_t n_w = (size_t)n_mels * WD_MEL_N_BINS;
  for (size_t i = 0; i < n_w; i++)
    if (!isfinite(filters[i])) {
      wd_log_debug("%s: filterbank value %zu is not finite", __func__, i);
      return WD_EINVAL;
    }

  wd_mel_t *m = calloc(1, sizeof *m);
  if (!m)
    return WD_ENOMEM;
  *m = (wd_mel_t){ .n_mels = n_mels, .plan = NULL };
  m->window = malloc(sizeof(float) * WD_MEL_N_FFT);
  m->filters = malloc(sizeof(float) * n_w);
  m->band_lo = malloc(sizeof(int) * (size_t)n_mels);
  m->band_hi = malloc(sizeof(int) * (size_t)n_mels);
  in = wd_mel_aligned_alloc(sizeof(float) * WD_MEL_N_FFT);
  out = wd_mel_aligned_alloc(sizeof(fftwf_complex) * WD_MEL_N_BINS);
  if (!m->window || !m->filters || !m->band_lo || !m->band_hi || !in || !out) {
    rc = WD_ENOMEM;
    goto fail;
  }

  /* Periodic Hann, as torch.hann_window(400) (periodic=True):
   * w[n] = 0.5 * (1 - cos(2 pi n / 400)). ref: openai/whisper audio.py. */
  for (int i = 0; i < WD_MEL_N_FFT; i++)
    m->window[i] = (float)(0.5 * (1.0 - cos(2.0 * M_PI * i / WD_MEL_N_FFT)));

  /* Each band is a triangle: record its non-zero span so that the product
   * with the power spectrum only visits those bins. Skipping exact zeros
   * does not change the sum, since every power value is finite. */
  memcpy(m->filters, filters, sizeof(float) * n_w);
  for (int b = 0; b < n_mels; b++) {
    const float *row = m->filters + (size_t)b * WD_MEL_N_BINS;
    int lo = 0, hi = WD_MEL_N_BINS;
    while (lo < hi && row[lo] == 0.0f)
      lo++;
    while (hi > lo && row[hi - 1] == 0.0f)
      hi--;
    m->band_lo[b] = lo;
    m->band_hi[b] = hi;
  }

  pthread_mutex_lock(&wd_mel_fftw_lock);
  m->plan = fftwf_plan_dft_r2c_1d(WD_MEL_N_FFT, in, out, FFTW_ESTIMATE);
  pthread_mutex_unlock(&wd_mel_fftw_lock);
  if (!m->plan) {
    wd_log_debug("%s: fftwf_plan_dft_r2c_1d(%d) failed", __func__, WD_MEL_N_FFT);
    rc = WD_ENOMEM;
    goto fail;
  }
  free(in);
  free(out);
  *ret = m;
  return 0;
fail:
  free(in);
  free(out);
  wd_mel_free(m);
  return rc;
}

void wd_mel_free(wd_mel_t *m) {
  if (!m)
    return;
  if (m->plan) {
    pthread_mutex_lock(&wd_mel_fftw_lock);
    fftwf_destroy_plan(m->plan);
    pthread_mutex_unlock(&wd_mel_fftw_lock);
  }
  free(m->window);
  free(m->filters);
  free(m->band_lo);
  free(m->band_hi);
  free(m);
}

/*
 * Computes the log10 mel values of frames [j->t0, j->t1), before the global
 * clamp. Frame t covers padded samples [160 t, 160 t + 400), where the padded
 * signal is reflect(200) of (samples ++ 480000 zeros); in unpadded indices
 * that is [160 t - 200, 160 t + 200). ref: torch.stft center=True.
 */
static void wd_mel_run(wd_mel_job_t *j) {
  const wd_mel_t *m = j->m;
  const size_t n = j->n_samples;
  /* s16 / 32768 is exact in float: a power-of-two scale of a 16-bit value. */
  const float s16_scale = 1.0f / 32768.0f;
  float *in = wd_mel_aligned_alloc(sizeof(float) * WD_MEL_N_FFT);       /* (400) */
  fftwf_complex *out = wd_mel_aligned_alloc(sizeof(fftwf_complex) * WD_MEL_N_BINS); /* (201) */
  double power[WD_MEL_N_BINS];                                             /* (201) */
  float vmax = -INFINITY;
  if (!in || !out) {
    j->rc = WD_ENOMEM;
    goto done;
  }
  for (int t = j->t0; t < j->t1; t++) {
    const long long start = (long long)t * WD_MEL_HOP - WD_MEL_N_FFT / 2;
    for (int i = 0; i < WD_MEL_N_FFT; i++) {
      long long idx = start + i;
      /* Reflect padding excludes the edge sample: x[-k] = x[k]. The right
       * edge lies 480000 zeros away, so only the left one is ever reached;
       * with fewer than 201 samples the reflection reads appended zeros. */
      if (idx < 0)
        idx = -idx;
      const float x = (size_t)idx >= n ? 0.0f
                      : j->s16     ? (float)j->s16[idx] * s16_scale
                                   : j->f32[idx];
      in[i] = m->window[i] * x;
    }
    fftwf_execute_dft_r2c(m->plan, in, out);
    /* |STFT|^2 and the filterbank sums in double, so that they add no
     * rounding of note: the float32 FFT is then the only real error source
     * (measured max 1.5e-5 in output units on jfk.wav, all of it in bands
     * near the max - 8 floor, where the FFT's error is largest relative to
     * the band's energy; 5e-7 elsewhere). */
    for (int k = 0; k < WD_MEL_N_BINS; k++) {
      const double re = out[k][0], im = out[k][1];
      power[k] = re * re + im * im;
    }
    /* filters @ power, then log10(max(x, 1e-10)). ref: audio.py. */
    for (int b = 0; b < m->n_mels; b++) {
      const float *row = m->filters + (size_t)b * WD_MEL_N_BINS;
      double acc = 0.0;
      for (int k = m->band_lo[b]; k < m->band_hi[b]; k++)
        acc += (double)row[k] * power[k];
      const float v = wd_mel_log10((float)(acc > 1e-10 ? acc : 1e-10));
      if (j->mel)
        j->mel[(size_t)b * j->stride + (size_t)(t - j->col0)] = v;
      if (v > vmax)
        vmax = v;
    }
  }
done:
  j->max = vmax;
  free(in);
  free(out);
}

static void *wd_mel_thread(void *arg) {
  wd_mel_run(arg);
  return NULL;
}

/* Frames that start at or after the end of the content (160 t - 200 >= n)
 * see only appended zeros: their power is exactly 0 and their value is the
 * floor, so they skip the FFT. This counts the others, at most n_frames. */
static int wd_mel_n_fft(size_t n_samples, int n_frames) {
  const int n_fft = (int)((n_samples + WD_MEL_N_FFT / 2 + WD_MEL_HOP - 1) / WD_MEL_HOP);
  return n_fft < n_frames ? n_fft : n_frames;
}

/* Runs frames [0, n_fft) of tmpl's samples into tmpl's mel (or only for the
 * max) on up to n_threads threads; *ret_max is the largest log10 value,
 * the floor included when n_fft < n_frames. Each frame is computed the same
 * way whichever thread owns it, so the split never changes a bit. */
static int wd_mel_run_all(const wd_mel_job_t *tmpl, int n_fft, int n_frames, int n_threads,
                          float *ret_max) {
  int n_jobs = n_threads < WD_MEL_MAX_THREADS ? n_threads : WD_MEL_MAX_THREADS;
  const int by_size = n_fft / WD_MEL_MIN_FRAMES_PER_THREAD;
  if (n_jobs > by_size)
    n_jobs = by_size > 1 ? by_size : 1;
  wd_mel_job_t jobs[WD_MEL_MAX_THREADS];
  pthread_t tids[WD_MEL_MAX_THREADS];
  int started[WD_MEL_MAX_THREADS] = { 0 };
  for (int i = 0; i < n_jobs; i++) {
    jobs[i] = *tmpl;
    jobs[i].t0 = (int)((long long)n_fft * i / n_jobs);
    jobs[i].t1 = (int)((long long)n_fft * (i + 1) / n_jobs);
    jobs[i].max = -INFINITY;
    jobs[i].rc = 0;
  }
  /* Job 0 runs here; a thread that cannot be started runs here too. */
  for (int i = 1; i < n_jobs; i++) {
    started[i] = pthread_create(&tids[i], NULL, wd_mel_thread, &jobs[i]) == 0;
    if (!started[i]) {
      wd_log_debug("%s: pthread_create failed, running job %d inline", __func__, i);
      wd_mel_run(&jobs[i]);
    }
  }
  wd_mel_run(&jobs[0]);
  /* Joining makes every job's writes to mel visible here. */
  for (int i = 1; i < n_jobs; i++)
    if (started[i])
      pthread_join(tids[i], NULL);
  int rc = 0;
  float vmax = n_fft < n_frames ? wd_mel_log_floor() : -INFINITY;
  for (int i = 0; i < n_jobs; i++) {
    if (jobs[i].rc < 0 && rc == 0)
      rc = jobs[i].rc;
    if (jobs[i].max > vmax)
      vmax = jobs[i].max;
  }
  *ret_max = vmax;
  return rc;
}

/* log_spec = max(log_spec, log_spec.max() - 8); (log_spec + 4) / 4, in
 * float32 as torch does, on columns [0, n_cols) of n_mels rows `stride`
 * apart whose frames start at frame col0; frames from n_fft on are the
 * floor. ref: openai/whisper audio.py. */
static void wd_mel_normalise(float *mel, int n_mels, size_t stride, int col0, int n_cols,
                             int n_fft, float vmax) {
  const float floor_v = wd_mel_log_floor();
  const float lo = vmax - 8.0f;
  const float silent = ((floor_v > lo ? floor_v : lo) + 4.0f) / 4.0f;
  int n_real = n_fft - col0; /* columns before the first silent frame */
  n_real = n_real < 0 ? 0 : n_real > n_cols ? n_cols : n_real;
  for (int b = 0; b < n_mels; b++) {
    float *row = mel + (size_t)b * stride;
    for (int t = 0; t < n_real; t++) {
      const float v = row[t] > lo ? row[t] : lo;
      row[t] = (v + 4.0f) / 4.0f;
    }
    for (int t = n_real; t < n_cols; t++)
      row[t] = silent;
  }
}

/* The samples are usable: finite and within WD_MEL_MAX_ABS_SAMPLE. */
static int wd_mel_check_f32(const float *samples, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!(fabsf(samples[i]) <= WD_MEL_MAX_ABS_SAMPLE)) {
      wd_log_debug("mel: sample %zu is %g", i, (double)samples[i]);
      return WD_EINVAL;
    }
  return 0;
}

int wd_mel_compute(const wd_mel_t *m, const float *samples, size_t n_samples, int n_threads,
                   float **ret_mel, int *ret_n_frames) {
  if (!m || (!samples && n_samples > 0) || !ret_mel || !ret_n_frames || n_threads < 1 ||
      n_samples > WD_MEL_MAX_SAMPLES)
    return WD_EINVAL;
  if (wd_mel_check_f32(samples, n_samples) < 0)
    return WD_EINVAL;
  const int n_frames = wd_mel_n_frames(n_samples);
  const int n_fft = wd_mel_n_fft(n_samples, n_frames);
  const size_t n_out = (size_t)m->n_mels * (size_t)n_frames;
  float *mel = malloc(sizeof(float) * n_out); /* (n_mels, n_frames) */
  if (!mel)
    return WD_ENOMEM;
  const wd_mel_job_t tmpl = { .m = m, .f32 = samples, .n_samples = n_samples, .mel = mel,
                              .stride = (size_t)n_frames };
  float vmax;
  const int rc = wd_mel_run_all(&tmpl, n_fft, n_frames, n_threads, &vmax);
  if (rc < 0) {
    free(mel);
    return rc;
  }
  wd_mel_normalise(mel, m->n_mels, (size_t)n_frames, 0, n_frames, n_fft, vmax);
  *ret_mel = mel;
  *ret_n_frames = n_frames;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* One file's audio, its log-mel computed a window at a time                */

struct wd_mel_pcm {
  const wd_mel_t *m;
  int16_t *s16; /* one of the two, owned */
  float *f32;
  size_t n_samples;
  int n_frames, n_fft;
  float max; /* the whole log-mel's largest log10 value */
};

/* Takes ownership of s16 or f32 (freed on error too). */
static int wd_mel_pcm_make(const wd_mel_t *m, int16_t *s16, float *f32, size_t n, int n_threads,
                           wd_mel_pcm_t **ret) {
  if (!m || !ret || n_threads < 1 || n > WD_MEL_MAX_SAMPLES || (!s16 && !f32 && n > 0) ||
      (f32 && wd_mel_check_f32(f32, n) < 0)) {
    free(s16);
    free(f32);
    return WD_EINVAL;
  }
  wd_mel_pcm_t *p = calloc(1, sizeof *p);
  if (!p) {
    free(s16);
    free(f32);
    return WD_ENOMEM;
  }
  *p = (wd_mel_pcm_t){ .m = m, .s16 = s16, .f32 = f32, .n_samples = n };
  p->n_frames = wd_mel_n_frames(n);
  p->n_fft = wd_mel_n_fft(n, p->n_frames);
  /* openai/whisper clamps every value against the whole file's max: one
   * pass over the file for it, storing nothing. */
  const wd_mel_job_t tmpl = { .m = m, .f32 = f32, .s16 = s16, .n_samples = n };
  const int rc = wd_mel_run_all(&tmpl, p->n_fft, p->n_frames, n_threads, &p->max);
  if (rc < 0) {
    wd_mel_pcm_free(p);
    return rc;
  }
  *ret = p;
  return 0;
}

int wd_mel_pcm_new(const wd_mel_t *m, int16_t *samples, size_t n_samples, int n_threads,
                   wd_mel_pcm_t **ret) {
  return wd_mel_pcm_make(m, samples, NULL, n_samples, n_threads, ret);
}

int wd_mel_pcm_new_f32(const wd_mel_t *m, float *samples, size_t n_samples, int n_threads,
                       wd_mel_pcm_t **ret) {
  return wd_mel_pcm_make(m, NULL, samples, n_samples, n_threads, ret);
}

void wd_mel_pcm_free(wd_mel_pcm_t *p) {
  if (!p)
    return;
  free(p->s16);
  free(p->f32);
  free(p);
}

int wd_mel_pcm_n_frames(const wd_mel_pcm_t *p) { return p->n_frames; }

int wd_mel_pcm_n_mels(const wd_mel_pcm_t *p) { return p->m->n_mels; }

int wd_mel_pcm_window(const wd_mel_pcm_t *p, int seek, int size, float *dst) {
  if (!p || !dst || seek < 0 || size < 0 || size > WD_MEL_N_PAD_FRAMES ||
      seek > p->n_frames - size)
    return WD_EINVAL;
  const int n_mels = p->m->n_mels;
  const int end = seek + size < p->n_fft ? seek + size : p->n_fft;
  wd_mel_job_t j = { .m = p->m, .f32 = p->f32, .s16 = p->s16, .n_samples = p->n_samples,
                     .t0 = seek, .t1 = end > seek ? end : seek, .mel = dst,
                     .stride = WD_MEL_N_PAD_FRAMES, .col0 = seek, .max = -INFINITY };
  wd_mel_run(&j);
  if (j.rc < 0)
    return j.rc;
  wd_mel_normalise(dst, n_mels, WD_MEL_N_PAD_FRAMES, seek, size, p->n_fft, p->max);
  /* pad_or_trim pads with 0.0 in normalised units. */
  for (int b = 0; b < n_mels; b++)
    memset(dst + (size_t)b * WD_MEL_N_PAD_FRAMES + size, 0,
           (size_t)(WD_MEL_N_PAD_FRAMES - size) * sizeof *dst);
  return 0;
}
