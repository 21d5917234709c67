/*
 * model_vocab.c - a model's vocabulary handed to the tokenizer (see model_vocab.h).
 */
#include "model_vocab.h"

#include <stdlib.h>

#include "error.h"

int wd_model_tokenizer_new(const wd_model_t *m, wd_tokenizer_t **ret_tok) {
  const int n = wd_model_n_tokens(m);
  if (n <= 0)
    return WD_EMODEL;
  const char **toks = calloc((size_t)n, sizeof *toks);
  size_t *lens = calloc((size_t)n, sizeof *lens);
  int rc = (toks && lens) ? 0 : WD_ENOMEM;
  for (int i = 0; i < n && rc == 0; i++)
    toks[i] = wd_model_token(m, i, &lens[i]);
  if (rc == 0)
    rc = wd_tokenizer_new(toks, lens, n, wd_model_hparams(m)->n_vocab, ret_tok);
  free(toks);
  free(lens);
  return rc;
}
