/*
 * wd_tiktoken.h - reads whisper's .tiktoken vocabularies (tests/data/tokenizer)
 * into the raw-bytes-by-rank arrays wd_tokenizer_new() takes, as a ggml model
 * file hands them over. Shared by the tests that need a real tokenizer.
 *
 * File format: one token a line, base64 of its bytes, a space, its rank.
 */
#ifndef WD_TIKTOKEN_H
#define WD_TIKTOKEN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"

/* A vocabulary read from a .tiktoken file: tokens[rank], lens[rank]. */
typedef struct {
  char **tokens;
  size_t *lens;
  int n;
} wd_tiktoken_t;

static inline void wd_tiktoken_free(wd_tiktoken_t *v) {
  for (int i = 0; v->tokens && i < v->n; i++)
    free(v->tokens[i]);
  free(v->tokens);
  free(v->lens);
  memset(v, 0, sizeof *v);
}

/* Loads the .tiktoken file at path; ranks must be 0..n-1, each once.
 * Returns 0 or -1 (v is then empty). */
static inline int wd_tiktoken_load(const char *path, wd_tiktoken_t *v) {
  FILE *f = fopen(path, "r");
  memset(v, 0, sizeof *v);
  if (!f)
    return -1;
  const int cap = 60000;
  v->tokens = calloc((size_t)cap, sizeof(char *));
  v->lens = calloc((size_t)cap, sizeof(size_t));
  int ok = 0;
  if (!v->tokens || !v->lens)
    goto done;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char *sp = strchr(line, ' ');
    if (!sp)
      goto done;
    const long rank = strtol(sp + 1, NULL, 10);
    if (rank < 0 || rank >= cap || v->tokens[rank])
      goto done;
    unsigned char buf[WD_BASE64_DECODED_MAX(sizeof line)];
    size_t l = 0;
    if (wd_base64_decode(line, (size_t)(sp - line), 0, buf, &l) < 0 ||
        !(v->tokens[rank] = malloc(l + 1)))
      goto done;
    memcpy(v->tokens[rank], buf, l);
    v->lens[rank] = l;
    if (rank + 1 > v->n)
      v->n = (int)rank + 1;
  }
  ok = 1;
  for (int i = 0; i < v->n; i++)
    if (!v->tokens[i])
      ok = 0;
done:
  fclose(f);
  if (!ok) {
    v->n = cap; /* free every slot that was filled */
    wd_tiktoken_free(v);
  }
  return ok ? 0 : -1;
}

#endif
