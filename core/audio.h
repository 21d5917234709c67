/*
 * audio.h - decoding an uploaded audio file to Whisper's input signal.
 *
 * The input is a whole file held in memory (an HTTP upload); its format is
 * found from the content, never from a name. libsndfile is tried first (WAV
 * in all its encodings, FLAC, Ogg Opus, AIFF, CAF, W64), then
 * libavformat/libavcodec (MP4/M4A AAC and ALAC, WebM, Matroska, MPEG program
 * streams, ADTS AAC, and anything libsndfile refused). MP3/MP2 and Ogg
 * Vorbis, which libsndfile also reads, go straight to FFmpeg (see audio.c
 * wd_audio_prefer_libav for why), and so does Ogg Opus. The decoded audio
 * goes to mono 16 kHz 16-bit through libswresample exactly as openai/whisper's
 * `ffmpeg -ac 1 -ar 16000 -acodec pcm_s16le` does, and the samples come back
 * as those 16-bit values: divided by 32768 (core/mel.h does) they are the
 * numbers openai/whisper feeds its model.
 *
 * Errors: WD_EINVAL (bad arguments), WD_ENOMEM, WD_EAUDIO (empty, garbage,
 * truncated, no audio stream, no samples, absurd rate or channel count,
 * NaN, infinite or absurd float samples),
 * WD_ETOOBIG (longer than max_seconds), WD_ETIMEDOUT (past timeout_s),
 * or what on_length returned;
 * wd_audio_decode_file adds WD_ENOENT
 * and WD_EIO. Each comes with a one-line message for the user in err.
 *
 * Thread-safe: any number of threads may decode at once. The only shared
 * state is FFmpeg's log level, silenced once on first use.
 */
#ifndef WD_AUDIO_H
#define WD_AUDIO_H

#include <stddef.h>
#include <stdint.h>

/* Whisper's input sample rate. */
#define WD_AUDIO_SAMPLE_RATE 16000
/* The default for wd_audio_opts_t.max_seconds: three hours. */
#define WD_AUDIO_MAX_SECONDS_DEFAULT (3u * 3600u)

typedef struct {
  uint32_t max_seconds; /* refuse longer audio with WD_ETOOBIG; 0 = default 3 h */
  /* Optional: called once, before anything is decoded, with the length in
   * seconds that the file's header declares where its format states one
   * exactly (WAV, FLAC, AIFF; not MP3 or Opus). A negative return ends the
   * decode with that code: the server refuses audio it has no room for
   * without decoding it. Runs on the decoding thread. */
  int (*on_length)(void *ud, double seconds);
  void *ud;
  /* Wall-clock seconds the whole decode may take, from the call; 0 = no
   * bound. Checked in every read of the file's bytes (both libraries'
   * I/O callbacks, FFmpeg's interrupt callback) and between decoded
   * blocks and packets: a decode past it ends there with WD_ETIMEDOUT and
   * frees its thread. A library that spins without reading or returning
   * is not reached (that would take a child process). */
  double timeout_s;
} wd_audio_opts_t;

/*
 * Decodes the file in data[0..len) to 16 kHz mono 16-bit samples.
 * opts may be NULL (defaults). On success *ret_samples is a malloc'd array of
 * *ret_n > 0 samples that the caller frees with free(). On failure
 * *ret_samples is NULL, *ret_n is 0, a negative WD_E* code is returned and err
 * (if not NULL) holds a message such as "audio is truncated: ...".
 */
int wd_audio_decode(const void *data, size_t len, const wd_audio_opts_t *opts,
                    int16_t **ret_samples, size_t *ret_n, char *err, size_t err_len);

/*
 * Reads the file at path into memory and decodes it with wd_audio_decode.
 * Files larger than 2 GiB are refused with WD_ETOOBIG.
 */
int wd_audio_decode_file(const char *path, const wd_audio_opts_t *opts, int16_t **ret_samples,
                         size_t *ret_n, char *err, size_t err_len);

#endif
