/*
 * fuzz_common.h - helpers shared by the libFuzzer harnesses in tests/fuzz.
 *
 * Every harness defines LLVMFuzzerTestOneInput (and, when it needs state
 * built once, LLVMFuzzerInitialize). The same file links either with
 * libFuzzer (clang, WD_FUZZ=ON: fuzz_<name>) or with regress_main.c (any
 * compiler, the normal build: fuzz_regress_<name>, a ctest test that replays
 * tests/fuzz/regress/<name>/ and the hand-made seeds).
 *
 * Header-only on purpose: each harness is one translation unit and these are
 * a few lines each.
 */
#ifndef WD_FUZZ_COMMON_H
#define WD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Stops the run: a broken invariant is a finding, like a sanitizer report. */
#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond);     \
      abort();                                                                               \
    }                                                                                        \
  } while (0)

/* With WD_FUZZ_SEED_CHECK set (the seeds_load tests), an input the target
 * refuses is an error: the generated seeds must stay valid models. */
static inline void fuzz_seed_check(int rc, const char *err) {
  static int on = -1;
  if (on < 0)
    on = getenv("WD_FUZZ_SEED_CHECK") != NULL;
  if (on && rc < 0) {
    fprintf(stderr, "fuzz: seed refused (%d): %s\n", rc, err);
    abort();
  }
}

/* ------------------------------------------------------------ temp files */

static char fuzz_tmp_dir[256];

static inline void fuzz_tmp_cleanup(void) {
  if (fuzz_tmp_dir[0] == '\0')
    return;
  /* The harnesses write only plain files with fixed names into the dir. */
  static const char *const names[] = { "input", "model.bin", "config.json", "vocabulary.txt",
                                       "vocabulary.json" };
  char p[512];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", fuzz_tmp_dir, names[i]);
    unlink(p);
  }
  rmdir(fuzz_tmp_dir);
}

/* A private directory for this process, made on first use, removed at exit.
 * /dev/shm keeps the per-input file writes in memory when it exists. */
static inline const char *fuzz_tmp(void) {
  if (fuzz_tmp_dir[0] != '\0')
    return fuzz_tmp_dir;
  const char *base = getenv("TMPDIR");
  if (!base || !*base)
    base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(fuzz_tmp_dir, sizeof fuzz_tmp_dir, "%s/wd-fuzz-XXXXXX", base);
  if (!mkdtemp(fuzz_tmp_dir)) {
    perror("fuzz: mkdtemp");
    abort();
  }
  atexit(fuzz_tmp_cleanup);
  return fuzz_tmp_dir;
}

/* Writes data[0..len) to <tmp>/name (replacing it) and returns the path in
 * a static buffer. A failed write aborts: it is the harness, not the target. */
static inline const char *fuzz_tmp_write(const char *name, const void *data, size_t len) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", fuzz_tmp(), name);
  FILE *f = fopen(path, "wb");
  if (!f || (len > 0 && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
    perror("fuzz: write temp file");
    abort();
  }
  return path;
}

static inline void fuzz_tmp_remove(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", fuzz_tmp(), name);
  unlink(path);
}

/* -------------------------------------------------------- zero-run inputs */

/* Model files are mostly bulk data that their parsers never look at (a 64 KB
 * filterbank of zeros, tensor payloads of n_vocab rows). So that the fuzzer
 * works on the structure, the model harnesses accept a compact form where
 * the 4 bytes "ZRUN" and a u32 little-endian count stand for count zero
 * bytes (at most FUZZ_ZRUN_MAX in all). Returns a malloc'd buffer. */
#define FUZZ_ZRUN_MAX (2u << 20)

static inline uint8_t *fuzz_expand_zruns(const uint8_t *d, size_t n, size_t *ret_len) {
  size_t total = 0;
  for (size_t i = 0; i < n;) {
    if (n - i >= 8 && memcmp(d + i, "ZRUN", 4) == 0) {
      uint32_t c = (uint32_t)d[i + 4] | (uint32_t)d[i + 5] << 8 | (uint32_t)d[i + 6] << 16 |
                   (uint32_t)d[i + 7] << 24;
      total += c < FUZZ_ZRUN_MAX ? c : FUZZ_ZRUN_MAX;
      i += 8;
    } else {
      total++;
      i++;
    }
  }
  if (total > FUZZ_ZRUN_MAX + n)
    total = FUZZ_ZRUN_MAX + n;
  uint8_t *out = malloc(total ? total : 1);
  if (!out)
    abort();
  size_t o = 0, zeros = 0;
  for (size_t i = 0; i < n && o < total;) {
    if (n - i >= 8 && memcmp(d + i, "ZRUN", 4) == 0) {
      uint32_t c = (uint32_t)d[i + 4] | (uint32_t)d[i + 5] << 8 | (uint32_t)d[i + 6] << 16 |
                   (uint32_t)d[i + 7] << 24;
      size_t z = c;
      if (z > FUZZ_ZRUN_MAX - zeros)
        z = FUZZ_ZRUN_MAX - zeros;
      if (z > total - o)
        z = total - o;
      memset(out + o, 0, z);
      o += z;
      zeros += z;
      i += 8;
    } else {
      out[o++] = d[i++];
    }
  }
  *ret_len = o;
  return out;
}

/* ------------------------------------------------------------ byte reader */

/* Reads fields from the input front to back; past the end everything is 0. */
typedef struct {
  const uint8_t *p;
  size_t n, off;
} fuzz_reader_t;

static inline uint8_t fuzz_u8(fuzz_reader_t *r) { return r->off < r->n ? r->p[r->off++] : 0; }

static inline uint32_t fuzz_u32(fuzz_reader_t *r) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)fuzz_u8(r) << (8 * i);
  return v;
}

/* Up to max bytes of the input as a slice (not NUL-terminated): a length
 * byte, then that many bytes. */
static inline const uint8_t *fuzz_bytes(fuzz_reader_t *r, size_t max, size_t *ret_len) {
  size_t len = fuzz_u8(r);
  if (len > max)
    len = max;
  if (len > r->n - r->off)
    len = r->n - r->off;
  const uint8_t *s = r->p + r->off;
  r->off += len;
  *ret_len = len;
  return s;
}

#endif
