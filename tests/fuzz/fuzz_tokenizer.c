/*
 * fuzz_tokenizer.c - the BPE tokenizer (core/tokenizer.c): encode, decode,
 * the printable text of ids, language look-ups, and construction from a
 * hostile vocabulary.
 *
 * The real vocabularies (tests/data/tokenizer/ gpt2 and multilingual .tiktoken, or the directory
 * in $WD_FUZZ_TOKENIZER_DIR) are loaded once. Byte 0 of the input picks the
 * mode (bits 0-1) and the layout (bits 2-3: English-only, multilingual,
 * large-v3); the rest is the payload:
 *   0  text: encode it, decode the ids, and require the same bytes back
 *      (the documented decode(encode(x)) == x for any bytes x);
 *   1  ids: little-endian i32s, decoded, and each id's printable text;
 *   2  a language code: looked up, and encoded as a prompt would be;
 *   3  a vocabulary: the 256 single bytes, then the payload's '\n'-separated
 *      lines as the next ranks, then fillers up to a whole vocabulary; the
 *      text after a '\0' is encoded with it and must round-trip as well.
 *      Building a tokenizer costs milliseconds, so only 1 in 4 inputs whose
 *      mode bits say 3 (bits 4-5 both set) really takes this mode.
 */
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "fuzz_common.h"
#include "tokenizer.h"
#include "wd_tiktoken.h"

#ifndef WD_TEST_DATA_DIR
#define WD_TEST_DATA_DIR "tests/data"
#endif

static wd_tokenizer_t *g_tok[3]; /* 51864 English-only, 51865, 51866 */
static wd_tiktoken_t g_gpt2, g_multi;

static void load(const char *dir, const char *name, wd_tiktoken_t *v) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (wd_tiktoken_load(path, v) < 0) {
    fprintf(stderr, "fuzz_tokenizer: cannot load %s\n", path);
    abort();
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *dir = getenv("WD_FUZZ_TOKENIZER_DIR");
  if (!dir)
    dir = WD_TEST_DATA_DIR "/tokenizer";
  load(dir, "gpt2.tiktoken", &g_gpt2);
  load(dir, "multilingual.tiktoken", &g_multi);
  if (wd_tokenizer_new((const char *const *)g_gpt2.tokens, g_gpt2.lens, g_gpt2.n, 51864,
                       &g_tok[0]) < 0 ||
      wd_tokenizer_new((const char *const *)g_multi.tokens, g_multi.lens, g_multi.n, 51865,
                       &g_tok[1]) < 0 ||
      wd_tokenizer_new((const char *const *)g_multi.tokens, g_multi.lens, g_multi.n, 51866,
                       &g_tok[2]) < 0)
    abort();
  return 0;
}

/* Encodes text and checks that decoding gives it back. */
static void round_trip(const wd_tokenizer_t *t, const char *text, size_t len) {
  int n = 0;
  int rc = wd_tokenizer_encode(t, text, len, NULL, 0, &n);
  if (rc < 0 && rc != WD_ERANGE)
    return; /* WD_ENOMEM, WD_ETOOBIG: nothing to check */
  FUZZ_CHECK(n >= 0 && (n > 0 || len == 0) && (size_t)n <= len);
  int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
  if (!ids)
    abort();
  int n2 = -1;
  FUZZ_CHECK(wd_tokenizer_encode(t, text, len, ids, n, &n2) == 0 && n2 == n);
  size_t out_len = 0;
  rc = wd_tokenizer_decode(t, ids, n, NULL, 0, &out_len);
  FUZZ_CHECK(rc == 0 || rc == WD_ERANGE);
  FUZZ_CHECK(out_len == len);
  char *out = malloc(out_len + 1);
  if (!out)
    abort();
  size_t got = 0;
  FUZZ_CHECK(wd_tokenizer_decode(t, ids, n, out, out_len + 1, &got) == 0 && got == len);
  FUZZ_CHECK(memcmp(out, text, len) == 0 && out[len] == '\0');
  free(out);
  free(ids);
}

static void decode_ids(const wd_tokenizer_t *t, const uint8_t *p, size_t len) {
  const int n = (int)(len / 4);
  int32_t *ids = calloc((size_t)n + 1, sizeof *ids);
  if (!ids)
    abort();
  for (int i = 0; i < n; i++) {
    uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                 (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
    /* Top bit set: a negative id; else every id up to a few past n_vocab. */
    ids[i] = (u & 0x80000000u) ? (int32_t)u : (int32_t)(u % 51870u);
  }
  size_t need = 0;
  int rc = wd_tokenizer_decode(t, ids, n, NULL, 0, &need);
  if (rc == 0 || rc == WD_ERANGE) {
    char *out = malloc(need + 1);
    if (!out)
      abort();
    size_t got = 0;
    FUZZ_CHECK(wd_tokenizer_decode(t, ids, n, out, need + 1, &got) == 0 && got == need);
    free(out);
    /* Too small a buffer: an error, never an overflow. */
    if (need > 0) {
      char small[4];
      size_t g2 = 0;
      FUZZ_CHECK(wd_tokenizer_decode(t, ids, n, small, need < 4 ? need : 4, &g2) == WD_ERANGE);
    }
  }
  for (int i = 0; i < n && i < 64; i++) {
    char text[64];
    (void)wd_tokenizer_token_text(t, ids[i], text, sizeof text);
    char tiny[3];
    (void)wd_tokenizer_token_text(t, ids[i], tiny, sizeof tiny);
    size_t bl = 0;
    (void)wd_tokenizer_token_bytes(t, ids[i], &bl);
    (void)wd_tokenizer_lang_code(t, ids[i]);
  }
  free(ids);
}

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
  const int mode = data[0] & 3, layout = (data[0] >> 2) % 3;
  const wd_tokenizer_t *t = g_tok[layout];
  const uint8_t *p = data + 1;
  const size_t len = size - 1;
  switch (mode) {
  case 0:
    round_trip(t, (const char *)p, len);
    break;
  case 1:
    decode_ids(t, p, len);
    break;
  case 2: {
    char code[32];
    const size_t n = len < sizeof code - 1 ? len : sizeof code - 1;
    memcpy(code, p, n);
    code[n] = '\0';
    int32_t id = wd_tokenizer_lang_id(t, code);
    if (id >= 0)
      FUZZ_CHECK(wd_tokenizer_lang_code(t, id) != NULL);
    round_trip(t, code, strlen(code));
    break;
  }
  case 3:
    if ((data[0] & 0x30) == 0x30)
      custom_vocab(p, len, layout);
    else
      round_trip(t, (const char *)p, len);
    break;
  }
  return 0;
}
