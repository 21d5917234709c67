/*
 * transcript.c - releasing a transcript (see transcript.h).
 */
#include "transcript.h"

#include <stdlib.h>
#include <string.h>

void wd_words_free(wd_word_t *w, int n) {
  if (!w)
    return;
  for (int i = 0; i < n; i++)
    free(w[i].word);
  free(w);
}

void wd_transcript_free(wd_transcript_t *t) {
  if (!t)
    return;
  for (int i = 0; i < t->n_segments; i++) {
    free(t->segments[i].text);
    free(t->segments[i].tokens);
    free(t->segments[i].logprobs);
    wd_words_free(t->segments[i].words, t->segments[i].n_words);
  }
  free(t->segments);
  free(t->text);
  memset(t, 0, sizeof *t);
}
