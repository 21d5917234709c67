/*
 * tokenizer.h - Whisper's byte-level BPE tokenizer (encode and decode) and
 * its special tokens.
 *
 * A wd_tokenizer_t is built from the text vocabulary that ggml model files
 * carry: the raw bytes of every text token, where the token id is the BPE
 * rank (gpt2.tiktoken: 50256 tokens for English-only models,
 * multilingual.tiktoken: 50257), plus the model's n_vocab (51864, 51865 or
 * 51866), which fixes where the special tokens sit (whisper-decoding.md 4.2).
 * Encoding reproduces tiktoken as openai/whisper configures it: the GPT-2
 * pre-tokenisation regex, then byte-pair merges by rank.
 *
 * A tokenizer is immutable after wd_tokenizer_new(); every other function
 * only reads it and may be called from any number of threads at once.
 */
#ifndef WD_TOKENIZER_H
#define WD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct wd_tokenizer wd_tokenizer_t;

/* Special token ids for one vocabulary layout. */
typedef struct {
  int32_t eot;          /* <|endoftext|>; ids below it are text tokens */
  int32_t sot;          /* <|startoftranscript|> */
  int32_t lang_begin;   /* <|en|>; languages follow in wd_languages order */
  int32_t n_langs;      /* 99, or 100 for large-v3 ("yue") */
  int32_t translate;    /* <|translate|> */
  int32_t transcribe;   /* <|transcribe|> */
  int32_t startoflm;    /* <|startoflm|> */
  int32_t startofprev;  /* <|startofprev|> */
  int32_t nospeech;     /* <|nospeech|> */
  int32_t notimestamps; /* <|notimestamps|> */
  int32_t ts_begin;     /* <|0.00|>; 1501 timestamps in steps of 0.02 s */
  int32_t n_vocab;      /* total number of ids */
} wd_special_tokens_t;

/*
 * Builds a tokenizer. tokens[i] / lens[i] are the raw bytes of text token i
 * (i = BPE rank), n_tokens of them; the bytes are copied, so the caller keeps
 * ownership of its arrays. The layout follows openai/whisper from n_vocab
 * alone: multilingual iff n_vocab >= 51865, n_vocab - 51765 - multilingual
 * languages (1 to 100), <|endoftext|> = 50256 + multilingual. Tokens at or
 * above <|endoftext|> are ignored, so both a .tiktoken vocabulary (50256 or
 * 50257 ranks) and a ggml model's list (always 50257; English-only ones end
 * with the bytes "<|endoftext|>") work. A zero-length token is allowed
 * (multilingual rank 50256 is the empty string) and tokens[i] may then be
 * NULL. Every single byte must be a token. Returns 0, WD_EINVAL for a
 * vocabulary that breaks these rules, WD_ENOMEM, or WD_EINTERNAL when PCRE2
 * rejects the pattern.
 */
int wd_tokenizer_new(const char *const *tokens, const size_t *lens, int n_tokens, int n_vocab,
                     wd_tokenizer_t **ret);
/* Frees t; accepts NULL. */
void wd_tokenizer_free(wd_tokenizer_t *t);

/*
 * Encodes len bytes of UTF-8 text into text-token ids, exactly as tiktoken's
 * encode_ordinary() does for Whisper. Text that looks like a special token
 * ("<|endoftext|>") is ordinary text here. Invalid UTF-8 is kept, not
 * replaced: invalid byte sequences split the text (no pre-token crosses
 * them), every valid stretch is encoded as if it were a whole string, and
 * every run of invalid bytes is byte-pair encoded from its raw bytes, so that
 * decode(encode(x)) == x for any bytes x.
 *
 * Writes at most max_ids ids and sets *ret_n to the number of ids the text
 * needs. Returns 0, WD_ERANGE when max_ids was too small (*ret_n tells how
 * many are needed; ids = NULL with max_ids = 0 asks only for the count),
 * WD_EINVAL for bad arguments, WD_ENOMEM, WD_ETOOBIG for a single piece
 * over 1 GB, or WD_EINTERNAL on a PCRE2 failure. Cost is O(n log n) in the
 * length of the longest pre-token, linear otherwise.
 */
int wd_tokenizer_encode(const wd_tokenizer_t *t, const char *text, size_t len, int32_t *ids,
                        int max_ids, int *ret_n);

/*
 * Decodes ids to bytes: the concatenated bytes of the text tokens, with
 * special and timestamp tokens (id >= eot) skipped, as openai/whisper's
 * Tokenizer.decode() skips timestamps. The output is NUL-terminated and
 * *ret_len is its length without the NUL (tokens may themselves contain NUL
 * bytes, so *ret_len is authoritative). The bytes of a partial sequence of
 * tokens may be invalid UTF-8 (a character split across tokens). Returns 0,
 * WD_EINVAL for an id outside [0, n_vocab) or bad arguments, or WD_ERANGE when
 * out_len < *ret_len + 1 (out = NULL with out_len = 0 asks for the length).
 */
int wd_tokenizer_decode(const wd_tokenizer_t *t, const int32_t *ids, int n, char *out,
                        size_t out_len, size_t *ret_len);

/* wd_tokenizer_decode into a buffer of its own: the text, malloc'd and
 * NUL-terminated (the caller frees it), or NULL (bad ids, no memory). */
char *wd_tokenizer_decode_alloc(const wd_tokenizer_t *t, const int32_t *ids, int n);

/* Raw bytes of text token id (NUL-terminated, length in *ret_len), or NULL
 * with *ret_len = 0 when id is not a text token. ret_len may be NULL. */
const char *wd_tokenizer_token_bytes(const wd_tokenizer_t *t, int32_t id, size_t *ret_len);

/* The special token ids of this tokenizer's layout; valid as long as t. */
const wd_special_tokens_t *wd_tokenizer_special(const wd_tokenizer_t *t);

/* 1 if the model is multilingual (n_vocab >= 51865, as openai/whisper
 * model.py decides), else 0. English-only models take no language token. */
int wd_tokenizer_is_multilingual(const wd_tokenizer_t *t);

/* Token id of a language code ("en", case-insensitive). WD_ENOENT when the
 * code is unknown, WD_EUNSUP when this model has no token for it ("yue"
 * before large-v3), WD_EINVAL for NULL arguments. */
int32_t wd_tokenizer_lang_id(const wd_tokenizer_t *t, const char *code);
/* Language code of a language token id, or NULL when id is not one. */
const char *wd_tokenizer_lang_code(const wd_tokenizer_t *t, int32_t id);

/*
 * Writes the printable text of any id, NUL-terminated: the raw bytes of a
 * text token, or the name of a special token as tiktoken spells it
 * ("<|endoftext|>", "<|en|>", "<|notimestamps|>", "<|1.50|>"). Returns 0,
 * WD_EINVAL for an id outside [0, n_vocab), or WD_ERANGE when out_len is too
 * small (out then holds a truncated, NUL-terminated prefix when out_len > 0).
 */
int wd_tokenizer_token_text(const wd_tokenizer_t *t, int32_t id, char *out, size_t out_len);

/*
 * The tokens decoding suppresses for suppress_tokens="-1", sorted ascending:
 * openai/whisper's Tokenizer.non_speech_tokens (computed at construction by
 * encoding the same symbol list) plus translate, transcribe, sot,
 * startofprev, startoflm and nospeech (decoding.py _get_suppress_tokens).
 * Writes at most max ids, sets *ret_n to the full count; returns 0, WD_ERANGE
 * when max is too small, or WD_EINVAL.
 */
int wd_tokenizer_suppress_tokens(const wd_tokenizer_t *t, int32_t *ids, int max, int *ret_n);

/* Tests (the vocabulary fuzzer): wd_tokenizer_new's build with any number
 * of text tokens n_text >= 256 and an English-only layout after them (the
 * specials from id n_text on), so that a hostile vocabulary costs its own
 * size rather than GPT-2's 50,256 ranks. */
int wd__tokenizer_new_small(const char *const *tokens, const size_t *lens, int n_text,
                            wd_tokenizer_t **ret);

#endif
