/*
 * test_config_man.c - whisperd(8)'s renderer: roff escaping of table text
 * (a line starting with ' or . would be a roff request; dashes must be \-),
 * one entry per table row, and write errors reported.
 * tests/packaging/man_options.sh compares the whole page with --help.
 */
#include "config_man.c"

#include <stdlib.h>

#include "wd_test.h"

/* roff_text(s) as a string (caller frees). */
static char *render_text(const char *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return NULL;
  roff_text(f, s);
  fclose(f);
  return buf;
}

WD_TEST(roff_escapes) {
  char *t = render_text("'Authorization: Bearer KEY' on /v1");
  WD_CHECK_EQ_STR(t, "\\&'Authorization: Bearer KEY' on /v1");
  free(t);
  t = render_text(".bin files");
  WD_CHECK_EQ_STR(t, "\\&.bin files");
  free(t);
  t = render_text("a\\b --no-x");
  WD_CHECK_EQ_STR(t, "a\\eb \\-\\-no\\-x");
  free(t);
}

WD_TEST(every_option_once) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  WD_CHECK(f != NULL);
  if (!f)
    return;
  WD_CHECK_EQ_INT(wd_config_man(f, "9.9.9", "2000-01-01"), 0);
  fclose(f);
  WD_CHECK(strstr(buf, ".TH WHISPERD 8 \"2000-01-01\" \"whisperd 9.9.9\"") != NULL);
  wd_config_doc_t d;
  size_t n = 0;
  for (; wd_config_option_doc(n, &d) == 0; n++) {
    /* The tag names the long flag once, and the environment line follows. */
    char env[160] = "WHISPERD_";
    size_t k = strlen(env);
    for (const char *c = d.key; *c && k + 1 < sizeof env; c++)
      env[k++] = *c == '-' ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    env[k] = '\0';
    WD_CHECK(strstr(buf, env) != NULL);
  }
  WD_CHECK(n >= 30);
  size_t tp = 0;
  for (const char *p = buf; (p = strstr(p, "\n.TP\n")) != NULL; p++)
    tp++;
  /* options + --config, --help, --version + commands + endpoints/signals/files */
  WD_CHECK(tp > n + 3);
  free(buf);
}

WD_TEST(write_error) {
  FILE *f = fopen("/dev/full", "w");
  if (!f)
    return;
  setvbuf(f, NULL, _IONBF, 0); /* make the error show before fclose */
  WD_CHECK_EQ_INT(wd_config_man(f, "1", "2000-01-01"), WD_EIO);
  fclose(f);
}

int main(void) { return wd_test_main(); }
