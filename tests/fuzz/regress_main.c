/*
 * regress_main.c - replays fuzz inputs without libFuzzer.
 *
 * Linked with one harness (fuzz_<name>.c) into fuzz_regress_<name>, built by
 * the normal compiler in every build tree, so that each input that once
 * crashed a parser (tests/fuzz/regress/<name>/) and the hand-made seeds
 * (tests/fuzz/seeds/<name>/) run under the ASan/UBSan build in CI. Arguments
 * are files or directories (every regular file in them, not recursive). A
 * crash fails the test through the sanitizer or abort(); a missing
 * directory is fine (a harness may have no crashes on record).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

/* Harnesses that need no set-up do not define it. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "regress: %s: %s\n", path, strerror(errno));
    return -1;
  }
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (cap - len < 65536) {
      cap = cap ? 2 * cap : 65536;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return -1;
      }
      buf = nb;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0)
      break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    fprintf(stderr, "regress: %s: read error\n", path);
    return -1;
  }
  /* An exact-size copy, so ASan sees a read one past the input. */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, len);
  free(buf);
  fprintf(stderr, "regress: %s (%zu bytes)\n", path, len);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Runs every regular file in dir, in name order (reproducible logs). */
static int run_dir(const char *dir, int *n_run) {
  DIR *d = opendir(dir);
  if (!d)
    return errno == ENOENT ? 0 : -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nn = realloc(names, cap * sizeof *names);
      if (!nn)
        break;
      names = nn;
    }
    names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
    if (!names[n])
      break;
    sprintf(names[n], "%s/%s", dir, e->d_name);
    n++;
  }
  closedir(d);
  if (n > 0)
    qsort(names, n, sizeof *names, cmp_str);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(names[i]) < 0)
        rc = -1;
      else
        (*n_run)++;
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  int n_run = 0, rc = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(argv[i]) < 0)
        rc = 1;
      else
        n_run++;
    } else if (run_dir(argv[i], &n_run) < 0) {
      fprintf(stderr, "regress: %s: cannot read\n", argv[i]);
      rc = 1;
    }
  }
  printf("regress: %d inputs replayed without a crash\n", n_run);
  return rc;
}
