/*
 * fuzz_model_ct2.c - the CTranslate2 model loader (core/model_ct2.c):
 * model.bin (header, variable table, aliases), config.json (alignment
 * heads) and the vocabulary (vocabulary.txt, or vocabulary.json).
 *
 * The loader reads a directory, so each input is written as files into a
 * private temp dir (in /dev/shm when there is one) and loaded with
 * wd_model_load(). Input:
 *   u8 flags: bit 0 model.bin is in the compact "ZRUN" form (fuzz_common.h);
 *             bit 1 the vocabulary goes to vocabulary.json, else .txt;
 *             bit 2 no config.json;
 *             bit 3 pad the vocabulary with valid tokens ("a") up to
 *             51864 + (bits 4-5 % 3) entries, so that small inputs reach
 *             the token checks of a whole n_vocab vocabulary;
 *   u32 n, then n bytes of model.bin;
 *   u32 n, then n bytes of config.json;
 *   the rest: the vocabulary (for JSON with padding: the array's first items
 *   without the brackets).
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "model.h"

static const uint8_t *part(fuzz_reader_t *r, size_t *ret_len) {
  size_t n = fuzz_u32(r);
  if (n > r->n - r->off)
    n = r->n - r->off;
  const uint8_t *p = r->p + r->off;
  r->off += n;
  *ret_len = n;
  return p;
}

/* The vocabulary file's bytes, padded as flags ask; malloc'd. */
FUZZ_NO_COVERAGE static char *vocab_text(const uint8_t *p, size_t n, uint8_t flags, size_t *ret_len) {
  const int json = flags & 2, pad = flags & 8;
  size_t have = 0;
  for (size_t i = 0; i < n; i++)
    have += p[i] == (json ? ',' : '\n');
  if (n > 0 && (json || p[n - 1] != '\n'))
    have++;
  const size_t want = 51864u + (size_t)((flags >> 4) % 3);
  const size_t extra = pad && have < want ? want - have : 0;
  char *out = malloc(n + 4 * extra + 8);
  if (!out)
    abort();
  size_t o = 0;
  if (json && pad)
    out[o++] = '[';
  memcpy(out + o, p, n);
  o += n;
  if (!json && n > 0 && p[n - 1] != '\n' && extra > 0)
    out[o++] = '\n';
  for (size_t i = 0; i < extra; i++) {
    if (json) {
      if (o > 1 || i > 0)
        out[o++] = ',';
      memcpy(out + o, "\"a\"", 3);
      o += 3;
    } else {
      out[o++] = 'a';
      out[o++] = '\n';
    }
  }
  if (json && pad)
    out[o++] = ']';
  *ret_len = o;
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  fuzz_reader_t r = { data, size, 0 };
  const uint8_t flags = fuzz_u8(&r);
  size_t bin_len, cfg_len;
  const uint8_t *bin = part(&r, &bin_len);
  const uint8_t *cfg = part(&r, &cfg_len);
  const uint8_t *voc = r.p + r.off;
  const size_t voc_len = r.n - r.off;

  /* Files are rewritten only when their part of the input changed (see
   * fuzz_tmp_same): the model's zero runs become holes of a sparse file,
   * and the padded vocabulary is made only when its part or flags change. */
  if (flags & 1)
    fuzz_tmp_write_zruns("model.bin", bin, bin_len);
  else
    fuzz_tmp_write("model.bin", bin, bin_len);
  if (flags & 4)
    fuzz_tmp_remove("config.json");
  else
    fuzz_tmp_write("config.json", cfg, cfg_len);
  const char *vname = (flags & 2) ? "vocabulary.json" : "vocabulary.txt";
  fuzz_tmp_remove((flags & 2) ? "vocabulary.txt" : "vocabulary.json");
  if (!fuzz_tmp_same(vname, fuzz_hash(voc, voc_len, FUZZ_HASH_INIT ^ (flags & 0x3a)))) {
    size_t vl;
    char *v = vocab_text(voc, voc_len, flags, &vl);
    fuzz_tmp_put(vname, v, vl);
    free(v);
  }

  wd_model_t *m = NULL;
  char err[512];
  int rc = wd_model_load(fuzz_tmp(), &m, err, sizeof err);
  fuzz_seed_check(rc, err);
  if (rc < 0) {
    FUZZ_CHECK(m == NULL && memchr(err, '\0', sizeof err) != NULL);
    return 0;
  }
  FUZZ_CHECK(m != NULL);
  const size_t n = wd_model_n_tensors(m);
  for (size_t i = 0; i < n; i++) {
    const wd_tensor_t *t = wd_model_tensor_at(m, i);
    FUZZ_CHECK(t != NULL && t->data != NULL);
    FUZZ_CHECK(t->nbytes == wd_dtype_row_bytes(t->type, t->ne[0]) *
                                (size_t)(t->ne[1] * t->ne[2] * t->ne[3]));
    /* Touch the first and last byte: ASan checks the buffer's size. */
    volatile uint8_t sink = ((const uint8_t *)t->data)[0];
    sink = ((const uint8_t *)t->data)[t->nbytes - 1];
    (void)sink;
  }
  const int (*heads)[2] = NULL;
  int n_heads = 0;
  if (wd_model_alignment_heads(m, &heads, &n_heads) == 0)
    for (int i = 0; i < n_heads; i++)
      FUZZ_CHECK(heads[i][0] >= 0 && heads[i][0] < wd_model_hparams(m)->n_text_layer &&
                 heads[i][1] >= 0 && heads[i][1] < wd_model_hparams(m)->n_text_head);
  wd_model_free(m);
  return 0;
}
