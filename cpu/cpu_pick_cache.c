/*
 * cpu_pick_cache.c - the measured kernel choices on disk (see
 * cpu_pick_cache.h for the format and why it is never required).
 */
#include "cpu_pick_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"

#define MAGIC "whisperd-kernels 1\n"
/* Larger than any file we write (header, key, 8 full entries, end line):
 * anything longer is not ours. */
#define FILE_MAX (64 + WD_PICK_KEY + WD_PICK_MAX * (WD_PICK_NAME + WD_PICK_VALUE + 2) + 64)

static uint64_t fnv1a(uint64_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

static int printable(const char *s, size_t max) {
  size_t n = 0;
  for (; s[n]; n++)
    if (n + 1 >= max || (unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e)
      return 0;
  return 1;
}

static int good_name(const char *s) {
  if (!s[0] || strcmp(s, "end") == 0) /* "end <hex>" is the file's last line */
    return 0;
  for (size_t n = 0; s[n]; n++)
    if (n + 1 >= WD_PICK_NAME || !((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') ||
                                   s[n] == '_'))
      return 0;
  return 1;
}

/* An environment path: set, non-empty and absolute. */
static const char *env_path(const char *name) {
  const char *v = getenv(name);
  return v && v[0] == '/' ? v : NULL;
}

int wd_pick_cache_dir(char *dir, size_t len) {
  const char *v;
  int n;
  /* Ours, set but relative, is a mistake to say rather than to pass over
   * for another directory: no cache (WD_EINVAL) until it is fixed. */
  const char *own = getenv("WHISPERD_CACHE_DIR");
  if (own && own[0] && own[0] != '/') {
    if (len)
      dir[0] = '\0';
    return WD_EINVAL;
  }
  if ((v = env_path("WHISPERD_CACHE_DIR")))
    n = snprintf(dir, len, "%s", v);
  else if ((v = env_path("CACHE_DIRECTORY"))) /* "a:b" where the unit lists several */
    n = snprintf(dir, len, "%.*s", (int)strcspn(v, ":"), v);
  else if ((v = env_path("XDG_CACHE_HOME")))
    n = snprintf(dir, len, "%s/whisperd", v);
  else if ((v = env_path("HOME")))
    n = snprintf(dir, len, "%s/.cache/whisperd", v);
  else {
    if (len)
      dir[0] = '\0';
    return WD_ENOENT;
  }
  return n < 0 || (size_t)n >= len ? WD_ERANGE : 0;
}

int wd_pick_cache_path(const char *dir, const char *key, char *path, size_t len) {
  if (!dir || !key)
    return WD_EINVAL;
  const uint64_t h = fnv1a(FNV_INIT, key, strlen(key));
  const int n = snprintf(path, len, "%s/cpu-kernels-%016llx.txt", dir, (unsigned long long)h);
  return n < 0 || (size_t)n >= len ? WD_ERANGE : 0;
}

int wd_pick_set_put(wd_pick_set_t *s, const char *name, const char *value) {
  if (!s || !name || !value || !good_name(name) || !printable(value, WD_PICK_VALUE))
    return WD_EINVAL;
  int i = 0;
  while (i < s->n && strcmp(s->e[i].name, name) != 0)
    i++;
  if (i == s->n) {
    if (s->n >= WD_PICK_MAX)
      return WD_ERANGE;
    s->n++;
  }
  snprintf(s->e[i].name, sizeof s->e[i].name, "%s", name);
  snprintf(s->e[i].value, sizeof s->e[i].value, "%s", value);
  return 0;
}

const char *wd_pick_set_get(const wd_pick_set_t *s, const char *name) {
  for (int i = 0; s && name && i < s->n; i++)
    if (strcmp(s->e[i].name, name) == 0)
      return s->e[i].value;
  return NULL;
}

/* The next line of buf[*pos .. n): its start and length without the '\n';
 * 0 where no whole line is left. */
static int next_line(const char *buf, size_t n, size_t *pos, const char **line, size_t *len) {
  if (*pos >= n)
    return 0;
  const char *nl = memchr(buf + *pos, '\n', n - *pos);
  if (!nl)
    return 0;
  *line = buf + *pos;
  *len = (size_t)(nl - *line);
  *pos = (size_t)(nl - buf) + 1;
  return 1;
}

/* Parses buf (n bytes, NUL after them) against key into out. */
static int parse(const char *buf, size_t n, const char *key, wd_pick_set_t *out) {
  const size_t lm = strlen(MAGIC);
  if (n < lm || memcmp(buf, MAGIC, lm) != 0 || memchr(buf, '\0', n))
    return WD_EFORMAT;
  size_t pos = lm, len;
  const char *line;
  if (!next_line(buf, n, &pos, &line, &len) || len < 4 || memcmp(line, "key ", 4) != 0)
    return WD_EFORMAT;
  const int same_key = len - 4 == strlen(key) && memcmp(line + 4, key, len - 4) == 0;
  for (;;) {
    const size_t start = pos;
    if (!next_line(buf, n, &pos, &line, &len))
      return WD_EFORMAT; /* no end line: truncated */
    if (len > 4 && memcmp(line, "end ", 4) == 0) {
      char want[17];
      snprintf(want, sizeof want, "%016llx", (unsigned long long)fnv1a(FNV_INIT, buf, start));
      if (len != 4 + 16 || memcmp(line + 4, want, 16) != 0 || pos != n)
        return WD_EFORMAT;
      break;
    }
    const char *sp = memchr(line, ' ', len);
    if (!sp)
      return WD_EFORMAT;
    char name[WD_PICK_NAME], value[WD_PICK_VALUE];
    const size_t nn = (size_t)(sp - line), vn = len - nn - 1;
    if (nn >= sizeof name || vn >= sizeof value)
      return WD_EFORMAT;
    memcpy(name, line, nn);
    name[nn] = '\0';
    memcpy(value, sp + 1, vn);
    value[vn] = '\0';
    if (wd_pick_set_get(out, name) || wd_pick_set_put(out, name, value) < 0)
      return WD_EFORMAT; /* a bad or repeated name, a bad value, too many */
  }
  return same_key ? 0 : WD_ENOENT;
}

int wd_pick_cache_read(const char *path, const char *key, wd_pick_set_t *out) {
  if (!out)
    return WD_EINVAL;
  memset(out, 0, sizeof *out);
  if (!path || !key)
    return WD_EINVAL;
  /* Non-blocking and regular files only: a FIFO or a device put where the
   * file should be must not hold the model's load up. */
  const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? WD_ENOENT : WD_EIO;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return WD_EFORMAT;
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return WD_EIO;
  }
  char *buf = malloc(FILE_MAX + 1);
  if (!buf) {
    fclose(f);
    return WD_ENOMEM;
  }
  const size_t n = fread(buf, 1, FILE_MAX + 1, f);
  const int err = ferror(f);
  fclose(f);
  int rc = err ? WD_EIO : n > FILE_MAX ? WD_EFORMAT : 0;
  if (rc == 0) {
    buf[n] = '\0';
    rc = parse(buf, n, key, out);
  }
  free(buf);
  if (rc < 0)
    memset(out, 0, sizeof *out);
  return rc;
}

/* mkdir that takes an existing directory as success. */
/* 0700, as the XDG spec asks of the cache: only its owner reads the choices. */
static int make_dir(const char *p) { return mkdir(p, 0700) == 0 || errno == EEXIST ? 0 : -1; }

/* path's directory, and that one's parent ($HOME/.cache), where missing. */
static void make_dirs(const char *path) {
  char d[WD_PICK_PATH];
  if (snprintf(d, sizeof d, "%s", path) >= (int)sizeof d)
    return;
  char *slash = strrchr(d, '/');
  if (!slash || slash == d)
    return;
  *slash = '\0';
  if (make_dir(d) == 0)
    return;
  char *up = strrchr(d, '/');
  if (!up || up == d)
    return;
  *up = '\0';
  if (make_dir(d) == 0) {
    *up = '/';
    (void)make_dir(d);
  }
}

/* A writer's temporary file lives for milliseconds; one this old was left
 * by a process that died between mkstemp and rename. */
#define STALE_S 3600

/* Removes the temporary files of path (path.XXXXXX, mkstemp's six
 * characters) older than STALE_S: nothing else cleans them up, and each
 * crash of a writer would leave one more. */
static void sweep_stale(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path)
    return;
  char dir[WD_PICK_PATH];
  const size_t dlen = (size_t)(slash - path), blen = strlen(slash + 1);
  if (dlen >= sizeof dir)
    return;
  memcpy(dir, path, dlen);
  dir[dlen] = '\0';
  DIR *d = opendir(dir);
  if (!d)
    return;
  const time_t now = time(NULL);
  for (const struct dirent *de; (de = readdir(d)) != NULL;) {
    const char *n = de->d_name;
    if (strlen(n) != blen + 7 || strncmp(n, slash + 1, blen) != 0 || n[blen] != '.')
      continue;
    char full[WD_PICK_PATH + 16];
    struct stat st;
    if (snprintf(full, sizeof full, "%s/%s", dir, n) < (int)sizeof full &&
        lstat(full, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > STALE_S)
      (void)unlink(full);
  }
  closedir(d);
}

int wd_pick_cache_write(const char *path, const char *key, const wd_pick_set_t *s) {
  if (!path || !key || !s || s->n < 0 || s->n > WD_PICK_MAX || !printable(key, WD_PICK_KEY))
    return WD_EINVAL;
  char *buf = malloc(FILE_MAX + 1);
  if (!buf)
    return WD_ENOMEM;
  int n = snprintf(buf, FILE_MAX + 1, "%skey %s\n", MAGIC, key);
  for (int i = 0; i < s->n && n > 0 && n <= FILE_MAX; i++) {
    if (!good_name(s->e[i].name) || !printable(s->e[i].value, WD_PICK_VALUE)) {
      free(buf);
      return WD_EINVAL;
    }
    n += snprintf(buf + n, (size_t)(FILE_MAX + 1 - n), "%s %s\n", s->e[i].name, s->e[i].value);
  }
  if (n > 0 && n <= FILE_MAX)
    n += snprintf(buf + n, (size_t)(FILE_MAX + 1 - n), "end %016llx\n",
                  (unsigned long long)fnv1a(FNV_INIT, buf, (size_t)n));
  if (n <= 0 || n > FILE_MAX) {
    free(buf);
    return WD_EINVAL;
  }
  make_dirs(path);
  sweep_stale(path);
  /* A temporary name of its own (mkstemp), so that two engines of one
   * process or two processes writing the same key never share one; the
   * last rename wins, whole. */
  char tmp[WD_PICK_PATH + 16];
  int rc = snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp ? WD_ERANGE : 0;
  const int fd = rc ? -1 : mkstemp(tmp);
  if (fd < 0) {
    free(buf);
    return rc ? rc : WD_EIO;
  }
  (void)fchmod(fd, 0644); /* mkstemp's 0600 would hide it from a second user */
  const ssize_t w = write(fd, buf, (size_t)n);
  free(buf);
  rc = close(fd) == 0 && w == (ssize_t)n ? 0 : WD_EIO;
  if (rc == 0 && rename(tmp, path) != 0)
    rc = WD_EIO;
  if (rc < 0)
    (void)unlink(tmp);
  return rc;
}
