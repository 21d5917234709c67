/*
 * test_tokenizer.c - wd_tokenizer against openai/whisper's own tokenizer.
 *
 * The vocabularies are whisper's assets (tests/data/tokenizer/{gpt2,multilingual}.tiktoken,
 * base64 token + rank per line), loaded the way a ggml model file hands them
 * over: raw bytes indexed by rank. golden.tsv holds the ids that
 * openai/whisper 20250625 + tiktoken produce for several hundred strings in
 * both vocabularies (tests/tools/gen_tokenizer_golden.py). Special ids and
 * suppress lists are checked against shared/reference/whisper-decoding.md.
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "error.h"
#include "languages.h"
#include "tokenizer.h"
#include "wd_test.h"
#include "wd_tiktoken.h"

typedef wd_tiktoken_t vocab_t;

static vocab_t g_gpt2, g_multi;
static wd_tokenizer_t *g_en, *g_ml, *g_v3;

/* Builds the three tokenizers once; all later tests use them. */
static int setup(void) {
  static int done = 0, ok = 0;
  if (done)
    return ok;
  done = 1;
  if (wd_tiktoken_load(wd_test_data("tokenizer/gpt2.tiktoken"), &g_gpt2) < 0 ||
      wd_tiktoken_load(wd_test_data("tokenizer/multilingual.tiktoken"), &g_multi) < 0)
    return 0;
  ok = wd_tokenizer_new((const char *const *)g_gpt2.tokens, g_gpt2.lens, g_gpt2.n, 51864, &g_en) == 0 &&
       wd_tokenizer_new((const char *const *)g_multi.tokens, g_multi.lens, g_multi.n, 51865, &g_ml) == 0 &&
       wd_tokenizer_new((const char *const *)g_multi.tokens, g_multi.lens, g_multi.n, 51866, &g_v3) == 0;
  return ok;
}

WD_TEST(load_vocabularies) {
  WD_CHECK(setup());
  WD_CHECK_EQ_INT(g_gpt2.n, 50256);
  WD_CHECK_EQ_INT(g_multi.n, 50257);
  /* Multilingual rank 50256 is the empty string ("=" in base64). */
  WD_CHECK_EQ_INT(g_multi.lens[50256], 0);
}

/* Parses a space-separated id list; returns the count. */
static int parse_ids(const char *s, int32_t *ids, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    const long v = strtol(s, &end, 10);
    if (end == s)
      break;
    ids[n++] = (int32_t)v;
    s = end;
  }
  return n;
}

static int hexval(int c) {
  return (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* Encodes bytes with t and compares with want; also checks the decode round trip. */
static int check_case(const wd_tokenizer_t *t, const unsigned char *b, size_t n, const int32_t *want,
                      int n_want, int line_no, const char *which) {
  int32_t got[4096];
  int n_got = -1;
  const int r = wd_tokenizer_encode(t, (const char *)b, n, got, 4096, &n_got);
  int same = r == 0 && n_got == n_want && memcmp(got, want, sizeof(int32_t) * (size_t)n_want) == 0;
  if (!same) {
    fprintf(stderr, "golden line %d (%s): r=%d, %d ids, expected %d:", line_no, which, r, n_got,
            n_want);
    for (int i = 0; i < n_got && i < 24; i++)
      fprintf(stderr, " %d", got[i]);
    fprintf(stderr, "  want:");
    for (int i = 0; i < n_want && i < 24; i++)
      fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n");
  }
  char back[8192];
  size_t back_len = 0;
  const int rd = wd_tokenizer_decode(t, got, n_got > 0 ? n_got : 0, back, sizeof back, &back_len);
  if (rd != 0 || back_len != n || memcmp(back, b, n) != 0) {
    fprintf(stderr, "golden line %d (%s): decode(encode(s)) != s\n", line_no, which);
    same = 0;
  }
  return same;
}

WD_TEST(golden_encode_decode) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  FILE *f = fopen(wd_test_data("tokenizer/golden.tsv"), "r");
  WD_CHECK(f != NULL);
  if (!f)
    return;
  static char line[1 << 16];
  static unsigned char bytes[1 << 15];
  static int32_t want_en[4096], want_ml[4096];
  int line_no = 0, n_cases = 0, ok_en = 0, ok_ml = 0, n_bytes_cases = 0;
  while (fgets(line, sizeof line, f)) {
    line_no++;
    if (line[0] == '#')
      continue;
    line[strcspn(line, "\n")] = '\0';
    char *kind = line, *hex = strchr(kind, '\t');
    char *ids_en = hex ? strchr(hex + 1, '\t') : NULL;
    char *ids_ml = ids_en ? strchr(ids_en + 1, '\t') : NULL;
    WD_CHECK(ids_ml != NULL);
    if (!ids_ml)
      break;
    *hex++ = *ids_en++ = *ids_ml++ = '\0';
    size_t n = 0;
    for (const char *h = hex; h[0] && h[1]; h += 2)
      bytes[n++] = (unsigned char)(hexval(h[0]) << 4 | hexval(h[1]));
    const int ne = parse_ids(ids_en, want_en, 4096), nm = parse_ids(ids_ml, want_ml, 4096);
    n_cases++;
    n_bytes_cases += strcmp(kind, "bytes") == 0;
    ok_en += check_case(g_en, bytes, n, want_en, ne, line_no, "gpt2");
    ok_ml += check_case(g_ml, bytes, n, want_ml, nm, line_no, "multilingual");
  }
  fclose(f);
  printf("gpt2: %d/%d strings match (%d of them invalid UTF-8)\n", ok_en, n_cases, n_bytes_cases);
  printf("multilingual: %d/%d strings match\n", ok_ml, n_cases);
  WD_CHECK(n_cases >= 500);
  WD_CHECK_EQ_INT(ok_en, n_cases);
  WD_CHECK_EQ_INT(ok_ml, n_cases);
}

WD_TEST(special_ids) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  /* whisper-decoding.md 4.2: eot sot lang_begin n_langs translate transcribe startoflm
   * startofprev nospeech notimestamps ts_begin n_vocab */
  const int32_t want[3][12] = {
      {50256, 50257, 50258, 99, 50357, 50358, 50359, 50360, 50361, 50362, 50363, 51864},
      {50257, 50258, 50259, 99, 50358, 50359, 50360, 50361, 50362, 50363, 50364, 51865},
      {50257, 50258, 50259, 100, 50359, 50360, 50361, 50362, 50363, 50364, 50365, 51866},
  };
  const wd_tokenizer_t *ts[3] = {g_en, g_ml, g_v3};
  for (int i = 0; i < 3; i++) {
    const wd_special_tokens_t *s = wd_tokenizer_special(ts[i]);
    const int32_t got[12] = {s->eot,         s->sot,       s->lang_begin,  s->n_langs,
                             s->translate,   s->transcribe, s->startoflm,  s->startofprev,
                             s->nospeech,    s->notimestamps, s->ts_begin, s->n_vocab};
    for (int k = 0; k < 12; k++)
      WD_CHECK_EQ_INT(got[k], want[i][k]);
    /* Last language + 1 is translate; ts_begin + 1500 is the last id. */
    WD_CHECK_EQ_INT(s->lang_begin + s->n_langs, s->translate);
    WD_CHECK_EQ_INT(s->ts_begin + 1500, s->n_vocab - 1);
  }
  WD_CHECK_EQ_INT(wd_tokenizer_is_multilingual(g_en), 0);
  WD_CHECK_EQ_INT(wd_tokenizer_is_multilingual(g_ml), 1);
  WD_CHECK_EQ_INT(wd_tokenizer_is_multilingual(g_v3), 1);
}

/* whisper-decoding.md 4.3: non_speech_tokens for each vocabulary. */
static const int32_t doc_nst_ml[] = {
    1,     2,     7,     8,     9,     10,    14,    25,    26,    27,    28,    29,    31,    58,
    59,    60,    61,    62,    63,    90,    91,    92,    93,    359,   503,   522,   542,   873,
    893,   902,   918,   922,   931,   1350,  1853,  1982,  2460,  2627,  3246,  3253,  3268,  3536,
    3846,  3961,  4183,  4667,  6585,  6647,  7273,  9061,  9383,  10428, 10929, 11938, 12033, 12331,
    12562, 13793, 14157, 14635, 15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130,
    26161, 26435, 28279, 29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254};
static const int32_t doc_nst_en[] = {
    1,     2,     7,     8,     9,     10,    14,    25,    26,    27,    28,    29,    31,    58,
    59,    60,    61,    62,    63,    90,    91,    92,    93,    357,   366,   438,   532,   685,
    705,   796,   930,   1058,  1220,  1267,  1279,  1303,  1343,  1377,  1391,  1635,  1782,  1875,
    2162,  2361,  2488,  3467,  4008,  4211,  4600,  4808,  5299,  5855,  6329,  7203,  9609,  9959,
    10563, 10786, 11420, 11709, 11907, 13163, 13697, 13700, 14808, 15306, 16410, 16791, 17992, 19203,
    19510, 20724, 22305, 22935, 27007, 30109, 30420, 33409, 34949, 40283, 40493, 40549, 47282, 49146};

static void check_suppress(const wd_tokenizer_t *t, const int32_t *nst, int n_nst,
                           const int32_t specials[6]) {
  int32_t want[128], got[128];
  memcpy(want, nst, sizeof(int32_t) * (size_t)n_nst);
  memcpy(want + n_nst, specials, sizeof(int32_t) * 6);
  int n = -1;
  WD_CHECK_EQ_INT(wd_tokenizer_suppress_tokens(t, got, 128, &n), 0);
  WD_CHECK_EQ_INT(n, n_nst + 6);
  int same = n == n_nst + 6;
  for (int i = 0; same && i < n; i++)
    same = got[i] == want[i];
  WD_CHECK(same);
  printf("suppress_tokens(-1): %d ids, %s the reference list\n", n, same ? "equal to" : "DIFFERENT from");
}

WD_TEST(suppress_tokens) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  const int32_t sp_en[6] = {50257, 50357, 50358, 50359, 50360, 50361};
  const int32_t sp_ml[6] = {50258, 50358, 50359, 50360, 50361, 50362};
  const int32_t sp_v3[6] = {50258, 50359, 50360, 50361, 50362, 50363};
  check_suppress(g_en, doc_nst_en, (int)(sizeof doc_nst_en / sizeof doc_nst_en[0]), sp_en);
  check_suppress(g_ml, doc_nst_ml, (int)(sizeof doc_nst_ml / sizeof doc_nst_ml[0]), sp_ml);
  check_suppress(g_v3, doc_nst_ml, (int)(sizeof doc_nst_ml / sizeof doc_nst_ml[0]), sp_v3);
  /* Too small a buffer: WD_ERANGE and the needed count. */
  int32_t few[4];
  int n = 0;
  WD_CHECK_EQ_INT(wd_tokenizer_suppress_tokens(g_ml, few, 4, &n), WD_ERANGE);
  WD_CHECK_EQ_INT(n, 88);
  WD_CHECK_EQ_INT(few[3], 8);
  WD_CHECK_EQ_INT(wd_tokenizer_suppress_tokens(g_ml, NULL, 0, &n), WD_ERANGE);
  WD_CHECK_EQ_INT(wd_tokenizer_suppress_tokens(g_ml, NULL, 5, &n), WD_EINVAL);
}

WD_TEST(languages) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_ml, "en"), 50259);
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_ml, "zh"), 50260);
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_ml, "EN"), 50259);
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_ml, "su"), 50357);
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_ml, "yue"), WD_EUNSUP);
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_v3, "yue"), 50358);
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_en, "en"), 50258);
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_ml, "xx"), WD_ENOENT);
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_ml, "english"), WD_ENOENT); /* codes only */
  WD_CHECK_EQ_INT(wd_tokenizer_lang_id(g_ml, NULL), WD_EINVAL);
  WD_CHECK_EQ_STR(wd_tokenizer_lang_code(g_ml, 50259), "en");
  WD_CHECK_EQ_STR(wd_tokenizer_lang_code(g_v3, 50358), "yue");
  WD_CHECK(wd_tokenizer_lang_code(g_ml, 50358) == NULL); /* translate */
  WD_CHECK(wd_tokenizer_lang_code(g_ml, 50258) == NULL); /* sot */
  WD_CHECK(wd_tokenizer_lang_code(g_ml, -1) == NULL);
  /* Every language of the table round-trips through its token on large-v3. */
  int round = 0;
  for (int i = 0; i < wd_languages_count(); i++) {
    const int32_t id = wd_tokenizer_lang_id(g_v3, wd_languages_code(i));
    const char *c = wd_tokenizer_lang_code(g_v3, id);
    round += id == 50259 + i && c && strcmp(c, wd_languages_code(i)) == 0;
  }
  WD_CHECK_EQ_INT(round, 100);
}

WD_TEST(token_text) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  char buf[64];
  const wd_special_tokens_t *s = wd_tokenizer_special(g_ml);
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, s->ts_begin + 75, buf, sizeof buf), 0);
  WD_CHECK_EQ_STR(buf, "<|1.50|>");
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, 50364, buf, sizeof buf), 0);
  WD_CHECK_EQ_STR(buf, "<|0.00|>");
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, 50530, buf, sizeof buf), 0); /* API example */
  WD_CHECK_EQ_STR(buf, "<|3.32|>");
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, 51864, buf, sizeof buf), 0);
  WD_CHECK_EQ_STR(buf, "<|30.00|>");
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_v3, 51865, buf, sizeof buf), 0);
  WD_CHECK_EQ_STR(buf, "<|30.00|>");
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_en, 50363 + 75, buf, sizeof buf), 0);
  WD_CHECK_EQ_STR(buf, "<|1.50|>");
  const struct {
    int32_t id;
    const char *text;
  } named[] = {{50257, "<|endoftext|>"}, {50258, "<|startoftranscript|>"}, {50259, "<|en|>"},
               {50357, "<|su|>"},        {50358, "<|translate|>"},       {50359, "<|transcribe|>"},
               {50360, "<|startoflm|>"}, {50361, "<|startofprev|>"},     {50362, "<|nospeech|>"},
               {50363, "<|notimestamps|>"}, {2425, " Hello"}};
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
    WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, named[i].id, buf, sizeof buf), 0);
    WD_CHECK_EQ_STR(buf, named[i].text);
  }
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_en, 50256, buf, sizeof buf), 0);
  WD_CHECK_EQ_STR(buf, "<|endoftext|>");
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_en, 50362, buf, sizeof buf), 0);
  WD_CHECK_EQ_STR(buf, "<|notimestamps|>");
  /* Errors: out-of-range ids, a buffer too small (truncated but terminated). */
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, 51865, buf, sizeof buf), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, -1, buf, sizeof buf), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, 50364, buf, 5), WD_ERANGE);
  WD_CHECK_EQ_STR(buf, "<|0.");
  WD_CHECK_EQ_INT(wd_tokenizer_token_text(g_ml, 2425, buf, 3), WD_ERANGE);
  WD_CHECK_EQ_STR(buf, " H");
  size_t l = 99;
  const char *tb = wd_tokenizer_token_bytes(g_ml, 2425, &l);
  WD_CHECK(tb && l == 6 && memcmp(tb, " Hello", 6) == 0);
  WD_CHECK(wd_tokenizer_token_bytes(g_ml, 50257, &l) == NULL && l == 0);
  WD_CHECK(wd_tokenizer_token_bytes(g_ml, 50256, &l) != NULL && l == 0); /* the empty token */
}

WD_TEST(decode_rules_and_errors) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  char out[64];
  size_t n = 0;
  /* Timestamps and other specials are skipped. */
  const int32_t ids[] = {50258, 50259, 50359, 50364, 2425, 1002, 13, 50414, 50257};
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_ml, ids, 9, out, sizeof out, &n), 0);
  WD_CHECK_EQ_INT(n, 13);
  WD_CHECK_EQ_STR(out, " Hello world.");
  /* Length query and a too-small buffer. */
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_ml, ids, 9, NULL, 0, &n), WD_ERANGE);
  WD_CHECK_EQ_INT(n, 13);
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_ml, ids, 9, out, 13, &n), WD_ERANGE);
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_ml, ids, 0, out, sizeof out, &n), 0);
  WD_CHECK_EQ_INT(n, 0);
  /* Ids outside [0, n_vocab). */
  const int32_t bad1[] = {2425, -1}, bad2[] = {51865}, bad3[] = {51864};
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_ml, bad1, 2, out, sizeof out, &n), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_ml, bad2, 1, out, sizeof out, &n), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_en, bad3, 1, out, sizeof out, &n), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_v3, bad2, 1, out, sizeof out, &n), 0);
  WD_CHECK_EQ_INT(wd_tokenizer_decode(g_ml, NULL, 1, out, sizeof out, &n), WD_EINVAL);
}

WD_TEST(encode_buffer_and_errors) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  const char *s = " And so my fellow Americans";
  int32_t ids[16];
  int n = 0;
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, s, strlen(s), NULL, 0, &n), WD_ERANGE);
  WD_CHECK_EQ_INT(n, 5);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, s, strlen(s), ids, 3, &n), WD_ERANGE);
  WD_CHECK_EQ_INT(n, 5);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, s, strlen(s), ids, 16, &n), 0);
  /* ref: tiktoken multilingual " And so my fellow Americans" */
  const int32_t want[5] = {400, 370, 452, 7177, 6280};
  for (int i = 0; i < 5 && i < n; i++)
    WD_CHECK_EQ_INT(ids[i], want[i]);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, "", 0, ids, 16, &n), 0);
  WD_CHECK_EQ_INT(n, 0);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, NULL, 0, ids, 16, &n), 0);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, NULL, 3, ids, 16, &n), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, s, strlen(s), NULL, 4, &n), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, s, strlen(s), ids, -1, &n), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(NULL, s, strlen(s), ids, 16, &n), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, s, strlen(s), ids, 16, NULL), WD_EINVAL);
  /* " " is 220 in both vocabularies (SuppressBlank). */
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_en, " ", 1, ids, 16, &n), 0);
  WD_CHECK(n == 1 && ids[0] == 220);
}

/* xorshift64*: deterministic bytes for the fuzz test. */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

WD_TEST(arbitrary_bytes_round_trip) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  /* Random bytes (mostly invalid UTF-8) and random mixes of valid characters
   * with stray continuation bytes: encode must not fail and decode must give
   * the bytes back exactly. */
  static const char *frag[] = {"a", " ", "\xc3\xa9", "\xe4\xbd\xa0", "\xf0\x9f\x98\x80", "\x80",
                               "\xff", "\xe4\xbd", "'s", "\n", "9", "\xcc\x81", "\xed\xa0\x80"};
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  int ok = 0, total = 0;
  unsigned char b[600];
  int32_t ids[1024];
  char back[1024];
  for (int it = 0; it < 400; it++) {
    size_t n = 0;
    const size_t len = (size_t)(rng_next(&seed) % 200);
    if (it % 2 == 0) {
      for (size_t i = 0; i < len; i++)
        b[n++] = (unsigned char)(rng_next(&seed) & 0xffu);
    } else {
      for (size_t i = 0; i < len / 2; i++) {
        const char *f = frag[rng_next(&seed) % (sizeof frag / sizeof frag[0])];
        memcpy(b + n, f, strlen(f));
        n += strlen(f);
      }
    }
    const wd_tokenizer_t *t = (it % 3 == 0) ? g_en : g_ml;
    int n_ids = 0;
    size_t back_len = 0;
    total++;
    if (wd_tokenizer_encode(t, (const char *)b, n, ids, 1024, &n_ids) == 0 &&
        wd_tokenizer_decode(t, ids, n_ids, back, sizeof back, &back_len) == 0 && back_len == n &&
        memcmp(back, b, n) == 0)
      ok++;
  }
  printf("arbitrary bytes: %d/%d round trips exact\n", ok, total);
  WD_CHECK_EQ_INT(ok, total);
}

WD_TEST(constructor_validation) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  wd_tokenizer_t *t = NULL;
  const char *const *tok = (const char *const *)g_multi.tokens;
  /* n_vocab that leaves no language slot, or more than 100. */
  WD_CHECK_EQ_INT(wd_tokenizer_new(tok, g_multi.lens, g_multi.n, 51765, &t), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_new(tok, g_multi.lens, g_multi.n, 0, &t), WD_EINVAL);
  /* Multilingual n_vocab needs 50257 text tokens; gpt2 has 50256. */
  WD_CHECK_EQ_INT(wd_tokenizer_new((const char *const *)g_gpt2.tokens, g_gpt2.lens, g_gpt2.n,
                                   51865, &t), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_new(tok, g_multi.lens, g_multi.n, 51867, &t), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_new(NULL, g_multi.lens, g_multi.n, 51865, &t), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_tokenizer_new(tok, g_multi.lens, 100, 51865, &t), WD_EINVAL);
  WD_CHECK(t == NULL);
  /* A vocabulary without the single byte 'a' (rank 64) cannot encode everything. */
  char **copy = malloc(sizeof(char *) * (size_t)g_multi.n);
  size_t *lens = malloc(sizeof(size_t) * (size_t)g_multi.n);
  memcpy(copy, g_multi.tokens, sizeof(char *) * (size_t)g_multi.n);
  memcpy(lens, g_multi.lens, sizeof(size_t) * (size_t)g_multi.n);
  WD_CHECK(lens[64] == 1 && copy[64][0] == 'a');
  lens[64] = 0;
  WD_CHECK_EQ_INT(wd_tokenizer_new((const char *const *)copy, lens, g_multi.n, 51865, &t), WD_EINVAL);
  /* NULL bytes with a non-zero length. */
  lens[64] = 1;
  copy[64] = NULL;
  WD_CHECK_EQ_INT(wd_tokenizer_new((const char *const *)copy, lens, g_multi.n, 51865, &t), WD_EINVAL);
  WD_CHECK(t == NULL);
  free(copy);
  free(lens);
  wd_tokenizer_free(NULL);
}

WD_TEST(ggml_english_vocabulary) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  /* A ggml file of an English-only model carries 50257 tokens, the last being
   * the bytes "<|endoftext|>"; the layout must not change and that token
   * must not become encodable text. */
  char **tok = malloc(sizeof(char *) * 50257);
  size_t *lens = malloc(sizeof(size_t) * 50257);
  memcpy(tok, g_gpt2.tokens, sizeof(char *) * 50256);
  memcpy(lens, g_gpt2.lens, sizeof(size_t) * 50256);
  char eot_text[] = "<|endoftext|>";
  tok[50256] = eot_text;
  lens[50256] = strlen(eot_text);
  wd_tokenizer_t *t = NULL;
  WD_CHECK_EQ_INT(wd_tokenizer_new((const char *const *)tok, lens, 50257, 51864, &t), 0);
  if (t) {
    WD_CHECK_EQ_INT(wd_tokenizer_special(t)->eot, 50256);
    WD_CHECK_EQ_INT(wd_tokenizer_special(t)->ts_begin, 50363);
    WD_CHECK(wd_tokenizer_token_bytes(t, 50256, NULL) == NULL);
    int32_t a[32], b[32];
    int na = 0, nb = 0;
    const char *s = "x<|endoftext|>y";
    WD_CHECK_EQ_INT(wd_tokenizer_encode(t, s, strlen(s), a, 32, &na), 0);
    WD_CHECK_EQ_INT(wd_tokenizer_encode(g_en, s, strlen(s), b, 32, &nb), 0);
    WD_CHECK(na == nb && na > 3 && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0);
    int32_t sup[128];
    WD_CHECK_EQ_INT(wd_tokenizer_suppress_tokens(t, sup, 128, &na), 0);
    WD_CHECK_EQ_INT(na, 90);
  }
  wd_tokenizer_free(t);
  free(tok);
  free(lens);
}

/* Several threads encode the same text with one tokenizer; all must agree. */
typedef struct {
  const wd_tokenizer_t *t;
  const char *text;
  int32_t ids[512];
  int n;
  int r;
} enc_job_t;

static void *enc_thread(void *arg) {
  enc_job_t *j = arg;
  for (int k = 0; k < 50 && j->r == 0; k++)
    j->r = wd_tokenizer_encode(j->t, j->text, strlen(j->text), j->ids, 512, &j->n);
  return NULL;
}

WD_TEST(concurrent_encode) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  const char *text = "Ask not what your country can do for you. 你好，世界！ Привет, мир! 😀 x \xe1\xa0\x8ey";
  static enc_job_t jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (enc_job_t){.t = g_ml, .text = text};
    WD_CHECK_EQ_INT(pthread_create(&th[i], NULL, enc_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    WD_CHECK_EQ_INT(jobs[i].r, 0);
    WD_CHECK_EQ_INT(jobs[i].n, jobs[0].n);
    WD_CHECK(memcmp(jobs[i].ids, jobs[0].ids, sizeof(int32_t) * (size_t)jobs[0].n) == 0);
  }
}

WD_TEST(encode_throughput) {
  if (!setup())
    wd_test_skip("vocabularies missing");
  /* About 1 MB of English prose and a 20 kB single word (the quadratic case). */
  const char *sentence = "When the sunlight strikes raindrops in the air, they act as a prism and "
                         "form a rainbow. It's 10:30, isn't it? ";
  const size_t sl = strlen(sentence), reps = 1000000 / sl;
  char *text = malloc(sl * reps + 1);
  for (size_t i = 0; i < reps; i++)
    memcpy(text + i * sl, sentence, sl);
  const size_t len = sl * reps;
  int n = 0;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, text, len, NULL, 0, &n), WD_ERANGE);
  clock_gettime(CLOCK_MONOTONIC, &b);
  const double s1 = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
  printf("encode: %zu bytes -> %d tokens in %.3f s (%.1f MB/s)\n", len, n, s1, (double)len / s1 / 1e6);
  WD_CHECK(n > 0 && n < (int)len);
  memset(text, 'a', 20000); /* "aa", "aaaa", ... are tokens: many merges */
  clock_gettime(CLOCK_MONOTONIC, &a);
  WD_CHECK_EQ_INT(wd_tokenizer_encode(g_ml, text, 20000, NULL, 0, &n), WD_ERANGE);
  clock_gettime(CLOCK_MONOTONIC, &b);
  const double s2 = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
  printf("encode: one 20000-byte word -> %d tokens in %.3f s\n", n, s2);
  free(text);
}

WD_TEST(teardown) {
  wd_tokenizer_free(g_en);
  wd_tokenizer_free(g_ml);
  wd_tokenizer_free(g_v3);
  g_en = g_ml = g_v3 = NULL;
  wd_tiktoken_free(&g_gpt2);
  wd_tiktoken_free(&g_multi);
}

int main(void) { return wd_test_main(); }
