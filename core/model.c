/*
 * model.c - the immutable Whisper model: accessors, the loader dispatch, the
 * hyper-parameter checks and the list of tensors a model must have.
 *
 * The expected tensor list is derived from the hyper-parameters alone, so the
 * ggml reader can reject missing, unknown, duplicate and misshapen tensors,
 * the CTranslate2 reader knows what to build and the ggml writer knows the
 * order to write. Shapes and types follow whisper.cpp's whisper_model_load()
 * and its converters (ref: whisper.cpp src/whisper.cpp,
 * models/convert-pt-to-ggml.py).
 *
 * Threading: a loaded model is read-only; the functions here keep no state.
 * Ownership: the model owns its mapping, its buffers and its strings.
 */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "model_internal.h"

/* ---------------------------------------------------------------- errors */

int wd__model_fail(char *err, size_t err_len, int code, const char *fmt, ...) {
  if (err && err_len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return code;
}

void wd__model_shape_str(int n_dims, const int64_t *ne, char *buf, size_t len) {
  size_t used = 0;
  used += (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < n_dims && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)ne[i]);
  if (used < len)
    snprintf(buf + used, len - used, "]");
}

/* ----------------------------------------------------------------- types */

/* Block size (elements) and bytes per block of each type.
 * ref: ggml/src/ggml-common.h block_q4_0 ... block_q8_0: a f16 scale d (and
 * f16 min m for the _1 variants), 4 bytes of high bits for q5, then the packed
 * quants of 32 elements. */
static int wd_dtype_block(wd_dtype_t type, int *ret_elems, int *ret_bytes) {
  switch (type) {
  case WD_DTYPE_F32: *ret_elems = 1; *ret_bytes = 4; return 0;
  case WD_DTYPE_F16: *ret_elems = 1; *ret_bytes = 2; return 0;
  case WD_DTYPE_Q4_0: *ret_elems = 32; *ret_bytes = 2 + 16; return 0;
  case WD_DTYPE_Q4_1: *ret_elems = 32; *ret_bytes = 2 + 2 + 16; return 0;
  case WD_DTYPE_Q5_0: *ret_elems = 32; *ret_bytes = 2 + 4 + 16; return 0;
  case WD_DTYPE_Q5_1: *ret_elems = 32; *ret_bytes = 2 + 2 + 4 + 16; return 0;
  case WD_DTYPE_Q8_0: *ret_elems = 32; *ret_bytes = 2 + 32; return 0;
  }
  return WD_EINVAL;
}

const char *wd_dtype_name(wd_dtype_t type) {
  switch (type) {
  case WD_DTYPE_F32: return "f32";
  case WD_DTYPE_F16: return "f16";
  case WD_DTYPE_Q4_0: return "q4_0";
  case WD_DTYPE_Q4_1: return "q4_1";
  case WD_DTYPE_Q5_0: return "q5_0";
  case WD_DTYPE_Q5_1: return "q5_1";
  case WD_DTYPE_Q8_0: return "q8_0";
  }
  return "?";
}

size_t wd_dtype_row_bytes(wd_dtype_t type, int64_t n) {
  int be = 0, bb = 0;
  if (wd_dtype_block(type, &be, &bb) < 0 || n < 0 || n % be != 0)
    return 0;
  return (size_t)(n / be) * (size_t)bb;
}

int64_t wd_tensor_n_elements(const wd_tensor_t *t) {
  int64_t n = 1;
  for (int i = 0; i < t->n_dims; i++)
    n *= t->ne[i];
  return n;
}

/* ------------------------------------------------------- hyper-parameters */

static int wd_ftype_wtype(int32_t ftype, wd_dtype_t *ret) {
  /* ref: ggml.h enum ggml_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2,
   * MOSTLY_Q4_1 3, MOSTLY_Q8_0 7, MOSTLY_Q5_0 8, MOSTLY_Q5_1 9. */
  switch (ftype % WD__MODEL_QNT_FACTOR) {
  case 0: *ret = WD_DTYPE_F32; return 0;
  case 1: *ret = WD_DTYPE_F16; return 0;
  case 2: *ret = WD_DTYPE_Q4_0; return 0;
  case 3: *ret = WD_DTYPE_Q4_1; return 0;
  case 7: *ret = WD_DTYPE_Q8_0; return 0;
  case 8: *ret = WD_DTYPE_Q5_0; return 0;
  case 9: *ret = WD_DTYPE_Q5_1; return 0;
  }
  return WD_EUNSUP;
}

int wd__model_expect_type(const wd_hparams_t *hp, wd__tensor_kind_t kind, wd_dtype_t *ret) {
  wd_dtype_t wtype;
  int rc = wd_ftype_wtype(hp->ftype, &wtype);
  if (rc < 0)
    return rc;
  switch (kind) {
  case WD__TK_MATRIX: *ret = wtype; return 0;
  case WD__TK_CONV: *ret = wtype == WD_DTYPE_F32 ? WD_DTYPE_F32 : WD_DTYPE_F16; return 0;
  case WD__TK_VECTOR: *ret = WD_DTYPE_F32; return 0;
  }
  return WD_EINVAL;
}

/* One range check with a uniform message. */
static int wd_check_range(const char *what, int32_t v, int32_t lo, int32_t hi, char *err,
                          size_t err_len) {
  if (v < lo || v > hi)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "hyper-parameter %s = %d is out of range [%d, %d]", what, (int)v,
                          (int)lo, (int)hi);
  return 0;
}

int wd__model_check_hparams(const wd_hparams_t *hp, char *err, size_t err_len) {
  /* The ranges admit every OpenAI model and small test models (a state of 64
   * with one layer), and keep every size computation far from overflow. */
  int rc;
  if ((rc = wd_check_range("n_vocab", hp->n_vocab, 51864, 51866, err, err_len)) < 0 ||
      (rc = wd_check_range("n_audio_ctx", hp->n_audio_ctx, 1, 1500, err, err_len)) < 0 ||
      (rc = wd_check_range("n_audio_state", hp->n_audio_state, 1, 8192, err, err_len)) < 0 ||
      (rc = wd_check_range("n_audio_head", hp->n_audio_head, 1, 256, err, err_len)) < 0 ||
      (rc = wd_check_range("n_audio_layer", hp->n_audio_layer, 1, 128, err, err_len)) < 0 ||
      (rc = wd_check_range("n_text_ctx", hp->n_text_ctx, 1, 448, err, err_len)) < 0 ||
      (rc = wd_check_range("n_text_state", hp->n_text_state, 1, 8192, err, err_len)) < 0 ||
      (rc = wd_check_range("n_text_head", hp->n_text_head, 1, 256, err, err_len)) < 0 ||
      (rc = wd_check_range("n_text_layer", hp->n_text_layer, 1, 128, err, err_len)) < 0 ||
      (rc = wd_check_range("ftype", hp->ftype, 0, 2 * WD__MODEL_QNT_FACTOR + 99, err, err_len)) < 0)
    return rc;
  if (hp->n_mels != 80 && hp->n_mels != 128)
    return wd__model_fail(err, err_len, WD_EMODEL, "hyper-parameter n_mels = %d: expected 80 or 128",
                          (int)hp->n_mels);
  if (hp->n_audio_state % hp->n_audio_head != 0)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "hyper-parameters: n_audio_head = %d does not divide n_audio_state = %d",
                          (int)hp->n_audio_head, (int)hp->n_audio_state);
  if (hp->n_text_state % hp->n_text_head != 0)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "hyper-parameters: n_text_head = %d does not divide n_text_state = %d",
                          (int)hp->n_text_head, (int)hp->n_text_state);
  /* Cross-attention reads encoder states with decoder-width projections. */
  if (hp->n_text_state != hp->n_audio_state)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "hyper-parameters: n_text_state = %d differs from n_audio_state = %d",
                          (int)hp->n_text_state, (int)hp->n_audio_state);
  wd_dtype_t wtype;
  if (wd_ftype_wtype(hp->ftype, &wtype) < 0) {
    /* ggml's ftype ids 10..14 are the k-quants (q2_K .. q6_K), which
     * whisper.cpp's quantize also writes; their super-blocks are not
     * implemented in our kernels. */
    static const char *const kq[] = { "q2_K", "q3_K", "q4_K", "q5_K", "q6_K" };
    const int id = (int)(hp->ftype % WD__MODEL_QNT_FACTOR);
    return wd__model_fail(err, err_len, WD_EUNSUP,
                          "hyper-parameter ftype = %d: %s%s weights are not supported; whisperd "
                          "runs f32, f16, q8_0, q5_0, q5_1, q4_0 and q4_1 files",
                          (int)hp->ftype, id >= 10 && id <= 14 ? kq[id - 10] : "this type's",
                          id >= 10 && id <= 14 ? " (k-quant)" : "");
  }
  if (wtype != WD_DTYPE_F32 && wtype != WD_DTYPE_F16) {
    /* Quantized blocks changed layout before ggml's quantization version 2. */
    if (hp->ftype / WD__MODEL_QNT_FACTOR != 2)
      return wd__model_fail(err, err_len, WD_EUNSUP,
                            "hyper-parameter ftype = %d: quantization version %d, expected 2",
                            (int)hp->ftype, (int)(hp->ftype / WD__MODEL_QNT_FACTOR));
    if (hp->n_audio_state % 32 != 0)
      return wd__model_fail(err, err_len, WD_EMODEL,
                            "hyper-parameters: n_audio_state = %d is not a multiple of the "
                            "quantization block (32)",
                            (int)hp->n_audio_state);
  }
  return 0;
}

/* ------------------------------------------------------ expected tensors */

typedef struct {
  wd__tensor_spec_t *v;
  size_t n, cap;
} wd_spec_list_t;

static int wd_spec_add(wd_spec_list_t *l, wd__tensor_kind_t kind, int n_dims, int64_t ne0,
                       int64_t ne1, int64_t ne2, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static int wd_spec_add(wd_spec_list_t *l, wd__tensor_kind_t kind, int n_dims, int64_t ne0,
                       int64_t ne1, int64_t ne2, const char *fmt, ...) {
  if (l->n == l->cap)
    return WD_EINTERNAL; /* the capacity is computed exactly up front */
  wd__tensor_spec_t *s = &l->v[l->n++];
  *s = (wd__tensor_spec_t){ .n_dims = n_dims, .ne = { ne0, ne1, ne2, 1 }, .kind = kind };
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->name, sizeof s->name, fmt, ap);
  va_end(ap);
  return 0;
}

/* Linear layer "prefix.weight" (n_in, n_out) and, unless no_bias, "prefix.bias" (n_out). */
static int wd_spec_linear(wd_spec_list_t *l, const char *prefix, int64_t n_in, int64_t n_out,
                          bool with_bias) {
  int rc = wd_spec_add(l, WD__TK_MATRIX, 2, n_in, n_out, 1, "%s.weight", prefix);
  if (rc == 0 && with_bias)
    rc = wd_spec_add(l, WD__TK_VECTOR, 1, n_out, 1, 1, "%s.bias", prefix);
  return rc;
}

static int wd_spec_norm(wd_spec_list_t *l, const char *prefix, int64_t n) {
  int rc = wd_spec_add(l, WD__TK_VECTOR, 1, n, 1, 1, "%s.weight", prefix);
  if (rc == 0)
    rc = wd_spec_add(l, WD__TK_VECTOR, 1, n, 1, 1, "%s.bias", prefix);
  return rc;
}

/* Multi-head attention: query, key (no bias), value, out; then its norm. */
static int wd_spec_attn(wd_spec_list_t *l, const char *prefix, const char *ln, int64_t n) {
  char p[WD__MODEL_NAME_MAX];
  int rc = 0;
  static const char *const parts[] = { "query", "key", "value", "out" };
  for (int i = 0; i < 4 && rc == 0; i++) {
    snprintf(p, sizeof p, "%s.%s", prefix, parts[i]);
    rc = wd_spec_linear(l, p, n, n, i != 1);
  }
  if (rc == 0)
    rc = wd_spec_norm(l, ln, n);
  return rc;
}

static int wd_spec_mlp(wd_spec_list_t *l, const char *block, int64_t n) {
  char p[WD__MODEL_NAME_MAX];
  snprintf(p, sizeof p, "%s.mlp.0", block);
  int rc = wd_spec_linear(l, p, n, 4 * n, true);
  snprintf(p, sizeof p, "%s.mlp.2", block);
  if (rc == 0)
    rc = wd_spec_linear(l, p, 4 * n, n, true);
  snprintf(p, sizeof p, "%s.mlp_ln", block);
  if (rc == 0)
    rc = wd_spec_norm(l, p, n);
  return rc;
}

int wd__model_expect(const wd_hparams_t *hp, wd__tensor_spec_t **ret, size_t *ret_n) {
  /* Encoder: positional embedding, two convs (4), 15 per block, ln_post (2).
   * Decoder: positional + token embedding, 24 per block, ln (2). */
  const size_t cap = 5 + 15 * (size_t)hp->n_audio_layer + 2 + 2 + 24 * (size_t)hp->n_text_layer + 2;
  wd_spec_list_t l = { .v = calloc(cap, sizeof(wd__tensor_spec_t)), .n = 0, .cap = cap };
  if (!l.v)
    return WD_ENOMEM;
  const int64_t na = hp->n_audio_state, nt = hp->n_text_state;
  char b[28], p[48], q[48]; /* "decoder.blocks.N", N < 2^31 */
  int rc = 0;

  /* (n_audio_ctx, n_audio_state) */
  rc |= wd_spec_add(&l, WD__TK_VECTOR, 2, na, hp->n_audio_ctx, 1, "encoder.positional_embedding");
  /* (n_audio_state, n_mels, 3) and (n_audio_state, n_audio_state, 3): kernel width fastest */
  rc |= wd_spec_add(&l, WD__TK_CONV, 3, 3, hp->n_mels, na, "encoder.conv1.weight");
  rc |= wd_spec_add(&l, WD__TK_VECTOR, 2, 1, na, 1, "encoder.conv1.bias");
  rc |= wd_spec_add(&l, WD__TK_CONV, 3, 3, na, na, "encoder.conv2.weight");
  rc |= wd_spec_add(&l, WD__TK_VECTOR, 2, 1, na, 1, "encoder.conv2.bias");
  for (int i = 0; i < hp->n_audio_layer && rc == 0; i++) {
    snprintf(b, sizeof b, "encoder.blocks.%d", i);
    snprintf(p, sizeof p, "%s.attn", b);
    snprintf(q, sizeof q, "%s.attn_ln", b);
    rc |= wd_spec_attn(&l, p, q, na);
    rc |= wd_spec_mlp(&l, b, na);
  }
  rc |= wd_spec_norm(&l, "encoder.ln_post", na);

  /* (n_text_ctx, n_text_state) and (n_vocab, n_text_state) */
  rc |= wd_spec_add(&l, WD__TK_VECTOR, 2, nt, hp->n_text_ctx, 1, "decoder.positional_embedding");
  rc |= wd_spec_add(&l, WD__TK_MATRIX, 2, nt, hp->n_vocab, 1, "decoder.token_embedding.weight");
  for (int i = 0; i < hp->n_text_layer && rc == 0; i++) {
    snprintf(b, sizeof b, "decoder.blocks.%d", i);
    snprintf(p, sizeof p, "%s.attn", b);
    snprintf(q, sizeof q, "%s.attn_ln", b);
    rc |= wd_spec_attn(&l, p, q, nt);
    snprintf(p, sizeof p, "%s.cross_attn", b);
    snprintf(q, sizeof q, "%s.cross_attn_ln", b);
    rc |= wd_spec_attn(&l, p, q, nt);
    rc |= wd_spec_mlp(&l, b, nt);
  }
  rc |= wd_spec_norm(&l, "decoder.ln", nt);

  if (rc != 0 || l.n != cap) {
    free(l.v);
    return WD_EINTERNAL;
  }
  *ret = l.v;
  *ret_n = l.n;
  return 0;
}

/* ---------------------------------------------------- names and heads */

typedef struct {
  const char *name;
  int n;
  int pairs[24][2];
} wd_aheads_row_t;

/* ref: openai/whisper 20250625 whisper/__init__.py _ALIGNMENT_HEADS, decoded
 * (base85 + gzip of a (n_text_layer, n_text_head) boolean mask). */
static const wd_aheads_row_t wd_aheads_table[] = {
  { "tiny.en", 8, { {1, 0}, {2, 0}, {2, 5}, {3, 0}, {3, 1}, {3, 2}, {3, 3}, {3, 4} } },
  { "tiny", 6, { {2, 2}, {3, 0}, {3, 2}, {3, 3}, {3, 4}, {3, 5} } },
  { "base.en", 5, { {3, 3}, {4, 7}, {5, 1}, {5, 5}, {5, 7} } },
  { "base", 8, { {3, 1}, {4, 2}, {4, 3}, {4, 7}, {5, 1}, {5, 2}, {5, 4}, {5, 6} } },
  { "small.en", 19, { {6, 6}, {7, 0}, {7, 3}, {7, 8}, {8, 2}, {8, 5}, {8, 7}, {9, 0}, {9, 4},
                      {9, 8}, {9, 10}, {10, 0}, {10, 1}, {10, 2}, {10, 3}, {10, 6}, {10, 11},
                      {11, 2}, {11, 4} } },
  { "small", 10, { {5, 3}, {5, 9}, {8, 0}, {8, 4}, {8, 7}, {8, 8}, {9, 0}, {9, 7}, {9, 9},
                   {10, 5} } },
  { "medium.en", 18, { {11, 4}, {14, 1}, {14, 12}, {14, 14}, {15, 4}, {16, 0}, {16, 4}, {16, 9},
                       {17, 12}, {17, 14}, {18, 7}, {18, 10}, {18, 15}, {20, 0}, {20, 3},
                       {20, 9}, {20, 14}, {21, 12} } },
  { "medium", 6, { {13, 15}, {15, 4}, {15, 15}, {16, 1}, {20, 0}, {23, 4} } },
  { "large-v1", 9, { {9, 19}, {11, 2}, {11, 4}, {11, 17}, {22, 7}, {22, 11}, {22, 17}, {23, 2},
                     {23, 15} } },
  { "large-v2", 23, { {10, 12}, {13, 17}, {16, 11}, {16, 12}, {16, 13}, {17, 15}, {17, 16},
                      {18, 4}, {18, 11}, {18, 19}, {19, 11}, {21, 2}, {21, 3}, {22, 3}, {22, 9},
                      {22, 12}, {23, 5}, {23, 7}, {23, 13}, {25, 5}, {26, 1}, {26, 12},
                      {27, 15} } },
  { "large-v3", 10, { {7, 0}, {10, 17}, {12, 18}, {13, 12}, {16, 1}, {17, 14}, {19, 11}, {21, 4},
                      {24, 1}, {25, 6} } },
  { "large-v3-turbo", 6, { {2, 4}, {2, 11}, {3, 3}, {3, 6}, {3, 11}, {3, 14} } },
};

/* Names by encoder shape; ref: openai/whisper model card dims. */
static const char *wd_model_derive_name(const wd_hparams_t *hp, bool *ret_has_en) {
  static const struct {
    const char *name;
    int32_t n_state, n_layer;
  } sizes[] = { { "tiny", 384, 4 }, { "base", 512, 6 }, { "small", 768, 12 }, { "medium", 1024, 24 } };
  *ret_has_en = false;
  const bool same_depth = hp->n_text_layer == hp->n_audio_layer;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    if (hp->n_audio_state == sizes[i].n_state && hp->n_audio_layer == sizes[i].n_layer) {
      if (!same_depth || hp->n_mels != 80 || hp->n_vocab == 51866)
        return "custom";
      *ret_has_en = true;
      return sizes[i].name;
    }
  }
  if (hp->n_audio_state == 1280 && hp->n_audio_layer == 32) {
    if (hp->n_mels == 128 && hp->n_vocab == 51866)
      return hp->n_text_layer == 4 ? "large-v3-turbo" : same_depth ? "large-v3" : "custom";
    /* large-v1 and large-v2 have identical shapes; v2 is the one in use. */
    if (hp->n_mels == 80 && hp->n_vocab == 51865 && same_depth)
      return "large-v2";
  }
  return "custom";
}

void wd__model_finish(wd_model_t *m) {
  bool has_en = false;
  const char *base = wd_model_derive_name(&m->hp, &has_en);
  snprintf(m->name, sizeof m->name, "%s%s", base, has_en && m->hp.n_vocab == 51864 ? ".en" : "");
}

/* --------------------------------------------------------- life cycle */

int wd__model_new(const wd_hparams_t *hp, size_t n_tensors, wd_model_t **ret) {
  wd_model_t *m = calloc(1, sizeof *m);
  if (!m)
    return WD_ENOMEM;
  *m = (wd_model_t){ .hp = *hp, .n_tensors = n_tensors };
  m->tensors = calloc(n_tensors, sizeof *m->tensors);
  m->tensor_names = calloc(n_tensors, sizeof *m->tensor_names);
  if (!m->tensors || !m->tensor_names) {
    wd_model_free(m);
    return WD_ENOMEM;
  }
  for (size_t i = 0; i < n_tensors; i++)
    m->tensors[i].name = m->tensor_names[i];
  *ret = m;
  return 0;
}

void wd_model_free(wd_model_t *m) {
  if (!m)
    return;
  if (m->map)
    munmap(m->map, m->map_len);
  for (size_t i = 0; i < m->n_owned; i++)
    free(m->owned[i]);
  free(m->owned);
  free(m->tensors);
  free(m->tensor_names);
  free(m->mel);
  free(m->tok);
  free(m->tok_len);
  free(m->tok_arena);
  free(m->aheads);
  free(m);
}

int wd_model_load(const char *path, wd_model_t **ret, char *err, size_t err_len) {
  if (!path || !ret)
    return WD_EINVAL;
  *ret = NULL;
  struct stat st;
  if (stat(path, &st) != 0)
    return wd__model_fail(err, err_len, WD_ENOENT, "'%s': no such file or directory", path);
  int rc = S_ISDIR(st.st_mode) ? wd__model_load_ct2(path, ret, err, err_len)
                               : wd__model_load_ggml(path, ret, err, err_len);
  if (rc == 0)
    wd_log_debug("model: loaded '%s' (%s, %zu tensors)", path, (*ret)->name, (*ret)->n_tensors);
  return rc;
}

/* ------------------------------------------------------------ accessors */

const wd_hparams_t *wd_model_hparams(const wd_model_t *m) { return &m->hp; }
const char *wd_model_name(const wd_model_t *m) { return m->name; }
int wd_model_is_multilingual(const wd_model_t *m) { return m->hp.n_vocab >= 51865; }
int wd_model_can_translate(const wd_model_t *m) {
  /* The rule and its reasons: model.h. */
  return wd_model_is_multilingual(m) && m->hp.n_text_layer == m->hp.n_audio_layer;
}
size_t wd_model_n_tensors(const wd_model_t *m) { return m->n_tensors; }

const wd_tensor_t *wd_model_tensor_at(const wd_model_t *m, size_t i) {
  return i < m->n_tensors ? &m->tensors[i] : NULL;
}

size_t wd_model_release(const wd_model_t *m, const wd_tensor_t *t) {
  const uintptr_t map = (uintptr_t)m->map, d = (uintptr_t)t->data;
  if (!m->map || d < map || d >= map + m->map_len || t->nbytes > map + m->map_len - d)
    return 0;
  const long ps = sysconf(_SC_PAGESIZE);
  const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096u;
  const uintptr_t lo = (d + page - 1) & ~(page - 1), hi = (d + t->nbytes) & ~(page - 1);
  if (hi <= lo)
    return 0;
  /* Advice only: a failure leaves the pages resident, which is no error. */
  if (madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0)
    return 0;
  return hi - lo;
}

const wd_tensor_t *wd_model_tensor(const wd_model_t *m, const char *name) {
  /* A linear scan: a large model has about 1,300 tensors and lookups happen
   * once, at engine set-up. */
  for (size_t i = 0; i < m->n_tensors; i++)
    if (strcmp(m->tensors[i].name, name) == 0)
      return &m->tensors[i];
  return NULL;
}

const float *wd_model_mel_filters(const wd_model_t *m, int *ret_n_mel, int *ret_n_fft) {
  if (ret_n_mel)
    *ret_n_mel = m->n_mel;
  if (ret_n_fft)
    *ret_n_fft = m->n_fft;
  return m->mel;
}

int wd_model_n_tokens(const wd_model_t *m) { return m->n_tokens; }

const char *wd_model_token(const wd_model_t *m, int id, size_t *ret_len) {
  if (id < 0 || id >= m->n_tokens)
    return NULL;
  if (ret_len)
    *ret_len = m->tok_len[id];
  return m->tok[id];
}

int wd_model_alignment_heads(const wd_model_t *m, const int (**ret_pairs)[2], int *ret_n) {
  if (m->n_aheads > 0) {
    *ret_pairs = (const int(*)[2])m->aheads;
    *ret_n = m->n_aheads;
    return 0;
  }
  for (size_t i = 0; i < sizeof wd_aheads_table / sizeof wd_aheads_table[0]; i++) {
    if (strcmp(wd_aheads_table[i].name, m->name) == 0) {
      *ret_pairs = (const int(*)[2])wd_aheads_table[i].pairs;
      *ret_n = wd_aheads_table[i].n;
      return 0;
    }
  }
  *ret_pairs = NULL;
  *ret_n = 0;
  return WD_ENOENT;
}
