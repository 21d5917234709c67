/*
 * model_ggml_write.c - writes a model as a whisper.cpp ggml file (the
 * `whisperd convert` output, and through wd__model_write_ggml_as the
 * `whisperd quantize` output, whose tensors change type on the way).
 *
 * The layout is the one model_ggml.c reads: magic, 11 hyper-parameters, the
 * (n_mel, 201) filterbank, the vocabulary, then every tensor in canonical
 * order with its ggml shape and type. A conversion of OpenAI's tiny.en and
 * base has exactly the length of whisper.cpp's published files
 * (77,704,715 and 147,951,465 bytes). ref: whisper.cpp
 * models/convert-pt-to-ggml.py.
 *
 * The file is written as "<path>.tmp", flushed and fsync'd, then renamed over
 * path, so readers see either the old file or the complete new one.
 * Threading: no shared state. Ownership: the model is only read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "model_internal.h"

#define WD_GGML_MAGIC 0x67676d6cu

typedef struct {
  FILE *f;
  bool failed;
} wd_writer_t;

static void wd_put(wd_writer_t *w, const void *p, size_t n) {
  if (!w->failed && n > 0 && fwrite(p, 1, n, w->f) != n)
    w->failed = true;
}

static void wd_put_u32(wd_writer_t *w, uint32_t v) {
  const unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                               (unsigned char)(v >> 24) };
  wd_put(w, b, sizeof b);
}

static void wd_put_i32(wd_writer_t *w, int32_t v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  wd_put_u32(w, u);
}

/* Everything but the tensor data goes out as the model holds it; ftype
 * replaces the stored one. src, if set, supplies each tensor's type and
 * bytes (see wd__tensor_source_fn); returns its error or 0. */
static int wd_write_body(wd_writer_t *w, const wd_model_t *m, int32_t ftype,
                         wd__tensor_source_fn src, void *ctx, char *err, size_t err_len) {
  const wd_hparams_t *hp = &m->hp;
  wd_put_u32(w, WD_GGML_MAGIC);
  const int32_t v[11] = { hp->n_vocab,    hp->n_audio_ctx,  hp->n_audio_state, hp->n_audio_head,
                          hp->n_audio_layer, hp->n_text_ctx, hp->n_text_state, hp->n_text_head,
                          hp->n_text_layer, hp->n_mels,     ftype };
  for (int i = 0; i < 11; i++)
    wd_put_i32(w, v[i]);

  /* (n_mel, n_fft) f32, host order = little-endian (checked by the readers). */
  wd_put_i32(w, m->n_mel);
  wd_put_i32(w, m->n_fft);
  wd_put(w, m->mel, (size_t)m->n_mel * (size_t)m->n_fft * sizeof(float));

  wd_put_i32(w, m->n_tokens);
  for (int i = 0; i < m->n_tokens; i++) {
    wd_put_u32(w, m->tok_len[i]);
    wd_put(w, m->tok[i], m->tok_len[i]);
  }

  for (size_t i = 0; i < m->n_tensors && !w->failed; i++) {
    const wd_tensor_t *t = &m->tensors[i];
    wd_dtype_t type = t->type;
    const void *data = t->data;
    size_t nbytes = t->nbytes;
    if (src) {
      const int rc = src(ctx, i, t, &type, &data, &nbytes, err, err_len);
      if (rc < 0)
        return rc;
    }
    const size_t name_len = strlen(t->name);
    wd_put_i32(w, t->n_dims);
    wd_put_i32(w, (int32_t)name_len);
    wd_put_i32(w, (int32_t)type);
    for (int d = 0; d < t->n_dims; d++)
      wd_put_i32(w, (int32_t)t->ne[d]);
    wd_put(w, t->name, name_len);
    wd_put(w, data, nbytes);
  }
  return 0;
}

int wd_model_write_ggml(const wd_model_t *m, const char *path, char *err, size_t err_len) {
  if (!m)
    return WD_EINVAL;
  return wd__model_write_ggml_as(m, m->hp.ftype, NULL, NULL, path, err, err_len);
}

int wd__model_write_ggml_as(const wd_model_t *m, int32_t ftype, wd__tensor_source_fn src,
                            void *ctx, const char *path, char *err, size_t err_len) {
  if (!m || !path)
    return WD_EINVAL;
  const size_t plen = strlen(path);
  char *tmp = malloc(plen + 5);
  if (!tmp)
    return WD_ENOMEM;
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp", 5);

  int rc = 0;
  wd_writer_t w = { .f = fopen(tmp, "wb"), .failed = false };
  if (!w.f) {
    rc = wd__model_fail(err, err_len, WD_EIO, "'%s': cannot create: %s", tmp, strerror(errno));
    free(tmp);
    return rc;
  }
  /* Large writes go straight through; the small header fields are buffered. */
  setvbuf(w.f, NULL, _IOFBF, 1 << 20);
  const int src_rc = wd_write_body(&w, m, ftype, src, ctx, err, err_len);
  int saved = errno;
  if (src_rc < 0) {
    /* The source failed (and said why in err): no file appears at path,
     * and the half-written temporary goes whatever fclose says. */
    (void)fclose(w.f);
    unlink(tmp);
    free(tmp);
    return src_rc;
  }
  if (!w.failed && fflush(w.f) != 0) {
    w.failed = true;
    saved = errno;
  }
  if (!w.failed && fsync(fileno(w.f)) != 0) {
    w.failed = true;
    saved = errno;
  }
  if (fclose(w.f) != 0 && !w.failed) {
    w.failed = true;
    saved = errno;
  }
  if (w.failed) {
    rc = wd__model_fail(err, err_len, WD_EIO, "'%s': write failed: %s", tmp, strerror(saved));
    unlink(tmp);
  } else if (rename(tmp, path) != 0) {
    rc = wd__model_fail(err, err_len, WD_EIO, "cannot rename '%s' to '%s': %s", tmp, path,
                        strerror(errno));
    unlink(tmp);
  } else {
    wd_log_debug("model: wrote '%s' (%zu tensors)", path, m->n_tensors);
  }
  free(tmp);
  return rc;
}
