/*
 * test_log.c - level parsing, the threshold and the line format on stderr.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "wd_test.h"

/* Runs fn with stderr redirected to a temporary file and returns its text. */
static const char *capture(void (*fn)(void)) {
  static char buf[4096];
  char path[] = "/tmp/wd_test_log_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return "";
  int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(path);
  return buf;
}

static void emit(void) {
  wd_log_info("hello %d", 42);
  wd_log_debug("hidden");
  wd_log_error("bad '%s'", "x");
}

WD_TEST(parse_levels) {
  wd_log_level_t l;
  WD_CHECK_EQ_INT(wd_log_level_parse("debug", &l), 0);
  WD_CHECK_EQ_INT(l, WD_LOG_DEBUG);
  WD_CHECK_EQ_INT(wd_log_level_parse("warning", &l), 0);
  WD_CHECK_EQ_INT(l, WD_LOG_WARNING);
  WD_CHECK_EQ_INT(wd_log_level_parse("error", &l), 0);
  WD_CHECK_EQ_INT(l, WD_LOG_ERR);
  WD_CHECK_EQ_INT(wd_log_level_parse("6", &l), 0);
  WD_CHECK_EQ_INT(l, WD_LOG_INFO);
  WD_CHECK(wd_log_level_parse("loud", &l) < 0);
  WD_CHECK(wd_log_level_parse("", &l) < 0);
  WD_CHECK(wd_log_level_parse(NULL, &l) < 0);
}

WD_TEST(syslog_prefixes_and_threshold) {
  wd_log_set_style(WD_LOG_STYLE_SYSLOG);
  wd_log_set_level(WD_LOG_INFO);
  WD_CHECK_EQ_STR(capture(emit), "<6>hello 42\n<3>bad 'x'\n");
}

/* JOURNAL_STREAM names stderr's device and inode: only then is stderr the
 * journal's. */
static int g_journal;
static void probe(void) { g_journal = wd_log_stderr_is_journal(); }

WD_TEST(journal_stream_must_name_stderr) {
  char path[] = "/tmp/wd_test_journal_XXXXXX";
  int fd = mkstemp(path);
  WD_CHECK(fd >= 0);
  if (fd < 0)
    return;
  struct stat st;
  WD_CHECK_EQ_INT(fstat(fd, &st), 0);
  char v[64];
  snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  unsetenv("JOURNAL_STREAM");
  probe();
  const int unset = g_journal;
  setenv("JOURNAL_STREAM", v, 1);
  probe();
  const int same = g_journal;
  setenv("JOURNAL_STREAM", "1:2", 1);
  probe();
  const int other = g_journal;
  setenv("JOURNAL_STREAM", "garbage", 1);
  probe();
  const int bad = g_journal;
  dup2(saved, STDERR_FILENO);
  close(saved);
  /* stderr back on the test's own: the variable no longer names it. */
  setenv("JOURNAL_STREAM", v, 1);
  probe();
  const int restored = g_journal;
  unsetenv("JOURNAL_STREAM");
  close(fd);
  unlink(path);
  WD_CHECK_EQ_INT(unset, 0);
  WD_CHECK_EQ_INT(same, 1);
  WD_CHECK_EQ_INT(other, 0);
  WD_CHECK_EQ_INT(bad, 0);
  WD_CHECK_EQ_INT(restored, 0);
}

WD_TEST(plain_style) {
  wd_log_set_style(WD_LOG_STYLE_PLAIN);
  wd_log_set_level(WD_LOG_DEBUG);
  WD_CHECK_EQ_STR(capture(emit), "info: hello 42\ndebug: hidden\nerr: bad 'x'\n");
}

static void emit_long(void) {
  char big[5000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  wd_log_info("%s", big);
}

WD_TEST(long_lines_are_truncated_with_newline) {
  wd_log_set_style(WD_LOG_STYLE_SYSLOG);
  wd_log_set_level(WD_LOG_INFO);
  const char *out = capture(emit_long);
  size_t n = strlen(out);
  WD_CHECK(n > 1000 && n <= 2048);
  WD_CHECK(out[n - 1] == '\n');
}

int main(void) { return wd_test_main(); }
