/*
 * test_vad.c - core/vad.c against Silero VAD as its authors run it: the
 * probabilities in tests/data/vad/NAME.probs were written by
 * tests/data/vad/make_reference.py (silero_vad.onnx of silero-vad 6.2.3 under
 * onnxruntime, chunk by chunk as silero_vad's audio_forward). Needs
 * models/silero-vad-v6.safetensors (scripts/fetch-vad.sh); skips without it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "error.h"
#include "vad.h"
#include "vad_job.h"
#include "vad_gemm.h"
#include "wd_test.h"

#define MODEL WD_SOURCE_DIR "/models/silero-vad-v6.safetensors"
/* Our f32 arithmetic sums in another order than onnxruntime's: measured
 * 2.0e-5 at worst (ask_not_padded, chunk 154, p = 0.26, where the LSTM
 * carries the difference along); the same network in float64 numpy is
 * within 6.2e-6 of onnxruntime there. Thresholds are 0.5 and 0.35. */
#define TOL 1e-4

static wd_vad_model_t *g_vad;

WD_TEST(setup) {
  char err[256] = "";
  FILE *f = fopen(MODEL, "rb");
  if (!f)
    wd_test_skip("models/silero-vad-v6.safetensors not present (scripts/fetch-vad.sh)");
  fclose(f);
  WD_CHECK_EQ_INT(wd_vad_model_load(MODEL, &g_vad, err, sizeof err), 0);
  fprintf(stderr, "  kernel: %s\n", wd_vad_gemm_kernel());
}

/* Max |ours - reference| over the file's chunks, s16 and float input. */
static double max_diff(const char *wav, const char *probs, size_t *ret_n) {
  int16_t *pcm = NULL;
  size_t n = 0;
  char err[256];
  if (wd_audio_decode_file(wav, NULL, &pcm, &n, err, sizeof err) < 0) {
    fprintf(stderr, "  %s: %s\n", wav, err);
    return 1.0;
  }
  const size_t nc = wd_vad_n_chunks(n);
  float *got = malloc(nc * sizeof *got), *got_f = malloc(nc * sizeof *got_f);
  float *x = malloc(n * sizeof *x);
  double worst = 0.0;
  size_t lines = 0;
  FILE *f = fopen(probs, "r");
  if (!got || !got_f || !x || !f || wd_vad_probs_s16(g_vad, pcm, n, got) < 0) {
    worst = 1.0;
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    x[i] = (float)pcm[i] / 32768.0f;
  if (wd_vad_probs(g_vad, x, n, got_f) < 0) {
    worst = 1.0;
    goto out;
  }
  double want;
  while (fscanf(f, "%lf", &want) == 1) {
    if (lines < nc) {
      worst = fmax(worst, fabs(got[lines] - want));
      if (got[lines] != got_f[lines]) /* the same signal either way */
        worst = 1.0;
    }
    lines++;
  }
  if (lines != nc)
    worst = 1.0;
out:
  if (f)
    fclose(f);
  *ret_n = nc;
  free(pcm), free(got), free(got_f), free(x);
  return worst;
}

static void check(const char *wav, const char *name) {
  if (!g_vad)
    wd_test_skip("no VAD model");
  char probs[512];
  snprintf(probs, sizeof probs, WD_TEST_DATA_DIR "/vad/%s.probs", name);
  size_t n = 0;
  const double d = max_diff(wav, probs, &n);
  fprintf(stderr, "  %s: %zu chunks, max |ours - onnxruntime| %.2e\n", name, n, d);
  WD_CHECK(d <= TOL);
}

WD_TEST(jfk_matches_onnxruntime) { check(WD_TEST_DATA_DIR "/audio/jfk.wav", "jfk"); }
WD_TEST(silence_padded_speech_matches_onnxruntime) {
  check(WD_TEST_DATA_DIR "/audio/synth/ask_not_padded.wav", "ask_not_padded");
}
WD_TEST(cards_match_onnxruntime) { check(WD_TEST_DATA_DIR "/audio/cards/005.wav", "005"); }

/* The portable kernel (arm64, x86 without AVX2) gives the same answers. */
WD_TEST(portable_kernel_matches_onnxruntime) {
  wd_vad_gemm_force_portable(1);
  check(WD_TEST_DATA_DIR "/audio/jfk.wav", "jfk");
  wd_vad_gemm_force_portable(0);
}

/* Edges: no samples, less than a chunk, exactly one chunk. */
WD_TEST(short_signals) {
  if (!g_vad)
    wd_test_skip("no VAD model");
  WD_CHECK_EQ_INT((int)wd_vad_n_chunks(0), 0);
  WD_CHECK_EQ_INT((int)wd_vad_n_chunks(1), 1);
  WD_CHECK_EQ_INT((int)wd_vad_n_chunks(512), 1);
  WD_CHECK_EQ_INT((int)wd_vad_n_chunks(513), 2);
  float x[600] = { 0 }, p[2] = { -1.0f, -1.0f };
  WD_CHECK_EQ_INT(wd_vad_probs(g_vad, x, 0, p), 0);
  WD_CHECK(p[0] == -1.0f);
  WD_CHECK_EQ_INT(wd_vad_probs(g_vad, x, 600, p), 0);
  WD_CHECK(p[0] >= 0.0f && p[0] < 0.1f && p[1] >= 0.0f && p[1] < 0.1f); /* silence */
}

/* A live stream (wd_vad_stream_probs): jfk.wav arriving in pieces of 1 to
 * 1600 samples, the stream keeping only the last few thousand, gives every
 * complete chunk's probability bit for bit as the whole file does. */
WD_TEST(stream_in_pieces_matches_the_whole_file) {
  if (!g_vad)
    wd_test_skip("no VAD model");
  int16_t *pcm = NULL;
  size_t n = 0;
  char err[256];
  WD_CHECK_EQ_INT(wd_audio_decode_file(WD_TEST_DATA_DIR "/audio/jfk.wav", NULL, &pcm, &n, err,
                                       sizeof err), 0);
  const size_t nc = wd_vad_n_chunks(n);
  float *whole = malloc(nc * sizeof *whole), *got = malloc(nc * sizeof *got);
  WD_CHECK(whole && got && wd_vad_probs_s16(g_vad, pcm, n, whole) == 0);
  wd_vad_stream_t st;
  wd_vad_stream_init(&st);
  size_t have = 0, base = 0, n_got = 0, step = 1;
  while (have < n) {
    step = (step * 7 + 3) % 1601 + 1;
    have = have + step < n ? have + step : n;
    /* keep from the next chunk's context on: what a session holds */
    const size_t keep_from = st.next * 512 >= 64 ? st.next * 512 - 64 : 0;
    base = keep_from > base ? keep_from : base;
    const int k = wd_vad_stream_probs(g_vad, &st, pcm + base, have - base, base, got + n_got);
    WD_CHECK(k >= 0);
    if (k < 0)
      break;
    n_got += (size_t)k;
  }
  WD_CHECK_EQ_INT((int)n_got, (int)(n / 512));
  WD_CHECK(memcmp(got, whole, n_got * sizeof *got) == 0);
  /* context dropped: refused, not computed from zeros */
  wd_vad_stream_t st2;
  wd_vad_stream_init(&st2);
  WD_CHECK_EQ_INT(wd_vad_stream_probs(g_vad, &st2, pcm + 1000, 2000, 1000, got), WD_EINVAL);
  free(whole);
  free(got);
  free(pcm);
}

/* Files that are not ours are refused with a message, never read past. */
WD_TEST(bad_files_refused) {
  char err[256] = "";
  wd_vad_model_t *m = NULL;
  WD_CHECK_EQ_INT(wd_vad_model_load(WD_SOURCE_DIR "/models/no-such-vad", &m, err, sizeof err),
                  WD_ENOENT);
  /* Not safetensors at all, and a header that lies about its length. */
  const char *tmp = WD_BINARY_DIR "/test_vad_bad.safetensors";
  FILE *f = fopen(tmp, "wb");
  WD_CHECK(f != NULL);
  if (!f)
    return;
  fputs("RIFF....WAVE", f);
  fclose(f);
  WD_CHECK_EQ_INT(wd_vad_model_load(tmp, &m, err, sizeof err), WD_EMODEL);
  fprintf(stderr, "  %s\n", err);
  /* A real safetensors header of another model (the right format key
   * missing), then one of ours whose first tensor has another shape. */
  static const char *headers[] = {
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
    "{\"__metadata__\":{\"format\":\"whisperd-silero-vad\",\"version\":\"1\"},"
    "\"stft.basis\":{\"dtype\":\"F32\",\"shape\":[258,1,255],\"data_offsets\":[0,4]}}",
    "{\"__metadata__\":{\"format\":\"whisperd-silero-vad\",\"version\":\"1\"},"
    "\"stft.basis\":{\"dtype\":\"F32\",\"shape\":[258,1,256],\"data_offsets\":[0,264192]}}",
  };
  for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
    f = fopen(tmp, "wb");
    if (!f)
      break;
    size_t len = strlen(headers[i]), pad = (8 - len % 8) % 8;
    unsigned char hl[8];
    for (int b = 0; b < 8; b++)
      hl[b] = (unsigned char)((len + pad) >> (8 * b));
    fwrite(hl, 1, 8, f);
    fputs(headers[i], f);
    for (size_t p = 0; p < pad + 4; p++)
      fputc(' ', f);
    fclose(f);
    err[0] = '\0';
    WD_CHECK_EQ_INT(wd_vad_model_load(tmp, &m, err, sizeof err), WD_EMODEL);
    fprintf(stderr, "  %s\n", err);
  }
  WD_CHECK(m == NULL);
  remove(tmp);
}

/* Reads a .probs file (one probability a line) into *ret. */
static size_t read_probs(const char *path, float **ret) {
  FILE *f = fopen(path, "r");
  size_t n = 0, cap = 0;
  float *v = NULL;
  double x;
  while (f && fscanf(f, "%lf", &x) == 1) {
    if (n == cap) {
      cap = cap ? 2 * cap : 1024;
      float *nv = realloc(v, cap * sizeof *v);
      if (!nv)
        break;
      v = nv;
    }
    v[n++] = (float)x;
  }
  if (f)
    fclose(f);
  *ret = v;
  return n;
}

/* Every case of speech.txt (tests/data/vad/make_speech_reference.py: silero's
 * own get_speech_timestamps_from_probs over the reference probabilities and
 * a synthetic sequence, eight parameter sets): the same spans, to the
 * sample. Needs no model. */
WD_TEST(speech_spans_are_silero_s) {
  FILE *f = fopen(WD_TEST_DATA_DIR "/vad/speech.txt", "r");
  WD_CHECK(f != NULL);
  if (!f)
    return;
  char line[16384];
  int cases = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    char name[64], path[512];
    unsigned long long n_samples;
    wd_vad_params_t p;
    int used = 0;
    if (sscanf(line, "%63s %llu %f %f %d %f %d %d %d %d : %n", name, &n_samples, &p.threshold,
               &p.neg_threshold, &p.min_speech_ms, &p.max_speech_s, &p.min_silence_ms,
               &p.speech_pad_ms, &p.min_silence_at_max_ms, &p.use_max_silence, &used) != 10) {
      bad++;
      continue;
    }
    snprintf(path, sizeof path, WD_TEST_DATA_DIR "/vad/%s.probs", name);
    float *probs = NULL;
    const size_t np = read_probs(path, &probs);
    wd_vad_span_t *sp = NULL;
    size_t n = 0, k = 0;
    int ok = np > 0 && wd_vad_speech(probs, np, (size_t)n_samples, &p, &sp, &n) == 0;
    const char *c = line + used;
    unsigned long long a, b;
    int adv;
    while (ok && sscanf(c, "%llu %llu%n", &a, &b, &adv) == 2) {
      ok = k < n && sp[k].start == a && sp[k].end == b;
      k++;
      c += adv;
    }
    ok = ok && k == n;
    if (!ok) {
      fprintf(stderr, "  differs: %s  ours:", line);
      for (size_t i = 0; i < n && i < 12; i++)
        fprintf(stderr, " %zu %zu", sp[i].start, sp[i].end);
      fprintf(stderr, "\n");
      bad++;
    }
    cases++;
    free(probs);
    free(sp);
  }
  fclose(f);
  fprintf(stderr, "  %d cases, %d differ\n", cases, bad);
  WD_CHECK(cases >= 32);
  WD_CHECK_EQ_INT(bad, 0);
}

/* Times on the joined signal back on the original one: spans [1.0, 2.0)
 * and [5.0, 7.5) s joined as [0, 1) and [1, 3.5). */
WD_TEST(times_map_back_to_the_original) {
  wd_vad_span_t spans[2] = { { 16000, 32000 }, { 80000, 120000 } };
  size_t joined[2] = { 0, 16000 };
  const wd_vad_map_t map = { spans, joined, 2, 160000 };
  WD_CHECK(wd_vad_map_time(&map, 0.0, 0) == 1.0);
  WD_CHECK(wd_vad_map_time(&map, 0.5, 1) == 1.5);
  WD_CHECK(wd_vad_map_time(&map, 1.0, 0) == 5.0); /* a start at the join: the second span */
  WD_CHECK(wd_vad_map_time(&map, 1.0, 1) == 2.0); /* an end there: the first one's end */
  WD_CHECK(wd_vad_map_time(&map, 3.5, 1) == 7.5);
  WD_CHECK(wd_vad_map_time(&map, 1.23456, 0) == 5.235); /* to the millisecond */
  /* A transcript: a word that starts just before the join moves whole
   * into the span its middle lies in; a segment with words spans them, one
   * without maps its own times; the duration is the whole file's. */
  wd_word_t w[2] = { { NULL, 0.2, 0.5, 1.0f }, { NULL, 0.98, 1.3, 1.0f } };
  wd_segment_t seg[2] = { { .start = 0.0, .end = 1.3, .words = w, .n_words = 2 },
                          { .start = 1.3, .end = 3.5 } };
  wd_transcript_t t = { .segments = seg, .n_segments = 2, .duration = 3.5 };
  wd_vad_map_transcript(&map, &t);
  WD_CHECK(w[0].start == 1.2 && w[0].end == 1.5 && w[1].start == 4.98 && w[1].end == 5.3);
  WD_CHECK(seg[0].start == 1.2 && seg[0].end == 5.3);
  WD_CHECK(seg[1].start == 5.3 && seg[1].end == 7.5);
  WD_CHECK(t.duration == 10.0);
}

WD_TEST(teardown) { wd_vad_model_free(g_vad); }

int main(void) { return wd_test_main(); }
