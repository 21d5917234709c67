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

/* The harness's own bulk loops (hashing, padding) are not the target: no
 * coverage callbacks in them, which cost more than the loops themselves. */
#if defined(__clang__)
#define FUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define FUZZ_NO_COVERAGE
#endif

/* FNV-1a, 64 bits, continuing from h (start with FUZZ_HASH_INIT). */
#define FUZZ_HASH_INIT 14695981039346656037ull
FUZZ_NO_COVERAGE static inline uint64_t fuzz_hash(const void *p, size_t n, uint64_t h) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* What each temp file last received, by a hash of what made it: a file
 * whose content would not change is not rewritten. Consecutive inputs often
 * differ in one part only, and rewriting the rest (a vocabulary padded to
 * 51,864 lines, a model.bin of megabytes) was most of fuzz_model_ct2's
 * time. */
static struct {
  char name[32];
  uint64_t hash;
  int valid;
} fuzz_tmp_seen[8];

/* 1 when <tmp>/name already holds what hash stands for; else records it
 * (the caller then writes the file). */
static inline int fuzz_tmp_same(const char *name, uint64_t hash) {
  int free_slot = -1;
  for (int i = 0; i < 8; i++) {
    if (fuzz_tmp_seen[i].valid && strcmp(fuzz_tmp_seen[i].name, name) == 0) {
      if (fuzz_tmp_seen[i].hash == hash)
        return 1;
      fuzz_tmp_seen[i].hash = hash;
      return 0;
    }
    if (!fuzz_tmp_seen[i].valid && free_slot < 0)
      free_slot = i;
  }
  if (free_slot >= 0 && strlen(name) < sizeof fuzz_tmp_seen[0].name) {
    snprintf(fuzz_tmp_seen[free_slot].name, sizeof fuzz_tmp_seen[0].name, "%s", name);
    fuzz_tmp_seen[free_slot].hash = hash;
    fuzz_tmp_seen[free_slot].valid = 1;
  }
  return 0;
}

static inline void fuzz_tmp_forget(const char *name) {
  for (int i = 0; i < 8; i++)
    if (fuzz_tmp_seen[i].valid && strcmp(fuzz_tmp_seen[i].name, name) == 0)
      fuzz_tmp_seen[i].valid = 0;
}

/* <tmp>/name in a static buffer. */
static inline const char *fuzz_tmp_path(const char *name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", fuzz_tmp(), name);
  return path;
}

/* Writes data[0..len) to <tmp>/name (replacing it) and returns its path. A
 * failed write aborts: it is the harness, not the target. */
static inline const char *fuzz_tmp_put(const char *name, const void *data, size_t len) {
  const char *path = fuzz_tmp_path(name);
  FILE *f = fopen(path, "wb");
  if (!f || (len > 0 && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
    perror("fuzz: write temp file");
    abort();
  }
  return path;
}

/* fuzz_tmp_put, skipped when the file already holds exactly this. */
static inline const char *fuzz_tmp_write(const char *name, const void *data, size_t len) {
  if (fuzz_tmp_same(name, fuzz_hash(data, len, FUZZ_HASH_INIT) ^ len))
    return fuzz_tmp_path(name);
  return fuzz_tmp_put(name, data, len);
}

static inline void fuzz_tmp_remove(const char *name) {
  char path[512];
  fuzz_tmp_forget(name);
  snprintf(path, sizeof path, "%s/%s", fuzz_tmp(), name);
  unlink(path);
}

/* -------------------------------------------------------- zero-run inputs */

/* Model files are mostly bulk data that their parsers never look at (a 64 KB
 * filterbank of zeros, tensor payloads of n_vocab rows). So that the fuzzer
 * works on the structure, the model harnesses accept a compact form where
 * the 4 bytes "ZRUN" and a u32 little-endian count stand for count zero
 * bytes (at most FUZZ_ZRUN_MAX in all).
 *
 * Cost: an input expands to up to 2 MB, and writing that much fresh memory
 * per input (malloc, page faults, memset) was over half of each execution.
 * So the expansion lives in one arena that is kept all zero between inputs:
 * an input writes only its literal bytes, and fuzz_zruns_release() zeroes
 * them back. Under ASan everything past the input's end is poisoned, so a
 * read past it is still reported, as it would be for an exact-size copy. */
#define FUZZ_ZRUN_MAX (2u << 20)

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(FUZZ_ASAN)
#define FUZZ_ASAN 1
#endif
#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#define FUZZ_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define FUZZ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define FUZZ_POISON(p, n) ((void)(p), (void)(n))
#define FUZZ_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static uint8_t *fuzz_zrun_arena; /* all zero outside an input's literal bytes */
static size_t fuzz_zrun_cap;

/* d[i..] starts a zero-run record; its count in *c. */
static inline int fuzz_zrun_at(const uint8_t *d, size_t n, size_t i, uint32_t *c) {
  if (n - i < 8 || d[i] != 'Z' || d[i + 1] != 'R' || d[i + 2] != 'U' || d[i + 3] != 'N')
    return 0;
  *c = (uint32_t)d[i + 4] | (uint32_t)d[i + 5] << 8 | (uint32_t)d[i + 6] << 16 |
       (uint32_t)d[i + 7] << 24;
  return 1;
}

/* What to do with one run of literal bytes of an expansion: they go at
 * offset o of the expanded input. Returns 0 to go on. */
typedef enum { FUZZ_ZRUN_COUNT, FUZZ_ZRUN_COPY, FUZZ_ZRUN_CLEAR, FUZZ_ZRUN_FILE } fuzz_zrun_op_t;

static inline int fuzz_zrun_span(fuzz_zrun_op_t op, void *to, size_t o, const uint8_t *p,
                                 size_t len) {
  switch (op) {
  case FUZZ_ZRUN_COPY: memcpy((uint8_t *)to + o, p, len); return 0;
  case FUZZ_ZRUN_CLEAR: memset((uint8_t *)to + o, 0, len); return 0;
  case FUZZ_ZRUN_FILE:
    return fseek(to, (long)o, SEEK_SET) == 0 && fwrite(p, 1, len, to) == len ? 0 : -1;
  default: return 0;
  }
}

/* Walks d's expansion, handing each run of literal bytes to op (the zero
 * runs are skipped: the arena is zero there, a file has holes); returns the
 * expanded length, or 0 when op failed. */
static inline size_t fuzz_zrun_walk(const uint8_t *d, size_t n, fuzz_zrun_op_t op, void *to) {
  size_t o = 0, zeros = 0;
  for (size_t i = 0; i < n;) {
    uint32_t c;
    if (fuzz_zrun_at(d, n, i, &c)) {
      size_t z = c;
      if (z > FUZZ_ZRUN_MAX - zeros)
        z = FUZZ_ZRUN_MAX - zeros;
      o += z;
      zeros += z;
      i += 8;
      continue;
    }
    /* A run of literal bytes up to the next possible record. */
    size_t j = i + 1;
    while (j < n && d[j] != 'Z')
      j++;
    if (fuzz_zrun_span(op, to, o, d + i, j - i) != 0)
      return 0;
    o += j - i;
    i = j;
  }
  return o;
}

/* The expansion of d[0..n), in the arena (valid until the release). */
static inline uint8_t *fuzz_expand_zruns(const uint8_t *d, size_t n, size_t *ret_len) {
  const size_t len = fuzz_zrun_walk(d, n, FUZZ_ZRUN_COUNT, NULL);
  const size_t need = (len ? len : 1);
  if (need > fuzz_zrun_cap) {
    if (fuzz_zrun_arena) {
      FUZZ_UNPOISON(fuzz_zrun_arena, fuzz_zrun_cap);
      free(fuzz_zrun_arena);
    }
    fuzz_zrun_cap = need > FUZZ_ZRUN_MAX + (1u << 20) ? need : FUZZ_ZRUN_MAX + (1u << 20);
    fuzz_zrun_arena = calloc(1, fuzz_zrun_cap);
    if (!fuzz_zrun_arena)
      abort();
  }
  FUZZ_UNPOISON(fuzz_zrun_arena, len);
  FUZZ_POISON(fuzz_zrun_arena + len, fuzz_zrun_cap - len);
  fuzz_zrun_walk(d, n, FUZZ_ZRUN_COPY, fuzz_zrun_arena);
  *ret_len = len;
  return fuzz_zrun_arena;
}

/* Writes the expansion of d[0..n) to <tmp>/name as a sparse file: the
 * literal bytes where they go, the zero runs as holes (read back as zeros,
 * no pages written). Skipped when the file already holds it. */
static inline const char *fuzz_tmp_write_zruns(const char *name, const uint8_t *d, size_t n) {
  const char *path = fuzz_tmp_path(name);
  if (fuzz_tmp_same(name, fuzz_hash(d, n, FUZZ_HASH_INIT ^ 0x5a52554eu)))
    return path;
  FILE *f = fopen(path, "wb");
  const size_t len = fuzz_zrun_walk(d, n, FUZZ_ZRUN_COUNT, NULL);
  const int ok = f && (len == 0 || fuzz_zrun_walk(d, n, FUZZ_ZRUN_FILE, f) == len);
  /* The file ends where the expansion does, holes included. */
  if (!ok || fflush(f) != 0 || ftruncate(fileno(f), (off_t)len) != 0 || fclose(f) != 0) {
    perror("fuzz: write temp file");
    abort();
  }
  return path;
}

/* Zeroes back what fuzz_expand_zruns(d, n) wrote. */
static inline void fuzz_zruns_release(const uint8_t *d, size_t n) {
  FUZZ_UNPOISON(fuzz_zrun_arena, fuzz_zrun_cap);
  fuzz_zrun_walk(d, n, FUZZ_ZRUN_CLEAR, fuzz_zrun_arena);
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
