/*
 * languages.h - Whisper's language table: ISO 639 code and English name.
 *
 * The order is openai/whisper's LANGUAGES dict (whisper/tokenizer.py), which
 * is also the order of the language tokens: language index i is token
 * lang_begin + i of a model whose vocabulary has more than i language slots
 * (99 for every model before large-v3, 100 with "yue" since large-v3).
 * The table is static and read-only, so every function here is thread-safe.
 */
#ifndef WD_LANGUAGES_H
#define WD_LANGUAGES_H

/* Number of languages in the table (100). */
int wd_languages_count(void);

/* Code ("en") and lower-case English name ("english") of language index i;
 * NULL when i is outside [0, wd_languages_count()). */
const char *wd_languages_code(int i);
const char *wd_languages_name(int i);

/* Index of an exact language code, compared case-insensitively ("en", "EN");
 * a negative WD_E* code (WD_ENOENT) when the code is not in the table. */
int wd_languages_index(const char *code);

/*
 * Index for a code, a name or one of whisper's aliases ("en", "English",
 * "castilian", "mandarin"), case-insensitively, as whisper's get_tokenizer()
 * resolves its `language` argument through TO_LANGUAGE_CODE. A negative
 * WD_E* code (WD_ENOENT) when nothing matches.
 */
int wd_languages_find(const char *code_or_name);

#endif
