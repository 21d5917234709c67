/*
 * live_audio.h - a live stream's audio (the realtime sessions' appends) to
 * Whisper's input, 16 kHz mono 16-bit, piece by piece: G.711 μ-law and
 * A-law decoded as ITU-T G.711 defines them, and any rate resampled by
 * libswresample with the options an upload's resampling uses (audio.c:
 * ffmpeg -ar 16000's defaults), its filter state carried from piece to
 * piece, so a stream gives the samples its whole recording would (up to
 * the filter's few samples of delay at the end).
 */
#ifndef WD_LIVE_AUDIO_H
#define WD_LIVE_AUDIO_H

#include <stddef.h>
#include <stdint.h>

/* G.711: one code to its 16-bit linear sample. */
int16_t wd_g711_ulaw(uint8_t code);
int16_t wd_g711_alaw(uint8_t code);

typedef struct wd_live_audio wd_live_audio_t;

/* A resampler from rate (8000 .. 192000 Hz, mono 16-bit) to 16 kHz.
 * Returns 0, WD_EINVAL or WD_ENOMEM. */
int wd_live_audio_new(int rate, wd_live_audio_t **ret);
void wd_live_audio_free(wd_live_audio_t *a); /* accepts NULL */

/* Room *out needs for n more input samples. */
size_t wd_live_audio_room(const wd_live_audio_t *a, size_t n);

/* n input samples in; the 16 kHz samples that come out into out (room from
 * wd_live_audio_room). Returns their count, or WD_EINTERNAL. */
int wd_live_audio_push(wd_live_audio_t *a, const int16_t *in, size_t n, int16_t *out);

#endif
