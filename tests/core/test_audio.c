/*
 * test_audio.c - core/audio on real files: every container/codec in
 * tests/data/audio/formats/ (the same espeak sentence) must decode from
 * memory to 16 kHz mono with the expected length and match pcm16_16k.wav by
 * normalised cross-correlation (NCC) and RMS; jfk.wav and jfk.mp3 give
 * 176000 samples; downmix and resampling are checked on synthetic stereo and
 * 48 kHz WAVs built here; the error paths (empty, garbage, headers only,
 * truncations, lying headers, absurd rates and channel counts, max_seconds)
 * return codes and messages; concurrent decodes match serial ones exactly.
 * Measured similarities are printed.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wd_audio_f32.h"
#include "clock.h"
#include "error.h"
#include "fault.h"
#include "wd_test.h"
#include "wd_file.h"

/* synth/ask_not.wav at 16 kHz: the length every gapless decode must give. */
#define N_REF 110639
/* Lag search for the codec's delay, samples: 1105 for a bare LAME MP3
 * (576 + 529), 1024 for raw ADTS AAC; 2400 (150 ms) covers both. */
#define MAX_LAG 2400

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

/* Decodes tests/data/<name> from a memory copy (no file name reaches the decoder). */
static int decode_data(const char *name, uint32_t max_seconds, float **x, size_t *n, char *err,
                       size_t err_len) {
  size_t len;
  unsigned char *buf = wd_read_file(wd_test_data(name), &len);
  if (!buf)
    return -1000;
  wd_audio_opts_t o = { .max_seconds = max_seconds };
  int r = wd_test_audio_decode(buf, len, &o, x, n, err, err_len);
  free(buf);
  return r;
}

static double rms(const float *x, size_t n) {
  double e = 0.0;
  for (size_t i = 0; i < n; i++)
    e += (double)x[i] * x[i];
  return n ? sqrt(e / (double)n) : 0.0;
}

/* All samples finite and within [-1, 1]. */
static int all_in_range(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!(x[i] >= -1.0f && x[i] <= 1.0f))
      return 0;
  return 1;
}

/* sum x[i] * y[i + lag] over the overlap, every stride-th i. */
static double dot_lag(const float *x, size_t nx, const float *y, size_t ny, long lag,
                      size_t stride, double *ex, double *ey) {
  double d = 0.0, a = 0.0, b = 0.0;
  for (size_t i = lag < 0 ? (size_t)-lag : 0; i < nx; i += stride) {
    const long j = (long)i + lag;
    if (j >= (long)ny)
      break;
    d += (double)x[i] * y[j];
    a += (double)x[i] * x[i];
    b += (double)y[j] * y[j];
  }
  if (ex)
    *ex = a;
  if (ey)
    *ey = b;
  return d;
}

/*
 * Best normalised cross-correlation of y against x over lags in
 * [-max_lag, max_lag] (y[i + lag] ~ x[i]): a coarse pass over every other
 * lag and every 16th sample (speech at 16 kHz stays correlated over a
 * sample), then the exact NCC over the overlap within +-8 of its peak.
 */
static double best_ncc(const float *x, size_t nx, const float *y, size_t ny, long max_lag,
                       long *ret_lag) {
  long best = 0;
  double best_d = -1e300;
  for (long lag = -max_lag; lag <= max_lag; lag += 2) {
    double d = dot_lag(x, nx, y, ny, lag, 16, NULL, NULL);
    if (d > best_d)
      best_d = d, best = lag;
  }
  double best_ncc = -1.0;
  long c = best;
  for (long lag = c - 8; lag <= c + 8; lag++) {
    double ex, ey, d = dot_lag(x, nx, y, ny, lag, 1, &ex, &ey);
    double v = ex > 0 && ey > 0 ? d / sqrt(ex * ey) : 0.0;
    if (v > best_ncc)
      best_ncc = v, best = lag;
  }
  *ret_lag = best;
  return best_ncc;
}

/* Little-endian stores for building WAV files. */
static void put16(unsigned char *p, unsigned v) {
  p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/*
 * A 16-bit PCM WAV in memory: frames (n, ch) from gen(i, c) in [-1, 1],
 * with the data chunk claiming data_bytes_claimed (0 = the true size).
 */
static unsigned char *make_wav(uint32_t rate, unsigned ch, size_t n, uint32_t data_bytes_claimed,
                               double (*gen)(size_t i, unsigned c), size_t *ret_len) {
  const size_t data_bytes = n * ch * 2;
  unsigned char *w = calloc(1, 44 + data_bytes);
  if (!w)
    return NULL;
  const uint32_t claimed = data_bytes_claimed ? data_bytes_claimed : (uint32_t)data_bytes;
  memcpy(w, "RIFF", 4);
  put32(w + 4, claimed > 0xffffffffu - 36 ? 0xffffffffu : 36 + claimed);
  memcpy(w + 8, "WAVEfmt ", 8);
  put32(w + 16, 16);
  put16(w + 20, 1); /* WAVE_FORMAT_PCM */
  put16(w + 22, ch);
  put32(w + 24, rate);
  put32(w + 28, rate * ch * 2);
  put16(w + 32, ch * 2);
  put16(w + 34, 16);
  memcpy(w + 36, "data", 4);
  put32(w + 40, claimed);
  for (size_t i = 0; i < n; i++)
    for (unsigned c = 0; c < ch; c++) {
      long v = lround(gen(i, c) * 32767.0);
      put16(w + 44 + (i * ch + c) * 2, (unsigned)(v & 0xffff));
    }
  *ret_len = 44 + data_bytes;
  return w;
}

static uint32_t gen_rate = 16000; /* for the generators below */
static double sine_1k(size_t i, unsigned c) {
  (void)c;
  return 0.5 * sin(2.0 * M_PI * 1000.0 * (double)i / gen_rate);
}
static double sine_left_only(size_t i, unsigned c) { return c == 0 ? sine_1k(i, 0) : 0.0; }
static double sine_opposite(size_t i, unsigned c) { return c == 0 ? sine_1k(i, 0) : -sine_1k(i, 0); }

/* ------------------------------------------------------------------------ */
/* Every container/codec                                                    */

/*
 * n_extra_max: samples the decode may run past N_REF, because the format
 * keeps codec padding that nothing in the file lets a decoder trim (the
 * excess measured with FFmpeg 5.1 / libsndfile 1.2.0 is in brackets).
 * min_ncc: the normalised cross-correlation required against pcm16_16k.wav
 * at the best lag; rms_tol: the allowed relative RMS difference. Thresholds
 * sit below the measured values (printed by the test) with margin for other
 * decoder versions: lossless 0.9999 (measured 1.00000), resampled 44.1 kHz
 * round trip 0.9999 (0.99998), 8 kHz u-law 0.99 (0.9938), lossy codecs
 * 0.99 (0.9963 to 0.9999), the low-rate MP3 in MPEG-PS 0.98 (0.9883).
 * LAME's 64 kbps low-pass removes about 5 % of the RMS [-5.0 %, -5.7 %].
 */
typedef struct {
  const char *file;
  int n_extra_max;
  double min_ncc;
  double rms_tol;
} fmt_case_t;

static const fmt_case_t fmt_cases[] = {
  /* Lossless, gapless: N_REF within 1 sample (W64 pads data to 8 bytes). */
  { "pcm16_16k.wav", 0, 0.9999, 0.001 },
  { "float32_16k.wav", 0, 0.9999, 0.001 },
  { "pcm24_16k_wavex.wav", 0, 0.9999, 0.001 },
  { "flac_16k.flac", 0, 0.9999, 0.001 },
  { "aiff_16k.aiff", 0, 0.9999, 0.001 },
  { "pcm16_16k.caf", 0, 0.9999, 0.001 },
  { "pcm16_16k.w64", 1, 0.9999, 0.001 },
  { "pcm16_16k.mkv", 0, 0.9999, 0.001 },
  { "alac_16k.m4a", 0, 0.9999, 0.001 },
  /* 16 kHz -> 44.1 kHz stereo -> back: downmix plus the resampler's passband. */
  { "pcm16_44k_stereo.wav", 0, 0.9999, 0.002 },
  /* 8 kHz u-law: the band above 4 kHz is gone, plus companding noise [+1]. */
  { "ulaw_8k.wav", 1, 0.99, 0.02 },
  /* Lossy with gapless trimming (LAME header, Opus pre-skip, Vorbis granule). */
  { "mp3_16k_id3.mp3", 0, 0.99, 0.08 },
  { "mp3_16k.mpga", 0, 0.99, 0.08 },
  { "mp3_44k_stereo.mp3", 0, 0.99, 0.08 },
  { "opus_16k.ogg", 0, 0.99, 0.03 },
  { "opus_16k.opus", 0, 0.99, 0.03 },
  { "opus_16k.webm", 0, 0.99, 0.03 },
  { "vorbis_16k.ogg", 0, 0.99, 0.03 },
  /* Lossy with untrimmed padding: at most two codec frames (or priming
   * plus one frame) beyond N_REF. WebM Vorbis [+337], AAC in MP4 [+977,
   * end padding to 1024], ADTS [+2001, 1024 priming and padding], MP2
   * [+1105, 1152-sample frames], bare MP3 [+1681, LAME delay 1105 + padding]. */
  { "vorbis_16k.webm", 2 * 1024, 0.99, 0.03 },
  { "aac_16k.m4a", 2 * 1024, 0.99, 0.03 },
  { "aac_16k.mp4", 2 * 1024, 0.99, 0.03 },
  { "aac_adts_16k.aac", 3 * 1024, 0.99, 0.03 },
  { "mp2_16k.mp2", 2 * 1152, 0.99, 0.03 },
  { "mpeg_ps_mp2.mpeg", 2 * 1152, 0.99, 0.03 },
  { "mp3_16k_noid3_noxing.mp3", 4 * 576, 0.99, 0.08 },
  { "mpeg_ps_mp3.mpeg", 4 * 576, 0.98, 0.08 },
};
#define N_FMT_CASES (sizeof fmt_cases / sizeof fmt_cases[0])

static const fmt_case_t *fmt_case_find(const char *file) {
  for (size_t i = 0; i < N_FMT_CASES; i++)
    if (strcmp(fmt_cases[i].file, file) == 0)
      return &fmt_cases[i];
  return NULL;
}

WD_TEST(every_format_decodes_to_the_reference) {
  float *ref = NULL;
  size_t n_ref = 0;
  char err[256];
  WD_CHECK_EQ_INT(decode_data("audio/formats/pcm16_16k.wav", 0, &ref, &n_ref, err, sizeof err), 0);
  WD_CHECK_EQ_INT(n_ref, N_REF);
  if (!ref)
    return;
  const double rms_ref = rms(ref, n_ref);

  /* Walk the directory so that a file added there without a row fails. */
  DIR *dir = opendir(wd_test_data("audio/formats"));
  WD_CHECK(dir != NULL);
  int n_seen = 0;
  struct dirent *de;
  while (dir && (de = readdir(dir)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    const fmt_case_t *fc = fmt_case_find(de->d_name);
    if (!fc) {
      fprintf(stderr, "formats/%s has no row in fmt_cases\n", de->d_name);
      WD_CHECK(fc != NULL);
      continue;
    }
    n_seen++;
    char name[300];
    snprintf(name, sizeof name, "audio/formats/%s", fc->file);
    float *x = NULL;
    size_t n = 0;
    int r = decode_data(name, 0, &x, &n, err, sizeof err);
    if (r != 0) {
      fprintf(stderr, "%s: %s: %s\n", fc->file, wd_err_name(r), err);
      WD_CHECK_EQ_INT(r, 0);
      continue;
    }
    long lag = 0;
    const double ncc = best_ncc(ref, n_ref, x, n, MAX_LAG, &lag);
    const double rms_x = rms(x, n);
    fprintf(stderr, "  %-26s n=%6zu (%+5ld) lag=%5ld ncc=%.5f rms=%.5f (ref %.5f)\n", fc->file, n,
            (long)n - N_REF, lag, ncc, rms_x, rms_ref);
    WD_CHECK(n + 1 >= N_REF && n <= (size_t)(N_REF + 1 + fc->n_extra_max));
    WD_CHECK(ncc >= fc->min_ncc); /* NaN fails */
    WD_CHECK_NEAR(rms_x / rms_ref, 1.0, fc->rms_tol);
    WD_CHECK(all_in_range(x, n));
    /* Codec delay can only push the signal later, never earlier. */
    WD_CHECK(lag >= -2 && lag <= MAX_LAG - 16);
    free(x);
  }
  if (dir)
    closedir(dir);
  WD_CHECK_EQ_INT(n_seen, N_FMT_CASES);
  free(ref);
}

WD_TEST(jfk_wav_and_mp3_give_176000_samples) {
  float *w = NULL, *m = NULL;
  size_t nw = 0, nm = 0;
  char err[256];
  WD_CHECK_EQ_INT(decode_data("audio/jfk.wav", 0, &w, &nw, err, sizeof err), 0);
  WD_CHECK_EQ_INT(decode_data("audio/jfk.mp3", 0, &m, &nm, err, sizeof err), 0);
  WD_CHECK_EQ_INT(nw, 176000);
  WD_CHECK_EQ_INT(nm, 176000);
  if (w && m) {
    long lag;
    double ncc = best_ncc(w, nw, m, nm, 64, &lag);
    fprintf(stderr, "  jfk.mp3 vs jfk.wav: lag=%ld ncc=%.5f\n", lag, ncc);
    WD_CHECK(ncc >= 0.999); /* measured 0.99996 */
    WD_CHECK_EQ_INT(lag, 0); /* gapless */
    WD_CHECK(all_in_range(w, nw) && all_in_range(m, nm));
  }
  free(w);
  free(m);
}

WD_TEST(silence_stays_silent) {
  float *x = NULL;
  size_t n = 0;
  char err[256];
  WD_CHECK_EQ_INT(decode_data("audio/synth/silence_3s.wav", 0, &x, &n, err, sizeof err), 0);
  /* sox dithered it: +-1 LSB of s16, which must come through unchanged. */
  WD_CHECK_EQ_INT(n, 48000);
  for (size_t i = 0; x && i < n; i++)
    WD_CHECK(fabsf(x[i]) <= 1.0f / 32768.0f);
  WD_CHECK(x && rms(x, n) > 0.0 && rms(x, n) < 1.0 / 32768.0);
  free(x);
}

/* ------------------------------------------------------------------------ */
/* Downmix and resampling                                                   */

WD_TEST(stereo_downmix_averages_channels) {
  gen_rate = 16000;
  size_t len = 0, n = 0;
  float *x = NULL;
  char err[256];
  /* Left only: the mono signal is half the left channel (ffmpeg -ac 1). */
  unsigned char *w = make_wav(16000, 2, 16000, 0, sine_left_only, &len);
  WD_CHECK_EQ_INT(wd_test_audio_decode(w, len, NULL, &x, &n, err, sizeof err), 0);
  WD_CHECK_EQ_INT(n, 16000);
  for (size_t i = 0; x && i < n; i += 997)
    WD_CHECK_NEAR(x[i], 0.5 * sine_1k(i, 0), 1.0 / 32768);
  free(x);
  free(w);
  /* Opposite channels cancel. */
  w = make_wav(16000, 2, 16000, 0, sine_opposite, &len);
  WD_CHECK_EQ_INT(wd_test_audio_decode(w, len, NULL, &x, &n, err, sizeof err), 0);
  WD_CHECK(x && rms(x, n) < 1e-4);
  free(x);
  free(w);
}

WD_TEST(resampling_48k_keeps_frequency_and_length) {
  gen_rate = 48000;
  size_t len = 0, n = 0;
  float *x = NULL;
  char err[256];
  unsigned char *w = make_wav(48000, 1, 48000 * 2, 0, sine_1k, &len);
  WD_CHECK_EQ_INT(wd_test_audio_decode(w, len, NULL, &x, &n, err, sizeof err), 0);
  WD_CHECK_EQ_INT(n, 32000); /* 2 s at 16 kHz */
  if (x && n == 32000) {
    /* Away from the edges the output is the same 1 kHz sine, sampled at 16k,
     * possibly delayed by less than a sample: fit amplitude and phase. */
    double sc = 0, cc = 0, ss = 0, sx = 0, cx = 0;
    for (size_t i = 1000; i < 31000; i++) {
      const double s = sin(2 * M_PI * 1000.0 * (double)i / 16000), c = cos(2 * M_PI * 1000.0 * (double)i / 16000);
      sx += s * x[i], cx += c * x[i], ss += s * s, cc += c * c, sc += s * c;
    }
    const double a = sx / ss, b = cx / cc, amp = sqrt(a * a + b * b);
    double res = 0;
    for (size_t i = 1000; i < 31000; i++) {
      const double s = sin(2 * M_PI * 1000.0 * (double)i / 16000), c = cos(2 * M_PI * 1000.0 * (double)i / 16000);
      res = fmax(res, fabs(x[i] - (a * s + b * c)));
    }
    fprintf(stderr, "  48k->16k 1 kHz sine: amplitude %.6f, max residual %.2e\n", amp, res);
    WD_CHECK_NEAR(amp, 0.5, 1e-3);
    WD_CHECK(res < 1e-3);
    (void)sc;
  }
  free(x);
  free(w);
  gen_rate = 16000;
}

/* ------------------------------------------------------------------------ */
/* Sniffing and files                                                       */

WD_TEST(format_is_sniffed_from_memory) {
  static const char *const files[] = { "audio/formats/mp3_16k_id3.mp3", "audio/formats/opus_16k.opus",
                                       "audio/formats/aac_16k.m4a", "audio/formats/flac_16k.flac" };
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    size_t len = 0, n = 0;
    unsigned char *src = wd_read_file(wd_test_data(files[k]), &len);
    /* A fresh copy at another address: the decoder sees bytes only. */
    unsigned char *copy = src ? malloc(len) : NULL;
    if (copy)
      memcpy(copy, src, len);
    free(src);
    float *x = NULL;
    char err[256];
    WD_CHECK_EQ_INT(wd_test_audio_decode(copy, len, NULL, &x, &n, err, sizeof err), 0);
    WD_CHECK(n >= N_REF - 1 && n <= N_REF + 2048);
    free(x);
    free(copy);
  }
}

WD_TEST(decode_file_reads_and_reports_missing) {
  float *x = NULL;
  size_t n = 0;
  char err[256];
  WD_CHECK_EQ_INT(wd_test_audio_decode_file(wd_test_data("audio/jfk.wav"), NULL, &x, &n, err, sizeof err), 0);
  WD_CHECK_EQ_INT(n, 176000);
  free(x);
  x = NULL;
  WD_CHECK_EQ_INT(wd_test_audio_decode_file(wd_test_data("audio/no_such.wav"), NULL, &x, &n, err, sizeof err),
                  WD_ENOENT);
  WD_CHECK(x == NULL && n == 0 && strstr(err, "no_such.wav") != NULL);
  WD_CHECK_EQ_INT(wd_test_audio_decode_file(wd_test_data("audio"), NULL, &x, &n, err, sizeof err), WD_EIO);
}

/* ------------------------------------------------------------------------ */
/* Error paths                                                              */

/* Decodes buf[0..len) expecting code, a message and no output. */
static void expect_error(const void *buf, size_t len, uint32_t max_seconds, int code, const char *what) {
  float *x = (float *)1;
  size_t n = 99;
  char err[256] = "x";
  wd_audio_opts_t o = { .max_seconds = max_seconds };
  int r = wd_test_audio_decode(buf, len, &o, &x, &n, err, sizeof err);
  fprintf(stderr, "  %-28s -> %s: %s\n", what, wd_err_name(r), err);
  WD_CHECK_EQ_INT(r, code);
  WD_CHECK(x == NULL && n == 0);
  WD_CHECK(err[0] != '\0' && strcmp(err, "x") != 0);
  if (r == 0)
    free(x);
}

/* A mono 32-bit float WAV (WAVE_FORMAT_IEEE_FLOAT) of n samples of a quiet
 * 1 kHz sine, sample `at` replaced by `bad`. */
static unsigned char *make_float_wav(size_t n, size_t at, float bad, size_t *ret_len) {
  unsigned char *w = calloc(1, 44 + n * 4);
  if (!w)
    return NULL;
  memcpy(w, "RIFF", 4);
  put32(w + 4, (uint32_t)(36 + n * 4));
  memcpy(w + 8, "WAVEfmt ", 8);
  put32(w + 16, 16);
  put16(w + 20, 3); /* WAVE_FORMAT_IEEE_FLOAT */
  put16(w + 22, 1);
  put32(w + 24, 16000);
  put32(w + 28, 16000 * 4);
  put16(w + 32, 4);
  put16(w + 34, 32);
  memcpy(w + 36, "data", 4);
  put32(w + 40, (uint32_t)(n * 4));
  for (size_t i = 0; i < n; i++) {
    const float v = i == at ? bad : (float)(0.25 * sin(2.0 * M_PI * 1000.0 * (double)i / 16000.0));
    uint32_t u;
    memcpy(&u, &v, 4);
    put32(w + 44 + i * 4, u);
  }
  *ret_len = 44 + n * 4;
  return w;
}

/* NaN, infinities and samples far past full scale are no audio: a format
 * error with a message, where they used to reach the model as NaN (and
 * came back as "decoding options not supported"). Samples a little over
 * full scale are clipped as the ffmpeg command clips them. */
WD_TEST(nan_inf_and_absurd_float_samples_are_refused) {
  const struct { float v; const char *what; } bad[] = {
    { NAN, "float WAV with a NaN" },
    { INFINITY, "float WAV with +inf" },
    { -INFINITY, "float WAV with -inf" },
    { 3e38f, "float WAV with 3e38" },
    { -1e6f, "float WAV with -1e6" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t len = 0;
    unsigned char *w = make_float_wav(8000, 4000, bad[i].v, &len);
    WD_CHECK(w != NULL);
    if (w)
      expect_error(w, len, 0, WD_EAUDIO, bad[i].what);
    free(w);
  }
  size_t len = 0;
  unsigned char *w = make_float_wav(8000, 4000, 7.5f, &len);
  float *x = NULL;
  size_t n = 0;
  char err[256];
  WD_CHECK(w != NULL);
  WD_CHECK_EQ_INT(wd_test_audio_decode(w, len, NULL, &x, &n, err, sizeof err), 0);
  WD_CHECK_EQ_INT(n, 8000);
  if (x && n == 8000)
    WD_CHECK(x[4000] == 32767.0f / 32768.0f); /* clipped to s16's largest */
  free(x);
  free(w);
}

WD_TEST(bad_arguments_and_empty_input) {
  float *x = NULL;
  size_t n = 0;
  char err[64];
  unsigned char one = 0;
  WD_CHECK_EQ_INT(wd_test_audio_decode(NULL, 10, NULL, &x, &n, err, sizeof err), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_test_audio_decode(&one, 1, NULL, NULL, &n, err, sizeof err), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_test_audio_decode(&one, 1, NULL, &x, NULL, NULL, 0), WD_EINVAL);
  expect_error(&one, 0, 0, WD_EAUDIO, "empty buffer");
  expect_error(NULL, 0, 0, WD_EAUDIO, "NULL, 0");
}

WD_TEST(garbage_is_refused) {
  /* 1000 bytes from a fixed LCG (several seeds), and 1000 zero bytes. */
  unsigned char buf[1000];
  for (uint32_t seed = 1; seed <= 8; seed++) {
    uint32_t s = seed * 2654435761u;
    for (size_t i = 0; i < sizeof buf; i++) {
      s = s * 1664525u + 1013904223u;
      buf[i] = (unsigned char)(s >> 24);
    }
    expect_error(buf, sizeof buf, 0, WD_EAUDIO, "1000 random bytes");
  }
  memset(buf, 0, sizeof buf);
  expect_error(buf, sizeof buf, 0, WD_EAUDIO, "1000 zero bytes");
  const char text[] = "#EXTM3U\n#EXTINF:10,\nfile:///etc/passwd\nhttp://127.0.0.1/x.mp3\n";
  expect_error(text, sizeof text - 1, 0, WD_EAUDIO, "an HLS playlist");
}

WD_TEST(wav_header_without_data) {
  size_t len = 0;
  unsigned char *w = make_wav(16000, 1, 0, 32000, sine_1k, &len); /* claims 1 s, holds 0 */
  expect_error(w, len, 0, WD_EAUDIO, "WAV header only");
  expect_error(w, 20, 0, WD_EAUDIO, "half a WAV header");
  free(w);
}

WD_TEST(truncated_files_are_refused) {
  static const char *const files[] = { "audio/formats/flac_16k.flac", "audio/formats/mp3_16k_id3.mp3",
                                       "audio/formats/aac_16k.m4a", "audio/formats/alac_16k.m4a",
                                       "audio/formats/opus_16k.webm" };
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    size_t len = 0;
    unsigned char *buf = wd_read_file(wd_test_data(files[k]), &len);
    WD_CHECK(buf != NULL);
    if (!buf)
      continue;
    char what[64];
    snprintf(what, sizeof what, "%s cut at 50%%", strrchr(files[k], '/') + 1);
    expect_error(buf, len / 2, 0, WD_EAUDIO, what);
    snprintf(what, sizeof what, "%s cut at 10 bytes", strrchr(files[k], '/') + 1);
    expect_error(buf, 10, 0, WD_EAUDIO, what);
    free(buf);
  }
}

WD_TEST(lying_wav_size_is_not_trusted) {
  /* The data chunk claims 0xfffffffe bytes (2^31 - 1 frames of s16 mono;
   * what ffmpeg writes to a pipe) but 1000 frames follow. The decoder must
   * neither allocate for the claim nor refuse it as too long: streamed WAVs
   * are legitimate, so the 1000 frames present come back. */
  gen_rate = 16000;
  size_t len = 0, n = 0;
  float *x = NULL;
  char err[256];
  unsigned char *w = make_wav(16000, 1, 1000, 0xfffffffeu, sine_1k, &len);
  wd_audio_opts_t o = { .max_seconds = 1 };
  WD_CHECK_EQ_INT(wd_test_audio_decode(w, len, &o, &x, &n, err, sizeof err), 0);
  WD_CHECK_EQ_INT(n, 1000);
  for (size_t i = 0; x && i < n; i += 37)
    WD_CHECK_NEAR(x[i], sine_1k(i, 0), 1.0 / 32768);
  free(x);
  free(w);
}

/* A chunk that claims more bytes than the file holds. fuzz_audio found two
 * small WAVs (an INFO chunk of 0xffffffff or 0xffffff04 bytes, filled with
 * 0xff) on which libsndfile 1.2.0 spins inside sf_open for minutes: they
 * must be refused at once. A damaged tail after the data chunk (an INFO
 * chunk of 0xffffffff bytes) still gives the samples before it. */
WD_TEST(chunk_past_the_end_of_the_file) {
  static const char *const spun[] = { "hang-libsndfile-info-chunk-size-ffffffff",
                                      "hang-libsndfile-info-chunk-size-ffffff04-after-fmt" };
  wd_audio_opts_t o = { .max_seconds = 60 };
  char err[256], path[4096];
  for (size_t i = 0; i < sizeof spun / sizeof spun[0]; i++) {
    snprintf(path, sizeof path, "%s/tests/fuzz/regress/audio/%s", WD_SOURCE_DIR, spun[i]);
    float *x = NULL;
    size_t n = 0;
    WD_CHECK(wd_test_audio_decode_file(path, &o, &x, &n, err, sizeof err) == WD_EAUDIO);
    WD_CHECK(x == NULL && n == 0);
  }
  gen_rate = 16000;
  size_t len = 0;
  unsigned char *w = make_wav(16000, 1, 1000, 0, sine_1k, &len);
  unsigned char *v = w ? malloc(len + 44) : NULL;
  WD_CHECK(v != NULL);
  if (v) {
    static const unsigned char info[8] = { 'I', 'N', 'F', 'O', 0xff, 0xff, 0xff, 0xff };
    memcpy(v, w, len);
    memcpy(v + len, info, sizeof info);
    memset(v + len + sizeof info, 0xff, 36);
    float *x = NULL;
    size_t n = 0;
    WD_CHECK_EQ_INT(wd_test_audio_decode(v, len + 44, &o, &x, &n, err, sizeof err), 0);
    WD_CHECK_EQ_INT(n, 1000);
    for (size_t i = 0; x && i < n; i += 37)
      WD_CHECK_NEAR(x[i], sine_1k(i, 0), 1.0 / 32768);
    free(x);
  }
  free(v);
  free(w);
}

WD_TEST(absurd_rates_and_channels_are_refused) {
  gen_rate = 16000;
  size_t len = 0;
  unsigned char *w = make_wav(3, 1, 100, 0, sine_1k, &len);
  expect_error(w, len, 0, WD_EAUDIO, "WAV at 3 Hz");
  free(w);
  w = make_wav(4000000, 1, 100, 0, sine_1k, &len);
  expect_error(w, len, 0, WD_EAUDIO, "WAV at 4 MHz");
  free(w);
  w = make_wav(16000, 200, 10, 0, sine_1k, &len);
  expect_error(w, len, 0, WD_EAUDIO, "WAV with 200 channels");
  free(w);
  w = make_wav(16000, 1, 100, 0, sine_1k, &len);
  put16(w + 22, 0); /* zero channels */
  expect_error(w, len, 0, WD_EAUDIO, "WAV with 0 channels");
  free(w);
}

WD_TEST(max_seconds_is_enforced) {
  /* The sentence is 6.91 s: 6 s is refused by each back-end, 7 s is not. */
  static const char *const files[] = { "audio/formats/pcm16_16k.wav", "audio/formats/pcm16_44k_stereo.wav",
                                       "audio/formats/aac_16k.m4a", "audio/formats/mp3_16k_id3.mp3" };
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    size_t len = 0, n = 0;
    unsigned char *buf = wd_read_file(wd_test_data(files[k]), &len);
    expect_error(buf, len, 6, WD_ETOOBIG, strrchr(files[k], '/') + 1);
    float *x = NULL;
    char err[256];
    wd_audio_opts_t o = { .max_seconds = 7 };
    WD_CHECK_EQ_INT(wd_test_audio_decode(buf, len, &o, &x, &n, err, sizeof err), 0);
    free(x);
    free(buf);
  }
}

/* timeout_s bounds the whole decode: past it each back-end stops at its
 * next read or block and says WD_ETIMEDOUT (here a deadline already gone
 * at the first read); a generous one changes nothing. With the fault
 * switch's slow decode (decode_delay, fault.h) the decode is cut at the
 * deadline, not at the end of the delay. */
WD_TEST(timeout_s_stops_the_decode) {
  static const char *const files[] = { "audio/formats/pcm16_16k.wav", "audio/formats/aac_16k.m4a",
                                       "audio/formats/mp3_16k_id3.mp3" };
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    size_t len = 0, n = 0;
    unsigned char *buf = wd_read_file(wd_test_data(files[k]), &len);
    float *x = NULL;
    char err[256] = "";
    wd_audio_opts_t o = { .timeout_s = 1e-9 };
    WD_CHECK_EQ_INT(wd_test_audio_decode(buf, len, &o, &x, &n, err, sizeof err), WD_ETIMEDOUT);
    WD_CHECK(x == NULL && n == 0);
    WD_CHECK(strstr(err, "limit") != NULL);
    o.timeout_s = 60.0;
    WD_CHECK_EQ_INT(wd_test_audio_decode(buf, len, &o, &x, &n, err, sizeof err), 0);
    WD_CHECK(n > 0);
    free(x);
    free(buf);
  }
  size_t len = 0, n = 0;
  unsigned char *buf = wd_read_file(wd_test_data("audio/jfk.wav"), &len);
  WD_CHECK_EQ_INT(wd_fault_arm("decode_delay:5000"), 0);
  float *x = NULL;
  char err[256] = "";
  wd_audio_opts_t o = { .timeout_s = 0.2 };
  const double t0 = wd_now_s();
  WD_CHECK_EQ_INT(wd_test_audio_decode(buf, len, &o, &x, &n, err, sizeof err), WD_ETIMEDOUT);
  const double took = wd_now_s() - t0;
  WD_CHECK_EQ_INT(wd_fault_arm(NULL), 0);
  WD_CHECK(took < 2.0); /* 0.2 s and a 50 ms slice, not 5 s */
  free(buf);
}

WD_TEST(declared_length_over_the_cap_is_refused_before_decoding) {
  /* flac_16k.flac (6.91 s) with its STREAMINFO total-samples field (the low
   * 36 bits of the big-endian u64 at byte 18: after "fLaC", the block
   * header and 10 bytes of block and frame sizes) set to 10 hours. Decoded,
   * it would be "truncated" (6.91 s of 36000 s); refused from the header
   * it is WD_ETOOBIG, saying so: a 10-hour file of silence is only ~2 MB
   * of FLAC and must not be decoded up to the cap first. Under a cap above
   * the claim the file is decoded as before and found truncated. */
  size_t len = 0, n = 0;
  unsigned char *buf = wd_read_file(wd_test_data("audio/formats/flac_16k.flac"), &len);
  WD_CHECK(buf != NULL && len > 42 && memcmp(buf, "fLaC", 4) == 0 && (buf[4] & 0x7f) == 0);
  if (!buf)
    return;
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = v << 8 | buf[18 + i];
  WD_CHECK_EQ_INT((int64_t)(v & 0xfffffffffull), 110639); /* 6.91 s at 16 kHz */
  v = (v & ~0xfffffffffull) | (uint64_t)36000 * 16000;
  for (int i = 7; i >= 0; i--, v >>= 8)
    buf[18 + i] = (unsigned char)v;
  float *x = NULL;
  char err[256] = "";
  wd_audio_opts_t o = { .max_seconds = 10800 };
  WD_CHECK_EQ_INT(wd_test_audio_decode(buf, len, &o, &x, &n, err, sizeof err), WD_ETOOBIG);
  fprintf(stderr, "  10 h declared, 3 h cap        -> %s\n", err);
  WD_CHECK(x == NULL && strstr(err, "declares 36000 s") != NULL);
  o.max_seconds = 40000; /* over the claim: decoded, and the lie is found */
  WD_CHECK_EQ_INT(wd_test_audio_decode(buf, len, &o, &x, &n, err, sizeof err), WD_EAUDIO);
  WD_CHECK(x == NULL && strstr(err, "truncated") != NULL);
  free(buf);
}

WD_TEST(corrupted_files_never_crash) {
  /* Deterministic damage: 16 random bytes overwritten in the first 4 KiB
   * (headers live there) and the file cut at a random point; 20 variants of
   * each of 12 formats, across both back-ends. Each decode must either fail
   * with a code and a message, or succeed with sane samples; ASan and UBSan
   * watch the rest. */
  static const char *const files[] = {
    "audio/formats/pcm24_16k_wavex.wav", "audio/formats/flac_16k.flac",
    "audio/formats/vorbis_16k.ogg",      "audio/formats/opus_16k.webm",
    "audio/formats/mp3_16k_id3.mp3",     "audio/formats/aac_16k.m4a",
    "audio/formats/aac_adts_16k.aac",    "audio/formats/mpeg_ps_mp2.mpeg",
    "audio/formats/opus_16k.ogg",        "audio/formats/aiff_16k.aiff",
    "audio/formats/pcm16_16k.caf",       "audio/formats/ulaw_8k.wav",
  };
  uint32_t s = 12345;
  int n_ok = 0, n_err = 0;
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    size_t len = 0;
    unsigned char *orig = wd_read_file(wd_test_data(files[k]), &len);
    unsigned char *buf = orig ? malloc(len) : NULL;
    WD_CHECK(buf != NULL);
    for (int v = 0; buf && v < 20; v++) {
      memcpy(buf, orig, len);
      for (int b = 0; b < 16; b++) {
        s = s * 1664525u + 1013904223u;
        buf[(s >> 8) % (len < 4096 ? len : 4096)] = (unsigned char)(s >> 3);
      }
      s = s * 1664525u + 1013904223u;
      const size_t cut = v % 2 ? len : 1 + (s >> 4) % len;
      float *x = NULL;
      size_t n = 0;
      char err[256] = "";
      int r = wd_test_audio_decode(buf, cut, NULL, &x, &n, err, sizeof err);
      if (r == 0) {
        n_ok++;
        WD_CHECK(x != NULL && n > 0 && all_in_range(x, n));
      } else {
        n_err++;
        WD_CHECK(r < 0 && x == NULL && n == 0 && err[0] != '\0');
      }
      free(x);
    }
    free(buf);
    free(orig);
  }
  fprintf(stderr, "  corrupted variants: %d decoded, %d refused\n", n_ok, n_err);
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */

typedef struct {
  const char *file;
  float *x;
  size_t n;
  int r;
  unsigned char *buf; /* the file's bytes, read before the threads start */
  size_t len;
} thread_job_t;

static void *decode_thread(void *arg) {
  thread_job_t *j = arg;
  char err[256];
  for (int rep = 0; rep < 2; rep++) {
    free(j->x);
    j->x = NULL;
    j->r = j->buf ? wd_test_audio_decode(j->buf, j->len, NULL, &j->x, &j->n, err, sizeof err) : -1000;
  }
  return NULL;
}

WD_TEST(concurrent_decodes_match_serial) {
  thread_job_t jobs[] = {
    { .file = "audio/formats/mp3_44k_stereo.mp3", .r = -1 },
    { .file = "audio/formats/aac_16k.m4a", .r = -1 },
    { .file = "audio/formats/opus_16k.ogg", .r = -1 },
    { .file = "audio/formats/pcm16_44k_stereo.wav", .r = -1 },
  };
  enum { NJ = sizeof jobs / sizeof jobs[0] };
  pthread_t t[NJ];
  for (int i = 0; i < NJ; i++) /* wd_test_data() is not thread-safe */
    jobs[i].buf = wd_read_file(wd_test_data(jobs[i].file), &jobs[i].len);
  for (int i = 0; i < NJ; i++)
    WD_CHECK_EQ_INT(pthread_create(&t[i], NULL, decode_thread, &jobs[i]), 0);
  for (int i = 0; i < NJ; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < NJ; i++) {
    float *x = NULL;
    size_t n = 0;
    char err[256];
    WD_CHECK_EQ_INT(jobs[i].r, 0);
    WD_CHECK_EQ_INT(decode_data(jobs[i].file, 0, &x, &n, err, sizeof err), 0);
    WD_CHECK_EQ_INT(jobs[i].n, n);
    WD_CHECK(x && jobs[i].x && n == jobs[i].n && memcmp(x, jobs[i].x, n * sizeof(float)) == 0);
    free(x);
    free(jobs[i].x);
    free(jobs[i].buf);
  }
}

int main(void) { return wd_test_main(); }
