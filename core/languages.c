/*
 * languages.c - the language table of openai/whisper (code, name, aliases).
 * ref: openai/whisper tokenizer.py LANGUAGES and TO_LANGUAGE_CODE (v20250625).
 * Static read-only data; thread-safe; no allocation.
 */
#include "languages.h"

#include <stddef.h>
#include <strings.h>

#include "error.h"

typedef struct {
  const char *code;
  const char *name;
} wd_language_t;

/* The order matters: it is the order of the language tokens in the vocabulary. */
static const wd_language_t wd_languages[] = {
    {"en", "english"},   {"zh", "chinese"},    {"de", "german"},     {"es", "spanish"},
    {"ru", "russian"},   {"ko", "korean"},     {"fr", "french"},     {"ja", "japanese"},
    {"pt", "portuguese"}, {"tr", "turkish"},   {"pl", "polish"},     {"ca", "catalan"},
    {"nl", "dutch"},     {"ar", "arabic"},     {"sv", "swedish"},    {"it", "italian"},
    {"id", "indonesian"}, {"hi", "hindi"},     {"fi", "finnish"},    {"vi", "vietnamese"},
    {"he", "hebrew"},    {"uk", "ukrainian"},  {"el", "greek"},      {"ms", "malay"},
    {"cs", "czech"},     {"ro", "romanian"},   {"da", "danish"},     {"hu", "hungarian"},
    {"ta", "tamil"},     {"no", "norwegian"},  {"th", "thai"},       {"ur", "urdu"},
    {"hr", "croatian"},  {"bg", "bulgarian"},  {"lt", "lithuanian"}, {"la", "latin"},
    {"mi", "maori"},     {"ml", "malayalam"},  {"cy", "welsh"},      {"sk", "slovak"},
    {"te", "telugu"},    {"fa", "persian"},    {"lv", "latvian"},    {"bn", "bengali"},
    {"sr", "serbian"},   {"az", "azerbaijani"}, {"sl", "slovenian"}, {"kn", "kannada"},
    {"et", "estonian"},  {"mk", "macedonian"}, {"br", "breton"},     {"eu", "basque"},
    {"is", "icelandic"}, {"hy", "armenian"},   {"ne", "nepali"},     {"mn", "mongolian"},
    {"bs", "bosnian"},   {"kk", "kazakh"},     {"sq", "albanian"},   {"sw", "swahili"},
    {"gl", "galician"},  {"mr", "marathi"},    {"pa", "punjabi"},    {"si", "sinhala"},
    {"km", "khmer"},     {"sn", "shona"},      {"yo", "yoruba"},     {"so", "somali"},
    {"af", "afrikaans"}, {"oc", "occitan"},    {"ka", "georgian"},   {"be", "belarusian"},
    {"tg", "tajik"},     {"sd", "sindhi"},     {"gu", "gujarati"},   {"am", "amharic"},
    {"yi", "yiddish"},   {"lo", "lao"},        {"uz", "uzbek"},      {"fo", "faroese"},
    {"ht", "haitian creole"}, {"ps", "pashto"}, {"tk", "turkmen"},   {"nn", "nynorsk"},
    {"mt", "maltese"},   {"sa", "sanskrit"},   {"lb", "luxembourgish"}, {"my", "myanmar"},
    {"bo", "tibetan"},   {"tl", "tagalog"},    {"mg", "malagasy"},   {"as", "assamese"},
    {"tt", "tatar"},     {"haw", "hawaiian"},  {"ln", "lingala"},    {"ha", "hausa"},
    {"ba", "bashkir"},   {"jw", "javanese"},   {"su", "sundanese"},  {"yue", "cantonese"},
};

#define WD_N_LANGUAGES ((int)(sizeof wd_languages / sizeof wd_languages[0]))

/* Extra names accepted by whisper's get_tokenizer() (TO_LANGUAGE_CODE). */
static const wd_language_t wd_language_aliases[] = {
    {"my", "burmese"},   {"ca", "valencian"}, {"nl", "flemish"},   {"ht", "haitian"},
    {"lb", "letzeburgesch"}, {"ps", "pushto"}, {"pa", "panjabi"},  {"ro", "moldavian"},
    {"ro", "moldovan"},  {"si", "sinhalese"}, {"es", "castilian"}, {"zh", "mandarin"},
};

int wd_languages_count(void) { return WD_N_LANGUAGES; }

const char *wd_languages_code(int i) {
  return (i >= 0 && i < WD_N_LANGUAGES) ? wd_languages[i].code : NULL;
}

const char *wd_languages_name(int i) {
  return (i >= 0 && i < WD_N_LANGUAGES) ? wd_languages[i].name : NULL;
}

int wd_languages_index(const char *code) {
  if (!code)
    return WD_EINVAL;
  for (int i = 0; i < WD_N_LANGUAGES; i++)
    if (strcasecmp(code, wd_languages[i].code) == 0)
      return i;
  return WD_ENOENT;
}

int wd_languages_find(const char *code_or_name) {
  if (!code_or_name)
    return WD_EINVAL;
  int i = wd_languages_index(code_or_name);
  if (i >= 0)
    return i;
  for (i = 0; i < WD_N_LANGUAGES; i++)
    if (strcasecmp(code_or_name, wd_languages[i].name) == 0)
      return i;
  /* An alias names its language by code; the table above holds every such code. */
  for (size_t a = 0; a < sizeof wd_language_aliases / sizeof wd_language_aliases[0]; a++)
    if (strcasecmp(code_or_name, wd_language_aliases[a].name) == 0)
      return wd_languages_index(wd_language_aliases[a].code);
  return WD_ENOENT;
}
