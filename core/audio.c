/*
 * audio.c - an uploaded file in memory to 16 kHz mono float samples.
 *
 * Pipeline: a decoder back-end produces frames of any channel count and
 * sample format; each frame is converted to float and averaged over its
 * channels (what `ffmpeg -ac 1` does), and the mono signal is streamed through
 * libsoxr to 16 kHz (skipped when the input already is 16 kHz). The "sink"
 * below owns that second half, so both back-ends share it.
 *
 * Back-ends, in order: libsndfile through sf_open_virtual over the buffer,
 * then libavformat/libavcodec through a custom AVIOContext over the same
 * buffer. libsndfile "declines" a file it cannot open (or opens but gets no
 * samples from), and FFmpeg gets its turn; any other libsndfile failure is
 * final. MPEG audio and Ogg Vorbis skip libsndfile (wd_audio_prefer_libav).
 * Both identify the format by content; no file name exists here.
 *
 * Untrusted input: header sizes are never used to size an allocation. Memory
 * grows with the samples actually decoded, and decoding stops with WD_ETOOBIG
 * once the input passes max_seconds; a header that declares an exact length
 * over max_seconds is refused the same way before anything is decoded. A
 * file whose header declares an exact length but which decodes to clearly
 * less is reported as truncated. FFmpeg may only use an allowlist of
 * demuxers and may not open any other file or URL (HLS playlists, MOV
 * references), so an upload cannot make the daemon read anything but
 * itself.
 *
 * Threading: no mutable global state; FFmpeg's log level is set to quiet
 * once (pthread_once) so that the library never writes to stderr. Ownership:
 * the caller's buffer is only read; the result is malloc'd for the caller.
 */
#include "audio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if WD_HAVE_FFMPEG
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#endif
#include <sndfile.h>
#include <soxr.h>

#include "error.h"
#include "log.h"

/* Plausible input ranges; anything outside is a damaged or hostile header. */
#define WD_AUDIO_RATE_MIN 1000
#define WD_AUDIO_RATE_MAX 768000
#define WD_AUDIO_CHANNELS_MAX 64
/* Frames per sf_readf_float call. */
#define WD_AUDIO_SF_CHUNK 4096
/* Size of the AVIOContext's read buffer, bytes. */
#define WD_AUDIO_AVIO_BUF 32768
/* A decode that yields less than this fraction of an exact declared length
 * is truncated. The slack covers codec priming and rounding of durations. */
#define WD_AUDIO_TRUNC_FRACTION 0.95
/* Demuxers FFmpeg may pick (names as in `ffmpeg -demuxers`). Audio and the
 * common audio-carrying containers only: no playlists, images or text. */
#define WD_AUDIO_AV_FORMATS                                                    \
  "mov,mp4,m4a,3gp,matroska,webm,mpeg,mpegts,aac,mp3,ogg,flac,wav,w64,aiff,"   \
  "caf,asf,amr,amrnb,amrwb,ac3,eac3,au,wv,ape,tta,avi,flv,truehd,dts,mlp,"     \
  "mpc,mpc8,voc,loas,latm,oma,xwma"

static int wd_audio_fail(char *err, size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ------------------------------------------------------------------------ */
/* Messages                                                                 */

/* Writes the user's message into err, logs it at DEBUG and returns code. */
static int wd_audio_fail(char *err, size_t err_len, int code, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (err && err_len)
    snprintf(err, err_len, "%s", msg);
  wd_log_debug("audio: %s (%s)", msg, wd_err_name(code));
  return code;
}

#if WD_HAVE_FFMPEG
/* FFmpeg's error text for r, in buf. */
static const char *wd_audio_averr(int r, char *buf, size_t len) {
  if (av_strerror(r, buf, len) < 0)
    snprintf(buf, len, "error %d", r);
  return buf;
}
#endif

/* ------------------------------------------------------------------------ */
/* The sink: downmixed frames in, 16 kHz samples out                        */

typedef struct {
  uint32_t max_seconds;
  int rate;          /* input sample rate, Hz; 0 until started */
  soxr_t soxr;       /* NULL when rate is already 16 kHz */
  uint64_t n_in;     /* mono input frames pushed */
  uint64_t n_in_max; /* max_seconds * rate */
  float *mix;        /* (mix_cap) one chunk of mono input, at rate */
  size_t mix_cap;
  float *out; /* (n_out) the 16 kHz result so far, capacity out_cap */
  size_t n_out, out_cap;
} wd_audio_sink_t;

static void wd_audio_sink_free(wd_audio_sink_t *s) {
  if (!s)
    return;
  if (s->soxr)
    soxr_delete(s->soxr);
  free(s->mix);
  free(s->out);
  *s = (wd_audio_sink_t){ .max_seconds = s->max_seconds };
}

/* Fixes the input rate and creates the resampler. */
static int wd_audio_sink_start(wd_audio_sink_t *s, int rate, char *err, size_t err_len) {
  if (rate < WD_AUDIO_RATE_MIN || rate > WD_AUDIO_RATE_MAX)
    return wd_audio_fail(err, err_len, WD_EAUDIO,
                         "unsupported sample rate %d Hz (expected %d to %d)", rate,
                         WD_AUDIO_RATE_MIN, WD_AUDIO_RATE_MAX);
  s->rate = rate;
  s->n_in_max = (uint64_t)s->max_seconds * (uint64_t)rate;
  if (rate == WD_AUDIO_SAMPLE_RATE)
    return 0;
  /* ref: openai/whisper audio.py load_audio runs `ffmpeg -ac 1 -ar 16000`;
   * soxr's HQ (20-bit) band-limited resampler serves the same purpose. */
  soxr_error_t e = NULL;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
  s->soxr = soxr_create((double)rate, (double)WD_AUDIO_SAMPLE_RATE, 1, &e, &io, &q, NULL);
  if (!s->soxr || e)
    return wd_audio_fail(err, err_len, WD_ENOMEM, "cannot create the resampler: %s",
                         e ? e : "unknown error");
  return 0;
}

/* Makes room for n mono frames in s->mix. */
static int wd_audio_sink_mix_reserve(wd_audio_sink_t *s, size_t n, char *err, size_t err_len) {
  if (n <= s->mix_cap)
    return 0;
  float *p = realloc(s->mix, n * sizeof(float));
  if (!p)
    return wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
  s->mix = p;
  s->mix_cap = n;
  return 0;
}

/* Makes room for extra more output samples, growing geometrically. */
static int wd_audio_sink_out_reserve(wd_audio_sink_t *s, size_t extra, char *err,
                                     size_t err_len) {
  if (s->out_cap - s->n_out >= extra)
    return 0;
  size_t cap = s->out_cap ? s->out_cap * 2 : (size_t)WD_AUDIO_SAMPLE_RATE * 8;
  if (cap < s->n_out + extra)
    cap = s->n_out + extra;
  float *p = realloc(s->out, cap * sizeof(float));
  if (!p)
    return wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
  s->out = p;
  s->out_cap = cap;
  return 0;
}

/* Refuses, before anything is decoded, a file whose header declares a length
 * well over the cap. Without this a compact file (10 hours of FLAC silence is
 * under 2 MB) would be decoded, and its samples held, up to max_seconds only
 * to be refused then: hundreds of MB and seconds of CPU per request. The 1 s
 * of slack keeps every file the decode-time check would accept. declared_s
 * <= 0 (unknown) passes. */
static int wd_audio_sink_check_declared(const wd_audio_sink_t *s, double declared_s, char *err,
                                        size_t err_len) {
  if (declared_s > (double)s->max_seconds + 1.0)
    return wd_audio_fail(err, err_len, WD_ETOOBIG,
                         "audio is longer than the limit of %u s (the header declares %.0f s)",
                         s->max_seconds, declared_s);
  return 0;
}

/* Resamples (or copies) the first n frames of s->mix into the output. */
static int wd_audio_sink_push(wd_audio_sink_t *s, size_t n, char *err, size_t err_len) {
  s->n_in += n;
  if (s->n_in > s->n_in_max)
    return wd_audio_fail(err, err_len, WD_ETOOBIG,
                         "audio is longer than the limit of %u s", s->max_seconds);
  if (!s->soxr) {
    int r = wd_audio_sink_out_reserve(s, n, err, err_len);
    if (r < 0)
      return r;
    memcpy(s->out + s->n_out, s->mix, n * sizeof(float));
    s->n_out += n;
    return 0;
  }
  size_t done = 0;
  while (done < n) {
    /* Output for the rest of the chunk, plus slack for the filter's tail. */
    size_t want = (size_t)((double)(n - done) * WD_AUDIO_SAMPLE_RATE / s->rate) + 256;
    int r = wd_audio_sink_out_reserve(s, want, err, err_len);
    if (r < 0)
      return r;
    size_t idone = 0, odone = 0;
    soxr_error_t e = soxr_process(s->soxr, s->mix + done, n - done, &idone,
                                  s->out + s->n_out, s->out_cap - s->n_out, &odone);
    if (e)
      return wd_audio_fail(err, err_len, WD_EINTERNAL, "resampler failed: %s", e);
    s->n_out += odone;
    done += idone;
    if (idone == 0 && odone == 0)
      return wd_audio_fail(err, err_len, WD_EINTERNAL, "resampler made no progress");
  }
  return 0;
}

/* Drains the resampler, checks that there is audio and clamps to [-1, 1]. */
static int wd_audio_sink_finish(wd_audio_sink_t *s, char *err, size_t err_len) {
  if (s->n_in == 0)
    return wd_audio_fail(err, err_len, WD_EAUDIO, "the file contains no audio samples");
  while (s->soxr) {
    int r = wd_audio_sink_out_reserve(s, 4096, err, err_len);
    if (r < 0)
      return r;
    size_t odone = 0;
    soxr_error_t e = soxr_process(s->soxr, NULL, 0, NULL, s->out + s->n_out,
                                  s->out_cap - s->n_out, &odone);
    if (e)
      return wd_audio_fail(err, err_len, WD_EINTERNAL, "resampler failed: %s", e);
    if (odone == 0)
      break;
    s->n_out += odone;
  }
  if (s->n_out == 0)
    return wd_audio_fail(err, err_len, WD_EAUDIO, "the file contains no audio samples");
  /* Lossy decoders and the resampler overshoot full scale slightly. A float
   * file may also hold huge finite samples (3e38, found by fuzz_audio) that
   * overflow in the resampler's filter to inf and, summed, NaN: inf clamps
   * like any overshoot, NaN (which compares false both ways) becomes 0. */
  for (size_t i = 0; i < s->n_out; i++) {
    const float x = s->out[i];
    s->out[i] = isnan(x) ? 0.0f : (x > 1.0f ? 1.0f : (x < -1.0f ? -1.0f : x));
  }
  return 0;
}

/* Averages interleaved frames (n, ch) into mono; non-finite samples become 0. */
static void wd_audio_mix_interleaved(const float *in, size_t n, int ch, float *out) {
  for (size_t i = 0; i < n; i++) {
    float sum = 0.0f;
    for (int c = 0; c < ch; c++)
      sum += in[i * (size_t)ch + (size_t)c];
    out[i] = isfinite(sum) ? sum / (float)ch : 0.0f;
  }
}

/* Is the declared length n_declared (frames) clearly more than was decoded? */
static int wd_audio_sink_truncated(const wd_audio_sink_t *s, double n_declared) {
  return n_declared > 0.0 && (double)s->n_in < WD_AUDIO_TRUNC_FRACTION * n_declared;
}

/* ------------------------------------------------------------------------ */
/* Reading the caller's buffer                                              */

typedef struct {
  const unsigned char *data;
  int64_t len;
  int64_t pos;
} wd_audio_mem_t;

/* Moves the cursor like lseek; positions past the end are clamped to it. */
static int64_t wd_audio_mem_seek(wd_audio_mem_t *m, int64_t offset, int whence) {
  int64_t base = whence == SEEK_SET ? 0 : (whence == SEEK_CUR ? m->pos : m->len);
  if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END)
    return -1;
  if (offset < 0 && -offset > base)
    return -1;
  m->pos = offset > m->len - base ? m->len : base + offset;
  return m->pos;
}

static int64_t wd_audio_mem_read(wd_audio_mem_t *m, void *buf, int64_t count) {
  int64_t n = m->len - m->pos;
  if (count < n)
    n = count;
  if (n <= 0)
    return 0;
  memcpy(buf, m->data + m->pos, (size_t)n);
  m->pos += n;
  return n;
}

/* libsndfile's virtual I/O over wd_audio_mem_t. */
static sf_count_t wd_sf_get_filelen(void *ud) { return ((wd_audio_mem_t *)ud)->len; }
static sf_count_t wd_sf_seek(sf_count_t offset, int whence, void *ud) {
  return wd_audio_mem_seek(ud, offset, whence);
}
static sf_count_t wd_sf_read(void *ptr, sf_count_t count, void *ud) {
  return wd_audio_mem_read(ud, ptr, count);
}
static sf_count_t wd_sf_write(const void *ptr, sf_count_t count, void *ud) {
  (void)ptr, (void)count, (void)ud;
  return 0;
}
static sf_count_t wd_sf_tell(void *ud) { return ((wd_audio_mem_t *)ud)->pos; }

#if WD_HAVE_FFMPEG
/* FFmpeg's AVIOContext callbacks over wd_audio_mem_t. */
static int wd_av_read(void *opaque, uint8_t *buf, int buf_size) {
  int64_t n = wd_audio_mem_read(opaque, buf, buf_size);
  return n > 0 ? (int)n : AVERROR_EOF;
}
static int64_t wd_av_seek(void *opaque, int64_t offset, int whence) {
  wd_audio_mem_t *m = opaque;
  if (whence & AVSEEK_SIZE)
    return m->len;
  int64_t r = wd_audio_mem_seek(m, offset, whence & ~AVSEEK_FORCE);
  return r < 0 ? AVERROR(EINVAL) : r;
}
/* Demuxers must not open anything else (playlists, MOV data references). */
static int wd_av_io_open_refused(AVFormatContext *s, AVIOContext **pb, const char *url,
                                 int flags, AVDictionary **options) {
  (void)s, (void)pb, (void)flags, (void)options;
  wd_log_debug("audio: refused to open '%s' from inside an upload", url ? url : "");
  return AVERROR(EPERM);
}

#endif

/* ------------------------------------------------------------------------ */
/* Routing                                                                  */

/*
 * Should FFmpeg decode this buffer rather than libsndfile? Two kinds of
 * file that libsndfile 1.2.0 opens are sent straight to FFmpeg, found by
 * their first bytes:
 *   - MPEG audio elementary streams (an ID3v2 tag, or an MPEG audio / ADTS
 *     frame sync). libsndfile decodes MP3 through mpg123, which writes
 *     warnings such as "Xing stream size off by more than 1%" to stderr and
 *     cannot be silenced through libsndfile's API. FFmpeg reads the LAME
 *     gapless header too (the same 110639 samples for the test sentence).
 *   - Ogg Vorbis (an Ogg file holding "\x01vorbis"). On a damaged Vorbis
 *     header libsndfile leaks libvorbis's codec setup (about 6 KiB per file,
 *     found by the corrupted-file test under LeakSanitizer), which a daemon
 *     fed untrusted uploads cannot afford. FFmpeg's own Vorbis decoder does
 *     not leak. Ogg Opus and Ogg FLAC stay with libsndfile.
 */
static int wd_audio_prefer_libav(const unsigned char *d, size_t len) {
  if (len >= 3 && memcmp(d, "ID3", 3) == 0)
    return 1;
  if (len >= 2 && d[0] == 0xff && (d[1] & 0xe0) == 0xe0)
    return 1;
  if (len >= 4 && memcmp(d, "OggS", 4) == 0) {
    /* In a well-formed file the identification packet is on the first page,
     * but libsndfile's Ogg reader (libogg) skips anything that is not a
     * valid page and classifies the first stream it syncs to, so the packet
     * may sit anywhere: fuzz_audio found a file whose damaged first page
     * hid a Vorbis stream at byte 1337 from a scan of the first 300 bytes,
     * and leaked. So the whole buffer is searched (a memchr pass). */
    const unsigned char *p = d, *end = d + len;
    while ((p = memchr(p, 0x01, (size_t)(end - p))) != NULL && end - p >= 7) {
      if (memcmp(p + 1, "vorbis", 6) == 0)
        return 1;
      p++;
    }
  }
  return 0;
}

/*
 * Does a RIFF/RIFX/RF64 WAVE or an AIFF/AIFC file declare a chunk longer
 * than the bytes left after it? libsndfile 1.2.0 then spins inside
 * sf_open for minutes, CPU-bound: fuzz_audio found a 90-byte WAV with an
 * INFO chunk of size 0xffffffff (tests/fuzz/regress/audio/). Such files go
 * to FFmpeg, which stops at the end of the buffer, or are refused without
 * it. The sample-data chunk ("data", "SSND") is exempt: streaming writers
 * leave its size 0 or 0xffffffff, and a cut file ends inside it.
 */
static int wd_audio_chunk_overrun(const unsigned char *d, size_t len) {
  if (len < 12)
    return 0;
  int be;
  const char *samples;
  if ((memcmp(d, "RIFF", 4) == 0 || memcmp(d, "RF64", 4) == 0) && memcmp(d + 8, "WAVE", 4) == 0)
    be = 0, samples = "data";
  else if (memcmp(d, "RIFX", 4) == 0 && memcmp(d + 8, "WAVE", 4) == 0)
    be = 1, samples = "data";
  else if (memcmp(d, "FORM", 4) == 0 && (memcmp(d + 8, "AIFF", 4) == 0 ||
                                         memcmp(d + 8, "AIFC", 4) == 0))
    be = 1, samples = "SSND";
  else
    return 0;
  /* Chunks: id (4), size (4, the file's byte order), body, a pad byte
   * after an odd-sized body. */
  for (size_t off = 12; off <= len && len - off >= 8;) {
    const unsigned char *c = d + off;
    const uint32_t n = be ? (uint32_t)c[4] << 24 | (uint32_t)c[5] << 16 | (uint32_t)c[6] << 8 | c[7]
                          : (uint32_t)c[7] << 24 | (uint32_t)c[6] << 16 | (uint32_t)c[5] << 8 | c[4];
    if (n > len - off - 8)
      return memcmp(c, samples, 4) != 0;
    off += 8 + (size_t)n + (n & 1u);
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Back-end 1: libsndfile                                                   */

/*
 * Decodes with libsndfile into s. Sets *declined when libsndfile cannot
 * open the file or gets no samples from it, so that FFmpeg may try.
 */
static int wd_audio_decode_sndfile(wd_audio_mem_t *mem, wd_audio_sink_t *s, int *declined,
                                   char *err, size_t err_len) {
  SF_VIRTUAL_IO vio = {
    .get_filelen = wd_sf_get_filelen,
    .seek = wd_sf_seek,
    .read = wd_sf_read,
    .write = wd_sf_write,
    .tell = wd_sf_tell,
  };
  SF_INFO info = { 0 };
  float *buf = NULL;
  int r = 0;
  *declined = 0;
  SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, mem);
  if (!sf) {
    wd_log_debug("audio: libsndfile declined: %s", sf_strerror(NULL));
    *declined = 1;
    return WD_EAUDIO;
  }
  if (info.channels < 1 || info.channels > WD_AUDIO_CHANNELS_MAX) {
    r = wd_audio_fail(err, err_len, WD_EAUDIO, "unsupported channel count %d (expected 1 to %d)",
                      info.channels, WD_AUDIO_CHANNELS_MAX);
    goto fail;
  }
  r = wd_audio_sink_start(s, info.samplerate, err, err_len);
  if (r < 0)
    goto fail;
  /* info.frames comes from the header. libsndfile already clamps a WAV's
   * data size to the bytes present (a WAV streamed through a pipe says
   * 0xffffffff), so this catches FLAC and Ogg whose length is exact. For
   * MPEG audio it is an estimate from the file size and is not used. */
  const int exact = (info.format & SF_FORMAT_TYPEMASK) != SF_FORMAT_MPEG;
  if (exact && info.frames != SF_COUNT_MAX && info.frames > 0) {
    r = wd_audio_sink_check_declared(s, (double)info.frames / s->rate, err, err_len);
    if (r < 0)
      goto fail;
  }
  /* (WD_AUDIO_SF_CHUNK, channels) interleaved; libsndfile scales ints to [-1, 1]. */
  buf = malloc((size_t)WD_AUDIO_SF_CHUNK * (size_t)info.channels * sizeof(float));
  r = buf ? wd_audio_sink_mix_reserve(s, WD_AUDIO_SF_CHUNK, err, err_len)
          : wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
  if (r < 0)
    goto fail;
  for (;;) {
    sf_count_t got = sf_readf_float(sf, buf, WD_AUDIO_SF_CHUNK);
    if (got <= 0)
      break;
    wd_audio_mix_interleaved(buf, (size_t)got, info.channels, s->mix);
    r = wd_audio_sink_push(s, (size_t)got, err, err_len);
    if (r < 0)
      goto fail;
  }
  if (s->n_in == 0) {
    wd_log_debug("audio: libsndfile opened the file but decoded nothing: %s", sf_strerror(sf));
    *declined = 1;
    r = WD_EAUDIO;
    goto fail;
  }
  if (sf_error(sf) != SF_ERR_NO_ERROR) {
    r = wd_audio_fail(err, err_len, WD_EAUDIO, "audio is truncated or damaged after %.2f s: %s",
                      (double)s->n_in / s->rate, sf_strerror(sf));
    goto fail;
  }
  /* The declared length again (see above): less decoded is truncation. */
  if (exact && info.frames != SF_COUNT_MAX && wd_audio_sink_truncated(s, (double)info.frames)) {
    r = wd_audio_fail(err, err_len, WD_EAUDIO,
                      "audio is truncated: the header declares %.2f s, the data holds %.2f s",
                      (double)info.frames / s->rate, (double)s->n_in / s->rate);
    goto fail;
  }
  r = 0;
fail:
  free(buf);
  sf_close(sf);
  return r;
}

#if WD_HAVE_FFMPEG
/* ------------------------------------------------------------------------ */
/* Back-end 2: libavformat + libavcodec                                     */

/* Converts a decoded frame of any sample format to float and averages its
 * channels into s->mix[0..nb_samples). */
static void wd_audio_mix_avframe(const AVFrame *f, float *mix) {
  const int nch = f->ch_layout.nb_channels;
  const size_t n = (size_t)f->nb_samples;
  const enum AVSampleFormat fmt = (enum AVSampleFormat)f->format;
  const int planar = av_sample_fmt_is_planar(fmt);
  memset(mix, 0, n * sizeof(float));
  /* Planar: one plane per channel; packed: (n, nch) interleaved in plane 0. */
#define WD_MIX_LOOP(T, EXPR)                                                        \
  for (int c = 0; c < nch; c++) {                                                   \
    const T *src = (const T *)f->extended_data[planar ? c : 0];                     \
    const size_t step = planar ? 1 : (size_t)nch, off = planar ? 0 : (size_t)c;     \
    for (size_t i = 0; i < n; i++) {                                                \
      const double v = (double)src[off + i * step];                                 \
      mix[i] += (float)(EXPR);                                                      \
    }                                                                               \
  }
  switch (av_get_packed_sample_fmt(fmt)) {
  case AV_SAMPLE_FMT_U8: WD_MIX_LOOP(uint8_t, (v - 128.0) / 128.0); break;
  case AV_SAMPLE_FMT_S16: WD_MIX_LOOP(int16_t, v / 32768.0); break;
  case AV_SAMPLE_FMT_S32: WD_MIX_LOOP(int32_t, v / 2147483648.0); break;
  case AV_SAMPLE_FMT_S64: WD_MIX_LOOP(int64_t, v / 9223372036854775808.0); break;
  case AV_SAMPLE_FMT_FLT: WD_MIX_LOOP(float, v); break;
  case AV_SAMPLE_FMT_DBL: WD_MIX_LOOP(double, v); break;
  default: break; /* rejected by the caller */
  }
#undef WD_MIX_LOOP
  for (size_t i = 0; i < n; i++)
    mix[i] = isfinite(mix[i]) ? mix[i] / (float)nch : 0.0f;
}

/* Hands one decoded frame to the sink, starting it on the first frame. */
static int wd_audio_take_avframe(wd_audio_sink_t *s, const AVFrame *f, char *err,
                                 size_t err_len) {
  const int nch = f->ch_layout.nb_channels;
  if (nch < 1 || nch > WD_AUDIO_CHANNELS_MAX)
    return wd_audio_fail(err, err_len, WD_EAUDIO, "unsupported channel count %d (expected 1 to %d)",
                         nch, WD_AUDIO_CHANNELS_MAX);
  switch (av_get_packed_sample_fmt((enum AVSampleFormat)f->format)) {
  case AV_SAMPLE_FMT_U8: case AV_SAMPLE_FMT_S16: case AV_SAMPLE_FMT_S32:
  case AV_SAMPLE_FMT_S64: case AV_SAMPLE_FMT_FLT: case AV_SAMPLE_FMT_DBL: break;
  default:
    return wd_audio_fail(err, err_len, WD_EAUDIO, "unsupported sample format %d", f->format);
  }
  int r;
  if (s->rate == 0 && (r = wd_audio_sink_start(s, f->sample_rate, err, err_len)) < 0)
    return r;
  if (f->sample_rate != s->rate)
    return wd_audio_fail(err, err_len, WD_EAUDIO, "sample rate changes mid-stream (%d to %d Hz)",
                         s->rate, f->sample_rate);
  if (f->nb_samples <= 0)
    return 0;
  if ((r = wd_audio_sink_mix_reserve(s, (size_t)f->nb_samples, err, err_len)) < 0)
    return r;
  wd_audio_mix_avframe(f, s->mix);
  return wd_audio_sink_push(s, (size_t)f->nb_samples, err, err_len);
}

/* Receives every frame the decoder has ready. Decoder errors are counted in
 * *n_bad (a damaged packet is skipped, as the ffmpeg tool does). */
static int wd_audio_drain(AVCodecContext *dec, AVFrame *frame, wd_audio_sink_t *s, int *n_bad,
                          char *err, size_t err_len) {
  for (;;) {
    int r = avcodec_receive_frame(dec, frame);
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF)
      return 0;
    if (r < 0) {
      (*n_bad)++;
      return 0;
    }
    r = wd_audio_take_avframe(s, frame, err, err_len);
    av_frame_unref(frame);
    if (r < 0)
      return r;
  }
}

/* The stream's length from the container's own header, seconds; 0 when
 * unknown. One estimated from the bit rate is not exact and is not used. */
static double wd_av_declared_s(const AVFormatContext *fmt, const AVStream *st) {
  if (fmt->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE)
    return 0.0;
  if (st->duration != AV_NOPTS_VALUE && st->duration > 0)
    return (double)st->duration * av_q2d(st->time_base);
  if (fmt->duration != AV_NOPTS_VALUE && fmt->duration > 0)
    return (double)fmt->duration / AV_TIME_BASE;
  return 0.0;
}

/* Decodes the best audio stream with FFmpeg into s. */
static int wd_audio_decode_libav(wd_audio_mem_t *mem, wd_audio_sink_t *s, char *err,
                                 size_t err_len) {
  AVFormatContext *fmt = NULL;
  AVIOContext *avio = NULL;
  AVCodecContext *dec = NULL;
  AVPacket *pkt = NULL;
  AVFrame *frame = NULL;
  AVDictionary *opts = NULL;
  const AVCodec *codec = NULL;
  char avmsg[128];
  int r, n_bad = 0;

  unsigned char *iobuf = av_malloc(WD_AUDIO_AVIO_BUF);
  if (iobuf && !(avio = avio_alloc_context(iobuf, WD_AUDIO_AVIO_BUF, 0, mem, wd_av_read, NULL,
                                           wd_av_seek)))
    av_free(iobuf);
  fmt = avio ? avformat_alloc_context() : NULL;
  if (!fmt) {
    r = wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
    goto fail;
  }
  fmt->pb = avio;
  fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  fmt->io_open = wd_av_io_open_refused;
  av_dict_set(&opts, "format_whitelist", WD_AUDIO_AV_FORMATS, 0);
  r = avformat_open_input(&fmt, NULL, NULL, &opts); /* frees fmt on failure */
  if (r < 0) {
    wd_log_debug("audio: libavformat declined: %s", wd_audio_averr(r, avmsg, sizeof avmsg));
    r = wd_audio_fail(err, err_len, WD_EAUDIO, "unrecognised or unsupported audio format");
    goto fail;
  }
  r = avformat_find_stream_info(fmt, NULL);
  if (r < 0) {
    r = wd_audio_fail(err, err_len, WD_EAUDIO, "cannot read the %s stream layout: %s",
                      fmt->iformat->name, wd_audio_averr(r, avmsg, sizeof avmsg));
    goto fail;
  }
  const int idx = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
  if (idx < 0) {
    r = wd_audio_fail(err, err_len, WD_EAUDIO,
                      idx == AVERROR_DECODER_NOT_FOUND ? "no decoder for the audio codec in this %s file"
                                                       : "no audio stream in this %s file",
                      fmt->iformat->name);
    goto fail;
  }
  for (unsigned i = 0; i < fmt->nb_streams; i++)
    fmt->streams[i]->discard = (int)i == idx ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
  const AVStream *st = fmt->streams[idx];
  /* Over the cap by the header's word: refused before any decoding. */
  const double declared_s = wd_av_declared_s(fmt, st);
  if ((r = wd_audio_sink_check_declared(s, declared_s, err, err_len)) < 0)
    goto fail;
  dec = avcodec_alloc_context3(codec);
  pkt = av_packet_alloc();
  frame = av_frame_alloc();
  if (!dec || !pkt || !frame) {
    r = wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
    goto fail;
  }
  if ((r = avcodec_parameters_to_context(dec, st->codecpar)) >= 0) {
    dec->pkt_timebase = st->time_base;
    dec->thread_count = 1; /* the daemon already decodes on several threads */
    r = avcodec_open2(dec, codec, NULL);
  }
  if (r < 0) {
    r = wd_audio_fail(err, err_len, WD_EAUDIO, "cannot open the %s decoder: %s", codec->name,
                      wd_audio_averr(r, avmsg, sizeof avmsg));
    goto fail;
  }

  /* Every packet consumes input bytes, so this loop ends with the buffer;
   * the cap also bounds a container whose index repeats the same bytes. */
  const uint64_t n_pkt_max = (uint64_t)s->max_seconds * 1000u + 100000u;
  uint64_t n_pkt = 0;
  int read_r;
  while ((read_r = av_read_frame(fmt, pkt)) >= 0) {
    if (++n_pkt > n_pkt_max) {
      av_packet_unref(pkt);
      r = wd_audio_fail(err, err_len, WD_ETOOBIG, "too many packets in the %s file",
                        fmt->iformat->name);
      goto fail;
    }
    if (pkt->stream_index == idx) {
      r = avcodec_send_packet(dec, pkt);
      if (r < 0 && r != AVERROR(EAGAIN))
        n_bad++;
      r = wd_audio_drain(dec, frame, s, &n_bad, err, err_len);
    }
    av_packet_unref(pkt);
    if (r < 0)
      goto fail;
  }
  avcodec_send_packet(dec, NULL); /* flush the decoder's delayed frames */
  if ((r = wd_audio_drain(dec, frame, s, &n_bad, err, err_len)) < 0)
    goto fail;
  if (s->n_in == 0) {
    r = wd_audio_fail(err, err_len, WD_EAUDIO, "no audio could be decoded from the %s %s stream",
                      fmt->iformat->name, codec->name);
    goto fail;
  }
  if (read_r != AVERROR_EOF)
    wd_log_debug("audio: %s demuxer stopped early: %s", fmt->iformat->name,
                 wd_audio_averr(read_r, avmsg, sizeof avmsg));
  if (n_bad)
    wd_log_debug("audio: %d damaged %s packets skipped", n_bad, codec->name);

  if (wd_audio_sink_truncated(s, declared_s * s->rate)) {
    r = wd_audio_fail(err, err_len, WD_EAUDIO,
                      "audio is truncated: the %s header declares %.2f s, the data holds %.2f s",
                      fmt->iformat->name, declared_s, (double)s->n_in / s->rate);
    goto fail;
  }
  r = 0;
fail:
  av_dict_free(&opts);
  av_frame_free(&frame);
  av_packet_free(&pkt);
  avcodec_free_context(&dec);
  avformat_close_input(&fmt); /* leaves a custom AVIOContext alone */
  if (avio) {
    av_freep(&avio->buffer); /* FFmpeg may have replaced the original buffer */
    avio_context_free(&avio);
  }
  return r;
}

#else
/* A build without FFmpeg (cmake -DWD_FFMPEG=OFF, for minimal images): what
 * libsndfile declines is refused with a message that says why. */
static int wd_audio_decode_libav(wd_audio_mem_t *mem, wd_audio_sink_t *s, char *err,
                                 size_t err_len) {
  (void)mem, (void)s;
  return wd_audio_fail(err, err_len, WD_EAUDIO,
                       "unsupported audio format (this build reads WAV, FLAC, Ogg Opus, MP3, "
                       "AIFF, CAF and W64; m4a, mp4, webm and Vorbis need FFmpeg)");
}
#endif

/* ------------------------------------------------------------------------ */
/* Public API                                                               */

static pthread_once_t wd_audio_once = PTHREAD_ONCE_INIT;

static void wd_audio_init_once(void) {
#if WD_HAVE_FFMPEG
  /* FFmpeg logs to stderr by default; core/ code never prints. */
  av_log_set_level(AV_LOG_QUIET);
#endif
}

int wd_audio_decode(const void *data, size_t len, const wd_audio_opts_t *opts,
                    float **ret_samples, size_t *ret_n, char *err, size_t err_len) {
  if (err && err_len)
    err[0] = '\0';
  if (ret_samples)
    *ret_samples = NULL;
  if (ret_n)
    *ret_n = 0;
  if (!ret_samples || !ret_n || (!data && len))
    return wd_audio_fail(err, err_len, WD_EINVAL, "invalid argument");
  if (len == 0)
    return wd_audio_fail(err, err_len, WD_EAUDIO, "the audio file is empty");
  if (len > (size_t)INT64_MAX)
    return wd_audio_fail(err, err_len, WD_ETOOBIG, "the audio file is too large");
  pthread_once(&wd_audio_once, wd_audio_init_once);

  const uint32_t max_seconds =
      opts && opts->max_seconds ? opts->max_seconds : WD_AUDIO_MAX_SECONDS_DEFAULT;
  wd_audio_mem_t mem = { .data = data, .len = (int64_t)len, .pos = 0 };
  wd_audio_sink_t sink = { .max_seconds = max_seconds };
  int declined = 1, r = WD_EAUDIO;
  if (wd_audio_chunk_overrun(data, len))
    wd_log_debug("audio: a chunk runs past the end of the file: not for libsndfile");
  else if (!WD_HAVE_FFMPEG || !wd_audio_prefer_libav(data, len))
    r = wd_audio_decode_sndfile(&mem, &sink, &declined, err, err_len);
  if (r < 0 && declined) {
    wd_audio_sink_free(&sink); /* back to a fresh sink for the second try */
    mem.pos = 0;
    r = wd_audio_decode_libav(&mem, &sink, err, err_len);
  }
  if (r == 0)
    r = wd_audio_sink_finish(&sink, err, err_len);
  if (r == 0) {
    *ret_samples = sink.out;
    *ret_n = sink.n_out;
    sink.out = NULL;
    wd_log_debug("audio: %zu bytes -> %zu samples at 16 kHz (input %d Hz)", len, *ret_n,
                 sink.rate);
  }
  wd_audio_sink_free(&sink);
  return r;
}

int wd_audio_decode_file(const char *path, const wd_audio_opts_t *opts, float **ret_samples,
                         size_t *ret_n, char *err, size_t err_len) {
  if (ret_samples)
    *ret_samples = NULL;
  if (ret_n)
    *ret_n = 0;
  if (!path || !ret_samples || !ret_n)
    return wd_audio_fail(err, err_len, WD_EINVAL, "invalid argument");
  unsigned char *buf = NULL;
  struct stat sb;
  int r;
  char why[128];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (strerror_r(e, why, sizeof why) != 0)
      snprintf(why, sizeof why, "errno %d", e);
    return wd_audio_fail(err, err_len, e == ENOENT ? WD_ENOENT : WD_EIO, "cannot open '%s': %s",
                         path, why);
  }
  if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
    r = wd_audio_fail(err, err_len, WD_EIO, "'%s' is not a readable regular file", path);
    goto fail;
  }
  if ((uint64_t)sb.st_size > ((uint64_t)2 << 30)) {
    r = wd_audio_fail(err, err_len, WD_ETOOBIG, "'%s' is larger than 2 GiB", path);
    goto fail;
  }
  const size_t size = (size_t)sb.st_size;
  buf = malloc(size ? size : 1);
  if (!buf) {
    r = wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
    goto fail;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0 || strerror_r(errno, why, sizeof why) != 0)
        snprintf(why, sizeof why, "%s", n == 0 ? "unexpected end of file" : "read error");
      r = wd_audio_fail(err, err_len, WD_EIO, "cannot read '%s': %s", path, why);
      goto fail;
    }
    got += (size_t)n;
  }
  r = wd_audio_decode(buf, size, opts, ret_samples, ret_n, err, err_len);
fail:
  free(buf);
  close(fd);
  return r;
}
