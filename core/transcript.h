/*
 * transcript.h - what transcribing a file gives: the transcript, its
 * segments and their words, as openai/whisper's transcribe() returns them
 * (result["text"], result["segments"], segment["words"]).
 *
 * The decoder (core/decoder.c) builds them, word timing (core/timing.c) adds
 * the words, the renderer (core/render.c) and the API read them.
 *
 * Ownership: a transcript owns its segments, each segment its text, tokens
 * and words, each word its string; wd_transcript_free releases all of it.
 */
#ifndef WD_TRANSCRIPT_H
#define WD_TRANSCRIPT_H

#include <stdint.h>

/* One word of a segment, as openai's segment["words"] entries. */
typedef struct {
  char *word;        /* UTF-8, leading space kept ("' Hello,'"); owned */
  double start, end; /* seconds from the start of the file, rounded to 0.01 */
  float probability; /* mean of the word's token probabilities */
} wd_word_t;

typedef struct wd_segment {
  int id;
  int seek;                    /* window start, in mel frames */
  double start, end;           /* seconds */
  char *text;                  /* decoded text tokens, leading space kept */
  int32_t *tokens;             /* the segment's tokens, timestamps included */
  float *logprobs;             /* each token's log-probability (n_tokens), owned; NULL
                                * when not kept */
  int n_tokens;
  float temperature;
  float avg_logprob;           /* per window, as openai */
  float compression_ratio;     /* per window */
  float no_speech_prob;        /* per window */
  wd_word_t *words;            /* word timestamps (core/timing.c), owned; NULL when off */
  int n_words;
} wd_segment_t;

typedef struct {
  wd_segment_t *segments;
  int n_segments;
  char *text;                  /* all segments' text, concatenated */
  char language[8];            /* ISO code used or detected */
  float language_prob;         /* detection probability, 1 if given */
  /* Detection only: the likeliest languages, most probable first. */
  struct {
    char code[8];
    float prob;
  } language_probs[5];
  int n_language_probs;
  double duration;             /* seconds of audio */
} wd_transcript_t;

void wd_transcript_free(wd_transcript_t *t); /* accepts NULL and zeroed */

/* Frees n segment words and the array; accepts NULL. */
void wd_words_free(wd_word_t *w, int n);

#endif
