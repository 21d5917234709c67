/*
 * make_seeds.c - writes the generated seed inputs of the model harnesses:
 * small valid models in the compact form their harnesses read (fuzz_common.h
 * "ZRUN" zero runs for the bulk data), plus one model in the raw form.
 *
 * Usage: fuzz_make_seeds OUTDIR  -> files in OUTDIR/model_ggml/ and OUTDIR/model_ct2/
 *
 * The ggml seeds follow the loader's own expected-tensor list
 * (wd__model_expect), so they stay valid when it changes; the CTranslate2
 * seeds are spelled out here from CTranslate2's WhisperSpec layout (fused
 * Q/K/V, reversed shapes), an independent statement of the format. Both are
 * checked by the regression test, which replays them: a seed that stopped
 * loading would lose the fuzzer its way in, so the test fails on it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"
#include "model_internal.h"

typedef struct {
  uint8_t *p;
  size_t len, cap;
} buf_t;

static void put(buf_t *b, const void *d, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
      cap *= 2;
    uint8_t *np = realloc(b->p, cap);
    if (!np) {
      perror("make_seeds");
      exit(1);
    }
    b->p = np;
    b->cap = cap;
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
}

static void put_u8(buf_t *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(buf_t *b, uint16_t v) {
  uint8_t x[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
  put(b, x, 2);
}
static void put_u32(buf_t *b, uint32_t v) {
  uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
  put(b, x, 4);
}
/* n zero bytes: written out, or as a "ZRUN" record in compact form. */
static void put_zeros(buf_t *b, size_t n, int compact) {
  if (compact) {
    put(b, "ZRUN", 4);
    put_u32(b, (uint32_t)n);
    return;
  }
  static const uint8_t z[4096];
  for (size_t k = 0; k < n; k += sizeof z)
    put(b, z, n - k < sizeof z ? n - k : sizeof z);
}

static void save(const char *dir, const char *name, const buf_t *b) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(b->p, 1, b->len, f) != b->len || fclose(f) != 0) {
    fprintf(stderr, "make_seeds: %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

static void mkdir_p(const char *path) {
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "make_seeds: mkdir %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

/* ---------------------------------------------------------------- ggml */

static void ggml_seed(const char *dir, const char *name, wd_hparams_t hp, int compact,
                      int n_tokens) {
  buf_t b = { 0 };
  put_u8(&b, compact ? 1 : 0); /* the harness's form byte */
  put_u32(&b, 0x67676d6cu);
  const int32_t v[11] = { hp.n_vocab,      hp.n_audio_ctx,  hp.n_audio_state, hp.n_audio_head,
                          hp.n_audio_layer, hp.n_text_ctx,  hp.n_text_state,  hp.n_text_head,
                          hp.n_text_layer, hp.n_mels,       hp.ftype };
  for (int i = 0; i < 11; i++)
    put_u32(&b, (uint32_t)v[i]);
  put_u32(&b, (uint32_t)hp.n_mels);
  put_u32(&b, 201);
  put_zeros(&b, (size_t)hp.n_mels * 201 * 4, compact);
  /* The 256 single bytes, then a few longer tokens. */
  put_u32(&b, (uint32_t)n_tokens);
  for (int i = 0; i < n_tokens; i++) {
    if (i < 256) {
      put_u32(&b, 1);
      put_u8(&b, (uint8_t)i);
    } else {
      char t[32];
      int n = snprintf(t, sizeof t, " t%d", i);
      put_u32(&b, (uint32_t)n);
      put(&b, t, (size_t)n);
    }
  }
  wd__tensor_spec_t *specs = NULL;
  size_t n_specs = 0;
  if (wd__model_expect(&hp, &specs, &n_specs) < 0) {
    fprintf(stderr, "make_seeds: wd__model_expect failed\n");
    exit(1);
  }
  for (size_t k = 0; k < n_specs; k++) {
    const wd__tensor_spec_t *s = &specs[k];
    wd_dtype_t type;
    if (wd__model_expect_type(&hp, s->kind, &type) < 0)
      exit(1);
    put_u32(&b, (uint32_t)s->n_dims);
    put_u32(&b, (uint32_t)strlen(s->name));
    put_u32(&b, (uint32_t)type);
    for (int d = 0; d < s->n_dims; d++)
      put_u32(&b, (uint32_t)s->ne[d]);
    put(&b, s->name, strlen(s->name));
    put_zeros(&b, wd_dtype_row_bytes(type, s->ne[0]) * (size_t)(s->ne[1] * s->ne[2] * s->ne[3]),
              compact);
  }
  free(specs);
  save(dir, name, &b);
  free(b.p);
}

/* ----------------------------------------------------------- CTranslate2 */

enum { CT2_F32 = 0, CT2_I32 = 3, CT2_F16 = 4 };

static void ct2_string(buf_t *b, const char *s) {
  put_u16(b, (uint16_t)(strlen(s) + 1));
  put(b, s, strlen(s) + 1);
}

/* One variable (dims in CTranslate2 order, row-major): zero data, or the
 * literal bytes lit when given. */
static void ct2_var_data(buf_t *b, int *count, const char *name, int dtype, int rank, uint32_t d0,
                         uint32_t d1, uint32_t d2, const void *lit) {
  const uint32_t dims[3] = { d0, d1, d2 };
  uint64_t n = 1;
  ct2_string(b, name);
  put_u8(b, (uint8_t)rank);
  for (int i = 0; i < rank; i++) {
    put_u32(b, dims[i]);
    n *= dims[i];
  }
  put_u8(b, (uint8_t)dtype);
  const size_t es = dtype == CT2_F16 ? 2 : 4;
  put_u32(b, (uint32_t)(n * es));
  if (lit)
    put(b, lit, (size_t)(n * es));
  else
    put_zeros(b, (size_t)(n * es), 1);
  (*count)++;
}

static void ct2_var(buf_t *b, int *count, const char *name, int dtype, int rank, uint32_t d0,
                    uint32_t d1, uint32_t d2) {
  ct2_var_data(b, count, name, dtype, rank, d0, d1, d2, NULL);
}

/* One attention head: the i32 scalar 1. */
static const uint8_t k_one_head[4] = { 1, 0, 0, 0 };

static void ct2_linear(buf_t *b, int *count, const char *prefix, uint32_t n_out, uint32_t n_in) {
  char name[256];
  snprintf(name, sizeof name, "%s/weight", prefix);
  ct2_var(b, count, name, CT2_F16, 2, n_out, n_in, 0);
  snprintf(name, sizeof name, "%s/bias", prefix);
  ct2_var(b, count, name, CT2_F32, 1, n_out, 0, 0);
}

static void ct2_norm(buf_t *b, int *count, const char *prefix, uint32_t n) {
  char name[256];
  snprintf(name, sizeof name, "%s/gamma", prefix);
  ct2_var(b, count, name, CT2_F32, 1, n, 0, 0);
  snprintf(name, sizeof name, "%s/beta", prefix);
  ct2_var(b, count, name, CT2_F32, 1, n, 0, 0);
}

/* model.bin of a CTranslate2 WhisperSpec with zero weights and one head,
 * in the compact form; the variable count is patched in at the end. */
static void ct2_model_bin(buf_t *b, uint32_t n, uint32_t n_mels, uint32_t n_vocab, int layers) {
  put_u32(b, 6);
  ct2_string(b, "WhisperSpec");
  put_u32(b, 1);
  const size_t count_at = b->len;
  put_u32(b, 0);
  int count = 0;
  char p[256];
  ct2_var(b, &count, "encoder/conv1/weight", CT2_F16, 3, n, n_mels, 3);
  ct2_var(b, &count, "encoder/conv1/bias", CT2_F32, 1, n, 0, 0);
  ct2_var(b, &count, "encoder/conv2/weight", CT2_F16, 3, n, n, 3);
  ct2_var(b, &count, "encoder/conv2/bias", CT2_F32, 1, n, 0, 0);
  ct2_var(b, &count, "encoder/position_encodings/encodings", CT2_F32, 2, 2, n, 0);
  ct2_norm(b, &count, "encoder/layer_norm", n);
  ct2_var_data(b, &count, "encoder/num_heads", CT2_I32, 0, 0, 0, 0, k_one_head);
  for (int side = 0; side < 2; side++) {
    const char *s = side ? "decoder" : "encoder";
    for (int l = 0; l < layers; l++) {
      snprintf(p, sizeof p, "%s/layer_%d/self_attention/linear_0", s, l);
      ct2_linear(b, &count, p, 3 * n, n);
      snprintf(p, sizeof p, "%s/layer_%d/self_attention/linear_1", s, l);
      ct2_linear(b, &count, p, n, n);
      snprintf(p, sizeof p, "%s/layer_%d/self_attention/layer_norm", s, l);
      ct2_norm(b, &count, p, n);
      if (side) {
        snprintf(p, sizeof p, "%s/layer_%d/attention/linear_0", s, l);
        ct2_linear(b, &count, p, n, n);
        snprintf(p, sizeof p, "%s/layer_%d/attention/linear_1", s, l);
        ct2_linear(b, &count, p, 2 * n, n);
        snprintf(p, sizeof p, "%s/layer_%d/attention/linear_2", s, l);
        ct2_linear(b, &count, p, n, n);
        snprintf(p, sizeof p, "%s/layer_%d/attention/layer_norm", s, l);
        ct2_norm(b, &count, p, n);
      }
      snprintf(p, sizeof p, "%s/layer_%d/ffn/linear_0", s, l);
      ct2_linear(b, &count, p, 4 * n, n);
      snprintf(p, sizeof p, "%s/layer_%d/ffn/linear_1", s, l);
      ct2_linear(b, &count, p, n, 4 * n);
      snprintf(p, sizeof p, "%s/layer_%d/ffn/layer_norm", s, l);
      ct2_norm(b, &count, p, n);
    }
  }
  ct2_var(b, &count, "decoder/embeddings/weight", CT2_F16, 2, n_vocab, n, 0);
  ct2_var(b, &count, "decoder/position_encodings/encodings", CT2_F32, 2, 2, n, 0);
  ct2_norm(b, &count, "decoder/layer_norm", n);
  ct2_var_data(b, &count, "decoder/num_heads", CT2_I32, 0, 0, 0, 0, k_one_head);
  put_u32(b, 1);
  ct2_string(b, "decoder/projection/weight");
  ct2_string(b, "decoder/embeddings/weight");
  b->p[count_at] = (uint8_t)count;
  b->p[count_at + 1] = (uint8_t)(count >> 8);
}

/* A whole harness input: flags, model.bin, config.json, vocabulary head. */
static void ct2_seed(const char *dir, const char *name, uint8_t flags, uint32_t n_vocab,
                     int layers, const char *config, const char *vocab) {
  buf_t bin = { 0 }, b = { 0 };
  ct2_model_bin(&bin, 4, 80, n_vocab, layers);
  put_u8(&b, flags);
  put_u32(&b, (uint32_t)bin.len);
  put(&b, bin.p, bin.len);
  put_u32(&b, (uint32_t)strlen(config));
  put(&b, config, strlen(config));
  put(&b, vocab, strlen(vocab));
  save(dir, name, &b);
  free(bin.p);
  free(b.p);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  char dir[1024];
  mkdir_p(argv[1]);
  snprintf(dir, sizeof dir, "%s/model_ggml", argv[1]);
  mkdir_p(dir);
  const wd_hparams_t f16 = { 51864, 2, 4, 1, 1, 2, 4, 1, 1, 80, 1 };
  ggml_seed(dir, "tiny_en_f16", f16, 1, 300);
  ggml_seed(dir, "tiny_en_f16_raw", f16, 0, 300);
  wd_hparams_t h = f16;
  h.n_vocab = 51865, h.ftype = 0, h.n_audio_layer = 2, h.n_text_layer = 2;
  ggml_seed(dir, "multi_f32_2layers", h, 1, 257);
  h = f16;
  h.n_vocab = 51866, h.n_mels = 128, h.n_audio_state = h.n_text_state = 32, h.ftype = 2002;
  h.n_audio_head = h.n_text_head = 2;
  ggml_seed(dir, "v3_q4_0", h, 1, 256);
  h.ftype = 2007;
  ggml_seed(dir, "v3_q8_0", h, 1, 256);
  h.ftype = 2009;
  ggml_seed(dir, "v3_q5_1", h, 1, 256);

  snprintf(dir, sizeof dir, "%s/model_ct2", argv[1]);
  mkdir_p(dir);
  /* flags: 1 compact model.bin, 8 pad the vocabulary; 2 JSON vocabulary;
   * bits 4-5 the padded size 51864 + k. */
  ct2_seed(dir, "tiny_en_txt", 1 | 8, 51864, 1, "{\"alignment_heads\": [[0, 0]]}",
           "!\n\xc4\xa0the\n<|endoftext|>\n");
  ct2_seed(dir, "multi_json", 1 | 2 | 8 | 16, 51865, 2,
           "{\"alignment_heads\": [[1, 0], [0, 0]], \"lang_ids\": [50259]}",
           "\"!\", \"\\u0120the\", \"a\"");
  ct2_seed(dir, "no_config", 1 | 4 | 8, 51864, 1, "", "a\n");
  return 0;
}
