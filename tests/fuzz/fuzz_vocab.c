/*
 * fuzz_vocab.c - a tokenizer built from a hostile vocabulary
 * (wd_tokenizer_new: duplicates, empty and long tokens, odd ranks), then
 * encoding with it, which must still round-trip (fuzz_round_trip.h).
 *
 * Input: byte 0 picks the layout (n_vocab 51864 + byte % 3); then the
 * vocabulary's extra tokens as '\n'-separated lines, a '\0', and the text.
 * Separate from fuzz_tokenizer because each build costs ~15 ms.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_round_trip.h"
#include "tokenizer.h"

/* A vocabulary is at least n_text = 50256 tokens (wd_tokenizer_new): the
 * 256 single bytes, the input's lines, then fillers "\xff\xfe" + 3 bytes
 * of the rank (distinct from each other, rarely from the lines). */
#define N_VOCAB_TEXT 50257

static void custom_vocab(const uint8_t *p, size_t len, int layout) {
  static char filler[N_VOCAB_TEXT][5];
  static const char *tokens[N_VOCAB_TEXT];
  static size_t lens[N_VOCAB_TEXT];
  for (int i = 0; i < N_VOCAB_TEXT; i++) {
    if (i < 256) {
      filler[i][0] = (char)i;
      lens[i] = 1;
    } else {
      filler[i][0] = (char)0xff;
      filler[i][1] = (char)0xfe;
      filler[i][2] = (char)(i >> 16);
      filler[i][3] = (char)(i >> 8);
      filler[i][4] = (char)i;
      lens[i] = 5;
    }
    tokens[i] = filler[i];
  }
  const uint8_t *nul = memchr(p, '\0', len);
  const size_t vlen = nul ? (size_t)(nul - p) : len;
  size_t k = 256, start = 0;
  for (size_t i = 0; i <= vlen && vlen > 0 && k < N_VOCAB_TEXT; i++) {
    if (i == vlen || p[i] == '\n') {
      tokens[k] = (const char *)p + start;
      lens[k++] = i - start;
      start = i + 1;
    }
  }
  wd_tokenizer_t *t = NULL;
  if (wd_tokenizer_new(tokens, lens, N_VOCAB_TEXT, 51864 + layout, &t) == 0) {
    if (nul)
      round_trip(t, (const char *)nul + 1, len - vlen - 1);
    wd_tokenizer_free(t);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  custom_vocab(data + 1, size - 1, data[0] % 3);
  return 0;
}
