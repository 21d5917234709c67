/*
 * test_languages.c - the language table against openai/whisper's LANGUAGES
 * order (whisper/tokenizer.py v20250625) and its TO_LANGUAGE_CODE aliases.
 */
#include "error.h"
#include "languages.h"
#include "wd_test.h"

WD_TEST(table_order_and_size) {
  WD_CHECK_EQ_INT(wd_languages_count(), 100);
  /* Spot checks across the table; the token id is lang_begin + index. */
  WD_CHECK_EQ_STR(wd_languages_code(0), "en");
  WD_CHECK_EQ_STR(wd_languages_name(0), "english");
  WD_CHECK_EQ_STR(wd_languages_code(1), "zh");
  WD_CHECK_EQ_STR(wd_languages_code(2), "de");
  WD_CHECK_EQ_STR(wd_languages_code(21), "uk");
  WD_CHECK_EQ_STR(wd_languages_name(80), "haitian creole");
  WD_CHECK_EQ_STR(wd_languages_code(98), "su");
  WD_CHECK_EQ_STR(wd_languages_code(99), "yue");
  WD_CHECK_EQ_STR(wd_languages_name(99), "cantonese");
  WD_CHECK(wd_languages_code(100) == NULL);
  WD_CHECK(wd_languages_code(-1) == NULL);
  WD_CHECK(wd_languages_name(100) == NULL);
  /* Codes and names are unique. */
  int dup = 0;
  for (int i = 0; i < 100; i++)
    for (int j = i + 1; j < 100; j++)
      dup += strcmp(wd_languages_code(i), wd_languages_code(j)) == 0 ||
             strcmp(wd_languages_name(i), wd_languages_name(j)) == 0;
  WD_CHECK_EQ_INT(dup, 0);
}

WD_TEST(lookup) {
  WD_CHECK_EQ_INT(wd_languages_index("en"), 0);
  WD_CHECK_EQ_INT(wd_languages_index("EN"), 0);
  WD_CHECK_EQ_INT(wd_languages_index("haw"), 93);
  WD_CHECK_EQ_INT(wd_languages_index("english"), WD_ENOENT);
  WD_CHECK_EQ_INT(wd_languages_index(""), WD_ENOENT);
  WD_CHECK_EQ_INT(wd_languages_index(NULL), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_languages_find("English"), 0);
  WD_CHECK_EQ_INT(wd_languages_find("de"), 2);
  WD_CHECK_EQ_INT(wd_languages_find("castilian"), wd_languages_index("es"));
  WD_CHECK_EQ_INT(wd_languages_find("Mandarin"), 1);
  WD_CHECK_EQ_INT(wd_languages_find("moldovan"), wd_languages_index("ro"));
  WD_CHECK_EQ_INT(wd_languages_find("burmese"), wd_languages_index("my"));
  WD_CHECK_EQ_INT(wd_languages_find("klingon"), WD_ENOENT);
  WD_CHECK_EQ_INT(wd_languages_find(NULL), WD_EINVAL);
  /* Every code and name resolves to its own index. */
  int ok = 0;
  for (int i = 0; i < 100; i++)
    ok += wd_languages_find(wd_languages_code(i)) == i && wd_languages_find(wd_languages_name(i)) == i;
  WD_CHECK_EQ_INT(ok, 100);
}

int main(void) { return wd_test_main(); }
