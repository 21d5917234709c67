/*
 * test_pick_cache.c - the measured kernel choices on disk (cpu/cpu_pick_cache.h)
 * with a fake choice: the round trip, the directory's order of precedence,
 * a foreign key, every truncation and byte flip of a good file and random
 * garbage, a FIFO in the file's place (each must read as "measure again",
 * never hang, crash nor be taken), a
 * directory that cannot be written, values the format cannot hold, and
 * the temporary files a crashed writer left, swept by the next write.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cpu_pick_cache.h"
#include "error.h"
#include "wd_test.h"

static const char *KEY = "kernels 1; cpu Fake CPU (family 25 model 17 stepping 1); batch 8";

/* A fresh directory under /tmp for one test. */
static void temp_dir(char *dir, size_t len) {
  snprintf(dir, len, "/tmp/wd_test_pick_XXXXXX");
  if (!mkdtemp(dir))
    dir[0] = '\0';
}

static void fake_set(wd_pick_set_t *s) {
  memset(s, 0, sizeof *s);
  WD_CHECK_EQ_INT(wd_pick_set_put(s, "gemv_path", "2 2 2 1 1 1 1 1 1 1 1 1 1 1 1 1 1"), 0);
  WD_CHECK_EQ_INT(wd_pick_set_put(s, "gemv_note", "measured on fc1 (2048x512): 1 row avx512"), 0);
  WD_CHECK_EQ_INT(wd_pick_set_put(s, "enc_attn", "blocked"), 0);
}

/* The whole file as bytes, or NULL. */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = malloc(65536);
  *n = buf ? fread(buf, 1, 65536, f) : 0;
  fclose(f);
  return buf;
}

static void spill(const char *path, const char *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return;
  if (n)
    fwrite(buf, 1, n, f);
  fclose(f);
}

static void remove_dir(const char *dir, const char *path) {
  (void)unlink(path);
  (void)rmdir(dir);
}

WD_TEST(round_trip) {
  char dir[64], path[WD_PICK_PATH];
  temp_dir(dir, sizeof dir);
  WD_CHECK(dir[0] != '\0');
  WD_CHECK_EQ_INT(wd_pick_cache_path(dir, KEY, path, sizeof path), 0);
  WD_CHECK(strstr(path, "/cpu-kernels-") != NULL);
  wd_pick_set_t s, r;
  fake_set(&s);
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), WD_ENOENT); /* nothing yet */
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, KEY, &s), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), 0);
  WD_CHECK_EQ_INT(r.n, 3);
  WD_CHECK_EQ_STR(wd_pick_set_get(&r, "gemv_path"), "2 2 2 1 1 1 1 1 1 1 1 1 1 1 1 1 1");
  WD_CHECK_EQ_STR(wd_pick_set_get(&r, "enc_attn"), "blocked");
  WD_CHECK(wd_pick_set_get(&r, "absent") == NULL);
  /* Rewriting replaces (rename over the old file); no temp file is left. */
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "enc_attn", "sgemm"), 0);
  WD_CHECK_EQ_INT(s.n, 3);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, KEY, &s), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), 0);
  WD_CHECK_EQ_STR(wd_pick_set_get(&r, "enc_attn"), "sgemm");
  int files = 0;
  DIR *d = opendir(dir);
  for (const struct dirent *de; d && (de = readdir(d)) != NULL;)
    files += de->d_name[0] != '.';
  if (d)
    closedir(d);
  WD_CHECK_EQ_INT(files, 1);
  /* An empty set round-trips too. */
  memset(&s, 0, sizeof s);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, KEY, &s), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), 0);
  WD_CHECK_EQ_INT(r.n, 0);
  remove_dir(dir, path);
}

/* A writer that died between mkstemp and rename left path.XXXXXX behind:
 * the next write removes those over an hour old, and nothing else (a
 * writer's fresh one, another file, a name of another length). */
WD_TEST(stale_temporary_files_are_swept) {
  char dir[64], path[WD_PICK_PATH], old[WD_PICK_PATH + 16], fresh[WD_PICK_PATH + 16],
      other[WD_PICK_PATH + 16];
  temp_dir(dir, sizeof dir);
  WD_CHECK(dir[0] != '\0');
  WD_CHECK_EQ_INT(wd_pick_cache_path(dir, KEY, path, sizeof path), 0);
  snprintf(old, sizeof old, "%s.a1B2c3", path);
  snprintf(fresh, sizeof fresh, "%s.d4E5f6", path);
  snprintf(other, sizeof other, "%s.abc", path);
  spill(old, "x", 1);
  spill(fresh, "y", 1);
  spill(other, "z", 1);
  const struct timespec two_hours_ago[2] = { { time(NULL) - 7200, 0 }, { time(NULL) - 7200, 0 } };
  WD_CHECK_EQ_INT(utimensat(AT_FDCWD, old, two_hours_ago, 0), 0);
  WD_CHECK_EQ_INT(utimensat(AT_FDCWD, other, two_hours_ago, 0), 0);
  wd_pick_set_t s;
  fake_set(&s);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, KEY, &s), 0);
  WD_CHECK(access(old, F_OK) != 0);
  WD_CHECK_EQ_INT(access(fresh, F_OK), 0);
  WD_CHECK_EQ_INT(access(other, F_OK), 0);
  (void)unlink(fresh);
  (void)unlink(other);
  remove_dir(dir, path);
}

WD_TEST(another_key_is_foreign) {
  char dir[64], path[WD_PICK_PATH], other[WD_PICK_PATH];
  temp_dir(dir, sizeof dir);
  WD_CHECK_EQ_INT(wd_pick_cache_path(dir, KEY, path, sizeof path), 0);
  /* Another key (another batch) names another file... */
  WD_CHECK_EQ_INT(wd_pick_cache_path(dir, "kernels 1; batch 16", other, sizeof other), 0);
  WD_CHECK(strcmp(path, other) != 0);
  /* ...and a file holding another key (a hash collision, a copied file)
   * reads as absent, its entries not taken. */
  wd_pick_set_t s, r;
  fake_set(&s);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, "kernels 1; batch 16", &s), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), WD_ENOENT);
  WD_CHECK_EQ_INT(r.n, 0);
  /* A key that is a prefix of the stored one is another key too. */
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, "kernels 1; batch 1", &r), WD_ENOENT);
  remove_dir(dir, path);
}

WD_TEST(every_truncation_and_flip_is_refused) {
  char dir[64], path[WD_PICK_PATH];
  temp_dir(dir, sizeof dir);
  WD_CHECK_EQ_INT(wd_pick_cache_path(dir, KEY, path, sizeof path), 0);
  wd_pick_set_t s, r;
  fake_set(&s);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, KEY, &s), 0);
  size_t n = 0;
  char *good = slurp(path, &n);
  WD_CHECK(good && n > 100);
  if (!good)
    return;
  int taken = 0;
  for (size_t cut = 0; cut < n; cut++) { /* every truncation */
    spill(path, good, cut);
    taken += wd_pick_cache_read(path, KEY, &r) == 0;
  }
  WD_CHECK_EQ_INT(taken, 0);
  for (size_t i = 0; i < n; i++) { /* every single-bit flip, the low and the high bit */
    for (int bit = 0; bit < 8; bit += 7) {
      good[i] = (char)(good[i] ^ (1 << bit));
      spill(path, good, n);
      const int rc = wd_pick_cache_read(path, KEY, &r);
      /* A flip in the key line can only make it foreign; anywhere else the
       * checksum (or the parser) refuses it. */
      WD_CHECK(rc == WD_EFORMAT || rc == WD_ENOENT);
      WD_CHECK_EQ_INT(r.n, 0);
      good[i] = (char)(good[i] ^ (1 << bit));
    }
  }
  spill(path, good, n); /* restored: read again */
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), 0);
  free(good);
  remove_dir(dir, path);
}

WD_TEST(garbage_is_refused) {
  char dir[64], path[WD_PICK_PATH];
  temp_dir(dir, sizeof dir);
  WD_CHECK_EQ_INT(wd_pick_cache_path(dir, KEY, path, sizeof path), 0);
  wd_pick_set_t r;
  uint64_t x = 0x243f6a8885a308d3ull;
  char buf[4096];
  int taken = 0;
  for (int t = 0; t < 300; t++) {
    /* Random bytes, random printable lines, and the right header followed
     * by random lines: lengths 0 .. 4095. */
    size_t n = 0, len = (size_t)(t * 13) % sizeof buf;
    if (t % 3 == 2)
      n = (size_t)snprintf(buf, sizeof buf, "whisperd-kernels 1\nkey %s\n", KEY);
    for (; n < len; n++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      buf[n] = t % 3 == 0 ? (char)(x & 0xff) : (x & 15) == 0 ? '\n' : (char)(' ' + x % 95);
    }
    spill(path, buf, n);
    taken += wd_pick_cache_read(path, KEY, &r) == 0;
  }
  WD_CHECK_EQ_INT(taken, 0);
  /* Longer than any file of ours. */
  char *big = calloc(1, 200000);
  WD_CHECK(big != NULL);
  if (big) {
    memset(big, 'a', 199999);
    memcpy(big, "whisperd-kernels 1\n", 19);
    spill(path, big, 199999);
    WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), WD_EFORMAT);
    free(big);
  }
  /* A directory where the file should be. */
  (void)unlink(path);
  WD_CHECK_EQ_INT(mkdir(path, 0700), 0);
  WD_CHECK(wd_pick_cache_read(path, KEY, &r) < 0);
  (void)rmdir(path);
  /* A FIFO where the file should be, with no writer: refused at once
   * (a blocking open would hang the model's load forever). */
  WD_CHECK_EQ_INT(mkfifo(path, 0600), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), WD_EFORMAT);
  remove_dir(dir, path);
}

WD_TEST(unwritable_is_only_an_error_code) {
  char dir[64], file[128], path[WD_PICK_PATH];
  temp_dir(dir, sizeof dir);
  /* A directory below a regular file can be neither made nor written,
   * even by root (chmod would not stop root). */
  snprintf(file, sizeof file, "%s/plain", dir);
  spill(file, "x", 1);
  char sub[192];
  snprintf(sub, sizeof sub, "%s/whisperd", file);
  WD_CHECK_EQ_INT(wd_pick_cache_path(sub, KEY, path, sizeof path), 0);
  wd_pick_set_t s, r;
  fake_set(&s);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, KEY, &s), WD_EIO);
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), WD_EIO);
  /* A missing directory and its parent are made. */
  char deep[192];
  snprintf(deep, sizeof deep, "%s/cache/whisperd", dir);
  WD_CHECK_EQ_INT(wd_pick_cache_path(deep, KEY, path, sizeof path), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, KEY, &s), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), 0);
  (void)unlink(path);
  (void)rmdir(deep);
  snprintf(deep, sizeof deep, "%s/cache", dir);
  (void)rmdir(deep);
  (void)unlink(file);
  (void)rmdir(dir);
}

WD_TEST(values_the_format_cannot_hold) {
  wd_pick_set_t s;
  memset(&s, 0, sizeof s);
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "Bad", "x"), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "", "x"), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "a b", "x"), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "ok", "two\nlines"), WD_EINVAL);
  /* "end" would read as the file's last line: a file holding it could be
   * written but never read back (measured again at every load). */
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "end", "x"), WD_EINVAL);
  WD_CHECK_EQ_INT(s.n, 0);
  char longv[WD_PICK_VALUE + 1];
  memset(longv, 'v', sizeof longv - 1);
  longv[WD_PICK_VALUE] = '\0';
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "ok", longv), WD_EINVAL);
  longv[WD_PICK_VALUE - 1] = '\0'; /* the longest that fits */
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "ok", longv), 0);
  for (int i = 1; i < WD_PICK_MAX; i++) {
    char name[8];
    snprintf(name, sizeof name, "n%d", i);
    WD_CHECK_EQ_INT(wd_pick_set_put(&s, name, "v"), 0);
  }
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "one_more", "v"), WD_ERANGE);
  WD_CHECK_EQ_INT(s.n, WD_PICK_MAX);
  /* A full set of the longest values still fits a file. */
  char dir[64], path[WD_PICK_PATH];
  temp_dir(dir, sizeof dir);
  WD_CHECK_EQ_INT(wd_pick_cache_path(dir, KEY, path, sizeof path), 0);
  for (int i = 0; i < s.n; i++)
    memcpy(s.e[i].value, longv, WD_PICK_VALUE); /* longv is WD_PICK_VALUE - 1 chars + NUL */
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, KEY, &s), 0);
  wd_pick_set_t r;
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, KEY, &r), 0);
  WD_CHECK_EQ_INT(r.n, WD_PICK_MAX);
  /* A key with a newline is refused. */
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, "a\nb", &s), WD_EINVAL);
  remove_dir(dir, path);
}

WD_TEST(directory_precedence) {
  char dir[WD_PICK_PATH];
  const char *names[] = { "WHISPERD_CACHE_DIR", "CACHE_DIRECTORY", "XDG_CACHE_HOME", "HOME" };
  char *saved[4];
  for (int i = 0; i < 4; i++) {
    const char *v = getenv(names[i]);
    saved[i] = v ? strdup(v) : NULL;
  }
  setenv("HOME", "/home/u", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("CACHE_DIRECTORY", "/var/cache/whisperd:/var/cache/other", 1);
  setenv("WHISPERD_CACHE_DIR", "/explicit", 1);
  WD_CHECK_EQ_INT(wd_pick_cache_dir(dir, sizeof dir), 0);
  WD_CHECK_EQ_STR(dir, "/explicit");
  setenv("WHISPERD_CACHE_DIR", "cache", 1); /* relative: a wrong setting, no cache */
  WD_CHECK_EQ_INT(wd_pick_cache_dir(dir, sizeof dir), WD_EINVAL);
  unsetenv("WHISPERD_CACHE_DIR");
  WD_CHECK_EQ_INT(wd_pick_cache_dir(dir, sizeof dir), 0);
  WD_CHECK_EQ_STR(dir, "/var/cache/whisperd"); /* systemd's first */
  unsetenv("CACHE_DIRECTORY");
  WD_CHECK_EQ_INT(wd_pick_cache_dir(dir, sizeof dir), 0);
  WD_CHECK_EQ_STR(dir, "/xdg/whisperd");
  setenv("XDG_CACHE_HOME", "relative", 1); /* not absolute: ignored, as the spec says */
  WD_CHECK_EQ_INT(wd_pick_cache_dir(dir, sizeof dir), 0);
  WD_CHECK_EQ_STR(dir, "/home/u/.cache/whisperd");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  WD_CHECK_EQ_INT(wd_pick_cache_dir(dir, sizeof dir), WD_ENOENT);
  setenv("HOME", "/home/u", 1);
  char tiny[8];
  WD_CHECK_EQ_INT(wd_pick_cache_dir(tiny, sizeof tiny), WD_ERANGE);
  for (int i = 0; i < 4; i++) {
    if (saved[i])
      setenv(names[i], saved[i], 1);
    else
      unsetenv(names[i]);
    free(saved[i]);
  }
}

int main(void) { return wd_test_main(); }
