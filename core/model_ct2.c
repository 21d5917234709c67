/*
 * model_ct2.c - reads CTranslate2 Whisper model directories (faster-whisper).
 *
 * A directory holds model.bin (binary version 6, spec "WhisperSpec"),
 * config.json (alignment heads) and the vocabulary as vocabulary.txt (one
 * token a line) or vocabulary.json (an array of strings), in GPT-2's
 * byte-to-unicode form.
 *
 * model.bin: u32 version; string spec name; u32 revision; u32 n_variables,
 * then per variable string name, u8 rank, u32 dims[rank], u8 dtype, u32 byte
 * count, row-major data; u32 n_aliases, then string alias, string target.
 * A string is a u16 length counting a trailing NUL, then the bytes and NUL.
 * ref: CTranslate2 python/ctranslate2/specs/model_spec.py (_serialize),
 * src/models/model.cc (the C++ reader), specs/whisper_spec.py;
 * /work/shared/reference/model-formats.md.
 *
 * The model is rebuilt in ggml's naming, shapes and types: the fused Q/K/V
 * (self-attention) and K/V (cross-attention) projections are split by rows,
 * the key bias (zeros in CTranslate2) is dropped, biases, norms and
 * positional embeddings become f32, weights f16, conv biases get shape
 * {1, n_state}, and the tied output projection (an alias of the token
 * embedding) is not kept. The filterbank, which CTranslate2 does not store,
 * is computed (wd_mel_filters_slaney). Every converted tensor is a malloc'd
 * buffer owned by the model; model.bin is unmapped before returning.
 *
 * Threading: no shared state; loads may run concurrently.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "f16.h"
#include "log.h"
#include "mel_filters.h"
#include "model_internal.h"

#define WD_CT2_MAX_RANK 4
#define WD_CT2_NAME_MAX 256

/* CTranslate2 dtype ids (ref: include/ctranslate2/types.h DataType). */
enum { WD_CT2_F32 = 0, WD_CT2_I8 = 1, WD_CT2_I16 = 2, WD_CT2_I32 = 3, WD_CT2_F16 = 4, WD_CT2_BF16 = 5 };

typedef struct {
  char name[WD_CT2_NAME_MAX];
  int rank;
  uint32_t dims[WD_CT2_MAX_RANK];
  int dtype;
  const unsigned char *data; /* into the mapping of model.bin */
  size_t nbytes;
  bool used;
} wd_ct2_var_t;

typedef struct {
  const unsigned char *p;
  size_t len, off;
} wd_ct2_cursor_t;

typedef struct {
  void *map;
  size_t map_len;
  wd_ct2_var_t *vars;
  size_t n_vars;
} wd_ct2_file_t;

/* ------------------------------------------------------------ model.bin */

static bool wd_ct2_get(wd_ct2_cursor_t *c, void *out, size_t n) {
  if (c->len - c->off < n)
    return false;
  memcpy(out, c->p + c->off, n);
  c->off += n;
  return true;
}

/* Reads a string into buf (NUL-terminated); false if truncated or too long. */
static bool wd_ct2_string(wd_ct2_cursor_t *c, char *buf, size_t len) {
  uint16_t n;
  if (!wd_ct2_get(c, &n, sizeof n) || n < 1 || n > len || c->len - c->off < n)
    return false;
  memcpy(buf, c->p + c->off, n);
  c->off += n;
  return buf[n - 1] == '\0' && strlen(buf) == (size_t)n - 1;
}

static size_t wd_ct2_dtype_size(int dtype) {
  switch (dtype) {
  case WD_CT2_F32: case WD_CT2_I32: return 4;
  case WD_CT2_I16: case WD_CT2_F16: case WD_CT2_BF16: return 2;
  case WD_CT2_I8: return 1;
  }
  return 0;
}

static int wd_ct2_parse(wd_ct2_file_t *f, char *err, size_t err_len) {
  wd_ct2_cursor_t c = { .p = f->map, .len = f->map_len, .off = 0 };
  uint32_t version, revision, n;
  char spec[WD_CT2_NAME_MAX];
  if (!wd_ct2_get(&c, &version, 4))
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: truncated header");
  /* Versions 5 and 6 share this layout; 6 is what current converters write. */
  if (version < 5 || version > 6)
    return wd__model_fail(err, err_len, WD_EUNSUP, "model.bin: binary version %u, expected 5 or 6",
                          (unsigned)version);
  if (!wd_ct2_string(&c, spec, sizeof spec) || !wd_ct2_get(&c, &revision, 4) ||
      !wd_ct2_get(&c, &n, 4))
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: truncated header");
  if (strcmp(spec, "WhisperSpec") != 0)
    return wd__model_fail(err, err_len, WD_EUNSUP, "model.bin: spec '%s', expected 'WhisperSpec'",
                          spec);
  /* Each variable takes at least 9 bytes, which bounds a corrupt count. */
  if (n > (c.len - c.off) / 9)
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: %u variables cannot fit in the file",
                          (unsigned)n);
  f->vars = calloc(n ? n : 1, sizeof *f->vars);
  if (!f->vars)
    return WD_ENOMEM;
  /* Variables are sorted by name; data is row-major with the last dim fastest. */
  for (uint32_t i = 0; i < n; i++) {
    wd_ct2_var_t *v = &f->vars[i];
    uint8_t rank, dtype;
    uint32_t nbytes;
    if (!wd_ct2_string(&c, v->name, sizeof v->name) || !wd_ct2_get(&c, &rank, 1))
      return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: truncated at variable %u of %u",
                            (unsigned)i, (unsigned)n);
    if (rank > WD_CT2_MAX_RANK)
      return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: variable '%s' has rank %u", v->name,
                            (unsigned)rank);
    v->rank = rank;
    uint64_t count = 1;
    for (int d = 0; d < rank; d++) {
      if (!wd_ct2_get(&c, &v->dims[d], 4))
        return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: truncated in variable '%s'",
                              v->name);
      /* count * dim <= 2^40, checked before multiplying: afterwards would
       * miss a wrapped product (dims {2^20, 2^20, 2^24} multiply to 2^64,
       * which is 0 in a u64). */
      if (v->dims[d] != 0 && count > ((uint64_t)1 << 40) / v->dims[d])
        return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: variable '%s' is too large",
                              v->name);
      count *= v->dims[d];
    }
    if (!wd_ct2_get(&c, &dtype, 1) || !wd_ct2_get(&c, &nbytes, 4))
      return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: truncated in variable '%s'", v->name);
    v->dtype = dtype;
    const size_t es = wd_ct2_dtype_size(dtype);
    if (es == 0)
      return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: variable '%s' has unknown dtype %u",
                            v->name, (unsigned)dtype);
    if ((uint64_t)nbytes != count * es)
      return wd__model_fail(err, err_len, WD_EMODEL,
                            "model.bin: variable '%s': %u bytes, expected %llu", v->name,
                            (unsigned)nbytes, (unsigned long long)(count * es));
    if (c.len - c.off < nbytes)
      return wd__model_fail(err, err_len, WD_EMODEL,
                            "model.bin: truncated: variable '%s' needs %u bytes, %zu left", v->name,
                            (unsigned)nbytes, c.len - c.off);
    v->data = c.p + c.off;
    v->nbytes = nbytes;
    c.off += nbytes;
    f->n_vars = i + 1;
  }
  /* Aliases: only the tied output projection is expected, and it is dropped. */
  uint32_t n_alias;
  if (!wd_ct2_get(&c, &n_alias, 4))
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: truncated before the aliases");
  for (uint32_t i = 0; i < n_alias; i++) {
    char alias[WD_CT2_NAME_MAX], target[WD_CT2_NAME_MAX];
    if (!wd_ct2_string(&c, alias, sizeof alias) || !wd_ct2_string(&c, target, sizeof target))
      return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: truncated in alias %u", (unsigned)i);
    if (strcmp(alias, "decoder/projection/weight") != 0 ||
        strcmp(target, "decoder/embeddings/weight") != 0)
      return wd__model_fail(err, err_len, WD_EUNSUP, "model.bin: unexpected alias '%s' -> '%s'",
                            alias, target);
  }
  /* Trailing bytes would mean a misparse or a concatenation of two files. */
  if (c.off != c.len)
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: %zu unexpected bytes at the end",
                          c.len - c.off);
  return 0;
}

static wd_ct2_var_t *wd_ct2_find(wd_ct2_file_t *f, const char *name) {
  for (size_t i = 0; i < f->n_vars; i++)
    if (strcmp(f->vars[i].name, name) == 0)
      return &f->vars[i];
  return NULL;
}

/* A scalar integer setting such as encoder/num_heads. */
static int wd_ct2_scalar(wd_ct2_file_t *f, const char *name, int32_t *ret, char *err, size_t err_len) {
  wd_ct2_var_t *v = wd_ct2_find(f, name);
  if (!v || v->rank != 0)
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: missing scalar '%s'", name);
  v->used = true;
  switch (v->dtype) {
  case WD_CT2_I8: { int8_t x; memcpy(&x, v->data, 1); *ret = x; return 0; }
  case WD_CT2_I16: { int16_t x; memcpy(&x, v->data, 2); *ret = x; return 0; }
  case WD_CT2_I32: { int32_t x; memcpy(&x, v->data, 4); *ret = x; return 0; }
  }
  return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: '%s' is not an integer", name);
}

/* Counts prefix/layer_N/self_attention/linear_0/weight for N = 0, 1, ... */
static int32_t wd_ct2_count_layers(wd_ct2_file_t *f, const char *prefix) {
  char name[WD_CT2_NAME_MAX];
  int32_t n = 0;
  for (;;) {
    snprintf(name, sizeof name, "%s/layer_%d/self_attention/linear_0/weight", prefix, (int)n);
    if (!wd_ct2_find(f, name) || n > 1000)
      return n;
    n++;
  }
}

static int wd_ct2_dims2(wd_ct2_file_t *f, const char *name, int rank, uint32_t *ret, char *err,
                        size_t err_len) {
  const wd_ct2_var_t *v = wd_ct2_find(f, name);
  if (!v)
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: missing variable '%s'", name);
  if (v->rank != rank)
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: variable '%s' has rank %d, expected %d",
                          name, v->rank, rank);
  memcpy(ret, v->dims, sizeof(uint32_t) * (size_t)rank);
  return 0;
}

/* Hyper-parameters from the shapes and settings; ftype 1 (f16 weights). */
static int wd_ct2_hparams(wd_ct2_file_t *f, wd_hparams_t *hp, char *err, size_t err_len) {
  /* conv1 (n_state, n_mels, 3); encoder positions (n_audio_ctx, n_state);
   * token embedding (n_vocab, n_state); decoder positions (n_text_ctx, n_state). */
  uint32_t conv1[3], epe[2], emb[2], dpe[2];
  int rc;
  if ((rc = wd_ct2_dims2(f, "encoder/conv1/weight", 3, conv1, err, err_len)) < 0 ||
      (rc = wd_ct2_dims2(f, "encoder/position_encodings/encodings", 2, epe, err, err_len)) < 0 ||
      (rc = wd_ct2_dims2(f, "decoder/embeddings/weight", 2, emb, err, err_len)) < 0 ||
      (rc = wd_ct2_dims2(f, "decoder/position_encodings/encodings", 2, dpe, err, err_len)) < 0)
    return rc;
  int32_t eh, dh;
  if ((rc = wd_ct2_scalar(f, "encoder/num_heads", &eh, err, err_len)) < 0 ||
      (rc = wd_ct2_scalar(f, "decoder/num_heads", &dh, err, err_len)) < 0)
    return rc;
  /* Clamp to int32 range before the range checks see them. */
  const uint32_t lim = 1u << 30;
  *hp = (wd_hparams_t){
    .n_vocab = (int32_t)(emb[0] < lim ? emb[0] : lim),
    .n_audio_ctx = (int32_t)(epe[0] < lim ? epe[0] : lim),
    .n_audio_state = (int32_t)(conv1[0] < lim ? conv1[0] : lim),
    .n_audio_head = eh,
    .n_audio_layer = wd_ct2_count_layers(f, "encoder"),
    .n_text_ctx = (int32_t)(dpe[0] < lim ? dpe[0] : lim),
    .n_text_state = (int32_t)(emb[1] < lim ? emb[1] : lim),
    .n_text_head = dh,
    .n_text_layer = wd_ct2_count_layers(f, "decoder"),
    .n_mels = (int32_t)(conv1[1] < lim ? conv1[1] : lim),
    .ftype = 1,
  };
  return wd__model_check_hparams(hp, err, err_len);
}

/* ------------------------------------------------------ tensor mapping */

/* OpenAI module name inside a block -> CTranslate2 module, and which of
 * n_parts equal row slices of it (fused projections) the tensor is. */
static const struct {
  const char *openai, *ct2;
  int part, n_parts;
} wd_ct2_block_map[] = {
  { "attn.query", "self_attention/linear_0", 0, 3 },
  { "attn.key", "self_attention/linear_0", 1, 3 },
  { "attn.value", "self_attention/linear_0", 2, 3 },
  { "attn.out", "self_attention/linear_1", 0, 1 },
  { "attn_ln", "self_attention/layer_norm", 0, 1 },
  { "cross_attn.query", "attention/linear_0", 0, 1 },
  { "cross_attn.key", "attention/linear_1", 0, 2 },
  { "cross_attn.value", "attention/linear_1", 1, 2 },
  { "cross_attn.out", "attention/linear_2", 0, 1 },
  { "cross_attn_ln", "attention/layer_norm", 0, 1 },
  { "mlp.0", "ffn/linear_0", 0, 1 },
  { "mlp.2", "ffn/linear_1", 0, 1 },
  { "mlp_ln", "ffn/layer_norm", 0, 1 },
};

static const struct {
  const char *openai, *ct2;
} wd_ct2_top_map[] = {
  { "encoder.positional_embedding", "encoder/position_encodings/encodings" },
  { "encoder.conv1.weight", "encoder/conv1/weight" },
  { "encoder.conv1.bias", "encoder/conv1/bias" },
  { "encoder.conv2.weight", "encoder/conv2/weight" },
  { "encoder.conv2.bias", "encoder/conv2/bias" },
  { "encoder.ln_post.weight", "encoder/layer_norm/gamma" },
  { "encoder.ln_post.bias", "encoder/layer_norm/beta" },
  { "decoder.positional_embedding", "decoder/position_encodings/encodings" },
  { "decoder.token_embedding.weight", "decoder/embeddings/weight" },
  { "decoder.ln.weight", "decoder/layer_norm/gamma" },
  { "decoder.ln.bias", "decoder/layer_norm/beta" },
};

/* Finds the CTranslate2 variable name and row slice for an OpenAI name. */
static int wd_ct2_source(const char *openai, char *ct2, size_t len, int *ret_part, int *ret_n_parts) {
  *ret_part = 0;
  *ret_n_parts = 1;
  for (size_t i = 0; i < sizeof wd_ct2_top_map / sizeof wd_ct2_top_map[0]; i++) {
    if (strcmp(openai, wd_ct2_top_map[i].openai) == 0) {
      snprintf(ct2, len, "%s", wd_ct2_top_map[i].ct2);
      return 0;
    }
  }
  /* "encoder.blocks.3.attn.query.weight" -> side, layer, module, parameter */
  char side[8];
  int layer = -1, used = 0;
  if (sscanf(openai, "%7[a-z].blocks.%d.%n", side, &layer, &used) != 2 || used == 0)
    return WD_EINTERNAL;
  const char *module = openai + used;
  const char *dot = strrchr(module, '.');
  if (!dot)
    return WD_EINTERNAL;
  const size_t mlen = (size_t)(dot - module);
  const bool is_weight = strcmp(dot + 1, "weight") == 0;
  for (size_t i = 0; i < sizeof wd_ct2_block_map / sizeof wd_ct2_block_map[0]; i++) {
    const char *o = wd_ct2_block_map[i].openai;
    if (strlen(o) != mlen || strncmp(o, module, mlen) != 0)
      continue;
    const bool is_norm = strstr(wd_ct2_block_map[i].ct2, "layer_norm") != NULL;
    const char *param = is_norm ? (is_weight ? "gamma" : "beta") : (is_weight ? "weight" : "bias");
    snprintf(ct2, len, "%s/layer_%d/%s/%s", side, layer, wd_ct2_block_map[i].ct2, param);
    *ret_part = wd_ct2_block_map[i].part;
    *ret_n_parts = wd_ct2_block_map[i].n_parts;
    return 0;
  }
  return WD_EINTERNAL;
}

static float wd_ct2_elem(const wd_ct2_var_t *v, size_t i) {
  switch (v->dtype) {
  case WD_CT2_F32: { float x; memcpy(&x, v->data + 4 * i, 4); return x; }
  case WD_CT2_F16: { uint16_t h; memcpy(&h, v->data + 2 * i, 2); return wd_f16_to_f32(h); }
  case WD_CT2_BF16: {
    uint16_t h;
    memcpy(&h, v->data + 2 * i, 2);
    const uint32_t bits = (uint32_t)h << 16;
    float x;
    memcpy(&x, &bits, 4);
    return x;
  }
  }
  return 0.0f;
}

/* Builds tensor k of m from its CTranslate2 source. */
static int wd_ct2_build_tensor(wd_ct2_file_t *f, wd_model_t *m, const wd__tensor_spec_t *s,
                               size_t k, char *err, size_t err_len) {
  char src_name[WD_CT2_NAME_MAX];
  int part, n_parts;
  if (wd_ct2_source(s->name, src_name, sizeof src_name, &part, &n_parts) < 0)
    return wd__model_fail(err, err_len, WD_EINTERNAL, "no CTranslate2 source for '%s'", s->name);
  wd_ct2_var_t *v = wd_ct2_find(f, src_name);
  if (!v)
    return wd__model_fail(err, err_len, WD_EMODEL, "model.bin: missing variable '%s' (for '%s')",
                          src_name, s->name);
  if (v->dtype != WD_CT2_F32 && v->dtype != WD_CT2_F16 && v->dtype != WD_CT2_BF16)
    return wd__model_fail(err, err_len, WD_EUNSUP,
                          "model.bin: variable '%s' has dtype %d; only float32/float16/bfloat16 "
                          "models are supported (convert with --quantization float16)",
                          src_name, v->dtype);
  /* Expected CTranslate2 shape: ggml's reversed, the fused rows multiplied,
   * and a plain vector where ggml has the conv bias as {1, n}. */
  int64_t want[4] = { 0 };
  int want_rank = 0;
  const bool conv_bias = s->kind == WD__TK_VECTOR && s->n_dims == 2 && s->ne[0] == 1;
  for (int d = s->n_dims - 1; d >= (conv_bias ? 1 : 0); d--)
    want[want_rank++] = s->ne[d];
  want[0] *= n_parts;
  bool same = v->rank == want_rank;
  for (int d = 0; d < want_rank && same; d++)
    same = v->dims[d] == (uint64_t)want[d];
  if (!same) {
    int64_t got[4] = { 0 };
    for (int d = 0; d < v->rank; d++)
      got[d] = v->dims[d];
    char ws[96], gs[96];
    wd__model_shape_str(want_rank, want, ws, sizeof ws);
    wd__model_shape_str(v->rank, got, gs, sizeof gs);
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "model.bin: variable '%s' (for '%s'): expected shape %s, found %s",
                          src_name, s->name, ws, gs);
  }
  v->used = true;

  /* A fused source (3n, n) = [Wq; Wk; Wv] or (2n, n) = [Wk; Wv] is split by
   * rows: part p of n_parts is one contiguous block of the row-major data,
   * and a CTranslate2 row of (out, in) is a ggml row of ne = {in, out}. */
  wd_dtype_t type;
  int rc = wd__model_expect_type(&m->hp, s->kind, &type);
  if (rc < 0)
    return rc;
  int64_t n = 1;
  for (int d = 0; d < s->n_dims; d++)
    n *= s->ne[d];
  const size_t first = (size_t)part * (size_t)n; /* the slice's first element */
  const size_t nbytes = wd_dtype_row_bytes(type, n);
  void *buf = malloc(nbytes);
  if (!buf)
    return WD_ENOMEM;
  m->owned[m->n_owned++] = buf;
  /* f16 -> f16 is a copy, so converted weights are bit-identical to the
   * original; f16 -> f32 is exact; f32/bf16 -> f16 rounds to nearest even. */
  if (type == WD_DTYPE_F16 && v->dtype == WD_CT2_F16) {
    memcpy(buf, v->data + 2 * first, nbytes); /* bit-exact */
  } else if (type == WD_DTYPE_F16) {
    uint16_t *out = buf;
    for (size_t i = 0; i < (size_t)n; i++)
      out[i] = wd_f32_to_f16(wd_ct2_elem(v, first + i));
  } else {
    float *out = buf;
    for (size_t i = 0; i < (size_t)n; i++)
      out[i] = wd_ct2_elem(v, first + i);
  }
  wd_tensor_t *t = &m->tensors[k];
  memcpy(m->tensor_names[k], s->name, sizeof m->tensor_names[k]);
  t->type = type;
  t->n_dims = s->n_dims;
  memcpy(t->ne, s->ne, sizeof t->ne);
  t->data = buf;
  t->nbytes = nbytes;
  return 0;
}

/* ---------------------------------------------------------- vocabulary */

/* GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
 * other 68 are shifted to U+0100 onwards in byte order.
 * ref: openai/gpt-2 encoder.py bytes_to_unicode(). Fills cp -> byte (or -1). */
static void wd_ct2_unicode_to_byte(int16_t table[324]) {
  for (int i = 0; i < 324; i++)
    table[i] = -1;
  int shifted = 0;
  for (int b = 0; b < 256; b++) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    table[printable ? b : 256 + shifted++] = (int16_t)b;
  }
}

/* Decodes one token (UTF-8, n bytes) into raw bytes at out; returns the
 * length or -1 if it is not in byte-to-unicode form. */
static long wd_ct2_decode_token(const int16_t table[324], const char *s, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    const unsigned char c0 = (unsigned char)s[i];
    uint32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xe0) == 0xc0 && i + 1 < n && ((unsigned char)s[i + 1] & 0xc0) == 0x80) {
      cp = (uint32_t)(c0 & 0x1f) << 6 | ((unsigned char)s[i + 1] & 0x3f);
      i += 2;
    } else {
      return -1; /* every code point of the map needs at most 2 UTF-8 bytes */
    }
    if (cp >= 324 || table[cp] < 0)
      return -1;
    out[o++] = (char)table[cp];
  }
  return (long)o;
}

static int wd_read_file(const char *path, char **ret, size_t *ret_len) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return errno == ENOENT ? WD_ENOENT : WD_EIO;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (cap - len < 65536) {
      cap = cap ? 2 * cap : 1 << 20;
      char *nb = realloc(buf, cap + 1);
      if (!nb) {
        free(buf);
        fclose(fp);
        return WD_ENOMEM;
      }
      buf = nb;
    }
    const size_t got = fread(buf + len, 1, cap - len, fp);
    len += got;
    if (got == 0)
      break;
  }
  const bool bad = ferror(fp) != 0;
  fclose(fp);
  if (bad) {
    free(buf);
    return WD_EIO;
  }
  buf[len] = '\0';
  *ret = buf;
  *ret_len = len;
  return 0;
}

/* Collects the vocabulary's tokens as (pointer, length) pairs, from
 * vocabulary.txt or vocabulary.json. *ret_store keeps them alive. */
static int wd_ct2_vocab_tokens(const char *dir, char **ret_store, json_t **ret_json,
                               const char ***ret_tok, size_t **ret_len, size_t *ret_n, char *err,
                               size_t err_len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/vocabulary.txt", dir);
  char *text = NULL;
  size_t text_len = 0;
  int rc = wd_read_file(path, &text, &text_len);
  if (rc == 0) {
    size_t n = 0;
    for (size_t i = 0; i < text_len; i++)
      n += text[i] == '\n';
    if (text_len > 0 && text[text_len - 1] != '\n')
      n++;
    const char **tok = calloc(n ? n : 1, sizeof *tok);
    size_t *len = calloc(n ? n : 1, sizeof *len);
    if (!tok || !len) {
      free(tok);
      free(len);
      free(text);
      return WD_ENOMEM;
    }
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= text_len && k < n; i++) {
      if (i == text_len || text[i] == '\n') {
        tok[k] = text + start;
        len[k++] = i - start;
        start = i + 1;
      }
    }
    *ret_store = text;
    *ret_tok = tok;
    *ret_len = len;
    *ret_n = n;
    return 0;
  }
  if (rc != WD_ENOENT)
    return wd__model_fail(err, err_len, rc, "'%s': cannot read", path);

  snprintf(path, sizeof path, "%s/vocabulary.json", dir);
  json_error_t jerr;
  json_t *arr = json_load_file(path, 0, &jerr);
  if (!arr)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "'%s': no vocabulary.txt, and vocabulary.json is unreadable: %s (line %d)",
                          path, jerr.text, jerr.line);
  if (!json_is_array(arr)) {
    json_decref(arr);
    return wd__model_fail(err, err_len, WD_EMODEL, "'%s': not a JSON array of tokens", path);
  }
  const size_t n = json_array_size(arr);
  const char **tok = calloc(n ? n : 1, sizeof *tok);
  size_t *len = calloc(n ? n : 1, sizeof *len);
  if (!tok || !len) {
    free(tok);
    free(len);
    json_decref(arr);
    return WD_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    const json_t *s = json_array_get(arr, i);
    if (!json_is_string(s)) {
      free(tok);
      free(len);
      json_decref(arr);
      return wd__model_fail(err, err_len, WD_EMODEL, "'%s': entry %zu is not a string", path, i);
    }
    tok[i] = json_string_value(s);
    len[i] = json_string_length(s);
  }
  *ret_json = arr;
  *ret_tok = tok;
  *ret_len = len;
  *ret_n = n;
  return 0;
}

static int wd_ct2_load_vocab(const char *dir, wd_model_t *m, char *err, size_t err_len) {
  char *store = NULL;
  json_t *json = NULL;
  const char **tok = NULL;
  size_t *len = NULL, n = 0;
  int rc = wd_ct2_vocab_tokens(dir, &store, &json, &tok, &len, &n, err, err_len);
  if (rc < 0)
    return rc;
  if (n != (size_t)m->hp.n_vocab) {
    rc = wd__model_fail(err, err_len, WD_EMODEL, "vocabulary: %zu tokens, but the model has n_vocab = %d",
                        n, (int)m->hp.n_vocab);
    goto out;
  }
  /* Keep the text tokens (ids 0..50256), as a ggml file does: whisper.cpp
   * names the special and timestamp tokens above them itself, and they are in
   * the same place in every layout of a given n_vocab. */
  const int n_keep = WD__MODEL_N_TEXT_TOKENS;
  size_t total = 0;
  for (int i = 0; i < n_keep; i++)
    total += len[i];
  int16_t table[324];
  wd_ct2_unicode_to_byte(table);
  m->tok_arena = malloc(total ? total : 1);
  m->tok = calloc((size_t)n_keep, sizeof *m->tok);
  m->tok_len = calloc((size_t)n_keep, sizeof *m->tok_len);
  if (!m->tok_arena || !m->tok || !m->tok_len) {
    rc = WD_ENOMEM;
    goto out;
  }
  size_t off = 0;
  for (int i = 0; i < n_keep; i++) {
    /* Decoding never grows a token: each code point yields one byte. */
    const long got = wd_ct2_decode_token(table, tok[i], len[i], m->tok_arena + off);
    if (got < 0) {
      rc = wd__model_fail(err, err_len, WD_EMODEL,
                          "vocabulary: token %d is not in GPT-2 byte-to-unicode form", i);
      goto out;
    }
    m->tok[i] = m->tok_arena + off;
    m->tok_len[i] = (uint32_t)got;
    off += (size_t)got;
  }
  m->n_tokens = n_keep;
out:
  free(store);
  json_decref(json);
  free(tok);
  free(len);
  return rc;
}

/* Alignment heads from config.json; none there (or no file) is not an error. */
static int wd_ct2_load_config(const char *dir, wd_model_t *m, char *err, size_t err_len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  if (access(path, F_OK) != 0)
    return 0;
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (!root)
    return wd__model_fail(err, err_len, WD_EMODEL, "'%s': invalid JSON: %s (line %d)", path,
                          jerr.text, jerr.line);
  int rc = 0;
  const json_t *heads = json_object_get(root, "alignment_heads");
  if (json_is_array(heads) && json_array_size(heads) > 0) {
    const size_t n = json_array_size(heads);
    m->aheads = calloc(n, sizeof *m->aheads);
    if (!m->aheads) {
      rc = WD_ENOMEM;
      goto out;
    }
    for (size_t i = 0; i < n; i++) {
      const json_t *p = json_array_get(heads, i);
      const json_t *l = json_array_get(p, 0), *h = json_array_get(p, 1);
      if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_integer(l) ||
          !json_is_integer(h) || json_integer_value(l) < 0 ||
          json_integer_value(l) >= m->hp.n_text_layer || json_integer_value(h) < 0 ||
          json_integer_value(h) >= m->hp.n_text_head) {
        rc = wd__model_fail(err, err_len, WD_EMODEL,
                            "'%s': alignment_heads[%zu] is not a [layer, head] pair within "
                            "%d layers and %d heads",
                            path, i, (int)m->hp.n_text_layer, (int)m->hp.n_text_head);
        goto out;
      }
      m->aheads[i][0] = (int)json_integer_value(l);
      m->aheads[i][1] = (int)json_integer_value(h);
    }
    m->n_aheads = (int)n;
  }
out:
  json_decref(root);
  return rc;
}

/* ---------------------------------------------------------------- load */

int wd__model_load_ct2(const char *dir, wd_model_t **ret, char *err, size_t err_len) {
  wd_ct2_file_t f = { .map = NULL };
  wd_model_t *m = NULL;
  wd__tensor_spec_t *specs = NULL;
  size_t n_specs = 0;
  int rc = 0;

  char path[4096];
  snprintf(path, sizeof path, "%s/model.bin", dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return wd__model_fail(err, err_len, errno == ENOENT ? WD_ENOENT : WD_EIO,
                          "'%s': cannot open: %s (a CTranslate2 directory needs model.bin)", path,
                          strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    close(fd);
    return wd__model_fail(err, err_len, WD_EMODEL, "'%s': empty or not a regular file", path);
  }
  f.map_len = (size_t)st.st_size;
  f.map = mmap(NULL, f.map_len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (f.map == MAP_FAILED) {
    f.map = NULL;
    return wd__model_fail(err, err_len, WD_EIO, "'%s': cannot map: %s", path, strerror(errno));
  }

  /* Parse and check everything, then build tensors in canonical order, then
   * make sure nothing in model.bin was left unaccounted for. */
  wd_hparams_t hp;
  if ((rc = wd_ct2_parse(&f, err, err_len)) < 0 || (rc = wd_ct2_hparams(&f, &hp, err, err_len)) < 0)
    goto fail;
  if ((rc = wd__model_expect(&hp, &specs, &n_specs)) < 0 || (rc = wd__model_new(&hp, n_specs, &m)) < 0)
    goto fail;
  m->owned = calloc(n_specs, sizeof *m->owned);
  if (!m->owned) {
    rc = WD_ENOMEM;
    goto fail;
  }
  for (size_t k = 0; k < n_specs; k++)
    if ((rc = wd_ct2_build_tensor(&f, m, &specs[k], k, err, err_len)) < 0)
      goto fail;
  /* Everything else must be a setting or the tied projection. */
  for (size_t i = 0; i < f.n_vars; i++) {
    const wd_ct2_var_t *v = &f.vars[i];
    if (v->used || v->rank == 0)
      continue;
    if (strcmp(v->name, "decoder/projection/weight") == 0) {
      const wd_ct2_var_t *e = wd_ct2_find(&f, "decoder/embeddings/weight");
      if (e && e->nbytes == v->nbytes && memcmp(e->data, v->data, v->nbytes) == 0)
        continue;
    }
    rc = wd__model_fail(err, err_len, WD_EUNSUP, "model.bin: unexpected variable '%s'", v->name);
    goto fail;
  }

  /* (n_mels, 201): librosa's Slaney filterbank, as openai/whisper ships it. */
  m->mel = malloc(sizeof(float) * (size_t)hp.n_mels * WD__MODEL_N_BINS);
  if (!m->mel) {
    rc = WD_ENOMEM;
    goto fail;
  }
  if ((rc = wd_mel_filters_slaney(hp.n_mels, WD__MODEL_N_FFT, WD__MODEL_SAMPLE_RATE, m->mel)) < 0)
    goto fail;
  m->n_mel = hp.n_mels;
  m->n_fft = WD__MODEL_N_BINS;

  if ((rc = wd_ct2_load_vocab(dir, m, err, err_len)) < 0 ||
      (rc = wd_ct2_load_config(dir, m, err, err_len)) < 0)
    goto fail;
  wd__model_finish(m);
  wd_log_debug("model_ct2: '%s': %s, %zu variables -> %zu tensors", dir, m->name, f.n_vars,
               m->n_tensors);
  munmap(f.map, f.map_len);
  free(f.vars);
  free(specs);
  *ret = m;
  return 0;

fail:
  if (f.map)
    munmap(f.map, f.map_len);
  free(f.vars);
  free(specs);
  wd_model_free(m);
  return rc;
}
