/*
 * fuzz_vocab.c - a tokenizer built from a hostile vocabulary
 * (wd_tokenizer_new: duplicates, empty and long tokens, odd ranks), then
 * encoding with it, which must still round-trip (fuzz_round_trip.h).
 *
 * Input: byte 0 picks the layout; then the vocabulary's extra tokens as
 * '\n'-separated lines, a '\0', and the text. Byte 0 = 0xff, 0xfe or 0xfd
 * (rare under mutation): a real layout (n_vocab 51864 + 0, 1 or 2, the
 * lines after the 256 bytes and fillers up to GPT-2's 50,257 ranks: ~15 ms a
 * build); any other: wd__tokenizer_new_small with the 256 bytes and the
 * lines alone (tens of microseconds), the same hash table, duplicate,
 * empty-token and BPE code.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_round_trip.h"
#include "tokenizer.h"

/* A real layout needs at least n_text = 50256 tokens (wd_tokenizer_new):
 * the 256 single bytes, the input's lines, then fillers "\xff\xfe" + 3
 * bytes of the rank (distinct from each other, rarely from the lines); a
 * small one stops after the lines. */
#define N_VOCAB_TEXT 50257

static char filler[N_VOCAB_TEXT][5];
static const char *tokens[N_VOCAB_TEXT];
static size_t lens[N_VOCAB_TEXT];

/* tokens[i] = filler i: a single byte below 256, "\xff\xfe" + 3 bytes of
 * the rank above. */
static void filler_at(int i) {
  tokens[i] = filler[i];
  lens[i] = i < 256 ? 1 : 5;
}

static void custom_vocab(const uint8_t *p, size_t len, int layout, int full) {
  static int ready;
  if (!ready) { /* once: the fillers never change */
    for (int i = 0; i < N_VOCAB_TEXT; i++) {
      filler[i][0] = (char)(i < 256 ? i : 0xff);
      filler[i][1] = (char)0xfe;
      filler[i][2] = (char)(i >> 16);
      filler[i][3] = (char)(i >> 8);
      filler[i][4] = (char)i;
      filler_at(i);
    }
    ready = 1;
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
  const int rc = full ? wd_tokenizer_new(tokens, lens, N_VOCAB_TEXT, 51864 + layout, &t)
                      : wd__tokenizer_new_small(tokens, lens, (int)k, &t);
  if (rc == 0) {
    if (nul)
      round_trip(t, (const char *)nul + 1, len - vlen - 1);
    wd_tokenizer_free(t);
  }
  for (size_t i = 256; i < k; i++) /* the next input starts from the fillers */
    filler_at((int)i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  custom_vocab(data + 1, size - 1, 0xff - data[0], data[0] >= 0xfd);
  return 0;
}
