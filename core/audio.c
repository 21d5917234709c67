/*
 * audio.c - an uploaded file in memory to 16 kHz mono 16-bit samples.
 *
 * Pipeline: a decoder back-end produces frames of any channel count and
 * sample format; the "sink" below hands them, unconverted, to one
 * libswresample context set up as the `ffmpeg -ac 1 -ar 16000` command in
 * openai/whisper's load_audio sets up its own (mono, 16 kHz, s16), and
 * returns those samples: divided by 32768 they are the same input to the
 * model, bit for bit. Kept as 16 bits they take half the memory of floats
 * (a queued job holds them until its last window: core/mel.h wd_mel_pcm).
 * Both back-ends share the sink.
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
#include <time.h>
#include <unistd.h>

#if WD_HAVE_FFMPEG
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#endif
#include <libavutil/avutil.h>
#include <libavutil/channel_layout.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
#include <sndfile.h>

#include "clock.h"
#include "error.h"
#include "fault.h"
#include "log.h"

/* Plausible input ranges; anything outside is a damaged or hostile header. */
#define WD_AUDIO_RATE_MIN 1000
#define WD_AUDIO_RATE_MAX 768000
#define WD_AUDIO_CHANNELS_MAX 64
/* Largest |sample| a float file may hold (2^16 x full scale, 96 dB over). */
#define WD_AUDIO_FLOAT_MAX 65536.0
/* Frames per sf_readf_* call. */
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
/* The sink: frames in the decoder's own format in, 16 kHz samples out      */

/*
 * ref: openai/whisper audio.py load_audio runs
 *   ffmpeg -nostdin -threads 0 -i FILE -f s16le -ac 1 -acodec pcm_s16le -ar 16000 -
 * and divides the samples by 32768. In that command one libswresample
 * context (the filter graph's automatic aresample, default options) takes
 * the decoder's frames as they come (sample format, channel layout, rate)
 * to 16 kHz mono s16: its internal format follows from those (16-bit input
 * is resampled and downmixed in fixed point, anything wider in float), so
 * the same samples come out only from the same context fed the same
 * frames. The sink builds exactly that context and feeds it the decoder's
 * frames unconverted; the samples are then s16 / 32768, bit for bit what
 * openai/whisper hands its model (tests/core/test_audio_ffmpeg.c checks it
 * against the ffmpeg command). A change of sample format or layout mid-stream
 * flushes the context and starts a new one, as ffmpeg reconfigures its
 * filter graph.
 */
typedef struct {
  uint32_t max_seconds;
  int (*on_length)(void *ud, double seconds); /* wd_audio_opts_t's */
  void *ud;
  int rate;                 /* input sample rate, Hz; 0 until started */
  SwrContext *swr;          /* (rate, layout, fmt) -> 16 kHz mono s16 */
  AVChannelLayout layout;   /* the input's, as the context was built */
  enum AVSampleFormat fmt;  /* the input's */
  uint64_t n_in;            /* input frames pushed */
  uint64_t n_in_max;        /* max_seconds * rate */
  int16_t *pcm;             /* (pcm_cap) one conversion's output */
  size_t pcm_cap;
  int16_t *out; /* (n_out) the 16 kHz result so far, capacity out_cap */
  size_t n_out, out_cap;
} wd_audio_sink_t;

static void wd_audio_sink_free(wd_audio_sink_t *s) {
  if (!s)
    return;
  swr_free(&s->swr);
  av_channel_layout_uninit(&s->layout);
  free(s->pcm);
  free(s->out);
  *s = (wd_audio_sink_t){ .max_seconds = s->max_seconds, .on_length = s->on_length, .ud = s->ud };
}

/* Fixes the input rate; the resampler comes with the first frame's format. */
static int wd_audio_sink_start(wd_audio_sink_t *s, int rate, char *err, size_t err_len) {
  if (rate < WD_AUDIO_RATE_MIN || rate > WD_AUDIO_RATE_MAX)
    return wd_audio_fail(err, err_len, WD_EAUDIO,
                         "unsupported sample rate %d Hz (expected %d to %d)", rate,
                         WD_AUDIO_RATE_MIN, WD_AUDIO_RATE_MAX);
  s->rate = rate;
  s->n_in_max = (uint64_t)s->max_seconds * (uint64_t)rate;
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
  int16_t *p = realloc(s->out, cap * sizeof *p);
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
 * <= 0 (unknown) passes. A known length then goes to the caller's on_length,
 * which may end the decode too (no room for that much audio). */
static int wd_audio_sink_check_declared(const wd_audio_sink_t *s, double declared_s, char *err,
                                        size_t err_len) {
  if (declared_s > (double)s->max_seconds + 1.0)
    return wd_audio_fail(err, err_len, WD_ETOOBIG,
                         "audio is longer than the limit of %u s (the header declares %.0f s)",
                         s->max_seconds, declared_s);
  if (declared_s > 0 && s->on_length) {
    const int r = s->on_length(s->ud, declared_s);
    if (r < 0)
      return wd_audio_fail(err, err_len, r, "no room for %.0f s of audio", declared_s);
  }
  return 0;
}

/* Runs n input frames (NULL, 0: the flush) through the context and appends
 * what comes out. */
static int wd_audio_sink_convert(wd_audio_sink_t *s, const uint8_t **in, int n, char *err,
                                 size_t err_len) {
  for (;;) {
    const int want = swr_get_out_samples(s->swr, n);
    if (want < 0)
      return wd_audio_fail(err, err_len, WD_EINTERNAL, "resampler failed");
    if ((size_t)want + 1 > s->pcm_cap) {
      int16_t *p = realloc(s->pcm, ((size_t)want + 1) * sizeof *p);
      if (!p)
        return wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
      s->pcm = p;
      s->pcm_cap = (size_t)want + 1;
    }
    uint8_t *o = (uint8_t *)s->pcm;
    const int got = swr_convert(s->swr, &o, (int)s->pcm_cap, in, n);
    if (got < 0)
      return wd_audio_fail(err, err_len, WD_EINTERNAL, "resampler failed");
    int r = wd_audio_sink_out_reserve(s, (size_t)got, err, err_len);
    if (r < 0)
      return r;
    if (got > 0)
      memcpy(s->out + s->n_out, s->pcm, (size_t)got * sizeof *s->out);
    s->n_out += (size_t)got;
    /* Input is taken whole; a flush repeats until the filter is empty. */
    if (in || got == 0)
      return 0;
  }
}

/* Drains and frees the current context (a format change or the end). */
static int wd_audio_sink_flush(wd_audio_sink_t *s, char *err, size_t err_len) {
  if (!s->swr)
    return 0;
  int r = wd_audio_sink_convert(s, NULL, 0, err, err_len);
  swr_free(&s->swr);
  av_channel_layout_uninit(&s->layout);
  return r;
}

/* Makes the context fit frames of this layout and sample format. A layout
 * of unknown order gets the default one for its channel count, as the
 * ffmpeg tool guesses it. */
static int wd_audio_sink_format(wd_audio_sink_t *s, const AVChannelLayout *layout,
                                enum AVSampleFormat fmt, char *err, size_t err_len) {
  AVChannelLayout in = { 0 };
  if (layout->order == AV_CHANNEL_ORDER_UNSPEC)
    av_channel_layout_default(&in, layout->nb_channels);
  else if (av_channel_layout_copy(&in, layout) < 0)
    return wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
  if (s->swr && s->fmt == fmt && av_channel_layout_compare(&s->layout, &in) == 0) {
    av_channel_layout_uninit(&in);
    return 0;
  }
  int r = wd_audio_sink_flush(s, err, err_len);
  if (r < 0) {
    av_channel_layout_uninit(&in);
    return r;
  }
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO; /* not const: FFmpeg 5.1's prototype */
  int e = swr_alloc_set_opts2(&s->swr, &mono, AV_SAMPLE_FMT_S16, WD_AUDIO_SAMPLE_RATE, &in, fmt,
                              s->rate, 0, NULL);
  if (e >= 0)
    e = swr_init(s->swr);
  if (e < 0) {
    av_channel_layout_uninit(&in);
    swr_free(&s->swr);
    return wd_audio_fail(err, err_len, WD_EAUDIO,
                         "cannot convert %d channel(s) of %s samples at %d Hz", layout->nb_channels,
                         av_get_sample_fmt_name(fmt) ? av_get_sample_fmt_name(fmt) : "unknown",
                         s->rate);
  }
  s->layout = in;
  s->fmt = fmt;
  return 0;
}

/* Is every sample of a float frame real audio? NaN and infinities have no
 * meaning as sound, and samples past WD_AUDIO_FLOAT_MAX (96 dB over full
 * scale) are no recording: both make a file-format error, not clipped
 * noise. n values of planes planes (one for packed data). */
static int wd_audio_floats_ok(const uint8_t *const *data, int planes, size_t n,
                              enum AVSampleFormat fmt) {
  const int dbl = av_get_packed_sample_fmt(fmt) == AV_SAMPLE_FMT_DBL;
  for (int p = 0; p < planes; p++)
    for (size_t i = 0; i < n; i++) {
      const double v = dbl ? ((const double *)data[p])[i] : ((const float *)data[p])[i];
      if (!(fabs(v) <= WD_AUDIO_FLOAT_MAX))
        return 0;
    }
  return 1;
}

/* Pushes n frames of the current format (planes as FFmpeg lays them out). */
static int wd_audio_sink_push(wd_audio_sink_t *s, const uint8_t *const *data, int n, char *err,
                              size_t err_len) {
  s->n_in += (uint64_t)n;
  if (s->n_in > s->n_in_max)
    return wd_audio_fail(err, err_len, WD_ETOOBIG,
                         "audio is longer than the limit of %u s", s->max_seconds);
  const enum AVSampleFormat packed = av_get_packed_sample_fmt(s->fmt);
  if (packed == AV_SAMPLE_FMT_FLT || packed == AV_SAMPLE_FMT_DBL) {
    const int planar = av_sample_fmt_is_planar(s->fmt);
    const int nch = s->layout.nb_channels;
    const size_t per = planar ? (size_t)n : (size_t)n * (size_t)nch;
    if (!wd_audio_floats_ok(data, planar ? nch : 1, per, s->fmt))
      return wd_audio_fail(err, err_len, WD_EAUDIO,
                           "invalid audio: the file holds NaN, infinite or out-of-range "
                           "(beyond %g) float samples",
                           WD_AUDIO_FLOAT_MAX);
  }
  /* swr_convert wants a mutable array of plane pointers. */
  const uint8_t *planes[WD_AUDIO_CHANNELS_MAX];
  const int n_planes = av_sample_fmt_is_planar(s->fmt) ? s->layout.nb_channels : 1;
  for (int p = 0; p < n_planes && p < WD_AUDIO_CHANNELS_MAX; p++)
    planes[p] = data[p];
  return wd_audio_sink_convert(s, planes, n, err, err_len);
}

/* Drains the resampler and checks that there is audio. */
static int wd_audio_sink_finish(wd_audio_sink_t *s, char *err, size_t err_len) {
  if (s->n_in == 0)
    return wd_audio_fail(err, err_len, WD_EAUDIO, "the file contains no audio samples");
  int r = wd_audio_sink_flush(s, err, err_len);
  if (r < 0)
    return r;
  if (s->n_out == 0)
    return wd_audio_fail(err, err_len, WD_EAUDIO, "the file contains no audio samples");
  /* The samples outlive the decode (a job holds them to its end): give back
   * what geometric growth reserved past them. */
  int16_t *p = realloc(s->out, s->n_out * sizeof *p);
  if (p) {
    s->out = p;
    s->out_cap = s->n_out;
  }
  return 0;
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
  double deadline;  /* CLOCK_MONOTONIC s (wd_audio_opts_t.timeout_s); 0: none */
  int expired;      /* the deadline passed: reads give nothing from then on */
} wd_audio_mem_t;

/* Whether the decode has run past its deadline (sticky once it has). */
static int wd_audio_mem_expired(wd_audio_mem_t *m) {
  if (!m->expired && m->deadline > 0 && wd_now_s() > m->deadline)
    m->expired = 1;
  return m->expired;
}

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
  if (wd_audio_mem_expired(m))
    return 0; /* the end, for the library; the caller answers WD_ETIMEDOUT */
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
  return n > 0 ? (int)n : ((wd_audio_mem_t *)opaque)->expired ? AVERROR_EXIT : AVERROR_EOF;
}
/* FFmpeg asks this in its blocking loops (probing, stream info, reads). */
static int wd_av_interrupt(void *opaque) { return wd_audio_mem_expired(opaque); }
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
 *     not leak. Ogg FLAC stays with libsndfile.
 *   - Ogg Opus (an Ogg file holding "OpusHead"). libsndfile decodes it with
 *     libopus, the ffmpeg tool with FFmpeg's own Opus decoder, and the two
 *     differ in the last bits: openai/whisper hears the latter.
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
    if (len >= 36 && memcmp(d + 28, "OpusHead", 8) == 0)
      return 1;
  }
  return 0;
}

/* Is c a four-character code of printable ASCII, as RIFF's ids are? */
static int wd_audio_fourcc_ok(const unsigned char *c) {
  for (int i = 0; i < 4; i++)
    if (c[i] < 0x20 || c[i] > 0x7e)
      return 0;
  return 1;
}

/* Chunks: id (4), size (4, the file's byte order), body, a pad byte after
 * an odd-sized body. Does a chunk in d[off, end) declare a body longer than
 * the bytes left before end, or (inside a list) carry an id that is not
 * printable ASCII? samples (NULL inside a list) names the sample-data
 * chunk, which may run on; a RIFF "LIST" chunk is walked too (its 4-byte
 * type, then subchunks), one level deep. */
static int wd_audio_chunks_overrun(const unsigned char *d, size_t off, size_t end, int be,
                                   const char *samples, int depth) {
  while (off <= end && end - off >= 8) {
    const unsigned char *c = d + off;
    const uint32_t n = be ? (uint32_t)c[4] << 24 | (uint32_t)c[5] << 16 | (uint32_t)c[6] << 8 | c[7]
                          : (uint32_t)c[7] << 24 | (uint32_t)c[6] << 16 | (uint32_t)c[5] << 8 | c[4];
    if (n > end - off - 8)
      return !samples || memcmp(c, samples, 4) != 0;
    if (depth == 1 && !wd_audio_fourcc_ok(c))
      return 1;
    if (depth == 0 && !be && n >= 4 && memcmp(c, "LIST", 4) == 0 &&
        wd_audio_chunks_overrun(d, off + 12, off + 8 + n, be, NULL, 1))
      return 1;
    /* a bare INFO chunk: libsndfile reads its body as a LIST's subchunks */
    if (depth == 0 && !be && memcmp(c, "INFO", 4) == 0 &&
        wd_audio_chunks_overrun(d, off + 8, off + 8 + n, be, NULL, 1))
      return 1;
    off += 8 + (size_t)n + (n & 1u);
  }
  return 0;
}

/*
 * Does a RIFF/RIFX/RF64 WAVE or an AIFF/AIFC file declare a chunk longer
 * than the bytes left after it, or a LIST subchunk longer than its list or
 * with an id that is not printable ASCII?
 * libsndfile 1.2.0 then spins inside sf_open for minutes, CPU-bound:
 * fuzz_audio found a 90-byte WAV with an INFO chunk of size 0xffffffff, a
 * 42-byte one whose LIST holds a subchunk of 16,000 bytes, and a 41-byte one
 * whose LIST (of a type other than INFO) holds a subchunk with the id
 * f7 ff ff ff, and a 40-byte one with a bare top-level INFO chunk holding
 * a subchunk of id 03 00 00 00 (tests/fuzz/regress/audio/). Such files go to FFmpeg, which stops at the
 * end of the buffer, or are refused without it. The sample-data chunk
 * ("data", "SSND") is exempt: streaming writers leave its size 0 or
 * 0xffffffff, and a cut file ends inside it.
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
  return wd_audio_chunks_overrun(d, 12, len, be, samples, 0);
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
  void *buf = NULL;
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
  /* Frames as FFmpeg's decoder for the same data gives them, so that the
   * resampler sees what it sees in the ffmpeg tool: 8- to 16-bit PCM (and
   * the codecs that expand to 16 bits) as s16, wider integers as s32
   * (left-aligned, libsndfile's int and FFmpeg's s32 alike), floats as
   * themselves. (WD_AUDIO_SF_CHUNK, channels) interleaved. */
  enum AVSampleFormat fmt;
  switch (info.format & SF_FORMAT_SUBMASK) {
  case SF_FORMAT_FLOAT: case SF_FORMAT_VORBIS: case SF_FORMAT_OPUS: fmt = AV_SAMPLE_FMT_FLT; break;
  case SF_FORMAT_DOUBLE: fmt = AV_SAMPLE_FMT_DBL; break;
  case SF_FORMAT_PCM_24: case SF_FORMAT_PCM_32: fmt = AV_SAMPLE_FMT_S32; break;
  default: fmt = AV_SAMPLE_FMT_S16; break;
  }
  AVChannelLayout layout = { 0 };
  av_channel_layout_default(&layout, info.channels);
  r = wd_audio_sink_format(s, &layout, fmt, err, err_len);
  av_channel_layout_uninit(&layout);
  if (r < 0)
    goto fail;
  buf = malloc((size_t)WD_AUDIO_SF_CHUNK * (size_t)info.channels *
               (size_t)av_get_bytes_per_sample(fmt));
  if (!buf) {
    r = wd_audio_fail(err, err_len, WD_ENOMEM, "out of memory");
    goto fail;
  }
  for (;;) {
    sf_count_t got;
    switch (fmt) {
    case AV_SAMPLE_FMT_FLT: got = sf_readf_float(sf, buf, WD_AUDIO_SF_CHUNK); break;
    case AV_SAMPLE_FMT_DBL: got = sf_readf_double(sf, buf, WD_AUDIO_SF_CHUNK); break;
    case AV_SAMPLE_FMT_S32: got = sf_readf_int(sf, buf, WD_AUDIO_SF_CHUNK); break;
    default: got = sf_readf_short(sf, buf, WD_AUDIO_SF_CHUNK); break;
    }
    if (got <= 0 || wd_audio_mem_expired(mem)) /* between blocks */
      break;
    const uint8_t *planes[1] = { (const uint8_t *)buf };
    r = wd_audio_sink_push(s, planes, (int)got, err, err_len);
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
  if ((r = wd_audio_sink_format(s, &f->ch_layout, (enum AVSampleFormat)f->format, err,
                                err_len)) < 0)
    return r;
  return wd_audio_sink_push(s, (const uint8_t *const *)f->extended_data, f->nb_samples, err,
                            err_len);
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
  fmt->interrupt_callback = (AVIOInterruptCB){ .callback = wd_av_interrupt, .opaque = mem };
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
    if (wd_audio_mem_expired(mem)) { /* between packets */
      av_packet_unref(pkt);
      r = WD_ETIMEDOUT;
      goto fail;
    }
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

/* Tests only (fault.h decode_delay): the decode is slow before its first
 * read, in slices of at most 50 ms with the deadline checked after each,
 * as a decode that is slow between its reads would be cut at the next
 * one. */
static void wd_audio_fault_delay(wd_audio_mem_t *m) {
  const double delay_s = (double)wd__fault_decode_delay_ms() * 1e-3;
  if (delay_s <= 0)
    return;
  const double end = wd_now_s() + delay_s;
  for (double left = delay_s; left > 0 && !wd_audio_mem_expired(m); left = end - wd_now_s()) {
    const double step = left < 0.05 ? left : 0.05;
    const struct timespec ts = { 0, (long)(step * 1e9) };
    nanosleep(&ts, NULL);
  }
}

static pthread_once_t wd_audio_once = PTHREAD_ONCE_INIT;

static void wd_audio_init_once(void) {
#if WD_HAVE_FFMPEG
  /* FFmpeg logs to stderr by default; core/ code never prints. */
  av_log_set_level(AV_LOG_QUIET);
#endif
}

int wd_audio_decode(const void *data, size_t len, const wd_audio_opts_t *opts,
                    int16_t **ret_samples, size_t *ret_n, char *err, size_t err_len) {
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
  const double timeout_s = opts && opts->timeout_s > 0 ? opts->timeout_s : 0.0;
  wd_audio_mem_t mem = { .data = data, .len = (int64_t)len, .pos = 0,
                         .deadline = timeout_s > 0 ? wd_now_s() + timeout_s : 0.0 };
  wd_audio_fault_delay(&mem);

  const uint32_t max_seconds =
      opts && opts->max_seconds ? opts->max_seconds : WD_AUDIO_MAX_SECONDS_DEFAULT;
  wd_audio_sink_t sink = { .max_seconds = max_seconds,
                           .on_length = opts ? opts->on_length : NULL,
                           .ud = opts ? opts->ud : NULL };
  int declined = 1, r = WD_EAUDIO;
  if (wd_audio_chunk_overrun(data, len))
    wd_log_debug("audio: a chunk runs past the end of the file: not for libsndfile");
  else if (!WD_HAVE_FFMPEG || !wd_audio_prefer_libav(data, len))
    r = wd_audio_decode_sndfile(&mem, &sink, &declined, err, err_len);
  if (r < 0 && declined && !wd_audio_mem_expired(&mem)) {
    wd_audio_sink_free(&sink); /* back to a fresh sink for the second try */
    mem.pos = 0;
    r = wd_audio_decode_libav(&mem, &sink, err, err_len);
  }
  /* Past the deadline the libraries saw an early end of file, and said
   * whatever that means to them: the answer is the deadline's. */
  if (wd_audio_mem_expired(&mem))
    r = wd_audio_fail(err, err_len, WD_ETIMEDOUT,
                      "stopped at the %g s limit, %.2f s of audio decoded",
                      timeout_s, sink.rate > 0 ? (double)sink.n_in / sink.rate : 0.0);
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

int wd_audio_decode_file(const char *path, const wd_audio_opts_t *opts, int16_t **ret_samples,
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
