/*
 * vad.h - voice activity detection: the Silero VAD v6 network (16 kHz) in C.
 *
 * The model file is ours (scripts/fetch-vad.sh makes it from the silero-vad
 * PyPI package's silero_vad.onnx with scripts/vad_convert.py): the 15 f32
 * tensors of the 16 kHz network in the safetensors layout, with
 * __metadata__ {"format": "whisperd-silero-vad", "version": "1"}.
 *
 * The network, per 512-sample chunk (32 ms at 16 kHz): the chunk with the
 * 64 samples before it (zeros before the first), reflect-padded by 64 on
 * the right; an STFT as a convolution (258 filters of 256 taps, stride 128:
 * 4 frames) and its magnitude (129 bins); four convolutions of 3 taps
 * (129 -> 128, 128 -> 64 stride 2, 64 -> 64 stride 2, 64 -> 128), each with
 * ReLU, down to one 128-vector; an LSTM cell (128) whose state runs from
 * chunk to chunk; ReLU, a 128 -> 1 projection and a sigmoid: the chunk's
 * speech probability. The last chunk of a file is zero-padded, as
 * silero_vad's audio_forward does. Everything but the LSTM recurrence is
 * computed for many chunks at once, as matrix products (vad_gemm.h).
 */
#ifndef WD_VAD_H
#define WD_VAD_H

#include <stddef.h>
#include <stdint.h>

#define WD_VAD_SAMPLE_RATE 16000
#define WD_VAD_CHUNK 512  /* samples per probability */
#define WD_VAD_CONTEXT 64 /* samples of the previous chunk each chunk sees */

typedef struct wd_vad_model wd_vad_model_t;

/* Loads the model file at path. WD_EMODEL (with err) for a file that is not
 * ours or whose tensors have other names, types or shapes. */
int wd_vad_model_load(const char *path, wd_vad_model_t **ret_model, char *err, size_t err_len);
void wd_vad_model_free(wd_vad_model_t *m); /* accepts NULL */

/* Number of probabilities for n samples: ceil(n / WD_VAD_CHUNK). */
size_t wd_vad_n_chunks(size_t n_samples);

/* probs[i] = the speech probability of chunk i of a 16 kHz mono signal of
 * n samples, float in [-1, 1] or 16-bit (value / 32768); probs holds
 * wd_vad_n_chunks(n). Returns 0 or WD_ENOMEM. */
int wd_vad_probs(const wd_vad_model_t *m, const float *pcm, size_t n, float *probs);
int wd_vad_probs_s16(const wd_vad_model_t *m, const int16_t *pcm, size_t n, float *probs);

/* A signal that arrives in pieces (a live stream): the LSTM state and the
 * next chunk to compute. */
#define WD_VAD_STATE 128
typedef struct {
  float h[WD_VAD_STATE], c[WD_VAD_STATE];
  size_t next;                /* chunks computed so far */
} wd_vad_stream_t;

void wd_vad_stream_init(wd_vad_stream_t *st);

/* The probabilities of the chunks complete in the signal so far and not yet
 * computed, into probs (room for (base + n) / WD_VAD_CHUNK - st->next);
 * pcm holds the signal's samples [base, base + n), which must include the
 * WD_VAD_CONTEXT samples before the next chunk (a stream may drop what is
 * older). Returns how many, or WD_EINVAL (context dropped), WD_ENOMEM.
 * Bit for bit what wd_vad_probs_s16 gives those chunks of the whole signal. */
int wd_vad_stream_probs(const wd_vad_model_t *m, wd_vad_stream_t *st, const int16_t *pcm,
                        size_t n, size_t base, float *probs);

/* ------------------------------------------------------------------------ */
/* Speech spans from the probabilities (core/vad_speech.c)                   */

/* The parameters silero-vad's get_speech_timestamps takes (faster-whisper's
 * VadOptions, whisper.cpp's vad params), its defaults in brackets. */
typedef struct {
  float threshold;            /* [0.5] a chunk at or above it is speech */
  float neg_threshold;        /* [< 0: max(threshold - 0.15, 0.01)] below it, silence */
  int min_speech_ms;          /* [250] shorter speech is dropped */
  float max_speech_s;         /* [0: unlimited] longer speech is cut, at its longest
                               * silence (or as use_max_silence says) */
  int min_silence_ms;         /* [100] silence that ends a span */
  int speech_pad_ms;          /* [30] added at both ends (halving shorter gaps) */
  int min_silence_at_max_ms;  /* [98] silences shorter than this are no cut points */
  int use_max_silence;        /* [1] cut a too-long span at its longest silence;
                               * 0: at the last one long enough */
} wd_vad_params_t;

void wd_vad_params_default(wd_vad_params_t *p);

typedef struct {
  size_t start, end; /* samples, end exclusive */
} wd_vad_span_t;

/* The speech spans of a signal of n_samples samples whose chunk
 * probabilities are probs (n_probs of them), exactly as silero-vad 6.2's
 * get_speech_timestamps_from_probs computes them at 16 kHz. *ret is
 * malloc'd (NULL when none), *ret_n the count. WD_ENOMEM or 0. */
int wd_vad_speech(const float *probs, size_t n_probs, size_t n_samples,
                  const wd_vad_params_t *p, wd_vad_span_t **ret, size_t *ret_n);

/* Both steps over a 16-bit signal: its probabilities, then its spans. */
int wd_vad_spans_s16(const wd_vad_model_t *m, const wd_vad_params_t *p, const int16_t *pcm,
                     size_t n, wd_vad_span_t **ret, size_t *ret_n);

#endif
