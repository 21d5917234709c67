/*
 * test_ref_engine.c - the incremental reference decoder (KV cache, cached
 * cross K/V) gives the same logits as the full causal decoder pass over the
 * whole sequence, on the real tiny.en weights. This pins the structure the
 * Vulkan engine copies.
 */
#include <math.h>
#include <stdlib.h>

#include "error.h"
#include "model.h"
#include "ref_engine.h"
#include "whisper_ref.h"
#include "wd_test.h"

WD_TEST(incremental_matches_full_pass) {
  wd_model_t *m = NULL;
  char err[256] = "";
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &m, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  const wd_hparams_t *hp = wd_model_hparams(m);
  wd_ref_engine_t *r = NULL;
  WD_CHECK_EQ_INT(wd_ref_engine_new(m, 2, 1, &r), 0);
  const size_t n_mel = (size_t)hp->n_mels * 3000;
  float *mel = malloc(n_mel * sizeof *mel);
  uint32_t s = 12345;
  for (size_t i = 0; mel && i < n_mel; i++) { /* a smooth pseudo-spectrogram in [-0.6, 0.6] */
    s = s * 1664525u + 1013904223u;
    mel[i] = (float)(0.4 * sin((double)i * 0.001) + 0.2 * ((double)(s >> 8) / 16777216.0 - 0.5));
  }
  const wd_engine_t *e = r ? wd_ref_engine_iface(r) : NULL;
  WD_CHECK(e && mel);
  if (!e || !mel)
    goto out;
  WD_CHECK_EQ_INT(e->encode(e->self, 0, mel), 0);
  /* <|startoftranscript|> <|0.00|> " And" " so" " my" */
  const int32_t toks[] = { 50257, 50363, 843, 523, 616 };
  const int n = 5, nv = hp->n_vocab;
  float *full = malloc((size_t)n * (size_t)nv * sizeof *full);
  WD_CHECK_EQ_INT(wd_ref_decode(m, wd_ref_engine_encoded(r, 0), toks, n, full), 0);
  WD_CHECK_EQ_INT(e->seq_reset(e->self, 1, 0), 0);
  double max_err = 0.0;
  for (int i = 0; i < n; i++) {
    const int seq = 1;
    const float *lg = NULL;
    WD_CHECK_EQ_INT(e->step(e->self, 1, &seq, &toks[i], &lg), 0);
    for (int v = 0; lg && v < nv; v++) {
      const double d = fabs((double)lg[v] - full[(size_t)i * (size_t)nv + (size_t)v]);
      if (!(d <= max_err))
        max_err = d; /* NaN sticks */
    }
  }
  fprintf(stderr, "  max |incremental - full| logit difference: %.3g\n", max_err);
  WD_CHECK(max_err < 1e-3);
  /* Out-of-range input is refused, not crashed on. */
  const int bad_seq = 7;
  const int32_t bad_tok = 99999;
  const float *lg = NULL;
  WD_CHECK_EQ_INT(e->step(e->self, 1, &bad_seq, &toks[0], &lg), WD_EINVAL);
  const int seq0 = 0;
  WD_CHECK_EQ_INT(e->step(e->self, 1, &seq0, &bad_tok, &lg), WD_EINVAL);
  free(full);
out:
  free(mel);
  wd_ref_engine_free(r);
  wd_model_free(m);
}

int main(void) { return wd_test_main(); }
