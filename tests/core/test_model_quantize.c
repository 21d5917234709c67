/*
 * test_model_quantize.c - wd_model_quantize (core/model_quantize.c) on a
 * small synthetic f16 model (state 64, one layer each; tests/wd_synth_model.h).
 *
 * For every target type the output loads, its ftype is ggml's (+ 2000 for
 * block types), and the tensors quantized are exactly those whisper.cpp's
 * quantize tool picks (2-D, not a conv bias or positional embedding; the
 * rule is spelled out here on its own, not taken from the module): those
 * dequantize to within one quantization step of the f16 originals, all the
 * others, the filterbank and the vocabulary are copied byte for byte.
 * Also: an already quantized model can be converted again; a state that is
 * not a multiple of 32 and an unwritable path are refused, leaving no file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "model.h"
#include "quant.h"
#include "wd_synth_model.h"
#include "wd_test.h"

static char g_tmpdir[256];
static const char *const g_names[] = { "in.bin", "in48.bin", "out.bin", "out.bin.tmp", "re.bin",
                                       "out48.bin", "out48.bin.tmp" };

static void tmp_cleanup(void) {
  char path[600];
  for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", g_tmpdir, g_names[i]);
    unlink(path);
  }
  rmdir(g_tmpdir);
}

/* name inside the scratch directory, into buf (PATH_MAX-ish). */
static const char *tmp_path(const char *name, char *buf, size_t len) {
  if (!g_tmpdir[0]) {
    snprintf(g_tmpdir, sizeof g_tmpdir, "/tmp/wd_test_model_quantize.XXXXXX");
    if (!mkdtemp(g_tmpdir))
      abort();
    atexit(tmp_cleanup);
  }
  snprintf(buf, len, "%s/%s", g_tmpdir, name);
  return buf;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static const wd_hparams_t syn_hp = { .n_vocab = 51864, .n_audio_ctx = 16, .n_audio_state = 64,
                                     .n_audio_head = 2, .n_audio_layer = 1, .n_text_ctx = 8,
                                     .n_text_state = 64, .n_text_head = 2, .n_text_layer = 1,
                                     .n_mels = 80, .ftype = 1 };

/* whisper.cpp's choice (examples/quantize/quantize.cpp): 2-D and not skipped. */
static bool whispercpp_quantizes(const wd_tensor_t *t) {
  static const char *const skip[] = { "encoder.conv1.bias", "encoder.conv2.bias",
                                      "encoder.positional_embedding",
                                      "decoder.positional_embedding" };
  for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
    if (strcmp(t->name, skip[i]) == 0)
      return false;
  return t->n_dims == 2;
}

/* Largest |original - dequantized| over a tensor, in units of each block's
 * quantization step (span / levels, as test_quant.c defines it). */
static double worst_steps(wd_dtype_t qt, const wd_tensor_t *orig, const wd_tensor_t *q) {
  const int64_t n_row = orig->ne[0], n_rows = wd_tensor_n_elements(orig) / n_row;
  float *x = malloc((size_t)n_row * sizeof(float)), *y = malloc((size_t)n_row * sizeof(float));
  const bool has_min = qt == WD_DTYPE_Q4_1 || qt == WD_DTYPE_Q5_1;
  const float levels = qt == WD_DTYPE_Q8_0 ? 254.0f
                       : (qt == WD_DTYPE_Q5_0 || qt == WD_DTYPE_Q5_1) ? 31.0f : 15.0f;
  double worst = 0.0;
  const size_t in_row = wd_dtype_row_bytes(orig->type, n_row), q_row = wd_dtype_row_bytes(qt, n_row);
  for (int64_t r = 0; r < n_rows && x && y; r++) {
    if (wd_dequantize_row(orig->type, (const uint8_t *)orig->data + r * (int64_t)in_row, x, n_row) < 0 ||
        wd_dequantize_row(qt, (const uint8_t *)q->data + r * (int64_t)q_row, y, n_row) < 0) {
      worst = INFINITY;
      break;
    }
    for (int64_t b = 0; b < n_row; b += WD_QK) {
      float mn = x[b], mx = x[b];
      for (int j = 0; j < WD_QK; j++) {
        mn = fminf(mn, x[b + j]);
        mx = fmaxf(mx, x[b + j]);
      }
      const float span = has_min ? mx - mn : 2.0f * fmaxf(-mn, mx);
      const float step = span > 0.0f ? span / levels : 1e-30f;
      for (int j = 0; j < WD_QK; j++)
        worst = fmax(worst, fabsf(x[b + j] - y[b + j]) / step);
    }
  }
  if (!x || !y)
    worst = INFINITY;
  free(x);
  free(y);
  return worst;
}

/* Same filterbank and vocabulary, bit for bit. */
static bool same_mel_and_vocab(const wd_model_t *a, const wd_model_t *b) {
  int na = 0, fa = 0, nb = 0, fb = 0;
  const float *ma = wd_model_mel_filters(a, &na, &fa), *mb = wd_model_mel_filters(b, &nb, &fb);
  if (na != nb || fa != fb || memcmp(ma, mb, (size_t)na * (size_t)fa * sizeof(float)) != 0)
    return false;
  if (wd_model_n_tokens(a) != wd_model_n_tokens(b))
    return false;
  for (int i = 0; i < wd_model_n_tokens(a); i++) {
    size_t la = 0, lb = 0;
    const char *ta = wd_model_token(a, i, &la), *tb = wd_model_token(b, i, &lb);
    if (la != lb || memcmp(ta, tb, la) != 0)
      return false;
  }
  return true;
}

static wd_model_t *load_or_report(const char *path) {
  wd_model_t *m = NULL;
  char err[512] = "";
  if (wd_model_load(path, &m, err, sizeof err) < 0) {
    fprintf(stderr, "  load '%s': %s\n", path, err);
    return NULL;
  }
  return m;
}

/* The synthetic f16 model at in.bin, loaded. */
static wd_model_t *synth_f16(void) {
  char in[512];
  tmp_path("in.bin", in, sizeof in);
  if (!exists(in) && wd_synth_write(in, &syn_hp) < 0)
    return NULL;
  return load_or_report(in);
}

WD_TEST(every_type_quantizes_whispercpps_tensors_within_a_step) {
  wd_model_t *src = synth_f16();
  WD_CHECK(src != NULL);
  if (!src)
    return;
  static const struct {
    wd_dtype_t t;
    int32_t ftype;
  } cases[] = { { WD_DTYPE_Q8_0, 2007 }, { WD_DTYPE_Q5_0, 2008 }, { WD_DTYPE_Q5_1, 2009 },
                { WD_DTYPE_Q4_0, 2002 }, { WD_DTYPE_Q4_1, 2003 } };
  char out[512], tmp[600];
  tmp_path("out.bin", out, sizeof out);
  snprintf(tmp, sizeof tmp, "%s.tmp", out);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const wd_dtype_t qt = cases[k].t;
    char err[512] = "";
    size_t n_conv = 0;
    const int rc = wd_model_quantize(src, qt, out, &n_conv, err, sizeof err);
    WD_CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
      fprintf(stderr, "  %s: %s\n", wd_dtype_name(qt), err);
      continue;
    }
    WD_CHECK(!exists(tmp));
    wd_model_t *m = load_or_report(out);
    WD_CHECK(m != NULL);
    if (!m)
      continue;
    WD_CHECK_EQ_INT(wd_model_hparams(m)->ftype, cases[k].ftype);
    WD_CHECK(same_mel_and_vocab(src, m));
    /* one layer each: 6 encoder + 10 decoder linear weights + the token embedding */
    WD_CHECK_EQ_INT((int)n_conv, 6 + 10 + 1);
    size_t n_quant = 0;
    for (size_t i = 0; i < wd_model_n_tensors(src); i++) {
      const wd_tensor_t *a = wd_model_tensor_at(src, i);
      const wd_tensor_t *b = wd_model_tensor(m, a->name);
      WD_CHECK(b != NULL);
      if (!b)
        continue;
      if (whispercpp_quantizes(a)) {
        n_quant++;
        WD_CHECK_EQ_STR(wd_dtype_name(b->type), wd_dtype_name(qt));
        const double w = worst_steps(qt, a, b);
        if (!(w <= 1.01)) {
          fprintf(stderr, "  %s %s: off by %.3f steps\n", wd_dtype_name(qt), a->name, w);
          WD_CHECK(0);
        }
      } else {
        /* conv kernels stay f16, vectors f32, and their bytes stay put */
        WD_CHECK_EQ_STR(wd_dtype_name(b->type), wd_dtype_name(a->type));
        WD_CHECK(a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0);
      }
    }
    WD_CHECK_EQ_INT((int)n_quant, (int)n_conv);
    wd_model_free(m);
  }
  wd_model_free(src);
}

WD_TEST(f32_and_f16_targets_and_requantizing) {
  wd_model_t *src = synth_f16();
  WD_CHECK(src != NULL);
  if (!src)
    return;
  char out[512], re[512], err[512] = "";
  tmp_path("out.bin", out, sizeof out);
  tmp_path("re.bin", re, sizeof re);

  /* f32: everything widens exactly, conv kernels included; ftype 0. */
  WD_CHECK_EQ_INT(wd_model_quantize(src, WD_DTYPE_F32, out, NULL, err, sizeof err), 0);
  wd_model_t *m = load_or_report(out);
  WD_CHECK(m != NULL);
  if (m) {
    WD_CHECK_EQ_INT(wd_model_hparams(m)->ftype, 0);
    const wd_tensor_t *a = wd_model_tensor(src, "encoder.conv1.weight");
    const wd_tensor_t *b = wd_model_tensor(m, "encoder.conv1.weight");
    WD_CHECK(a && b && b->type == WD_DTYPE_F32 && b->nbytes == 2 * a->nbytes);
    a = wd_model_tensor(src, "decoder.blocks.0.mlp.2.weight");
    b = wd_model_tensor(m, "decoder.blocks.0.mlp.2.weight");
    WD_CHECK(a && b && b->type == WD_DTYPE_F32);
    if (a && b) {
      float x, y;
      uint16_t h;
      memcpy(&h, (const uint8_t *)a->data + 2 * 777, 2);
      memcpy(&y, (const uint8_t *)b->data + 4 * 777, 4);
      x = wd_f16_to_f32(h);
      WD_CHECK(x == y);
    }
    /* and back to f16: every tensor as in the original, byte for byte */
    WD_CHECK_EQ_INT(wd_model_quantize(m, WD_DTYPE_F16, re, NULL, err, sizeof err), 0);
    wd_model_free(m);
    m = load_or_report(re);
    WD_CHECK(m != NULL);
    for (size_t i = 0; m && i < wd_model_n_tensors(src); i++) {
      const wd_tensor_t *s = wd_model_tensor_at(src, i), *t = wd_model_tensor_at(m, i);
      WD_CHECK(s->type == t->type && s->nbytes == t->nbytes &&
               memcmp(s->data, t->data, s->nbytes) == 0);
    }
    wd_model_free(m);
  }

  /* q8_0 -> q4_0: dequantized, then quantized again; loads as q4_0. */
  WD_CHECK_EQ_INT(wd_model_quantize(src, WD_DTYPE_Q8_0, out, NULL, err, sizeof err), 0);
  m = load_or_report(out);
  WD_CHECK(m != NULL);
  if (m) {
    WD_CHECK_EQ_INT(wd_model_quantize(m, WD_DTYPE_Q4_0, re, NULL, err, sizeof err), 0);
    wd_model_free(m);
    m = load_or_report(re);
    WD_CHECK(m != NULL);
    if (m) {
      WD_CHECK_EQ_INT(wd_model_hparams(m)->ftype, 2002);
      const wd_tensor_t *t = wd_model_tensor(m, "decoder.token_embedding.weight");
      WD_CHECK(t && t->type == WD_DTYPE_Q4_0);
    }
    wd_model_free(m);
  }
  wd_model_free(src);
}

WD_TEST(refusals_leave_no_file) {
  /* A state of 48 is a valid f16 model but no whole number of blocks. */
  wd_hparams_t hp = syn_hp;
  hp.n_audio_state = hp.n_text_state = 48;
  char in[512], out[512], tmp[600], err[512] = "";
  tmp_path("in48.bin", in, sizeof in);
  tmp_path("out48.bin", out, sizeof out);
  snprintf(tmp, sizeof tmp, "%s.tmp", out);
  WD_CHECK_EQ_INT(wd_synth_write(in, &hp), 0);
  wd_model_t *m = load_or_report(in);
  WD_CHECK(m != NULL);
  if (m) {
    WD_CHECK_EQ_INT(wd_model_quantize(m, WD_DTYPE_Q5_0, out, NULL, err, sizeof err), WD_EMODEL);
    WD_CHECK(strstr(err, "n_audio_state = 48") && strstr(err, "multiple"));
    WD_CHECK(!exists(out) && !exists(tmp));
    WD_CHECK_EQ_INT(wd_model_quantize(m, WD_DTYPE_F16, out, NULL, err, sizeof err), 0);
    wd_model_free(m);
  }

  wd_model_t *src = synth_f16();
  WD_CHECK(src != NULL);
  if (src) {
    err[0] = '\0';
    WD_CHECK_EQ_INT(wd_model_quantize(src, WD_DTYPE_Q8_0, "/nonexistent-dir/x.bin", NULL, err,
                                      sizeof err),
                    WD_EIO);
    WD_CHECK(strstr(err, "/nonexistent-dir/x.bin.tmp") && strstr(err, "cannot create"));
    WD_CHECK_EQ_INT(wd_model_quantize(src, (wd_dtype_t)5, out, NULL, err, sizeof err), WD_EINVAL);
    int32_t f = -1;
    WD_CHECK(wd_dtype_ftype(WD_DTYPE_Q5_1, &f) == 0 && f == 2009);
    WD_CHECK(wd_dtype_ftype((wd_dtype_t)4, &f) == WD_EINVAL);
  }
  wd_model_free(src);
}

int main(void) { return wd_test_main(); }
