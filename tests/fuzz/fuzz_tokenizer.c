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
 *      lines as extra tokens by rank; the text after a '\0' is encoded with
 *      it and must round-trip as well.
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
  int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
  if (!ids)
    abort();
  for (int i = 0; i < n; i++) {
    uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                 (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
    /* The top bit keeps ids near the interesting edges most of the time. */
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

static void custom_vocab(const uint8_t *p, size_t len, int layout) {
  const uint8_t *nul = memchr(p, '\0', len);
  const size_t vlen = nul ? (size_t)(nul - p) : len;
  size_t n = 256;
  for (size_t i = 0; i < vlen; i++)
    n += p[i] == '\n';
  n += vlen > 0;
  if (n > 4096)
    n = 4096;
  const char **tokens = calloc(n, sizeof *tokens);
  size_t *lens = calloc(n, sizeof *lens);
  static char bytes[256];
  if (!tokens || !lens)
    abort();
  for (int b = 0; b < 256; b++) {
    bytes[b] = (char)b;
    tokens[b] = &bytes[b];
    lens[b] = 1;
  }
  size_t k = 256, start = 0;
  for (size_t i = 0; i <= vlen && vlen > 0 && k < n; i++) {
    if (i == vlen || p[i] == '\n') {
      tokens[k] = (const char *)p + start;
      lens[k++] = i - start;
      start = i + 1;
    }
  }
  wd_tokenizer_t *t = NULL;
  if (wd_tokenizer_new(tokens, lens, (int)k, 51864 + layout, &t) == 0) {
    if (nul)
      round_trip(t, (const char *)nul + 1, len - vlen - 1);
    wd_tokenizer_free(t);
  }
  free(tokens);
  free(lens);
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
    custom_vocab(p, len, layout);
    break;
  }
  return 0;
}
