/*
 * test_model.c - the model loaders and the ggml writer.
 *
 * Without models: a small synthetic ggml model (state 64, one layer each)
 * is written here, loaded, rewritten byte for byte, and corrupted in every
 * way the loader must reject (bad magic, truncated header and data, wrong
 * shape and type, missing, unknown and duplicate tensors, absurd
 * hyper-parameters), each giving WD_EMODEL and a message naming the problem.
 * The filterbank is compared with openai/whisper's mel_filters.npz
 * (tests/data/mel).
 *
 * With models (scripts/fetch-model.sh tiny.en and base, else those tests
 * skip): facts of tiny.en and base, exact converted lengths, and every
 * converted tensor compared bit for bit with the CTranslate2 original,
 * including the fused Q/K/V and K/V slices read straight from model.bin.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "f16.h"
#include "mel_filters.h"
#include "model.h"
#include "model_internal.h"
#include "wd_synth_model.h"
#include "wd_test.h"

#define TINY_GGML WD_SOURCE_DIR "/models/ggml-tiny.en.bin"
#define TINY_CT2 WD_SOURCE_DIR "/models/ct2-tiny.en"
#define BASE_GGML WD_SOURCE_DIR "/models/ggml-base.bin"
#define BASE_CT2 WD_SOURCE_DIR "/models/ct2-base"

static char g_tmpdir[256];

/* Removes the scratch directory at exit (tests that skip end the binary early). */
static void tmp_cleanup(void) {
  static const char *const names[] = { "syn.bin", "syn-rewritten.bin", "syn-rewritten.bin.tmp",
                                       "bad.bin", "good.bin", "tiny-trunc.bin", "tiny.en.bin",
                                       "base.bin", "ct2-trunc/model.bin", "ct2-trunc" };
  char path[600];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", g_tmpdir, names[i]);
    if (unlink(path) != 0)
      rmdir(path);
  }
  rmdir(g_tmpdir);
}

static const char *tmp_path(const char *name) {
  static char path[512];
  if (!g_tmpdir[0]) {
    snprintf(g_tmpdir, sizeof g_tmpdir, "/tmp/wd_test_model.XXXXXX");
    if (!mkdtemp(g_tmpdir))
      abort();
    atexit(tmp_cleanup);
  }
  snprintf(path, sizeof path, "%s/%s", g_tmpdir, name);
  return path;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* ------------------------------------------------------ synthetic model */

typedef enum {
  SYN_OK,
  SYN_BAD_MAGIC,
  SYN_WRONG_SHAPE,   /* encoder.conv1.weight with 32 output channels */
  SYN_WRONG_TYPE,    /* encoder.conv1.bias stored as f16 */
  SYN_MISSING,       /* no decoder.ln.bias */
  SYN_UNKNOWN,       /* an extra "encoder.blocks.0.attn.key.bias" */
  SYN_DUPLICATE,     /* decoder.ln.bias twice */
  SYN_ABSURD_LAYERS, /* n_audio_layer = 100000 */
  SYN_BAD_HEADS,     /* n_audio_head = 3 does not divide 64 */
  SYN_BAD_MELS,      /* n_mels = 81 */
  SYN_HUGE_TOKEN,    /* a token claiming 1 GB */
} syn_kind_t;

static const wd_hparams_t syn_hp = { .n_vocab = 51864, .n_audio_ctx = 16, .n_audio_state = 64,
                                     .n_audio_head = 2, .n_audio_layer = 1, .n_text_ctx = 8,
                                     .n_text_state = 64, .n_text_head = 2, .n_text_layer = 1,
                                     .n_mels = 80, .ftype = 1 };

static void write_synth(const char *path, syn_kind_t kind) {
  wd_hparams_t hp = syn_hp;
  if (kind == SYN_ABSURD_LAYERS)
    hp.n_audio_layer = 100000;
  if (kind == SYN_BAD_HEADS)
    hp.n_audio_head = 3;
  if (kind == SYN_BAD_MELS)
    hp.n_mels = 81;
  FILE *f = fopen(path, "wb");
  if (!f)
    abort();
  wd_synth_put_preamble(f, &hp, kind == SYN_BAD_MAGIC ? 0x46464952 /* "RIFF" */ : WD_SYNTH_MAGIC,
                        kind == SYN_HUGE_TOKEN ? 1000 : -1);
  wd__tensor_spec_t *specs = NULL;
  size_t n = 0;
  if (wd__model_expect(&syn_hp, &specs, &n) < 0)
    abort();
  for (size_t i = 0; i < n; i++) {
    const wd__tensor_spec_t *s = &specs[i];
    wd_dtype_t type;
    wd__model_expect_type(&syn_hp, s->kind, &type);
    int64_t ne[4];
    memcpy(ne, s->ne, sizeof ne);
    if (kind == SYN_MISSING && strcmp(s->name, "decoder.ln.bias") == 0)
      continue;
    if (kind == SYN_WRONG_SHAPE && strcmp(s->name, "encoder.conv1.weight") == 0)
      ne[2] = 32;
    if (kind == SYN_WRONG_TYPE && strcmp(s->name, "encoder.conv1.bias") == 0)
      type = WD_DTYPE_F16;
    wd_synth_put_tensor(f, s->name, s->n_dims, ne, type, (unsigned)i);
    if (kind == SYN_DUPLICATE && strcmp(s->name, "decoder.ln.bias") == 0)
      wd_synth_put_tensor(f, s->name, s->n_dims, ne, type, (unsigned)i);
    if (kind == SYN_UNKNOWN && strcmp(s->name, "encoder.blocks.0.attn.query.bias") == 0)
      wd_synth_put_tensor(f, "encoder.blocks.0.attn.key.bias", s->n_dims, ne, type, 0);
  }
  free(specs);
  fclose(f);
}

/* Copies the first n bytes of src to dst. */
static void truncate_copy(const char *src, const char *dst, long long n) {
  FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
  if (!in || !out)
    abort();
  static char buf[1 << 16];
  while (n > 0) {
    const size_t want = n < (long long)sizeof buf ? (size_t)n : sizeof buf;
    const size_t got = fread(buf, 1, want, in);
    if (got == 0)
      break;
    fwrite(buf, 1, got, out);
    n -= (long long)got;
  }
  fclose(in);
  fclose(out);
}

/* Loads path expecting failure code with every one of the substrings in err. */
static void expect_reject(const char *path, int code, const char *needle1, const char *needle2) {
  wd_model_t *m = (wd_model_t *)0x1;
  char err[512] = "";
  const int rc = wd_model_load(path, &m, err, sizeof err);
  WD_CHECK_EQ_INT(rc, code);
  WD_CHECK(m == NULL);
  if (!strstr(err, needle1) || (needle2 && !strstr(err, needle2))) {
    fprintf(stderr, "  message '%s' lacks '%s'%s%s\n", err, needle1, needle2 ? " / " : "",
            needle2 ? needle2 : "");
    WD_CHECK(0);
  }
  if (rc == 0)
    wd_model_free(m);
}

WD_TEST(synthetic_model_loads_and_rewrites_identically) {
  const char *p = tmp_path("syn.bin");
  write_synth(p, SYN_OK);
  char path[512];
  snprintf(path, sizeof path, "%s", p);
  wd_model_t *m = NULL;
  char err[512] = "";
  WD_CHECK_EQ_INT(wd_model_load(path, &m, err, sizeof err), 0);
  if (!m) {
    fprintf(stderr, "  %s\n", err);
    return;
  }
  WD_CHECK_EQ_STR(wd_model_name(m), "custom");
  WD_CHECK_EQ_INT(wd_model_is_multilingual(m), 0);
  WD_CHECK_EQ_INT(wd_model_n_tensors(m), 5 + 15 + 2 + 2 + 24 + 2);
  WD_CHECK_EQ_INT(wd_model_n_tokens(m), 50257);
  size_t len = 0;
  const char *t = wd_model_token(m, 1234, &len);
  WD_CHECK(t && len == 5 && memcmp(t, "t1234", 5) == 0);
  WD_CHECK(wd_model_token(m, 50257, NULL) == NULL && wd_model_token(m, -1, NULL) == NULL);
  const wd_tensor_t *c1 = wd_model_tensor(m, "encoder.conv1.bias");
  WD_CHECK(c1 && c1->type == WD_DTYPE_F32 && c1->n_dims == 2 && c1->ne[0] == 1 && c1->ne[1] == 64);
  WD_CHECK(wd_model_tensor(m, "encoder.blocks.0.attn.key.bias") == NULL);
  const int(*heads)[2] = NULL;
  int nh = -1;
  WD_CHECK_EQ_INT(wd_model_alignment_heads(m, &heads, &nh), WD_ENOENT);
  WD_CHECK_EQ_INT(nh, 0);

  /* The writer reproduces the file byte for byte (same canonical order). */
  const char *q = tmp_path("syn-rewritten.bin");
  char qpath[512];
  snprintf(qpath, sizeof qpath, "%s", q);
  WD_CHECK_EQ_INT(wd_model_write_ggml(m, qpath, err, sizeof err), 0);
  WD_CHECK_EQ_INT(file_size(qpath), file_size(path));
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", qpath);
  WD_CHECK(!exists(tmp));
  FILE *a = fopen(path, "rb"), *b = fopen(qpath, "rb");
  WD_CHECK(a && b);
  if (a && b) {
    int ca, cb;
    long long diff_at = -1, off = 0;
    do {
      ca = fgetc(a);
      cb = fgetc(b);
      if (ca != cb && diff_at < 0)
        diff_at = off;
      off++;
    } while (ca != EOF && cb != EOF);
    WD_CHECK_EQ_INT(diff_at, -1);
  }
  if (a)
    fclose(a);
  if (b)
    fclose(b);
  wd_model_free(m);
  wd_model_free(NULL);
}

WD_TEST(corrupt_files_are_rejected_with_a_clear_message) {
  char path[512];
  snprintf(path, sizeof path, "%s", tmp_path("bad.bin"));
  write_synth(path, SYN_BAD_MAGIC);
  expect_reject(path, WD_EMODEL, "bad magic", "not a ggml");
  write_synth(path, SYN_WRONG_SHAPE);
  expect_reject(path, WD_EMODEL, "tensor 'encoder.conv1.weight': expected shape [3, 80, 64]",
                "found [3, 80, 32]");
  write_synth(path, SYN_WRONG_TYPE);
  expect_reject(path, WD_EMODEL, "tensor 'encoder.conv1.bias': expected type f32", "found f16");
  write_synth(path, SYN_MISSING);
  expect_reject(path, WD_EMODEL, "missing tensor 'decoder.ln.bias'", NULL);
  write_synth(path, SYN_UNKNOWN);
  expect_reject(path, WD_EMODEL, "unknown tensor 'encoder.blocks.0.attn.key.bias'", NULL);
  write_synth(path, SYN_DUPLICATE);
  expect_reject(path, WD_EMODEL, "duplicate tensor 'decoder.ln.bias'", NULL);
  write_synth(path, SYN_ABSURD_LAYERS);
  expect_reject(path, WD_EMODEL, "n_audio_layer = 100000", "out of range");
  write_synth(path, SYN_BAD_HEADS);
  expect_reject(path, WD_EMODEL, "n_audio_head = 3 does not divide n_audio_state = 64", NULL);
  write_synth(path, SYN_BAD_MELS);
  expect_reject(path, WD_EMODEL, "n_mels = 81", NULL);
  write_synth(path, SYN_HUGE_TOKEN);
  expect_reject(path, WD_EMODEL, "vocabulary: token 1000", NULL);

  /* Truncations of a valid file at every part of it. */
  char good[512];
  snprintf(good, sizeof good, "%s", tmp_path("good.bin"));
  write_synth(good, SYN_OK);
  const long long size = file_size(good);
  truncate_copy(good, path, 0);
  expect_reject(path, WD_EMODEL, "truncated file", "no ggml header");
  truncate_copy(good, path, 20);
  expect_reject(path, WD_EMODEL, "truncated header", NULL);
  truncate_copy(good, path, 48 + 8 + 1000);
  expect_reject(path, WD_EMODEL, "truncated file: mel filterbank", NULL);
  truncate_copy(good, path, 48 + 8 + 80 * 201 * 4 + 4 + 100);
  expect_reject(path, WD_EMODEL, "truncated file: vocabulary", NULL);
  truncate_copy(good, path, size - 10);
  expect_reject(path, WD_EMODEL, "truncated file: tensor 'decoder.ln.bias' needs 256 bytes", NULL);
  truncate_copy(good, path, size - 256 - 15 - 4 * 4 + 3);
  expect_reject(path, WD_EMODEL, "truncated file", NULL);

  /* Not there at all, and a directory without model.bin. */
  expect_reject(WD_SOURCE_DIR "/models/does-not-exist.bin", WD_ENOENT, "no such file", NULL);
  expect_reject(g_tmpdir, WD_ENOENT, "model.bin", NULL);
}

/* ------------------------------------------------------- f16 and mels */

static bool read_f32(const char *path, float *out, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  const size_t got = fread(out, sizeof(float), n, f);
  const int extra = fgetc(f);
  fclose(f);
  return got == n && extra == EOF;
}

/* whisper.cpp's quantize also writes k-quant files (ftype 10..14): refused
 * by name before any tensor is read. */
WD_TEST(k_quant_files_are_refused_by_name) {
  char path[512];
  snprintf(path, sizeof path, "%s", tmp_path("q4k.bin"));
  wd_hparams_t hp = syn_hp;
  hp.ftype = 2012; /* MOSTLY_Q4_K at quantization version 2 */
  FILE *f = fopen(path, "wb");
  WD_CHECK(f != NULL);
  if (!f)
    return;
  wd_synth_put_preamble(f, &hp, WD_SYNTH_MAGIC, -1);
  WD_CHECK_EQ_INT(fclose(f), 0);
  expect_reject(path, WD_EUNSUP, "ftype = 2012: q4_K (k-quant) weights are not supported",
                "q5_0");
}

WD_TEST(filterbank_matches_openai_mel_filters_npz) {
  static const int n_mels[2] = { 80, 128 };
  static float ref[128 * 201], ours[128 * 201];
  for (int k = 0; k < 2; k++) {
    char name[64];
    snprintf(name, sizeof name, "mel/mel_filters_%d.f32", n_mels[k]);
    const size_t n = (size_t)n_mels[k] * 201;
    WD_CHECK(read_f32(wd_test_data(name), ref, n));
    WD_CHECK_EQ_INT(wd_mel_filters_slaney(n_mels[k], 400, 16000, ours), 0);
    double max_abs = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < n; i++) {
      const double d = fabs((double)ours[i] - (double)ref[i]);
      max_abs = d > max_abs || d != d ? d : max_abs;
      max_ref = fabs(ref[i]) > max_ref ? fabs(ref[i]) : max_ref;
    }
    /* Both are float32 roundings of double computations that differ only in
     * operation order: allow 2 float32 ulps at the largest weights
     * (ulp 3.7e-9 in [2^-5, 2^-4)); measured: 1 ulp. */
    fprintf(stderr, "  n_mels %d: max |ours - openai| = %.3g (max weight %.3g)\n", n_mels[k],
            max_abs, max_ref);
    WD_CHECK(max_ref > 0.01);
    WD_CHECK_NEAR(max_abs, 0.0, 7.5e-9);
  }
}

/* Whether a model can translate follows from its shape alone (model.h):
 * a multilingual vocabulary and a decoder as deep as the encoder. Every
 * OpenAI multilingual release can; the English-only ones and
 * large-v3-turbo (4 decoder layers under 32) cannot, nor can a model of no
 * published name with a pruned decoder such as distil-whisper's (2 under
 * 32), which deciding by name let through. Built from hyper-parameters
 * only: no tensor is needed to name a model or answer this. */
WD_TEST(translation_decided_by_shape) {
#define HP(nv, d, h, la, lt, nm)                                                         \
  { .n_vocab = nv, .n_audio_ctx = 1500, .n_audio_state = d, .n_audio_head = h,           \
    .n_audio_layer = la, .n_text_ctx = 448, .n_text_state = d, .n_text_head = h,          \
    .n_text_layer = lt, .n_mels = nm, .ftype = 1 }
  static const struct {
    const char *name;
    wd_hparams_t hp;
    int translates;
  } cases[] = {
    { "tiny.en", HP(51864, 384, 6, 4, 4, 80), 0 },
    { "tiny", HP(51865, 384, 6, 4, 4, 80), 1 },
    { "base.en", HP(51864, 512, 8, 6, 6, 80), 0 },
    { "base", HP(51865, 512, 8, 6, 6, 80), 1 },
    { "small", HP(51865, 768, 12, 12, 12, 80), 1 },
    { "medium.en", HP(51864, 1024, 16, 24, 24, 80), 0 },
    { "medium", HP(51865, 1024, 16, 24, 24, 80), 1 },
    { "large-v2", HP(51865, 1280, 20, 32, 32, 80), 1 },
    { "large-v3", HP(51866, 1280, 20, 32, 32, 128), 1 },
    { "large-v3-turbo", HP(51866, 1280, 20, 32, 4, 128), 0 },
    /* distil-large-v3: large-v3's encoder, 2 decoder layers. */
    { "custom", HP(51866, 1280, 20, 32, 2, 128), 0 },
    /* distil-large-v2: large-v2's encoder, 2 decoder layers. */
    { "custom", HP(51865, 1280, 20, 32, 2, 80), 0 },
    /* A multilingual model of no published shape, decoder as deep as its
     * encoder (a fine-tune with 128 mel bands): it keeps the task. */
    { "custom", HP(51866, 384, 6, 4, 4, 128), 1 },
  };
#undef HP
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    wd_model_t *m = NULL;
    WD_CHECK_EQ_INT(wd__model_new(&cases[i].hp, 0, &m), 0);
    if (!m)
      continue;
    wd__model_finish(m);
    WD_CHECK_EQ_STR(wd_model_name(m), cases[i].name);
    if (wd_model_can_translate(m) != cases[i].translates)
      fprintf(stderr, "  case %zu (%s, %d decoder layers): can_translate %d, expected %d\n", i,
              cases[i].name, cases[i].hp.n_text_layer, wd_model_can_translate(m),
              cases[i].translates);
    WD_CHECK_EQ_INT(wd_model_can_translate(m), cases[i].translates);
    wd_model_free(m);
  }
}

/* ----------------------------------------------------------- real models */

WD_TEST(tiny_en_facts) {
  if (!exists(TINY_GGML))
    wd_test_skip("models/ggml-tiny.en.bin absent (run scripts/fetch-model.sh tiny.en)");
  wd_model_t *m = NULL;
  char err[512] = "";
  WD_CHECK_EQ_INT(wd_model_load(TINY_GGML, &m, err, sizeof err), 0);
  if (!m)
    return;
  const wd_hparams_t *hp = wd_model_hparams(m);
  WD_CHECK_EQ_INT(hp->n_vocab, 51864);
  WD_CHECK_EQ_INT(wd_model_is_multilingual(m), 0);
  WD_CHECK_EQ_INT(hp->n_audio_layer, 4);
  WD_CHECK_EQ_INT(hp->n_text_layer, 4);
  WD_CHECK_EQ_INT(hp->n_audio_state, 384);
  WD_CHECK_EQ_INT(hp->n_audio_head, 6);
  WD_CHECK_EQ_INT(hp->n_audio_ctx, 1500);
  WD_CHECK_EQ_INT(hp->n_text_ctx, 448);
  WD_CHECK_EQ_INT(hp->n_mels, 80);
  WD_CHECK_EQ_INT(hp->ftype, 1);
  WD_CHECK_EQ_STR(wd_model_name(m), "tiny.en");
  WD_CHECK_EQ_INT(wd_model_n_tensors(m), 167);
  WD_CHECK_EQ_INT(wd_model_n_tokens(m), 50257);
  size_t len = 0;
  const char *t = wd_model_token(m, 50256, &len);
  WD_CHECK(t && len == 13 && memcmp(t, "<|endoftext|>", 13) == 0);
  t = wd_model_token(m, 262, &len); /* GPT-2 rank 262 is " the" */
  WD_CHECK(t && len == 4 && memcmp(t, " the", 4) == 0);
  t = wd_model_token(m, 198, &len); /* and 198 is a newline */
  WD_CHECK(t && len == 1 && t[0] == '\n');
  const wd_tensor_t *te = wd_model_tensor(m, "decoder.token_embedding.weight");
  WD_CHECK(te && te->type == WD_DTYPE_F16 && te->ne[0] == 384 && te->ne[1] == 51864 &&
           te->nbytes == (size_t)384 * 51864 * 2);
  /* Released pages read back the file's bytes (faulted in again). */
  if (te) {
    uint64_t sum0 = 0, sum1 = 0;
    for (size_t i = 0; i < te->nbytes; i++)
      sum0 = sum0 * 31 + ((const uint8_t *)te->data)[i];
    const size_t rel = wd_model_release(m, te);
    WD_CHECK(rel > te->nbytes - 8192 && rel <= te->nbytes);
    for (size_t i = 0; i < te->nbytes; i++)
      sum1 = sum1 * 31 + ((const uint8_t *)te->data)[i];
    WD_CHECK(sum0 == sum1);
  }
  const int(*heads)[2] = NULL;
  int nh = 0;
  WD_CHECK_EQ_INT(wd_model_alignment_heads(m, &heads, &nh), 0);
  WD_CHECK_EQ_INT(nh, 8);
  if (nh == 8)
    WD_CHECK(heads[0][0] == 1 && heads[0][1] == 0 && heads[7][0] == 3 && heads[7][1] == 4);
  /* The filterbank stored in the file is the computed one, bit for bit. */
  int n_mel = 0, n_fft = 0;
  const float *mel = wd_model_mel_filters(m, &n_mel, &n_fft);
  static float ours[80 * 201];
  wd_mel_filters_slaney(80, 400, 16000, ours);
  WD_CHECK(n_mel == 80 && n_fft == 201 && memcmp(mel, ours, sizeof ours) == 0);
  wd_model_free(m);

  /* A truncated copy of the real file fails cleanly. */
  char path[512];
  snprintf(path, sizeof path, "%s", tmp_path("tiny-trunc.bin"));
  truncate_copy(TINY_GGML, path, 40 << 20);
  expect_reject(path, WD_EMODEL, "truncated file: tensor '", NULL);
  unlink(path);
}

WD_TEST(base_facts) {
  if (!exists(BASE_GGML))
    wd_test_skip("models/ggml-base.bin absent (run scripts/fetch-model.sh base)");
  wd_model_t *m = NULL;
  char err[512] = "";
  WD_CHECK_EQ_INT(wd_model_load(BASE_GGML, &m, err, sizeof err), 0);
  if (!m)
    return;
  const wd_hparams_t *hp = wd_model_hparams(m);
  WD_CHECK_EQ_INT(hp->n_vocab, 51865);
  WD_CHECK_EQ_INT(wd_model_is_multilingual(m), 1);
  WD_CHECK_EQ_INT(hp->n_audio_state, 512);
  WD_CHECK_EQ_INT(hp->n_audio_layer, 6);
  WD_CHECK_EQ_INT(hp->n_text_head, 8);
  WD_CHECK_EQ_STR(wd_model_name(m), "base");
  WD_CHECK_EQ_INT(wd_model_n_tensors(m), 245);
  size_t len = 99;
  WD_CHECK(wd_model_token(m, 50256, &len) != NULL && len == 0); /* the empty token */
  const int(*heads)[2] = NULL;
  int nh = 0;
  WD_CHECK_EQ_INT(wd_model_alignment_heads(m, &heads, &nh), 0);
  WD_CHECK(nh == 8 && heads[0][0] == 3 && heads[0][1] == 1);
  wd_model_free(m);
}

/* A minimal independent reader of model.bin, enough to find a variable. */
typedef struct {
  unsigned char *buf;
  size_t len;
} ct2_raw_t;

static const unsigned char *ct2_var(const ct2_raw_t *r, const char *name, uint32_t *ret_rows,
                                    uint32_t *ret_nbytes, uint8_t *ret_dtype) {
  size_t p = 4;
  uint16_t sl;
  memcpy(&sl, r->buf + p, 2);
  p += 2 + sl + 4;
  uint32_t n;
  memcpy(&n, r->buf + p, 4);
  p += 4;
  for (uint32_t i = 0; i < n && p < r->len; i++) {
    memcpy(&sl, r->buf + p, 2);
    const char *vname = (const char *)r->buf + p + 2;
    p += 2 + sl;
    const uint8_t rank = r->buf[p++];
    uint32_t rows = 1;
    if (rank > 0)
      memcpy(&rows, r->buf + p, 4);
    p += 4u * rank;
    const uint8_t dtype = r->buf[p++];
    uint32_t nbytes;
    memcpy(&nbytes, r->buf + p, 4);
    p += 4;
    if (strcmp(vname, name) == 0) {
      *ret_rows = rows;
      *ret_nbytes = nbytes;
      *ret_dtype = dtype;
      return r->buf + p;
    }
    p += nbytes;
  }
  return NULL;
}

/* Checks tensor name of m against rows [part/n_parts] of CT2 variable var. */
static int check_slice(const wd_model_t *m, const ct2_raw_t *r, const char *name, const char *var,
                       int part, int n_parts) {
  const wd_tensor_t *t = wd_model_tensor(m, name);
  uint32_t rows = 0, nbytes = 0;
  uint8_t dtype = 255;
  const unsigned char *src = ct2_var(r, var, &rows, &nbytes, &dtype);
  if (!t || !src || dtype != 4 /* float16 */) {
    fprintf(stderr, "  %s / %s: not found\n", name, var);
    return 1;
  }
  const size_t slice = nbytes / (size_t)n_parts; /* bytes of f16 */
  const unsigned char *s = src + slice * (size_t)part;
  if (t->type == WD_DTYPE_F16)
    return t->nbytes == slice && memcmp(t->data, s, slice) == 0 ? 0 : 1;
  /* f32 from f16: exact widening */
  if (t->nbytes != slice * 2)
    return 1;
  for (size_t i = 0; i < slice / 2; i++) {
    uint16_t h;
    float want, got;
    memcpy(&h, s + 2 * i, 2);
    want = wd_f16_to_f32(h);
    memcpy(&got, (const unsigned char *)t->data + 4 * i, 4);
    if (memcmp(&want, &got, 4) != 0)
      return 1;
  }
  return 0;
}

static void convert_and_compare(const char *ct2_dir, const char *out_name, long long want_size,
                                int n_layer) {
  wd_model_t *a = NULL, *b = NULL;
  char err[512] = "";
  WD_CHECK_EQ_INT(wd_model_load(ct2_dir, &a, err, sizeof err), 0);
  if (!a) {
    fprintf(stderr, "  %s\n", err);
    return;
  }
  char out[512];
  snprintf(out, sizeof out, "%s", tmp_path(out_name));
  WD_CHECK_EQ_INT(wd_model_write_ggml(a, out, err, sizeof err), 0);
  WD_CHECK_EQ_INT(file_size(out), want_size);
  WD_CHECK_EQ_INT(wd_model_load(out, &b, err, sizeof err), 0);
  if (!b) {
    fprintf(stderr, "  %s\n", err);
    wd_model_free(a);
    return;
  }
  /* The ggml file holds exactly what the CTranslate2 loader built. */
  WD_CHECK(memcmp(wd_model_hparams(a), wd_model_hparams(b), sizeof(wd_hparams_t)) == 0);
  WD_CHECK_EQ_STR(wd_model_name(a), wd_model_name(b));
  WD_CHECK_EQ_INT(wd_model_n_tensors(a), wd_model_n_tensors(b));
  int mismatched = 0;
  for (size_t i = 0; i < wd_model_n_tensors(a); i++) {
    const wd_tensor_t *x = wd_model_tensor_at(a, i), *y = wd_model_tensor_at(b, i);
    if (strcmp(x->name, y->name) != 0 || x->type != y->type || x->n_dims != y->n_dims ||
        memcmp(x->ne, y->ne, sizeof x->ne) != 0 || x->nbytes != y->nbytes ||
        memcmp(x->data, y->data, x->nbytes) != 0) {
      fprintf(stderr, "  tensor %zu '%s' differs after conversion\n", i, x->name);
      mismatched++;
    }
  }
  WD_CHECK_EQ_INT(mismatched, 0);
  int n_mel_a, n_fft_a, n_mel_b, n_fft_b;
  const float *ma = wd_model_mel_filters(a, &n_mel_a, &n_fft_a);
  const float *mb = wd_model_mel_filters(b, &n_mel_b, &n_fft_b);
  WD_CHECK(n_mel_a == n_mel_b && n_fft_a == n_fft_b &&
           memcmp(ma, mb, sizeof(float) * (size_t)n_mel_a * (size_t)n_fft_a) == 0);
  WD_CHECK_EQ_INT(wd_model_n_tokens(a), wd_model_n_tokens(b));
  int tok_diff = 0;
  for (int i = 0; i < wd_model_n_tokens(a); i++) {
    size_t la, lb;
    const char *ta = wd_model_token(a, i, &la), *tb = wd_model_token(b, i, &lb);
    tok_diff += la != lb || memcmp(ta, tb, la) != 0;
  }
  WD_CHECK_EQ_INT(tok_diff, 0);

  /* And it holds the CTranslate2 weights, sliced, read independently. */
  char path[512];
  snprintf(path, sizeof path, "%s/model.bin", ct2_dir);
  ct2_raw_t r = { 0 };
  FILE *f = fopen(path, "rb");
  WD_CHECK(f != NULL);
  if (f) {
    r.len = (size_t)file_size(path);
    r.buf = malloc(r.len);
    WD_CHECK(r.buf && fread(r.buf, 1, r.len, f) == r.len);
    fclose(f);
  }
  int bad = 0;
  char g[128], c[128];
  for (int l = 0; r.buf && l < n_layer; l++) {
    static const char *const side[2] = { "encoder", "decoder" };
    static const char *const qkv[3] = { "query", "key", "value" };
    for (int s = 0; s < 2; s++) {
      for (int k = 0; k < 3; k++) {
        snprintf(g, sizeof g, "%s.blocks.%d.attn.%s.weight", side[s], l, qkv[k]);
        snprintf(c, sizeof c, "%s/layer_%d/self_attention/linear_0/weight", side[s], l);
        bad += check_slice(b, &r, g, c, k, 3);
        if (k != 1) {
          snprintf(g, sizeof g, "%s.blocks.%d.attn.%s.bias", side[s], l, qkv[k]);
          snprintf(c, sizeof c, "%s/layer_%d/self_attention/linear_0/bias", side[s], l);
          bad += check_slice(b, &r, g, c, k, 3);
        }
      }
      snprintf(g, sizeof g, "%s.blocks.%d.mlp.2.weight", side[s], l);
      snprintf(c, sizeof c, "%s/layer_%d/ffn/linear_1/weight", side[s], l);
      bad += check_slice(b, &r, g, c, 0, 1);
      snprintf(g, sizeof g, "%s.blocks.%d.mlp_ln.weight", side[s], l);
      snprintf(c, sizeof c, "%s/layer_%d/ffn/layer_norm/gamma", side[s], l);
      bad += check_slice(b, &r, g, c, 0, 1);
    }
    snprintf(c, sizeof c, "decoder/layer_%d/attention/linear_1/weight", l);
    snprintf(g, sizeof g, "decoder.blocks.%d.cross_attn.key.weight", l);
    bad += check_slice(b, &r, g, c, 0, 2);
    snprintf(g, sizeof g, "decoder.blocks.%d.cross_attn.value.weight", l);
    bad += check_slice(b, &r, g, c, 1, 2);
    snprintf(c, sizeof c, "decoder/layer_%d/attention/linear_1/bias", l);
    snprintf(g, sizeof g, "decoder.blocks.%d.cross_attn.value.bias", l);
    bad += check_slice(b, &r, g, c, 1, 2);
    /* The dropped key bias is zero in CTranslate2. */
    uint32_t rows, nbytes;
    uint8_t dtype;
    const unsigned char *kb = ct2_var(&r, c, &rows, &nbytes, &dtype);
    for (uint32_t i = 0; kb && i < nbytes / 2; i++)
      bad += kb[i] != 0 && kb[i] != 0x80 ? 1 : 0; /* +0 or -0 halves */
  }
  if (r.buf) {
    bad += check_slice(b, &r, "decoder.token_embedding.weight", "decoder/embeddings/weight", 0, 1);
    bad += check_slice(b, &r, "encoder.conv1.weight", "encoder/conv1/weight", 0, 1);
    bad += check_slice(b, &r, "encoder.conv2.bias", "encoder/conv2/bias", 0, 1);
    bad += check_slice(b, &r, "encoder.positional_embedding", "encoder/position_encodings/encodings", 0, 1);
    bad += check_slice(b, &r, "decoder.positional_embedding", "decoder/position_encodings/encodings", 0, 1);
    bad += check_slice(b, &r, "decoder.ln.bias", "decoder/layer_norm/beta", 0, 1);
  }
  WD_CHECK_EQ_INT(bad, 0);
  free(r.buf);
  wd_model_free(a);
  wd_model_free(b);
  unlink(out);
}

WD_TEST(convert_tiny_en_exact_length_and_bit_exact) {
  if (!exists(TINY_CT2 "/model.bin"))
    wd_test_skip("models/ct2-tiny.en absent (run scripts/fetch-model.sh tiny.en)");
  convert_and_compare(TINY_CT2, "tiny.en.bin", 77704715LL, 4);
}

WD_TEST(convert_base_exact_length_and_bit_exact) {
  if (!exists(BASE_CT2 "/model.bin"))
    wd_test_skip("models/ct2-base absent (run scripts/fetch-model.sh base)");
  convert_and_compare(BASE_CT2, "base.bin", 147951465LL, 6);
}

WD_TEST(ct2_truncated_model_bin_is_rejected) {
  if (!exists(TINY_CT2 "/model.bin"))
    wd_test_skip("models/ct2-tiny.en absent (run scripts/fetch-model.sh tiny.en)");
  char dir[512], path[600], src[600];
  snprintf(dir, sizeof dir, "%s", tmp_path("ct2-trunc"));
  mkdir(dir, 0700);
  snprintf(path, sizeof path, "%s/model.bin", dir);
  truncate_copy(TINY_CT2 "/model.bin", path, 1 << 20);
  expect_reject(dir, WD_EMODEL, "model.bin: truncated", NULL);
  unlink(path);
  rmdir(dir);
  (void)src;
}

int main(void) { return wd_test_main(); }
