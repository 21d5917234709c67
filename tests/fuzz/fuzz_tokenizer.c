/*
 * fuzz_tokenizer.c - the BPE tokenizer (core/tokenizer.c): encode, decode,
 * the printable text of ids, language look-ups.
 *
 * The real vocabularies (tests/data/tokenizer/ gpt2 and multilingual .tiktoken, or the directory
 * in $WD_FUZZ_TOKENIZER_DIR) are loaded once. Byte 0 of the input picks the
 * mode (bits 0-1) and the layout (bits 2-3: English-only, multilingual,
 * large-v3); the rest is the payload:
 *   0  text: encode it, decode the ids, and require the same bytes back
 *      (the documented decode(encode(x)) == x for any bytes x);
 *   1  ids: little-endian i32s, decoded, and each id's printable text;
 *   2  a language code: looked up, and encoded as a prompt would be;
 *   3  a prompt, through the path a request's takes (core/decode.h
 *      wd_decode_encode_text: its tail, stripped, " " + it encoded, the last
 *      223 ids kept): the ids must decode to the end of what was encoded.
 * Hostile vocabularies are fuzz_vocab's (building a tokenizer costs ~15 ms,
 * which would starve these modes).
 */
#include <stdint.h>
#include <string.h>

#include "decode.h"
#include "error.h"
#include "fuzz_common.h"
#include "fuzz_round_trip.h"
#include "pystr.h"
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

static void prompt_path(const wd_tokenizer_t *t, const uint8_t *p, size_t len) {
  char *text = malloc(len + 1);
  if (!text)
    abort();
  memcpy(text, p, len);
  text[len] = '\0';
  int32_t *ids = NULL;
  int n = 0;
  const int rc = wd_decode_encode_text(t, text, &ids, &n);
  FUZZ_CHECK(rc == 0 || rc == WD_ENOMEM);
  if (rc == 0) {
    FUZZ_CHECK(n >= 1 && n <= WD_DECODE_TEXT_TOKENS);
    /* What was encoded: " " + the stripped tail. */
    const size_t tl = strlen(text);
    const char *tail = text + wd_decode_text_tail(text, tl);
    size_t sl = 0;
    const char *st = wd_py_strip(tail, strlen(tail), &sl);
    size_t need = 0;
    FUZZ_CHECK(wd_tokenizer_decode(t, ids, n, NULL, 0, &need) == WD_ERANGE || need == 0);
    char *out = malloc(need + 1);
    size_t got = 0;
    if (!out)
      abort();
    FUZZ_CHECK(wd_tokenizer_decode(t, ids, n, out, need + 1, &got) == 0 && got == need);
    /* The ids decode to a suffix of " " + st (all of it when none were cut). */
    FUZZ_CHECK(got <= sl + 1);
    const size_t from_st = got > sl ? 0 : sl - got; /* where the suffix starts in st */
    if (got > sl)
      FUZZ_CHECK(out[0] == ' ' && memcmp(out + 1, st, sl) == 0);
    else
      FUZZ_CHECK(memcmp(out, st + from_st, got) == 0);
    free(out);
  }
  free(ids);
  free(text);
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
    prompt_path(t, p, len);
    break;
  }
  return 0;
}
