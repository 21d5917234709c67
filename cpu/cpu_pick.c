/*
 * cpu_pick.c - every kernel choice of the CPU engine at load, and where it
 * came from (issue #40).
 *
 * Two kernels have candidates that only a measurement can rank: the
 * decoder GEMV (AVX-512 or AVX2, per batch-row bucket: cpu_gemv_pick.c)
 * and the encoder's self-attention (the blocked AVX-512 kernel of
 * cpu_enc_attn.h, or an OpenBLAS sgemm pair a head). Both exist only
 * where the CPU has AVX-512; elsewhere each kernel has one candidate and
 * nothing is measured (nor cached).
 *
 * In order:
 *   1. WHISPERD_CPU_ENC_ATTN=blocked|sgemm forces the attention (and
 *      WHISPERD_CPU_NO_AVX512 / _PORTABLE leave one candidate of each):
 *      what is forced is not measured, and the cache is neither read nor
 *      written, so a forced run never poisons it.
 *   2. The cache (cpu_pick_cache.h), under a key of the kernel version, the
 *      CPU model and features, the model's shape, the batch, the threads
 *      and OpenBLAS's version and kernels: a valid entry is taken as is.
 *   3. Otherwise both kernels are measured on the model's own shapes
 *      (cpu_tune.h) and the result written to the cache for the next load.
 * pick_source and pick_note say which, with the times that decided.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cpu_blas.h"
#include "cpu_enc_attn.h"
#include "cpu_features.h"
#include "cpu_internal.h"
#include "cpu_pick_cache.h"
#include "cpu_tune.h"
#include "error.h"

/* The attention's heads measured: two of the model's (a fifth to a tenth
 * of a layer's attention; a few ms for base on a many-core host). */
#define ATTN_PICK_HEADS 2
#define ATTN_PICK_ROUNDS 2

/* WHISPERD_CPU_ENC_ATTN: "blocked" or "sgemm" when set to either, else NULL. */
static const char *attn_forced(void) {
  const char *v = getenv("WHISPERD_CPU_ENC_ATTN");
  if (v && (strcmp(v, "blocked") == 0 || strcmp(v, "sgemm") == 0))
    return v;
  return NULL;
}

void wd_cpu_pick_key_hp(const wd_hparams_t *hp, int max_seqs, int n_threads,
                        wd_cpu_compute_t compute, char *key, size_t len) {
  char cpu[192];
  wd_cpu_ident(cpu, sizeof cpu);
  /* The sgemm candidate's speed is OpenBLAS's: its version and kernel set
   * (an upgrade, OPENBLAS_CORETYPE) are part of the key, last, so that a
   * key too long for len loses only their tail. */
  snprintf(key, len,
           "kernels %d; cpu %s; features %#x; audio %d/%d/%d/%d; text %d/%d/%d/%d; vocab %d; "
           "ftype %d; compute %s; batch %d; threads %d; gemm %s",
           WD_KERNEL_VERSION, cpu, wd_cpu_features(), hp->n_audio_ctx, hp->n_audio_state,
           hp->n_audio_head, hp->n_audio_layer, hp->n_text_ctx, hp->n_text_state,
           hp->n_text_head, hp->n_text_layer, hp->n_vocab, hp->ftype,
           wd_cpu_compute_name(compute), max_seqs, n_threads, wd_cpu_blas_path());
}

void wd_cpu_pick_key(const wd_cpu_engine_t *e, char *key, size_t len) {
  wd_cpu_pick_key_hp(&e->hp, e->max_seqs, e->n_threads, e->compute, key, len);
}

/* ---- the attention's measurement ---- */

typedef struct {
  wd_cpu_engine_t *e;
  int nh;
  float scale;
  int blocked[2]; /* the candidates' kernels: { 1, 0 }, or { 0, 0 } for the test twins */
} attn_ctx_t;

static void attn_run(void *ctx, int cand) {
  attn_ctx_t *a = ctx;
  wd_cpu_enc_attn_heads(a->e, a->blocked[cand], a->nh, a->scale);
}

static void attn_measure(wd_cpu_engine_t *e) {
  const int n = e->hp.n_audio_ctx, d = e->hp.n_audio_state, nh = e->hp.n_audio_head;
  const int dh = d / nh;
  /* The encoder's Q K V scratch, zeroed: the kernels' time does not depend
   * on the values (every encode overwrites them). */
  memset(e->e_qkv, 0, (size_t)n * 3 * (size_t)d * sizeof(float));
  attn_ctx_t a = { .e = e, .nh = nh < ATTN_PICK_HEADS ? nh : ATTN_PICK_HEADS,
                   .scale = 1.0f / 8.0f,
                   .blocked = { wd_cpu_enc_attn_available(dh), 0 } };
  double best[2] = { 0, 0 };
  const wd_cpu_tune_t t = { .n_cand = 2, .rounds = ATTN_PICK_ROUNDS, .run = attn_run, .ctx = &a };
  const int win = wd_cpu_tune_pick(&t, best);
  /* Candidate 0 is the blocked kernel (a failed pick keeps it, the feature
   * default); the twins' candidate 0 is sgemm. */
  e->enc_blocked = a.blocked[win <= 0 ? 0 : 1];
  snprintf(e->attn_choice, sizeof e->attn_choice,
           "measured on %d of %d heads (%d x %d): %s (blocked %.3f, sgemm %.3f ms)", a.nh, nh, n,
           dh, e->enc_blocked ? "blocked" : "sgemm", best[0] * 1e3, best[1] * 1e3);
}

/* ---- the cache ---- */

/* The set to cache: what the measurement chose and why. */
static void to_set(const wd_cpu_engine_t *e, int gemv2, int attn2, double ms, wd_pick_set_t *s) {
  memset(s, 0, sizeof *s);
  char v[WD_PICK_VALUE];
  if (gemv2) {
    int n = 0;
    for (int r = 0; r <= CPU_GEMV_PICK_ROWS && n >= 0 && (size_t)n < sizeof v; r++)
      n += snprintf(v + n, sizeof v - (size_t)n, "%s%d", r ? " " : "", e->gemv_path[r]);
    (void)wd_pick_set_put(s, "gemv_path", v);
    (void)wd_pick_set_put(s, "gemv_note", e->gemv_choice);
  }
  if (attn2) {
    (void)wd_pick_set_put(s, "enc_attn", e->enc_blocked ? "blocked" : "sgemm");
    (void)wd_pick_set_put(s, "enc_attn_note", e->attn_choice);
  }
  const time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm) && strftime(v, sizeof v, "%Y-%m-%dT%H:%M:%SZ", &tm) > 0)
    (void)wd_pick_set_put(s, "measured_at", v);
  snprintf(v, sizeof v, "%.1f", ms);
  (void)wd_pick_set_put(s, "measure_ms", v);
}

/* Takes a cached set where it answers every kernel that has candidates
 * with a choice this CPU can run: 1; else 0 and nothing changed. */
static int from_set(wd_cpu_engine_t *e, int gemv2, int attn2, const wd_pick_set_t *s) {
  signed char path[CPU_GEMV_PICK_ROWS + 1];
  const char *gp = wd_pick_set_get(s, "gemv_path"), *gn = wd_pick_set_get(s, "gemv_note");
  if (gemv2) {
    if (!gp || !gn)
      return 0;
    const char *p = gp;
    for (int r = 0; r <= CPU_GEMV_PICK_ROWS; r++) {
      char *end;
      const long v = strtol(p, &end, 10);
      if (end == p || v < 1 || v > 2 || (*end != ' ' && *end != '\0'))
        return 0; /* the paths measured: 1 (AVX2) or 2 (AVX-512) */
      path[r] = (signed char)v;
      p = end;
    }
    if (*p != '\0')
      return 0;
  }
  const char *ea = wd_pick_set_get(s, "enc_attn"), *en = wd_pick_set_get(s, "enc_attn_note");
  const int dh = e->hp.n_audio_state / e->hp.n_audio_head;
  if (attn2 && (!ea || !en || (strcmp(ea, "blocked") != 0 && strcmp(ea, "sgemm") != 0) ||
                (strcmp(ea, "blocked") == 0 && !wd_cpu_enc_attn_available(dh))))
    return 0; /* never the blocked kernel where it cannot run, whatever a file says */
  if (gemv2) {
    memcpy(e->gemv_path, path, sizeof path);
    snprintf(e->gemv_choice, sizeof e->gemv_choice, "%s", gn);
  }
  if (attn2) {
    e->enc_blocked = strcmp(ea, "blocked") == 0;
    snprintf(e->attn_choice, sizeof e->attn_choice, "%s", en);
  }
  return 1;
}

/* "GEMV <choice>; encoder attention <choice>" into the note at n. */
static void note_choices(wd_cpu_engine_t *e, int n) {
  if (n < 0 || (size_t)n >= sizeof e->pick_note)
    return;
  snprintf(e->pick_note + n, sizeof e->pick_note - (size_t)n,
           "; decoder GEMV %s; encoder attention %s",
           e->gemv_choice[0] ? e->gemv_choice : wd_cpu_gemv_path_name(wd_cpu_gemv_widest()),
           e->attn_choice[0] ? e->attn_choice : e->enc_blocked ? "blocked" : "sgemm");
}

void wd_cpu_kernels_pick(wd_cpu_engine_t *e) {
  const int dh = e->hp.n_audio_state / e->hp.n_audio_head;
  const char *fa = attn_forced();
  const int can_block = wd_cpu_enc_attn_available(dh);
  const int gemv2 = wd_cpu_gemv_pick_candidates(e);
  const int attn2 = (can_block || wd_cpu_pick_test_twins) && !fa;
  /* The defaults: the widest GEMV, the blocked attention wherever it runs
   * (as before measurement), or what the environment forces. */
  for (int r = 0; r <= CPU_GEMV_PICK_ROWS; r++)
    e->gemv_path[r] = (signed char)wd_cpu_gemv_widest();
  e->gemv_choice[0] = e->attn_choice[0] = e->pick_note[0] = '\0';
  e->enc_blocked = fa ? strcmp(fa, "blocked") == 0 && can_block : can_block;
  if (fa)
    snprintf(e->attn_choice, sizeof e->attn_choice, "%s (WHISPERD_CPU_ENC_ATTN=%s%s)",
             e->enc_blocked ? "blocked" : "sgemm", fa,
             strcmp(fa, "blocked") == 0 && !can_block ? ", which this CPU cannot run" : "");
  if (!gemv2 && !attn2) {
    e->pick_source = fa ? "forced" : "one candidate";
    note_choices(e, snprintf(e->pick_note, sizeof e->pick_note, "%s",
                             fa ? "forced, nothing measured"
                                : "one candidate per kernel on this CPU (no AVX-512), "
                                  "nothing measured"));
    return;
  }
  char key[WD_PICK_KEY], dir[WD_PICK_PATH], path[WD_PICK_PATH];
  wd_cpu_pick_key(e, key, sizeof key);
  const int use_cache = !fa && wd_pick_cache_dir(dir, sizeof dir) == 0 &&
                        wd_pick_cache_path(dir, key, path, sizeof path) == 0;
  int read_rc = WD_ENOENT;
  if (use_cache) {
    wd_pick_set_t s;
    read_rc = wd_pick_cache_read(path, key, &s);
    if (read_rc == 0 && from_set(e, gemv2, attn2, &s)) {
      const char *at = wd_pick_set_get(&s, "measured_at"), *ms = wd_pick_set_get(&s, "measure_ms");
      e->pick_source = "cache";
      note_choices(e, snprintf(e->pick_note, sizeof e->pick_note,
                               "from the cache %s (measured %s in %s ms)", path, at ? at : "?",
                               ms ? ms : "?"));
      return;
    }
  }
  const double t0 = wd_now_ms();
  if (gemv2)
    wd_cpu_gemv_pick(e);
  if (attn2)
    attn_measure(e);
  const double ms = wd_now_ms() - t0;
  e->pick_source = "measured";
  const char *why = fa ? "WHISPERD_CPU_ENC_ATTN forces a kernel: cache neither read nor written"
                    : !use_cache ? "no cache directory (WHISPERD_CACHE_DIR, CACHE_DIRECTORY, XDG_CACHE_HOME, HOME: unset, relative or too long)"
                    : read_rc == WD_EFORMAT ? "a corrupt cache file replaced"
                    : read_rc == 0          ? "the cached choice was not one this CPU runs"
                    : read_rc == WD_ENOENT  ? "nothing cached for this CPU and model"
                                            : "the cache file could not be read";
  int wrote = 0;
  if (use_cache) {
    wd_pick_set_t s;
    to_set(e, gemv2, attn2, ms, &s);
    wrote = wd_pick_cache_write(path, key, &s) == 0;
  }
  note_choices(e, snprintf(e->pick_note, sizeof e->pick_note, "measured at load in %.1f ms (%s%s%s)",
                           ms, why,
                           !use_cache ? "" : wrote ? "; cached in " : "; not cached: cannot write ",
                           use_cache ? path : ""));
}

/* ---- what a load would do, without loading (`whisperd info`) ---- */

void wd_cpu_engine_pick_preview(const wd_model_t *m, const wd_cpu_engine_opts_t *o, char *buf,
                                size_t len) {
  const wd_hparams_t *hp = wd_model_hparams(m);
  const wd_tensor_t *fc1 = wd_model_tensor(m, "decoder.blocks.0.mlp.0.weight");
  const char *fa = attn_forced();
  const int gemv2 = wd_cpu_gemv_widest() == 2 && o->compute == WD_CPU_COMPUTE_F32 && fc1 &&
                    (fc1->type == WD_DTYPE_F16 || fc1->type == WD_DTYPE_F32);
  const int attn2 = !fa && hp->n_audio_head > 0 &&
                    wd_cpu_enc_attn_available(hp->n_audio_state / hp->n_audio_head);
  if (!gemv2 && !attn2) {
    snprintf(buf, len, "%s", fa ? "forced by WHISPERD_CPU_ENC_ATTN, nothing measured"
                                : "one candidate per kernel on this CPU (no AVX-512), nothing "
                                  "measured");
    return;
  }
  if (fa) {
    snprintf(buf, len, "decoder GEMV measured at load, not cached (WHISPERD_CPU_ENC_ATTN=%s)", fa);
    return;
  }
  const long nc = sysconf(_SC_NPROCESSORS_ONLN);
  const int threads = o->n_threads ? o->n_threads : (nc > 0 ? (int)(nc > 64 ? 64 : nc) : 1);
  char key[WD_PICK_KEY], dir[WD_PICK_PATH], path[WD_PICK_PATH];
  wd_cpu_pick_key_hp(hp, o->max_seqs, threads, o->compute, key, sizeof key);
  if (wd_pick_cache_dir(dir, sizeof dir) < 0 || wd_pick_cache_path(dir, key, path, sizeof path) < 0) {
    snprintf(buf, len, "measured at every load (no cache directory)");
    return;
  }
  wd_pick_set_t s;
  const int rc = wd_pick_cache_read(path, key, &s);
  if (rc == 0) {
    const char *at = wd_pick_set_get(&s, "measured_at"), *gn = wd_pick_set_get(&s, "gemv_note");
    const char *an = wd_pick_set_get(&s, "enc_attn_note");
    snprintf(buf, len, "from the cache %s (measured %s): decoder GEMV %s; encoder attention %s",
             path, at ? at : "?", gn ? gn : "one candidate", an ? an : "one candidate");
  } else
    snprintf(buf, len, "measured at the next load and cached in %s (%s)", path,
             rc == WD_EFORMAT ? "the file there is corrupt" : "nothing cached yet");
}

void wd_cpu_engine_cache_dir(char *buf, size_t len) {
  const int rc = wd_pick_cache_dir(buf, len);
  if (rc == WD_EINVAL)
    snprintf(buf, len, "none (WHISPERD_CACHE_DIR is not an absolute path)");
  else if (rc == WD_ERANGE)
    snprintf(buf, len, "none (the cache directory's path is too long)");
  else if (rc < 0)
    snprintf(buf, len, "none (set WHISPERD_CACHE_DIR, CACHE_DIRECTORY, XDG_CACHE_HOME or HOME)");
}
