/*
 * model_vocab.h - the tokenizer of a loaded model, from the vocabulary the
 * model file carries (token id = BPE rank, raw bytes).
 */
#ifndef WD_MODEL_VOCAB_H
#define WD_MODEL_VOCAB_H

#include "model.h"
#include "tokenizer.h"

/* Builds a tokenizer over m's vocabulary and n_vocab layout. */
int wd_model_tokenizer_new(const wd_model_t *m, wd_tokenizer_t **ret_tok);

#endif
