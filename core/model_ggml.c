/*
 * model_ggml.c - reads whisper.cpp's ggml model files.
 *
 * Layout (little-endian): u32 magic 0x67676d6c; 11 i32 hyper-parameters;
 * i32 n_mel, i32 n_fft, then (n_mel, n_fft) f32 filterbank; i32 n_tokens,
 * then per token u32 length + raw bytes; then tensors until end of file, each
 * i32 n_dims, i32 name length, i32 type, i32 ne[n_dims], name, data.
 * ref: whisper.cpp src/whisper.cpp whisper_model_load(),
 * models/convert-pt-to-ggml.py; /work/shared/reference/model-formats.md.
 *
 * The file is mapped read-only and never trusted: every read is bounds
 * checked, the hyper-parameters are range checked, and every tensor is
 * matched against the list derived from them (name, shape, type, size)
 * before the model is returned. Tensor data and token bytes point into the
 * mapping, which the model owns; the filterbank is copied so that it is
 * aligned.
 *
 * Threading: no shared state; loads may run concurrently.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "model_internal.h"

#define WD_GGML_MAGIC 0x67676d6cu
/* GPT-2's longest token is 128 bytes; anything far beyond is corruption. */
#define WD_GGML_TOKEN_MAX 1024
#define WD_GGML_TENSOR_NAME_MAX 255

/* A bounds-checked cursor over the mapped file. */
typedef struct {
  const unsigned char *p;
  size_t len, off;
} wd_cursor_t;

static bool wd_cur_has(const wd_cursor_t *c, size_t n) { return c->len - c->off >= n; }

static bool wd_cur_u32(wd_cursor_t *c, uint32_t *ret) {
  if (!wd_cur_has(c, 4))
    return false;
  const unsigned char *b = c->p + c->off;
  *ret = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
  c->off += 4;
  return true;
}

static bool wd_cur_i32(wd_cursor_t *c, int32_t *ret) {
  uint32_t u;
  if (!wd_cur_u32(c, &u))
    return false;
  memcpy(ret, &u, sizeof *ret);
  return true;
}

static bool wd_host_is_le(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static bool wd_dtype_known(int32_t t) {
  switch (t) {
  case WD_DTYPE_F32: case WD_DTYPE_F16: case WD_DTYPE_Q4_0: case WD_DTYPE_Q4_1:
  case WD_DTYPE_Q5_0: case WD_DTYPE_Q5_1: case WD_DTYPE_Q8_0:
    return true;
  }
  return false;
}

/* Header, hyper-parameters, filterbank and vocabulary. */
static int wd_ggml_read_head(wd_cursor_t *c, wd_hparams_t *hp, char *err, size_t err_len) {
  uint32_t magic;
  if (!wd_cur_u32(c, &magic))
    return wd__model_fail(err, err_len, WD_EMODEL, "truncated file: %zu bytes, no ggml header",
                          c->len);
  if (magic != WD_GGML_MAGIC)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "bad magic 0x%08x: not a ggml Whisper model (expected 0x%08x)",
                          (unsigned)magic, WD_GGML_MAGIC);
  int32_t v[11];
  for (int i = 0; i < 11; i++)
    if (!wd_cur_i32(c, &v[i]))
      return wd__model_fail(err, err_len, WD_EMODEL,
                            "truncated header: file ends in hyper-parameter %d of 11", i + 1);
  *hp = (wd_hparams_t){ .n_vocab = v[0], .n_audio_ctx = v[1], .n_audio_state = v[2],
                        .n_audio_head = v[3], .n_audio_layer = v[4], .n_text_ctx = v[5],
                        .n_text_state = v[6], .n_text_head = v[7], .n_text_layer = v[8],
                        .n_mels = v[9], .ftype = v[10] };
  return wd__model_check_hparams(hp, err, err_len);
}

static int wd_ggml_read_mel(wd_cursor_t *c, wd_model_t *m, char *err, size_t err_len) {
  int32_t n_mel, n_fft;
  if (!wd_cur_i32(c, &n_mel) || !wd_cur_i32(c, &n_fft))
    return wd__model_fail(err, err_len, WD_EMODEL, "truncated file: ends in the mel filterbank header");
  if (n_mel != m->hp.n_mels || n_fft != WD__MODEL_N_BINS)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "mel filterbank: expected shape [%d, %d], found [%d, %d]",
                          (int)m->hp.n_mels, WD__MODEL_N_BINS, (int)n_mel, (int)n_fft);
  const size_t n = (size_t)n_mel * (size_t)n_fft;
  if (!wd_cur_has(c, n * sizeof(float)))
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "truncated file: mel filterbank needs %zu bytes, %zu left",
                          n * sizeof(float), c->len - c->off);
  /* (n_mel, n_fft) */
  m->mel = malloc(n * sizeof(float));
  if (!m->mel)
    return WD_ENOMEM;
  memcpy(m->mel, c->p + c->off, n * sizeof(float));
  c->off += n * sizeof(float);
  m->n_mel = n_mel;
  m->n_fft = n_fft;
  for (size_t i = 0; i < n; i++)
    if (!isfinite(m->mel[i]) || m->mel[i] < 0.0f)
      return wd__model_fail(err, err_len, WD_EMODEL,
                            "mel filterbank: entry [%zu, %zu] = %g is not a finite weight >= 0",
                            i / (size_t)n_fft, i % (size_t)n_fft, (double)m->mel[i]);
  return 0;
}

static int wd_ggml_read_vocab(wd_cursor_t *c, wd_model_t *m, char *err, size_t err_len) {
  int32_t n;
  if (!wd_cur_i32(c, &n))
    return wd__model_fail(err, err_len, WD_EMODEL, "truncated file: ends before the vocabulary");
  if (n < 1 || n > m->hp.n_vocab)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "vocabulary: %d tokens, expected 1 to n_vocab = %d", (int)n,
                          (int)m->hp.n_vocab);
  m->tok = calloc((size_t)n, sizeof *m->tok);
  m->tok_len = calloc((size_t)n, sizeof *m->tok_len);
  if (!m->tok || !m->tok_len)
    return WD_ENOMEM;
  for (int32_t i = 0; i < n; i++) {
    uint32_t len;
    if (!wd_cur_u32(c, &len))
      return wd__model_fail(err, err_len, WD_EMODEL,
                            "truncated file: vocabulary ends at token %d of %d", (int)i, (int)n);
    if (len > WD_GGML_TOKEN_MAX)
      return wd__model_fail(err, err_len, WD_EMODEL, "vocabulary: token %d is %u bytes long (max %d)",
                            (int)i, (unsigned)len, WD_GGML_TOKEN_MAX);
    if (!wd_cur_has(c, len))
      return wd__model_fail(err, err_len, WD_EMODEL,
                            "truncated file: vocabulary ends inside token %d of %d", (int)i, (int)n);
    m->tok[i] = (const char *)c->p + c->off;
    m->tok_len[i] = len;
    c->off += len;
  }
  m->n_tokens = n;
  return 0;
}

/* Reads one tensor record, checks it against the expected list and files it
 * into its slot. seen[] marks slots already filled. */
static int wd_ggml_read_tensor(wd_cursor_t *c, wd_model_t *m, const wd__tensor_spec_t *specs,
                               bool *seen, char *err, size_t err_len) {
  /* Offsets go into messages so that a broken file can be inspected with a
   * hex dump. */
  const size_t rec_off = c->off;
  int32_t n_dims, name_len, type;
  if (!wd_cur_i32(c, &n_dims) || !wd_cur_i32(c, &name_len) || !wd_cur_i32(c, &type))
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "truncated file: tensor header at offset %zu is cut off", rec_off);
  if (n_dims < 1 || n_dims > 4 || name_len < 1 || name_len > WD_GGML_TENSOR_NAME_MAX)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "tensor at offset %zu: bad header (n_dims %d, name length %d)", rec_off,
                          (int)n_dims, (int)name_len);
  /* ggml order: ne[0] is the fastest-varying (row length); unused dims are 1. */
  int64_t ne[4] = { 1, 1, 1, 1 };
  for (int i = 0; i < n_dims; i++) {
    int32_t d;
    if (!wd_cur_i32(c, &d))
      return wd__model_fail(err, err_len, WD_EMODEL,
                            "truncated file: tensor header at offset %zu is cut off", rec_off);
    if (d < 1)
      return wd__model_fail(err, err_len, WD_EMODEL, "tensor at offset %zu: dimension %d is %d",
                            rec_off, i, (int)d);
    ne[i] = d;
  }
  if (!wd_cur_has(c, (size_t)name_len))
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "truncated file: tensor name at offset %zu is cut off", rec_off);
  char name[WD_GGML_TENSOR_NAME_MAX + 1];
  memcpy(name, c->p + c->off, (size_t)name_len);
  name[name_len] = '\0';
  c->off += (size_t)name_len;
  if (strlen(name) != (size_t)name_len)
    return wd__model_fail(err, err_len, WD_EMODEL, "tensor at offset %zu: name contains a NUL byte",
                          rec_off);

  /* The name decides the slot; a name outside the derived list means a
   * different architecture or a corrupt record, and a second record for the
   * same name would silently shadow the first. */
  size_t k = 0;
  while (k < m->n_tensors && strcmp(specs[k].name, name) != 0)
    k++;
  if (k == m->n_tensors)
    return wd__model_fail(err, err_len, WD_EMODEL, "unknown tensor '%s' at offset %zu", name, rec_off);
  if (seen[k])
    return wd__model_fail(err, err_len, WD_EMODEL, "duplicate tensor '%s' at offset %zu", name,
                          rec_off);
  /* Shape first (it names the hyper-parameter that disagrees), then type. */
  const wd__tensor_spec_t *s = &specs[k];
  bool same = n_dims == s->n_dims;
  for (int i = 0; i < 4 && same; i++)
    same = ne[i] == s->ne[i];
  if (!same) {
    char want[96], got[96];
    wd__model_shape_str(s->n_dims, s->ne, want, sizeof want);
    wd__model_shape_str(n_dims, ne, got, sizeof got);
    return wd__model_fail(err, err_len, WD_EMODEL, "tensor '%s': expected shape %s, found %s", name,
                          want, got);
  }
  wd_dtype_t want_type;
  int rc = wd__model_expect_type(&m->hp, s->kind, &want_type);
  if (rc < 0)
    return rc;
  if (!wd_dtype_known(type) || (wd_dtype_t)type != want_type)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "tensor '%s': expected type %s (ftype %d), found %s (%d)", name,
                          wd_dtype_name(want_type), (int)m->hp.ftype,
                          wd_dtype_known(type)        ? wd_dtype_name((wd_dtype_t)type)
                          : type >= 10 && type <= 15 ? "a k-quant, unsupported"
                                                     : "unknown",
                          (int)type);
  /* The shape is one we derived from checked hyper-parameters, so this product
   * stays below 2^40; a quantized row must hold whole blocks. */
  const size_t row = wd_dtype_row_bytes(want_type, ne[0]);
  if (row == 0)
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "tensor '%s': row of %lld elements is not a whole number of %s blocks",
                          name, (long long)ne[0], wd_dtype_name(want_type));
  const size_t nbytes = row * (size_t)(ne[1] * ne[2] * ne[3]);
  if (!wd_cur_has(c, nbytes))
    return wd__model_fail(err, err_len, WD_EMODEL,
                          "truncated file: tensor '%s' needs %zu bytes of data, %zu left", name,
                          nbytes, c->len - c->off);
  wd_tensor_t *t = &m->tensors[k];
  memcpy(m->tensor_names[k], s->name, sizeof m->tensor_names[k]);
  t->type = want_type;
  t->n_dims = n_dims;
  memcpy(t->ne, ne, sizeof t->ne);
  t->data = c->p + c->off;
  t->nbytes = nbytes;
  c->off += nbytes;
  seen[k] = true;
  return 0;
}

int wd__model_parse_ggml(const void *data, size_t len, wd_model_t **ret, char *err,
                         size_t err_len) {
  wd_model_t *m = NULL;
  wd__tensor_spec_t *specs = NULL;
  bool *seen = NULL;
  size_t n_specs = 0;
  int rc = 0;

  if (!wd_host_is_le())
    return wd__model_fail(err, err_len, WD_EUNSUP, "ggml files are little-endian; this host is not");

  /* Sections in file order; each reader leaves the cursor after its section. */
  wd_cursor_t c = { .p = data, .len = len, .off = 0 };
  wd_hparams_t hp;
  if ((rc = wd_ggml_read_head(&c, &hp, err, err_len)) < 0)
    goto fail;
  if ((rc = wd__model_expect(&hp, &specs, &n_specs)) < 0)
    goto fail;
  if ((rc = wd__model_new(&hp, n_specs, &m)) < 0)
    goto fail;
  if ((rc = wd_ggml_read_mel(&c, m, err, err_len)) < 0 ||
      (rc = wd_ggml_read_vocab(&c, m, err, err_len)) < 0)
    goto fail;

  seen = calloc(n_specs, sizeof *seen);
  if (!seen) {
    rc = WD_ENOMEM;
    goto fail;
  }
  /* Tensors run to the end of the file, in any order. */
  while (c.off < c.len)
    if ((rc = wd_ggml_read_tensor(&c, m, specs, seen, err, err_len)) < 0)
      goto fail;
  for (size_t k = 0; k < n_specs; k++) {
    if (!seen[k]) {
      rc = wd__model_fail(err, err_len, WD_EMODEL, "missing tensor '%s' (file ends at %zu bytes)",
                          specs[k].name, c.len);
      goto fail;
    }
  }
  wd__model_finish(m);
  free(specs);
  free(seen);
  *ret = m;
  return 0;

fail:
  wd_model_free(m);
  free(specs);
  free(seen);
  return rc;
}

int wd__model_load_ggml(const char *path, wd_model_t **ret, char *err, size_t err_len) {
  void *map = NULL;
  size_t map_len = 0;

  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return wd__model_fail(err, err_len, errno == ENOENT ? WD_ENOENT : WD_EIO,
                          "'%s': cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return wd__model_fail(err, err_len, WD_EIO, "'%s': not a regular file", path);
  }
  map_len = (size_t)st.st_size;
  if (map_len > 0) {
    map = mmap(NULL, map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      close(fd);
      return wd__model_fail(err, err_len, WD_EIO, "'%s': cannot map: %s", path, strerror(errno));
    }
  }
  close(fd);

  wd_model_t *m = NULL;
  int rc = wd__model_parse_ggml(map, map_len, &m, err, err_len);
  if (rc < 0) {
    if (map)
      munmap(map, map_len);
    return rc;
  }
  m->map = map; /* tensor data and tokens point into it: the model owns it from here on */
  m->map_len = map_len;
  wd_log_debug("model_ggml: '%s': %s, %zu tensors, %d tokens", path, m->name, m->n_tensors,
               m->n_tokens);
  *ret = m;
  return 0;
}
