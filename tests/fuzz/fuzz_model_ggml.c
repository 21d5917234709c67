/*
 * fuzz_model_ggml.c - the ggml model loader (core/model_ggml.c): header and
 * hyper-parameters, mel filterbank, vocabulary, tensor table, from memory
 * (wd__model_parse_ggml, the loader minus the mmap).
 *
 * Input: byte 0 picks the form of the rest. Bit 0 clear: the file as is.
 * Bit 0 set: the compact form of fuzz_common.h, where "ZRUN" + u32 count
 * stands for that many zero bytes, so that a seed of a few hundred bytes is
 * a whole valid model (its 64 KB filterbank and its n_vocab-row token
 * embedding are zeros) and mutations land on the structure. A model that
 * loads is walked: every tensor must lie inside the input, and the
 * tokenizer is built from its vocabulary.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "model.h"
#include "model_internal.h"
#include "model_vocab.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  uint8_t *buf;
  size_t len;
  const int compact = data[0] & 1;
  if (compact) {
    buf = fuzz_expand_zruns(data + 1, size - 1, &len);
  } else {
    /* An exact-size copy: ASan then sees any read past the end. */
    len = size - 1;
    buf = malloc(len ? len : 1);
    if (!buf)
      abort();
    memcpy(buf, data + 1, len);
  }
  wd_model_t *m = NULL;
  char err[512];
  int rc = wd__model_parse_ggml(buf, len, &m, err, sizeof err);
  fuzz_seed_check(rc, err);
  if (rc < 0) {
    FUZZ_CHECK(m == NULL && memchr(err, '\0', sizeof err) != NULL);
  } else {
    FUZZ_CHECK(m != NULL && wd_model_name(m) != NULL);
    const size_t n = wd_model_n_tensors(m);
    for (size_t i = 0; i < n; i++) {
      const wd_tensor_t *t = wd_model_tensor_at(m, i);
      FUZZ_CHECK(t != NULL && t->data != NULL);
      const uint8_t *d = t->data;
      FUZZ_CHECK(d >= buf && t->nbytes <= len && (size_t)(d - buf) <= len - t->nbytes);
      FUZZ_CHECK(wd_model_tensor(m, t->name) == t);
      FUZZ_CHECK(t->nbytes == wd_dtype_row_bytes(t->type, t->ne[0]) *
                                  (size_t)(t->ne[1] * t->ne[2] * t->ne[3]));
    }
    int n_mel = 0, n_fft = 0;
    FUZZ_CHECK(wd_model_mel_filters(m, &n_mel, &n_fft) != NULL && n_fft == 201);
    for (int i = 0; i < wd_model_n_tokens(m); i++) {
      size_t tl = 0;
      FUZZ_CHECK(wd_model_token(m, i, &tl) != NULL || tl == 0);
    }
    const int (*heads)[2] = NULL;
    int n_heads = 0;
    (void)wd_model_alignment_heads(m, &heads, &n_heads);
    wd_tokenizer_t *tok = NULL;
    if (wd_model_tokenizer_new(m, &tok) == 0)
      wd_tokenizer_free(tok);
    wd_model_free(m);
  }
  if (compact)
    fuzz_zruns_release(data + 1, size - 1);
  else
    free(buf);
  return 0;
}
