/*
 * test_engine_types.c - the CPU engine on every weight type a ggml file can
 * hold, against the plain-C reference engine reading the same file (the
 * Vulkan engine's tests/gpu/test_engine_types.c, on cpu/).
 *
 * Synthetic models in the engine's smallest shape (tests/wd_synth_model.h:
 * d = 64, one layer each side, the real vocabulary size), written as all-f32
 * (ftype 0: conv kernels f32 too), q8_0, q4_0, q5_1 and q4_1, q5_0
 * (quantized blocks of pseudo-random values, ggml's rounding; conv kernels
 * f16), and f16 (ftype 1). The CPU engine keeps the decoder's f16 and
 * quantized matrices as stored and dequantizes them on the fly exactly as
 * wd_dequantize_row (which the reference uses) does; the encoder's are
 * dequantized to f32 at load. Both see the same numbers, so what differs is
 * f32 summation order only: the encoder output and every step's logits must
 * agree to 1e-3 relative (the f16 test's bound), and the argmax exactly.
 * Two sequences step together, so the batched GEMV runs too; then
 * a 3-token prefill (three rows through the decoder) is checked the same way.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "error.h"
#include "model.h"
#include "ref_engine.h"
#include "cpu_engine.h"
#include "wd_synth_model.h"
#include "wd_test.h"

/* max |a - b| / max |b| over n values. */
static double rel_max(const float *a, const float *b, size_t n) {
  double max_ref = 0, max_d = 0;
  for (size_t k = 0; k < n; k++) {
    if (fabs(b[k]) > max_ref)
      max_ref = fabs(b[k]);
    const double d = fabs((double)a[k] - b[k]);
    if (!(d <= max_d))
      max_d = d;
  }
  return max_ref > 0 ? max_d / max_ref : max_d;
}

static int argmax(const float *x, int n) {
  int a = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[a])
      a = i;
  return a;
}

static void run_ftype(int32_t ftype, const char *name) {
  char dir[] = "/tmp/wd_test_cpu_types.XXXXXX", path[80], err[256] = "";
  WD_CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/synth.bin", dir);
  const wd_hparams_t hp = wd_synth_engine_hparams(ftype);
  WD_CHECK_EQ_INT(wd_synth_write(path, &hp), 0);
  wd_model_t *m = NULL;
  wd_cpu_engine_t *e = NULL;
  wd_ref_engine_t *r = NULL;
  float *mel = NULL, *enc = NULL;
  int rc = wd_model_load(path, &m, err, sizeof err);
  if (rc < 0)
    fprintf(stderr, "  load: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  if (rc < 0)
    goto out;
  const wd_cpu_engine_opts_t o = { .max_seqs = 2, .max_audio = 1 };
  rc = wd_cpu_engine_new(m, &o, &e, err, sizeof err);
  if (rc < 0)
    fprintf(stderr, "  engine: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  WD_CHECK_EQ_INT(wd_ref_engine_new(m, 2, 1, &r), 0);
  if (!e || !r)
    goto out;
  const wd_engine_t *v = wd_cpu_engine_iface(e), *f = wd_ref_engine_iface(r);
  /* A mel window of values in the range log-mel takes after Whisper's
   * scaling (about [-1, 1.5]). */
  const size_t n_mel = (size_t)hp.n_mels * 3000;
  mel = malloc(n_mel * sizeof *mel);
  const size_t n_enc = (size_t)hp.n_audio_ctx * (size_t)hp.n_audio_state;
  enc = malloc(n_enc * sizeof *enc);
  WD_CHECK(mel && enc);
  if (!mel || !enc)
    goto out;
  for (size_t i = 0; i < n_mel; i++)
    mel[i] = 4.0f * wd_synth_rand((int64_t)i, 4242);
  WD_CHECK_EQ_INT(v->encode(v->self, 0, mel), 0);
  WD_CHECK_EQ_INT(f->encode(f->self, 0, mel), 0);
  WD_CHECK_EQ_INT(wd_cpu_engine_read_encoded(e, enc), 0);
  const double rel_enc = rel_max(enc, wd_ref_engine_encoded(r, 0), n_enc);
  WD_CHECK(rel_enc < 1e-3);
  /* Two sequences stepping together, different tokens. */
  const int seqs[2] = { 0, 1 };
  for (int s = 0; s < 2; s++) {
    WD_CHECK_EQ_INT(v->seq_reset(v->self, s, 0), 0);
    WD_CHECK_EQ_INT(f->seq_reset(f->self, s, 0), 0);
  }
  static const int32_t toks[4][2] = { { 50257, 50257 }, { 50362, 440 }, { 843, 51000 },
                                      { 13, 7 } };
  const int nv = hp.n_vocab;
  double worst = 0;
  float *lv = malloc(2 * (size_t)nv * sizeof *lv);
  WD_CHECK(lv != NULL);
  for (int i = 0; i < 4 && lv; i++) {
    const float *pv = NULL, *pr = NULL;
    WD_CHECK_EQ_INT(v->step(v->self, 2, seqs, toks[i], &pv), 0);
    if (!pv)
      break;
    memcpy(lv, pv, 2 * (size_t)nv * sizeof *lv);
    /* The reference steps its sequences one at a time. */
    for (int s = 0; s < 2; s++) {
      WD_CHECK_EQ_INT(f->step(f->self, 1, &seqs[s], &toks[i][s], &pr), 0);
      if (!pr)
        break;
      const double rel = rel_max(lv + (size_t)s * (size_t)nv, pr, (size_t)nv);
      if (!(rel <= worst))
        worst = rel;
      WD_CHECK_EQ_INT(argmax(lv + (size_t)s * (size_t)nv, nv), argmax(pr, nv));
    }
  }
  free(lv);
  /* A prefill (three rows through every decoder matrix, the token
   * embedding among them) against the reference's. */
  double worst_pf = 0;
  if (v->prefill && f->prefill) {
    static const int32_t pf[3] = { 50257, 50362, 843 };
    const float *pv = NULL, *pr = NULL;
    WD_CHECK_EQ_INT(v->seq_reset(v->self, 0, 0), 0);
    WD_CHECK_EQ_INT(f->seq_reset(f->self, 0, 0), 0);
    WD_CHECK_EQ_INT(v->prefill(v->self, 0, 3, pf, &pv), 0);
    float *keep = pv ? malloc((size_t)nv * sizeof *keep) : NULL;
    if (keep)
      memcpy(keep, pv, (size_t)nv * sizeof *keep);
    WD_CHECK_EQ_INT(f->prefill(f->self, 0, 3, pf, &pr), 0);
    if (keep && pr) {
      worst_pf = rel_max(keep, pr, (size_t)nv);
      WD_CHECK_EQ_INT(argmax(keep, nv), argmax(pr, nv));
    }
    free(keep);
  }
  fprintf(stderr, "  %-5s encoder rel %.3g, logits rel %.3g, prefill rel %.3g\n", name, rel_enc,
          worst, worst_pf);
  WD_CHECK(worst < 1e-3);
  WD_CHECK(worst_pf < 1e-3);
out:
  free(mel);
  free(enc);
  wd_cpu_engine_free(e);
  wd_ref_engine_free(r);
  wd_model_free(m);
  unlink(path);
  rmdir(dir);
}

WD_TEST(engine_f16) { run_ftype(1, "f16"); }
WD_TEST(engine_f32) { run_ftype(0, "f32"); }
WD_TEST(engine_q8_0) { run_ftype(2007, "q8_0"); }
WD_TEST(engine_q4_0) { run_ftype(2002, "q4_0"); }
WD_TEST(engine_q5_1) { run_ftype(2009, "q5_1"); }
WD_TEST(engine_q4_1) { run_ftype(2003, "q4_1"); }
WD_TEST(engine_q5_0) { run_ftype(2008, "q5_0"); }

int main(void) { return wd_test_main(); }
