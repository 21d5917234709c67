/*
 * test_compute.c - the CPU engine under --compute-type bf16 and int8
 * (cpu/cpu_rgemm.h) on the real tiny.en weights and jfk.wav, each type this
 * CPU runs (a type it cannot run must be refused at load, with a message):
 *   - jfk.wav through the whole decoding policy gives f32's words (case and
 *     punctuation aside);
 *   - a sequence's logits are bit-identical alone and batched (the shared
 *     check of tests/wd_engine_check.h);
 *   - the encoder output stays near f32's (relative RMS printed and
 *     bounded), and the first step's logits pick f32's token;
 *   - the memory plan (`whisperd info`) is what the engine allocates, and
 *     int8's weights take at most 60 % of f32's.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>

#include "cpu_engine.h"
#include "decode.h"
#include "error.h"
#include "model.h"
#include "wd_engine_check.h"
#include "wd_test.h"

static wd_model_t *g_model;
static float *g_mel;
static int g_frames;
static wd_cpu_engine_t *g_f32;
static char g_words[512]; /* f32's words */
static float *g_enc;      /* f32's encoder output of the first window */

/* Lowercase letters, digits and single spaces of s. */
static void words_of(const char *s, char *out, size_t n) {
  size_t j = 0;
  for (; *s && j + 1 < n; s++) {
    if (isalnum((unsigned char)*s))
      out[j++] = (char)tolower((unsigned char)*s);
    else if (isspace((unsigned char)*s) && j && out[j - 1] != ' ')
      out[j++] = ' ';
  }
  while (j && out[j - 1] == ' ')
    j--;
  out[j] = '\0';
}

static int transcribe_words(wd_cpu_engine_t *e, char *out, size_t n) {
  wd_tokenizer_t *tok = NULL;
  if (wd_model_tokenizer_new(g_model, &tok) < 0)
    return -1;
  wd_decode_opts_t o;
  wd_decode_opts_default(&o);
  wd_transcript_t tr;
  size_t n_pcm = 0;
  float *pcm = ec_jfk_pcm(&n_pcm);
  wd_mel_t *mel = ec_mel_new(g_model);
  int rc = pcm && mel ? wd_test_transcribe(wd_cpu_engine_iface(e), tok, mel, pcm, n_pcm, &o, &tr)
                      : WD_ENOMEM;
  free(pcm);
  wd_mel_free(mel);
  if (rc == 0) {
    fprintf(stderr, "  text:%s\n", tr.text);
    words_of(tr.text, out, n);
    wd_transcript_free(&tr);
  }
  wd_tokenizer_free(tok);
  return rc;
}

WD_TEST(setup) {
  char err[256] = "";
  if (wd_model_load(WD_SOURCE_DIR "/models/ggml-tiny.en.bin", &g_model, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  g_mel = ec_jfk_mel(g_model, &g_frames);
  WD_CHECK_EQ_INT(wd_cpu_engine_new(g_model, &(wd_cpu_engine_opts_t){ .max_seqs = 2, .max_audio = 1 },
                                    &g_f32, err, sizeof err),
                  0);
  if (!g_f32 || !g_mel)
    return;
  WD_CHECK_EQ_INT(transcribe_words(g_f32, g_words, sizeof g_words), 0);
  const wd_hparams_t *hp = wd_model_hparams(g_model);
  g_enc = malloc((size_t)hp->n_audio_ctx * (size_t)hp->n_audio_state * sizeof *g_enc);
  if (g_enc)
    WD_CHECK_EQ_INT(wd_cpu_engine_read_encoded(g_f32, g_enc), 0);
}

static void check_type(wd_cpu_compute_t ct) {
  if (!g_f32 || !g_enc)
    wd_test_skip("setup failed");
  enum { MAX_SEQS = 9 };
  const wd_cpu_engine_opts_t o = { .max_seqs = MAX_SEQS, .max_audio = 2, .compute = ct };
  wd_cpu_engine_t *e = NULL;
  char err[256] = "";
  const int rc = wd_cpu_engine_new(g_model, &o, &e, err, sizeof err);
  if (wd_cpu_compute_refusal(ct)) {
    /* This CPU lacks the instructions: refused, saying which. */
    WD_CHECK_EQ_INT(rc, WD_EINVAL);
    WD_CHECK(strstr(err, wd_cpu_compute_name(ct)) != NULL);
    fprintf(stderr, "  refused here: %s\n", err);
    return;
  }
  WD_CHECK_EQ_INT(rc, 0);
  if (!e)
    return;
  wd_cpu_engine_stats_t st;
  wd_cpu_engine_stats(e, &st);
  fprintf(stderr, "  %s on %s\n", st.compute, st.compute_path);
  WD_CHECK_EQ_STR(st.compute, wd_cpu_compute_name(ct));

  /* The whole transcription: f32's words (the first window's encoder
   * output stays in the engine for what follows). */
  char w[512] = "";
  WD_CHECK_EQ_INT(transcribe_words(e, w, sizeof w), 0);
  WD_CHECK_EQ_STR(w, g_words);

  const wd_hparams_t *hp = wd_model_hparams(g_model);
  const size_t n = (size_t)hp->n_audio_ctx * (size_t)hp->n_audio_state;
  float *got = malloc(n * sizeof *got);
  if (got && wd_cpu_engine_read_encoded(e, got) == 0) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
      num += ((double)got[i] - g_enc[i]) * ((double)got[i] - g_enc[i]);
      den += (double)g_enc[i] * g_enc[i];
    }
    const double rel = sqrt(num / den);
    fprintf(stderr, "  encoder output: relative RMS difference to f32 %.3g\n", rel);
    WD_CHECK(rel < (ct == WD_CPU_COMPUTE_INT8 ? 0.15 : 0.05));
  }
  free(got);

  /* Two audio slots for the identity check's companions. */
  const wd_engine_t *v = wd_cpu_engine_iface(e);
  float *win = ec_window(g_mel, hp->n_mels, g_frames, 0);
  WD_CHECK(win != NULL);
  if (win) {
    WD_CHECK_EQ_INT(v->encode(v->self, 0, win), 0);
    WD_CHECK_EQ_INT(v->encode(v->self, 1, win), 0);
    ec_check_alone_and_batched(v, hp->n_vocab);
  }
  free(win);

  wd_cpu_engine_plan_t p;
  wd_cpu_engine_plan(g_model, &o, &p);
  wd_cpu_engine_stats(e, &st);
  const double mib = 1024.0 * 1024.0;
  fprintf(stderr, "  weights %.1f MiB (plan %.1f), state %.1f MiB (plan %.1f)\n", st.weight_mib,
          p.weight_bytes / mib, st.state_mib, (p.self_bytes + p.cross_bytes + p.scratch_bytes) / mib);
  WD_CHECK(fabs(p.weight_bytes - st.weight_mib * mib) < 1.0);
  WD_CHECK(fabs(p.mapped_bytes - st.mapped_mib * mib) < 1.0);
  WD_CHECK(fabs(p.self_bytes + p.cross_bytes + p.scratch_bytes - st.state_mib * mib) < 1.0);
  wd_cpu_engine_stats_t s32;
  wd_cpu_engine_stats(g_f32, &s32);
  if (ct == WD_CPU_COMPUTE_INT8)
    WD_CHECK(st.weight_mib < 0.6 * s32.weight_mib);
  wd_cpu_engine_free(e);
}

WD_TEST(int8) { check_type(WD_CPU_COMPUTE_INT8); }

WD_TEST(bf16) { check_type(WD_CPU_COMPUTE_BF16); }

WD_TEST(names) {
  wd_cpu_compute_t c;
  WD_CHECK_EQ_INT(wd_cpu_compute_parse("int8", &c), 0);
  WD_CHECK_EQ_INT(c, WD_CPU_COMPUTE_INT8);
  WD_CHECK_EQ_INT(wd_cpu_compute_parse("bf16", &c), 0);
  WD_CHECK_EQ_INT(c, WD_CPU_COMPUTE_BF16);
  WD_CHECK_EQ_INT(wd_cpu_compute_parse("", &c), 0);
  WD_CHECK_EQ_INT(c, WD_CPU_COMPUTE_F32);
  WD_CHECK_EQ_INT(wd_cpu_compute_parse("int4", &c), WD_EINVAL);
}

WD_TEST(teardown) {
  wd_cpu_engine_free(g_f32);
  wd_model_free(g_model);
  free(g_mel), free(g_enc);
}

int main(void) { return wd_test_main(); }
