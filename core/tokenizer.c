/*
 * tokenizer.c - Whisper's byte-level BPE tokenizer.
 * ref: openai/whisper tokenizer.py (v20250625); openai/tiktoken src/lib.rs
 * (byte_pair_encode, encode_ordinary), read to understand, not copied.
 *
 * Encoding has two stages. Pre-tokenisation splits the text with the GPT-2
 * regex (PCRE2, compiled once per tokenizer with Unicode properties). Each
 * piece is then looked up whole; if it is not a token, it is split into
 * single bytes and the adjacent pair whose concatenation has the lowest rank
 * is merged, leftmost first on ties, until no adjacent pair is a token.
 * Ranks are found through an open-addressing hash table over the token byte
 * strings, built at construction.
 *
 * Threading: the tokenizer is immutable once built. wd_tokenizer_encode()
 * creates its own PCRE2 match data per call, so any number of threads may
 * encode and decode with one tokenizer at once.
 *
 * Ownership: the tokenizer owns a copy of every token's bytes (one blob) and
 * the compiled pattern; callers get pointers into the blob that live as long
 * as the tokenizer.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "languages.h"
#include "log.h"
#include "pystr.h"

/*
 * The pre-tokenisation pattern of openai/whisper get_encoding(), with one
 * deliberate spelling change: tiktoken (Rust regex) reads \s as the Unicode
 * White_Space property, while PCRE2 with PCRE2_UCP also counts U+180E
 * (MONGOLIAN VOWEL SEPARATOR, a format character since Unicode 6.3) as
 * space. The class WD_WS lists White_Space exactly, so that \s is [WD_WS]
 * and \S is [^WD_WS]; everything else is whisper's pattern verbatim:
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * The golden test covers U+180E. One divergence remains: \p{L} and \p{N}
 * come from PCRE2's Unicode tables (Unicode 14 in Debian 12's 10.42), while
 * tiktoken's are newer, so letters and digits added after Unicode 14 may be
 * split differently (none of Whisper's languages needs them).
 */
#define WD_WS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
static const char wd_pretok_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WD_WS "\\p{L}\\p{N}]+"
    "|[" WD_WS "]+(?![^" WD_WS "])|[" WD_WS "]+";

/* Fixed specials between the languages and the timestamps, and the count of
 * timestamps (<|0.00|> .. <|30.00|>). */
#define WD_N_TIMESTAMPS 1501
#define WD_N_FIXED_SPECIALS (2 + 6 + WD_N_TIMESTAMPS) /* eot, sot; 6 task/misc; timestamps */

/* Pieces up to this many bytes are merged on the stack in O(n^2); longer
 * ones through a heap in O(n log n). */
#define WD_BPE_STACK 128
#define WD_RANK_NONE INT32_MAX

struct wd_tokenizer {
  int32_t n_tokens;      /* text tokens = BPE ranks 0 .. n_tokens-1 */
  char *blob;            /* every token's bytes, each followed by a NUL */
  size_t *offs;          /* (n_tokens + 1): token i is blob[offs[i] .. offs[i+1]-1) */
  int32_t *slots;        /* (n_slots): token id or -1, open addressing */
  uint32_t slot_mask;    /* n_slots - 1, n_slots a power of two */
  pcre2_code *re;        /* the pre-tokenisation pattern */
  wd_special_tokens_t sp;
  int32_t *suppress;     /* (n_suppress) sorted suppress_tokens="-1" set */
  int n_suppress;
};

/* Output cursor of one encode call: stores while there is room, counts always. */
typedef struct {
  int32_t *ids;
  int max;
  int n;
} wd_id_sink_t;

static uint32_t wd_hash_bytes(const unsigned char *p, size_t n);
static int32_t wd_rank_of(const wd_tokenizer_t *t, const unsigned char *p, size_t n);
static size_t wd_token_len(const wd_tokenizer_t *t, int32_t id);
static void wd_sink_put(wd_id_sink_t *s, int32_t id);
static void wd_bpe_merge_small(const wd_tokenizer_t *t, const unsigned char *p, size_t n,
                               wd_id_sink_t *s);
static int wd_bpe_merge_large(const wd_tokenizer_t *t, const unsigned char *p, size_t n,
                              wd_id_sink_t *s);
static int wd_bpe_piece(const wd_tokenizer_t *t, const unsigned char *p, size_t n, wd_id_sink_t *s);
static int wd_build_suppress(wd_tokenizer_t *t);
static size_t wd_utf8_char_len(const unsigned char *p, size_t n);
static int wd_encode_valid(const wd_tokenizer_t *t, pcre2_match_data *md, const unsigned char *u,
                           size_t len, wd_id_sink_t *sink);

/* FNV-1a, 32 bit: short keys, good enough spread for ~50k byte strings. */
static uint32_t wd_hash_bytes(const unsigned char *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 16777619u;
  }
  return h;
}

static size_t wd_token_len(const wd_tokenizer_t *t, int32_t id) {
  return t->offs[id + 1] - t->offs[id] - 1;
}

/* Rank (= id) of the byte string p[0..n), or WD_RANK_NONE if it is no token. */
static int32_t wd_rank_of(const wd_tokenizer_t *t, const unsigned char *p, size_t n) {
  uint32_t i = wd_hash_bytes(p, n) & t->slot_mask;
  for (;;) {
    const int32_t id = t->slots[i];
    if (id < 0)
      return WD_RANK_NONE;
    if (wd_token_len(t, id) == n && memcmp(t->blob + t->offs[id], p, n) == 0)
      return id;
    i = (i + 1) & t->slot_mask;
  }
}

static int tokenizer_build(const char *const *tokens, const size_t *lens, int n_tokens,
                           int n_langs, int n_vocab, wd_tokenizer_t **ret);

int wd_tokenizer_new(const char *const *tokens, const size_t *lens, int n_tokens, int n_vocab,
                     wd_tokenizer_t **ret) {
  if (!tokens || !lens || !ret || n_tokens < 256 || n_tokens > (1 << 24))
    return WD_EINVAL;
  /* ref: openai/whisper model.py num_languages / is_multilingual and
   * tokenizer.py get_encoding(): the layout follows from n_vocab alone. */
  const int multilingual = n_vocab >= 51865;
  const int n_langs = n_vocab - 51765 - multilingual;
  if (n_langs < 1 || n_langs > wd_languages_count()) {
    wd_log_debug("%s: n_vocab %d gives %d language slots, expected 1..%d", __func__, n_vocab,
                 n_langs, wd_languages_count());
    return WD_EINVAL;
  }
  /* Text tokens are the ids below <|endoftext|>. A ggml file of an
   * English-only model stores one more token, "<|endoftext|>" itself, which
   * is a special token here and is not copied. */
  const int n_text = n_vocab - WD_N_FIXED_SPECIALS - n_langs;
  if (n_tokens < n_text) {
    wd_log_debug("%s: %d text tokens given, n_vocab %d needs %d", __func__, n_tokens, n_vocab,
                 n_text);
    return WD_EINVAL;
  }
  return tokenizer_build(tokens, lens, n_text, n_langs, n_vocab, ret);
}

int wd__tokenizer_new_small(const char *const *tokens, const size_t *lens, int n_text,
                            wd_tokenizer_t **ret) {
  if (!tokens || !lens || !ret || n_text < 256 || n_text > (1 << 24))
    return WD_EINVAL;
  return tokenizer_build(tokens, lens, n_text, 1, n_text + WD_N_FIXED_SPECIALS + 1, ret);
}

/* The tokenizer of n_tokens text tokens (ranks 0 .. n_tokens - 1) and the
 * specials after them, n_langs language tokens among them. */
static int tokenizer_build(const char *const *tokens, const size_t *lens, int n_tokens,
                           int n_langs, int n_vocab, wd_tokenizer_t **ret) {
  size_t total = 0;
  for (int i = 0; i < n_tokens; i++) {
    if (!tokens[i] && lens[i] > 0)
      return WD_EINVAL;
    if (lens[i] > 4096) /* real tokens are at most a few dozen bytes */
      return WD_EINVAL;
    total += lens[i] + 1;
  }

  int r = WD_ENOMEM;
  wd_tokenizer_t *t = malloc(sizeof *t);
  if (!t)
    return WD_ENOMEM;
  *t = (wd_tokenizer_t){.n_tokens = n_tokens};

  t->blob = malloc(total);
  t->offs = malloc(sizeof(size_t) * ((size_t)n_tokens + 1));
  /* At most half full: probe sequences stay short. */
  uint32_t n_slots = 1;
  while (n_slots < 2u * (uint32_t)n_tokens)
    n_slots <<= 1;
  t->slots = malloc(sizeof(int32_t) * n_slots);
  if (!t->blob || !t->offs || !t->slots)
    goto fail;
  t->slot_mask = n_slots - 1;
  memset(t->slots, 0xff, sizeof(int32_t) * n_slots); /* all -1 */

  size_t off = 0;
  for (int i = 0; i < n_tokens; i++) {
    t->offs[i] = off;
    if (lens[i])
      memcpy(t->blob + off, tokens[i], lens[i]);
    t->blob[off + lens[i]] = '\0';
    off += lens[i] + 1;
  }
  t->offs[n_tokens] = off;

  for (int32_t id = 0; id < n_tokens; id++) {
    const unsigned char *p = (const unsigned char *)t->blob + t->offs[id];
    const size_t n = wd_token_len(t, id);
    if (n == 0)
      continue; /* no piece is empty; the empty token is never looked up */
    if (wd_rank_of(t, p, n) != WD_RANK_NONE) {
      /* tiktoken's rank map cannot hold duplicates; keep the lowest rank. */
      wd_log_debug("%s: token %d duplicates an earlier token, ignored", __func__, (int)id);
      continue;
    }
    uint32_t s = wd_hash_bytes(p, n) & t->slot_mask;
    while (t->slots[s] >= 0)
      s = (s + 1) & t->slot_mask;
    t->slots[s] = id;
  }
  /* Byte-level BPE starts from single bytes, so all 256 must be tokens. */
  for (int b = 0; b < 256; b++) {
    const unsigned char c = (unsigned char)b;
    if (wd_rank_of(t, &c, 1) == WD_RANK_NONE) {
      wd_log_debug("%s: byte 0x%02x is not a token", __func__, (unsigned)b);
      r = WD_EINVAL;
      goto fail;
    }
  }

  /* Layout of whisper tokenizer.py get_encoding(): specials follow the ranks. */
  const int32_t eot = n_tokens, lang_begin = eot + 2, after = lang_begin + n_langs;
  t->sp = (wd_special_tokens_t){
      .eot = eot,
      .sot = eot + 1,
      .lang_begin = lang_begin,
      .n_langs = n_langs,
      .translate = after,
      .transcribe = after + 1,
      .startoflm = after + 2,
      .startofprev = after + 3,
      .nospeech = after + 4,
      .notimestamps = after + 5,
      .ts_begin = after + 6,
      .n_vocab = n_vocab,
  };

  int errcode = 0;
  PCRE2_SIZE erroff = 0;
  t->re = pcre2_compile((PCRE2_SPTR)wd_pretok_pattern, PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_UCP, &errcode, &erroff, NULL);
  if (!t->re) {
    wd_log_debug("%s: pcre2_compile failed with %d at offset %zu", __func__, errcode,
                 (size_t)erroff);
    r = WD_EINTERNAL;
    goto fail;
  }
  /* JIT is an optimisation only; the interpreter gives the same matches. */
  if (pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) != 0)
    wd_log_debug("%s: PCRE2 JIT unavailable, using the interpreter", __func__);

  r = wd_build_suppress(t);
  if (r < 0)
    goto fail;
  *ret = t;
  return 0;

fail:
  wd_tokenizer_free(t);
  return r;
}

void wd_tokenizer_free(wd_tokenizer_t *t) {
  if (!t)
    return;
  pcre2_code_free(t->re);
  free(t->suppress);
  free(t->slots);
  free(t->offs);
  free(t->blob);
  free(t);
}

static void wd_sink_put(wd_id_sink_t *s, int32_t id) {
  if (s->n < s->max)
    s->ids[s->n] = id;
  if (s->n < INT32_MAX)
    s->n++;
}

/*
 * Byte-pair merge of a short piece (2 <= n <= WD_BPE_STACK) on the stack.
 * ref: tiktoken src/lib.rs _byte_pair_merge. parts[k] is the start of the
 * k-th current part (parts[m] = n closes the last one); rank[k] is the rank
 * of parts k and k+1 merged, WD_RANK_NONE if that is no token. Each round
 * merges the lowest-ranked pair, the leftmost on ties, and re-ranks only the
 * two pairs that touch the merged part: O(n^2), cheap for short pieces.
 */
static void wd_bpe_merge_small(const wd_tokenizer_t *t, const unsigned char *p, size_t n,
                               wd_id_sink_t *s) {
  size_t parts[WD_BPE_STACK + 1];
  int32_t rank[WD_BPE_STACK];
  size_t m = n; /* number of parts */
  for (size_t k = 0; k <= n; k++)
    parts[k] = k;
  for (size_t k = 0; k + 1 < m; k++)
    rank[k] = wd_rank_of(t, p + k, 2);

  while (m > 1) {
    size_t best = 0;
    int32_t best_rank = WD_RANK_NONE;
    for (size_t k = 0; k + 1 < m; k++)
      if (rank[k] < best_rank) {
        best_rank = rank[k];
        best = k;
      }
    if (best_rank == WD_RANK_NONE)
      break;
    /* Merge parts best and best+1: drop the boundary parts[best+1]. */
    memmove(parts + best + 1, parts + best + 2, sizeof(size_t) * (m - best - 1));
    /* Pair ranks: drop rank[best + 1]; ranks best+2 .. m-2 move down by one. */
    if (m >= best + 3)
      memmove(rank + best + 1, rank + best + 2, sizeof(int32_t) * (m - best - 3));
    m--;
    if (best + 1 < m)
      rank[best] = wd_rank_of(t, p + parts[best], parts[best + 2] - parts[best]);
    if (best > 0)
      rank[best - 1] = wd_rank_of(t, p + parts[best - 1], parts[best + 1] - parts[best - 1]);
  }
  /* Every remaining part is a token: single bytes always are, merges were. */
  for (size_t k = 0; k < m; k++)
    wd_sink_put(s, wd_rank_of(t, p + parts[k], parts[k + 1] - parts[k]));
}

/* A candidate merge for the large-piece heap: the pair starting at byte
 * `start` has rank `rank`. Ordered by rank, then start (leftmost first). */
typedef struct {
  int32_t rank;
  uint32_t start;
} wd_bpe_cand_t;

static int wd_cand_less(wd_bpe_cand_t a, wd_bpe_cand_t b) {
  return a.rank < b.rank || (a.rank == b.rank && a.start < b.start);
}

static void wd_heap_push(wd_bpe_cand_t *h, size_t *n, wd_bpe_cand_t c) {
  size_t i = (*n)++;
  while (i > 0 && wd_cand_less(c, h[(i - 1) / 2])) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = c;
}

static wd_bpe_cand_t wd_heap_pop(wd_bpe_cand_t *h, size_t *n) {
  const wd_bpe_cand_t top = h[0], last = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n)
      break;
    if (c + 1 < *n && wd_cand_less(h[c + 1], h[c]))
      c++;
    if (!wd_cand_less(h[c], last))
      break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
  return top;
}

/*
 * Byte-pair merge of a long piece in O(n log n), with the same result as
 * wd_bpe_merge_small(): the lowest (rank, start) pair is merged first, which
 * is the lowest rank and the leftmost on ties. Parts form a linked list by
 * start byte (next[k] = start of the following part, n at the end);
 * pair_rank[k] is the current rank of the pair starting at k, and a heap
 * entry is stale unless it still equals it (a rank names one byte string, so
 * an equal rank at the same start is the same pair). Bounds the cost of
 * pathological input such as a 100 kB word in a user's prompt.
 */
static int wd_bpe_merge_large(const wd_tokenizer_t *t, const unsigned char *p, size_t n,
                              wd_id_sink_t *s) {
  uint32_t *next = malloc(sizeof(uint32_t) * n);
  uint32_t *prev = malloc(sizeof(uint32_t) * n);
  int32_t *pair_rank = malloc(sizeof(int32_t) * n);
  /* n initial pairs at most, plus two new candidates per merge (< n merges). */
  wd_bpe_cand_t *heap = malloc(sizeof(wd_bpe_cand_t) * 3 * n);
  if (!next || !prev || !pair_rank || !heap) {
    free(next);
    free(prev);
    free(pair_rank);
    free(heap);
    return WD_ENOMEM;
  }
  size_t hn = 0;
  const uint32_t end = (uint32_t)n;
  for (uint32_t k = 0; k < end; k++) {
    next[k] = k + 1;
    prev[k] = k == 0 ? end : k - 1; /* end = no previous part */
    pair_rank[k] = k + 1 < end ? wd_rank_of(t, p + k, 2) : WD_RANK_NONE;
    if (pair_rank[k] != WD_RANK_NONE)
      wd_heap_push(heap, &hn, (wd_bpe_cand_t){pair_rank[k], k});
  }
  while (hn > 0) {
    const wd_bpe_cand_t c = wd_heap_pop(heap, &hn);
    const uint32_t a = c.start;
    if (pair_rank[a] != c.rank)
      continue; /* stale: the pair changed or a was absorbed (rank NONE) */
    /* Merge part a with the part b that follows it. */
    const uint32_t b = next[a], after = next[b];
    next[a] = after;
    if (after < end)
      prev[after] = a;
    pair_rank[b] = WD_RANK_NONE;
    pair_rank[a] = after < end ? wd_rank_of(t, p + a, next[after] - a) : WD_RANK_NONE;
    if (pair_rank[a] != WD_RANK_NONE)
      wd_heap_push(heap, &hn, (wd_bpe_cand_t){pair_rank[a], a});
    const uint32_t pa = prev[a];
    if (pa < end) {
      pair_rank[pa] = wd_rank_of(t, p + pa, after - pa);
      if (pair_rank[pa] != WD_RANK_NONE)
        wd_heap_push(heap, &hn, (wd_bpe_cand_t){pair_rank[pa], pa});
    }
  }
  for (uint32_t k = 0; k < end; k = next[k])
    wd_sink_put(s, wd_rank_of(t, p + k, next[k] - k));
  free(next);
  free(prev);
  free(pair_rank);
  free(heap);
  return 0;
}

/* Encodes one pre-token p[0..n): the whole piece if it is a token (as
 * tiktoken checks first), otherwise its byte-pair merge. */
static int wd_bpe_piece(const wd_tokenizer_t *t, const unsigned char *p, size_t n,
                        wd_id_sink_t *s) {
  if (n == 0)
    return 0;
  const int32_t whole = wd_rank_of(t, p, n);
  if (whole != WD_RANK_NONE) {
    wd_sink_put(s, whole);
    return 0;
  }
  if (n <= WD_BPE_STACK) {
    wd_bpe_merge_small(t, p, n, s);
    return 0;
  }
  if (n > UINT32_MAX / 4)
    return WD_ETOOBIG;
  return wd_bpe_merge_large(t, p, n, s);
}

/* Length of the valid UTF-8 character at p[0..n), else 0 (pystr.h). */
static size_t wd_utf8_char_len(const unsigned char *p, size_t n) {
  const long l = wd_utf8_seq(p, n);
  return l > 0 ? (size_t)l : 0;
}

/*
 * Pre-tokenises one stretch of valid UTF-8 and byte-pair encodes each piece.
 * The stretch is passed to PCRE2 as the whole subject, so its end behaves as
 * the end of the text would (for the lookahead of \s+(?!\S)), and
 * PCRE2_NO_UTF_CHECK keeps every call proportional to its match.
 */
static int wd_encode_valid(const wd_tokenizer_t *t, pcre2_match_data *md, const unsigned char *u,
                           size_t len, wd_id_sink_t *sink) {
  const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
  size_t pos = 0;
  int r;
  while (pos < len) {
    const int rc = pcre2_match(t->re, (PCRE2_SPTR)u, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc < 0) {
      /* Every character matches some alternative, so NOMATCH is a bug too. */
      wd_log_debug("%s: pcre2_match failed with %d at byte %zu", __func__, rc, pos);
      return WD_EINTERNAL;
    }
    const size_t ms = ov[0], me = ov[1];
    if (ms != pos || me <= ms || me > len) {
      wd_log_debug("%s: unexpected match [%zu, %zu) at byte %zu", __func__, ms, me, pos);
      return WD_EINTERNAL;
    }
    if ((r = wd_bpe_piece(t, u + ms, me - ms, sink)) < 0)
      return r;
    pos = me;
  }
  return 0;
}

int wd_tokenizer_encode(const wd_tokenizer_t *t, const char *text, size_t len, int32_t *ids,
                        int max_ids, int *ret_n) {
  if (!t || (!text && len > 0) || max_ids < 0 || (!ids && max_ids > 0) || !ret_n)
    return WD_EINVAL;
  *ret_n = 0;
  if (len == 0)
    return 0;
  wd_id_sink_t sink = {.ids = ids, .max = max_ids, .n = 0};
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
  if (!md)
    return WD_ENOMEM;
  const unsigned char *u = (const unsigned char *)text;
  int r = 0;
  size_t pos = 0;
  /* Alternate between stretches of valid UTF-8 and runs of invalid bytes;
   * an invalid run is one raw piece, which no pre-token crosses. */
  while (pos < len && r == 0) {
    size_t end = pos, l;
    while (end < len && (l = wd_utf8_char_len(u + end, len - end)) > 0)
      end += l;
    if (end > pos) {
      r = wd_encode_valid(t, md, u + pos, end - pos, &sink);
    } else {
      while (end < len && wd_utf8_char_len(u + end, len - end) == 0)
        end++;
      r = wd_bpe_piece(t, u + pos, end - pos, &sink);
    }
    pos = end;
  }
  pcre2_match_data_free(md);
  if (r < 0)
    return r;
  *ret_n = sink.n;
  return sink.n > max_ids ? WD_ERANGE : 0;
}

int wd_tokenizer_decode(const wd_tokenizer_t *t, const int32_t *ids, int n, char *out,
                        size_t out_len, size_t *ret_len) {
  if (!t || n < 0 || (!ids && n > 0) || (!out && out_len > 0) || !ret_len)
    return WD_EINVAL;
  *ret_len = 0;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->sp.n_vocab)
      return WD_EINVAL;
    if (ids[i] < t->n_tokens)
      total += wd_token_len(t, ids[i]);
  }
  *ret_len = total;
  if (out_len < total + 1) {
    if (out_len > 0)
      out[0] = '\0';
    return WD_ERANGE;
  }
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    if (ids[i] >= t->n_tokens)
      continue; /* special and timestamp tokens have no text */
    const size_t l = wd_token_len(t, ids[i]);
    memcpy(out + off, t->blob + t->offs[ids[i]], l);
    off += l;
  }
  out[off] = '\0';
  return 0;
}

char *wd_tokenizer_decode_alloc(const wd_tokenizer_t *t, const int32_t *ids, int n) {
  /* the size first (NULL, 0), then the text into a buffer that fits */
  size_t need = 0, len = 0;
  const int rc = wd_tokenizer_decode(t, ids, n, NULL, 0, &need);
  if (rc < 0 && rc != WD_ERANGE)
    return NULL;
  char *s = malloc(need + 1);
  if (s && wd_tokenizer_decode(t, ids, n, s, need + 1, &len) < 0) {
    free(s);
    s = NULL;
  }
  return s;
}

const char *wd_tokenizer_token_bytes(const wd_tokenizer_t *t, int32_t id, size_t *ret_len) {
  if (ret_len)
    *ret_len = 0;
  if (!t || id < 0 || id >= t->n_tokens)
    return NULL;
  if (ret_len)
    *ret_len = wd_token_len(t, id);
  return t->blob + t->offs[id];
}

const wd_special_tokens_t *wd_tokenizer_special(const wd_tokenizer_t *t) {
  return t ? &t->sp : NULL;
}

int wd_tokenizer_is_multilingual(const wd_tokenizer_t *t) {
  /* ref: openai/whisper model.py is_multilingual: n_vocab >= 51865. */
  return t && t->sp.n_vocab >= 51865;
}

int32_t wd_tokenizer_lang_id(const wd_tokenizer_t *t, const char *code) {
  if (!t || !code)
    return WD_EINVAL;
  const int i = wd_languages_index(code);
  if (i < 0)
    return i;
  if (i >= t->sp.n_langs)
    return WD_EUNSUP;
  return t->sp.lang_begin + i;
}

const char *wd_tokenizer_lang_code(const wd_tokenizer_t *t, int32_t id) {
  if (!t || id < t->sp.lang_begin || id >= t->sp.lang_begin + t->sp.n_langs)
    return NULL;
  return wd_languages_code(id - t->sp.lang_begin);
}

int wd_tokenizer_token_text(const wd_tokenizer_t *t, int32_t id, char *out, size_t out_len) {
  if (!t || !out || out_len == 0 || id < 0 || id >= t->sp.n_vocab)
    return WD_EINVAL;
  if (id < t->n_tokens) {
    const size_t l = wd_token_len(t, id);
    if (l + 1 > out_len) {
      memcpy(out, t->blob + t->offs[id], out_len - 1);
      out[out_len - 1] = '\0';
      return WD_ERANGE;
    }
    memcpy(out, t->blob + t->offs[id], l + 1);
    return 0;
  }
  const wd_special_tokens_t *sp = &t->sp;
  int w;
  if (id >= sp->ts_begin) {
    /* ref: tokenizer.py get_encoding(): f"<|{i * 0.02:.2f}|>"; printf rounds
     * the same double the same way. */
    w = snprintf(out, out_len, "<|%.2f|>", (id - sp->ts_begin) * 0.02);
  } else if (id >= sp->lang_begin && id < sp->lang_begin + sp->n_langs) {
    w = snprintf(out, out_len, "<|%s|>", wd_languages_code(id - sp->lang_begin));
  } else {
    const char *name = id == sp->eot            ? "endoftext"
                       : id == sp->sot          ? "startoftranscript"
                       : id == sp->translate    ? "translate"
                       : id == sp->transcribe   ? "transcribe"
                       : id == sp->startoflm    ? "startoflm"
                       : id == sp->startofprev  ? "startofprev"
                       : id == sp->nospeech     ? "nospeech"
                                                : "notimestamps";
    w = snprintf(out, out_len, "<|%s|>", name);
  }
  return (w < 0 || (size_t)w >= out_len) ? WD_ERANGE : 0;
}

static int wd_cmp_i32(const void *a, const void *b) {
  const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/*
 * Computes the suppress_tokens="-1" set once per tokenizer.
 * ref: openai/whisper tokenizer.py non_speech_tokens and decoding.py
 * _get_suppress_tokens. A symbol counts when it encodes to a single token,
 * alone or after a space; the musical symbols in U+2640..U+267F count by
 * their first token (they share their first two UTF-8 bytes).
 */
static int wd_build_suppress(wd_tokenizer_t *t) {
  static const char *const symbols[] = {
      "\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]", "^",
      "_", "`", "{", "|", "}", "~", "\xe3\x80\x8c" /* 「 */, "\xe3\x80\x8d" /* 」 */,
      "\xe3\x80\x8e" /* 『 */, "\xe3\x80\x8f" /* 』 */, "<<", ">>", "<<<", ">>>", "--", "---",
      "-(", "-[", "('", "(\"", "((", "))", "(((", ")))", "[[", "]]", "{{", "}}",
      "\xe2\x99\xaa\xe2\x99\xaa" /* ♪♪ */, "\xe2\x99\xaa\xe2\x99\xaa\xe2\x99\xaa" /* ♪♪♪ */,
  };
  /* ♩ ♪ ♫ ♬ ♭ ♮ ♯ = U+2669..U+266F. */
  static const char *const misc[] = {
      "\xe2\x99\xa9", "\xe2\x99\xaa", "\xe2\x99\xab", "\xe2\x99\xac",
      "\xe2\x99\xad", "\xe2\x99\xae", "\xe2\x99\xaf",
  };
  const size_t n_sym = sizeof symbols / sizeof symbols[0], n_misc = sizeof misc / sizeof misc[0];
  /* At most 2 per symbol, 2 for " -" and " '", 6 specials. */
  const size_t cap = 2 * (n_sym + n_misc) + 2 + 6;
  t->suppress = malloc(sizeof(int32_t) * cap);
  if (!t->suppress)
    return WD_ENOMEM;
  int n = 0;
  char buf[32];
  int32_t ids[16];
  int n_ids = 0, r;

  /* Hyphens and apostrophes stay allowed between words, not at a word start. */
  static const char *const leading[] = {" -", " '"};
  for (size_t i = 0; i < 2; i++) {
    r = wd_tokenizer_encode(t, leading[i], 2, ids, 16, &n_ids);
    if (r < 0 || n_ids < 1)
      return r < 0 ? r : WD_EINTERNAL;
    t->suppress[n++] = ids[0];
  }
  for (size_t i = 0; i < n_sym + n_misc; i++) {
    const int is_misc = i >= n_sym;
    const char *sym = is_misc ? misc[i - n_sym] : symbols[i];
    const size_t l = strlen(sym);
    for (int spaced = 0; spaced < 2; spaced++) {
      buf[0] = ' ';
      memcpy(buf + 1, sym, l);
      r = wd_tokenizer_encode(t, spaced ? buf : buf + 1, l + (size_t)spaced, ids, 16, &n_ids);
      if (r < 0 && r != WD_ERANGE)
        return r;
      if (n_ids == 1 || (is_misc && n_ids >= 1))
        t->suppress[n++] = ids[0];
    }
  }
  const wd_special_tokens_t *sp = &t->sp;
  const int32_t specials[] = {sp->transcribe,  sp->translate, sp->sot,
                              sp->startofprev, sp->startoflm, sp->nospeech};
  for (size_t i = 0; i < 6; i++)
    t->suppress[n++] = specials[i];

  /* sorted(set(...)) */
  qsort(t->suppress, (size_t)n, sizeof(int32_t), wd_cmp_i32);
  int u = 0;
  for (int i = 0; i < n; i++)
    if (u == 0 || t->suppress[u - 1] != t->suppress[i])
      t->suppress[u++] = t->suppress[i];
  t->n_suppress = u;
  return 0;
}

int wd_tokenizer_suppress_tokens(const wd_tokenizer_t *t, int32_t *ids, int max, int *ret_n) {
  if (!t || max < 0 || (!ids && max > 0) || !ret_n)
    return WD_EINVAL;
  *ret_n = t->n_suppress;
  if (max > 0)
    memcpy(ids, t->suppress, sizeof(int32_t) * (size_t)(max < t->n_suppress ? max : t->n_suppress));
  return max < t->n_suppress ? WD_ERANGE : 0;
}
