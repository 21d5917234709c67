/*
 * test_pick.c - the CPU engine's kernel choices at load and the cache
 * behind them (cpu/cpu_pick.c) on tiny.en: the first load measures and
 * writes the cache, the second takes its choice from it (even a choice
 * the measurement would not have made, planted in the file), a corrupt
 * file or another batch is measured again, an unwritable directory only
 * costs the write, and WHISPERD_CPU_ENC_ATTN forces the attention and
 * leaves the cache alone.
 *
 * On a host without AVX-512 each kernel has one candidate, so the test
 * turns on wd_cpu_pick_test_twins: for the GEMV and for the attention two
 * "candidates" that run the same kernel (cpu_internal.h), enough to drive
 * the measurement and the cache end to end; the last two load without
 * them: what this CPU really offers, and the real blocked kernel (under
 * SIMDe where the CPU lacks AVX-512) measured against sgemm.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu_enc_attn.h"
#include "cpu_engine.h"
#include "cpu_internal.h"
#include "cpu_pick_cache.h"
#include "enc_attn_simde.h"
#include "error.h"
#include "wd_test.h"

static wd_model_t *g_model;
static char g_dir[64];

/* NULL once the model is loaded and the cache directory made, else why not. */
static const char *setup(void) {
  if (g_model)
    return NULL;
  char err[256];
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &g_model, err, sizeof err) < 0)
    return "models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)";
  snprintf(g_dir, sizeof g_dir, "/tmp/wd_test_pick_XXXXXX");
  if (!mkdtemp(g_dir)) {
    g_dir[0] = '\0';
    return "cannot make a temporary directory";
  }
  setenv("WHISPERD_CACHE_DIR", g_dir, 1);
  unsetenv("WHISPERD_CPU_ENC_ATTN");
  wd_cpu_pick_test_twins = 1;
  return NULL;
}

#define SETUP()                                                                  \
  do {                                                                           \
    const char *why_ = setup();                                                  \
    if (why_)                                                                    \
      wd_test_skip(why_);                                                        \
  } while (0)

static wd_cpu_engine_t *load(int max_seqs) {
  const wd_cpu_engine_opts_t o = { .max_seqs = max_seqs, .max_audio = 1, .n_threads = 2 };
  wd_cpu_engine_t *e = NULL;
  char err[256] = "";
  WD_CHECK_EQ_INT(wd_cpu_engine_new(g_model, &o, &e, err, sizeof err), 0);
  if (e)
    fprintf(stderr, "  load (batch %d): %s: %s\n", max_seqs, e->pick_source, e->pick_note);
  return e;
}

static void cache_path(const wd_cpu_engine_t *e, char *path, size_t len) {
  char key[WD_PICK_KEY];
  wd_cpu_pick_key(e, key, sizeof key);
  WD_CHECK_EQ_INT(wd_pick_cache_path(g_dir, key, path, len), 0);
}

WD_TEST(key_names_everything_that_changes_the_choice) {
  /* The threads, the batch, the weight and compute types, the CPU, and
   * OpenBLAS's version and kernels (the sgemm candidate's speed): whole, not
   * cut by the key's size. */
  wd_hparams_t hp = { .n_audio_ctx = 1500, .n_audio_state = 1280, .n_audio_head = 20,
                      .n_audio_layer = 32, .n_text_ctx = 448, .n_text_state = 1280,
                      .n_text_head = 20, .n_text_layer = 32, .n_vocab = 51866, .ftype = 1 };
  char key[WD_PICK_KEY], want[WD_PICK_KEY];
  wd_cpu_pick_key_hp(&hp, 16, 64, WD_CPU_COMPUTE_F32, key, sizeof key);
  fprintf(stderr, "  %s\n", key);
  WD_CHECK(strlen(key) + 1 < sizeof key);
  WD_CHECK(strstr(key, "batch 16; threads 64") != NULL);
  WD_CHECK(strstr(key, "ftype 1; compute f32") != NULL);
  snprintf(want, sizeof want, "gemm %s", wd_cpu_engine_gemm());
  WD_CHECK(strstr(key, want) != NULL);
}

WD_TEST(second_load_takes_the_cache) {
  SETUP();
  wd_cpu_engine_t *e = load(4);
  if (!e)
    return;
  WD_CHECK_EQ_STR(e->pick_source, "measured");
  WD_CHECK(strstr(e->pick_note, "cached in") != NULL);
  WD_CHECK(strstr(e->gemv_choice, "measured on fc1") != NULL);
  WD_CHECK(strstr(e->attn_choice, "measured on 2 of 6 heads (1500 x 64)") != NULL);
  char path[WD_PICK_PATH];
  cache_path(e, path, sizeof path);
  WD_CHECK(access(path, R_OK) == 0);
  signed char first[CPU_GEMV_PICK_ROWS + 1];
  memcpy(first, e->gemv_path, sizeof first);
  char key[WD_PICK_KEY];
  wd_cpu_pick_key(e, key, sizeof key);
  wd_cpu_engine_free(e);

  e = load(4);
  if (!e)
    return;
  WD_CHECK_EQ_STR(e->pick_source, "cache");
  WD_CHECK(strstr(e->pick_note, "from the cache") != NULL);
  WD_CHECK(memcmp(first, e->gemv_path, sizeof first) == 0);
  wd_cpu_engine_stats_t st;
  wd_cpu_engine_stats(e, &st);
  WD_CHECK_EQ_STR(st.pick_source, "cache");
  WD_CHECK(st.kernel_choice && strstr(st.kernel_choice, "measured on fc1"));
  WD_CHECK(st.attn_choice && strstr(st.attn_choice, "measured on 2 of 6 heads"));
  wd_cpu_engine_free(e);

  /* A choice planted in the file (path 1 at every row count but 3, path 2
   * there: nothing a measurement of two equal kernels would reproduce) is
   * the one the next load keeps: it came from the cache. */
  wd_pick_set_t s;
  WD_CHECK_EQ_INT(wd_pick_cache_read(path, key, &s), 0);
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "gemv_path", "1 1 1 2 1 1 1 1 1 1 1 1 1 1 1 1 1"), 0);
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "gemv_note", "planted"), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, key, &s), 0);
  e = load(4);
  if (!e)
    return;
  WD_CHECK_EQ_STR(e->pick_source, "cache");
  WD_CHECK_EQ_STR(e->gemv_choice, "planted");
  for (int r = 0; r <= CPU_GEMV_PICK_ROWS; r++)
    WD_CHECK_EQ_INT(e->gemv_path[r], r == 3 ? 2 : 1);
  wd_cpu_engine_free(e);

  /* The blocked attention where this CPU cannot run it (no AVX-512): a
   * file that says so is not believed. */
  if (!wd_cpu_enc_attn_available(WD_ENC_ATTN_DH)) {
    WD_CHECK_EQ_INT(wd_pick_set_put(&s, "enc_attn", "blocked"), 0);
    WD_CHECK_EQ_INT(wd_pick_cache_write(path, key, &s), 0);
    e = load(4);
    if (!e)
      return;
    WD_CHECK_EQ_STR(e->pick_source, "measured");
    WD_CHECK(strstr(e->pick_note, "not one this CPU runs") != NULL);
    WD_CHECK_EQ_INT(e->enc_blocked, 0);
    wd_cpu_engine_free(e);
    WD_CHECK_EQ_INT(wd_pick_set_put(&s, "enc_attn", "sgemm"), 0);
  }

  /* A value out of range in a well-formed file: measured again. */
  WD_CHECK_EQ_INT(wd_pick_set_put(&s, "gemv_path", "1 1 1 7 1 1 1 1 1 1 1 1 1 1 1 1 1"), 0);
  WD_CHECK_EQ_INT(wd_pick_cache_write(path, key, &s), 0);
  e = load(4);
  if (!e)
    return;
  WD_CHECK_EQ_STR(e->pick_source, "measured");
  wd_cpu_engine_free(e);
}

WD_TEST(corrupt_or_other_batch_measures_again) {
  SETUP();
  wd_cpu_engine_t *e = load(4);
  if (!e)
    return;
  char path[WD_PICK_PATH];
  cache_path(e, path, sizeof path);
  wd_cpu_engine_free(e);
  FILE *f = fopen(path, "wb");
  WD_CHECK(f != NULL);
  if (f) {
    fputs("whisperd-kernels 1\nkey garbage\x01\x02\n", f);
    fclose(f);
  }
  e = load(4);
  if (!e)
    return;
  WD_CHECK_EQ_STR(e->pick_source, "measured");
  WD_CHECK(strstr(e->pick_note, "corrupt") != NULL);
  wd_cpu_engine_free(e);
  e = load(4); /* the file was rewritten whole */
  if (e)
    WD_CHECK_EQ_STR(e->pick_source, "cache");
  wd_cpu_engine_free(e);
  e = load(2); /* another batch: another key */
  if (e)
    WD_CHECK_EQ_STR(e->pick_source, "measured");
  wd_cpu_engine_free(e);
}

WD_TEST(unwritable_cache_still_loads) {
  SETUP();
  char file[128], sub[192];
  snprintf(file, sizeof file, "%s/plain", g_dir);
  FILE *f = fopen(file, "wb");
  if (f)
    fclose(f);
  snprintf(sub, sizeof sub, "%s/whisperd", file); /* below a regular file: never writable */
  setenv("WHISPERD_CACHE_DIR", sub, 1);
  wd_cpu_engine_t *e = load(4);
  if (e) {
    WD_CHECK_EQ_STR(e->pick_source, "measured");
    WD_CHECK(strstr(e->pick_note, "not cached") != NULL);
  }
  wd_cpu_engine_free(e);
  unsetenv("WHISPERD_CACHE_DIR");
  unsetenv("HOME");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("CACHE_DIRECTORY");
  e = load(4); /* no directory at all */
  if (e) {
    WD_CHECK_EQ_STR(e->pick_source, "measured");
    WD_CHECK(strstr(e->pick_note, "no cache directory") != NULL);
  }
  wd_cpu_engine_free(e);
  setenv("WHISPERD_CACHE_DIR", g_dir, 1);
  (void)unlink(file);
}

WD_TEST(forced_attention_bypasses_the_cache) {
  SETUP();
  wd_cpu_engine_t *e = load(8);
  if (!e)
    return;
  char path[WD_PICK_PATH];
  cache_path(e, path, sizeof path);
  wd_cpu_engine_free(e);
  struct stat before, after;
  WD_CHECK_EQ_INT(stat(path, &before), 0);
  setenv("WHISPERD_CPU_ENC_ATTN", "sgemm", 1);
  e = load(8);
  if (e) {
    WD_CHECK_EQ_STR(e->pick_source, "measured"); /* the GEMV, which is not forced */
    WD_CHECK(strstr(e->pick_note, "neither read nor written") != NULL);
    WD_CHECK_EQ_INT(e->enc_blocked, 0);
    WD_CHECK(strstr(e->attn_choice, "WHISPERD_CPU_ENC_ATTN=sgemm") != NULL);
  }
  wd_cpu_engine_free(e);
  setenv("WHISPERD_CPU_ENC_ATTN", "blocked", 1);
  e = load(8);
  if (e) /* blocked only where it runs */
    WD_CHECK_EQ_INT(e->enc_blocked, wd_cpu_enc_attn_available(WD_ENC_ATTN_DH));
  wd_cpu_engine_free(e);
  unsetenv("WHISPERD_CPU_ENC_ATTN");
  WD_CHECK_EQ_INT(stat(path, &after), 0);
  WD_CHECK(before.st_ino == after.st_ino && before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
           before.st_mtim.tv_nsec == after.st_mtim.tv_nsec); /* not rewritten */
}

WD_TEST(this_cpu_without_the_hook) {
  /* The real candidates: on a CPU without AVX-512 one each, nothing
   * measured nor cached; with it, measured (attention included). */
  SETUP();
  wd_cpu_pick_test_twins = 0;
  char sub[128];
  snprintf(sub, sizeof sub, "%s/real", g_dir);
  setenv("WHISPERD_CACHE_DIR", sub, 1);
  wd_cpu_engine_t *e = load(4);
  const int avx512 = wd_cpu_enc_attn_available(WD_ENC_ATTN_DH);
  if (e) {
    WD_CHECK_EQ_STR(e->pick_source, avx512 ? "measured" : "one candidate");
    WD_CHECK_EQ_INT(e->enc_blocked == 0 || avx512, 1);
    WD_CHECK((strstr(e->attn_choice, "measured on 2 of 6 heads") != NULL) == avx512);
  }
  wd_cpu_engine_free(e);
  struct stat sb;
  WD_CHECK_EQ_INT(stat(sub, &sb) == 0, avx512); /* nothing written without a choice */
  setenv("WHISPERD_CACHE_DIR", g_dir, 1);
  wd_cpu_pick_test_twins = 1;
}

WD_TEST(simde_blocked_candidate_follows_the_measurement) {
  /* The real blocked kernel against sgemm, on a host without AVX-512: its
   * source under SIMDe (tests/cpu/enc_attn_simde.c). The choice is the
   * faster of the two times the note gives, and the next load takes it
   * from the cache. */
  SETUP();
  if (wd_cpu_enc_attn_available(WD_ENC_ATTN_DH))
    wd_test_nothing_to_check("this CPU runs the blocked kernel natively (this_cpu_without_the_hook)");
  if (!wd_cpu_use_avx2() || !enc_attn_simde_block())
    wd_test_nothing_to_check("no AVX2 or no SIMDe: the blocked kernel cannot run here");
  wd_cpu_pick_test_twins = 0;
  wd_cpu_enc_attn_test_kernel = enc_attn_simde_block();
  char sub[128];
  snprintf(sub, sizeof sub, "%s/simde", g_dir);
  setenv("WHISPERD_CACHE_DIR", sub, 1);
  wd_cpu_engine_t *e = load(4);
  if (e) {
    WD_CHECK_EQ_STR(e->pick_source, "measured");
    const char *t = strstr(e->attn_choice, "(blocked ");
    double tb = -1, ts = -1;
    WD_CHECK(t && sscanf(t, "(blocked %lf, sgemm %lf ms)", &tb, &ts) == 2);
    WD_CHECK(tb > 0 && ts > 0);
    WD_CHECK_EQ_INT(e->enc_blocked, tb <= ts); /* a tie keeps the first, blocked */
    const int blocked = e->enc_blocked;
    wd_cpu_engine_free(e);
    e = load(4);
    if (e) {
      WD_CHECK_EQ_STR(e->pick_source, "cache");
      WD_CHECK_EQ_INT(e->enc_blocked, blocked);
    }
  }
  wd_cpu_engine_free(e);
  wd_cpu_enc_attn_test_kernel = NULL;
  setenv("WHISPERD_CACHE_DIR", g_dir, 1);
  wd_cpu_pick_test_twins = 1;
}

WD_TEST(fewer_heads_are_the_first_heads_64_wide) {
  /* wd_cpu_enc_attn_heads on fewer heads than the model has (the
   * measurement runs 2 of tiny.en's 6): both kernels compute heads 0 and 1,
   * each the model's 64 columns wide (not d / 2), and write nothing else. */
  SETUP();
  const int native = wd_cpu_enc_attn_available(WD_ENC_ATTN_DH);
  if (!native && (!wd_cpu_use_avx2() || !enc_attn_simde_block()))
    wd_test_nothing_to_check("no AVX2 or no SIMDe: the blocked kernel cannot run here");
  if (!native)
    wd_cpu_enc_attn_test_kernel = enc_attn_simde_block();
  wd_cpu_engine_t *e = load(1);
  if (e) {
    const size_t n = (size_t)e->hp.n_audio_ctx, d = (size_t)e->hp.n_audio_state;
    uint32_t x = 12345;
    for (size_t i = 0; i < n * 3 * d; i++) {
      x = x * 1664525u + 1013904223u;
      e->e_qkv[i] = (float)(x >> 8) / 16777216.0f - 0.5f;
    }
    float *ref = malloc(n * d * sizeof *ref);
    WD_CHECK(ref != NULL);
    if (ref) {
      memset(e->e_o, 0, n * d * sizeof *ref);
      wd_cpu_enc_attn_heads(e, 0, 2, 0.125f);
      memcpy(ref, e->e_o, n * d * sizeof *ref);
      memset(e->e_o, 0, n * d * sizeof *ref);
      wd_cpu_enc_attn_heads(e, 1, 2, 0.125f);
      double worst = 0;
      size_t zero = 0, wrong_zero = 0;
      for (size_t i = 0; i < n * d; i++) {
        const double diff = fabs((double)ref[i] - (double)e->e_o[i]);
        worst = diff > worst ? diff : worst;
        const int head_0_1 = i % d < 2 * WD_ENC_ATTN_DH;
        zero += !head_0_1 && e->e_o[i] == 0.0f;
        wrong_zero += head_0_1 && ref[i] == 0.0f;
      }
      fprintf(stderr, "  blocked against sgemm, heads 0 and 1: max |diff| %.3g\n", worst);
      WD_CHECK(worst < 1e-4);
      WD_CHECK_EQ_INT(zero, n * (d - 2 * WD_ENC_ATTN_DH)); /* heads 2.. untouched */
      WD_CHECK_EQ_INT(wrong_zero, 0);                          /* heads 0, 1 written */
      free(ref);
    }
  }
  wd_cpu_engine_free(e);
  wd_cpu_enc_attn_test_kernel = NULL;
}

/* dir's plain files and empty subdirectories, then dir (what the tests
 * leave: cache files, "real" where the CPU had a choice). */
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  const struct dirent *de;
  char p[WD_PICK_PATH];
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (unlink(p) != 0)
      remove_tree(p);
  }
  closedir(d);
  (void)rmdir(dir);
}

int main(void) {
  const int rc = wd_test_main();
  if (g_dir[0])
    remove_tree(g_dir);
  if (g_model)
    wd_model_free(g_model);
  return rc;
}
