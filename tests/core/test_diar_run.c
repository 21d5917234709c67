/*
 * test_diar_run.c - the whole diarization pipeline (core/diar.h) with the
 * real networks on pyannote.audio's 30 s two-speaker sample.wav
 * (tests/data/audio/diar/, with its reference sample.rttm): two speakers,
 * a frame-level diarization error against the reference within a bound, the
 * known-speaker embedding of a clip of one speaker nearest that speaker's
 * centroid, the speaker bounds, silence, cancellation and the clip checks.
 *
 * Needs models/diar-segmentation-3.0.safetensors and
 * models/diar-campplus-zh-en.safetensors (scripts/fetch-diarization.sh);
 * skips without them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "audio.h"
#include "diar.h"
#include "error.h"
#include "wd_test.h"

#define SEG WD_SOURCE_DIR "/models/diar-segmentation-3.0.safetensors"
#define EMB WD_SOURCE_DIR "/models/diar-campplus-zh-en.safetensors"
#define WAV WD_TEST_DATA_DIR "/audio/diar/sample.wav"
#define RTTM WD_TEST_DATA_DIR "/audio/diar/sample.rttm"
#define SR WD_DIAR_SAMPLE_RATE

static wd_diar_t *g_d;
static float *g_pcm;
static size_t g_n;

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1: the model and the signal are loaded; 0: they failed to (checked);
 * -1: the model files are absent. */
static int setup(void) {
  if (g_d)
    return 1;
  struct stat st;
  if (stat(SEG, &st) != 0 || stat(EMB, &st) != 0)
    return -1;
  char err[256] = "";
  WD_CHECK_EQ_INT(wd_diar_load(SEG, EMB, &g_d, err, sizeof err), 0);
  int16_t *s16 = NULL;
  WD_CHECK_EQ_INT(wd_audio_decode_file(WAV, NULL, &s16, &g_n, err, sizeof err), 0);
  if (!g_d || !s16)
    return 0;
  g_pcm = malloc(g_n * sizeof *g_pcm);
  for (size_t i = 0; g_pcm && i < g_n; i++)
    g_pcm[i] = (float)s16[i] / 32768.0f;
  free(s16);
  return g_pcm != NULL;
}

/* Frame-level (10 ms) diarization error of r against sample.rttm, overlap
 * scored, no collar, with the better of the two speaker mappings: (missed +
 * false alarm + confused speaker-frames) / reference speaker-frames. */
static double frame_der(const wd_diar_result_t *r) {
  enum { NF = 3000 };
  static uint8_t ref[NF][2], hyp[NF][2];
  memset(ref, 0, sizeof ref);
  memset(hyp, 0, sizeof hyp);
  FILE *f = fopen(RTTM, "r");
  if (!f)
    return 1.0;
  char spk[64];
  double s, d;
  while (fscanf(f, "SPEAKER %*s %*d %lf %lf %*s %*s %63s %*s %*s\n", &s, &d, spk) == 3) {
    const int k = strcmp(spk, "speaker90") == 0 ? 0 : 1;
    for (long i = lrint(s * 100); i < lrint((s + d) * 100) && i < NF; i++)
      ref[i][k] = 1;
  }
  fclose(f);
  for (size_t t = 0; t < r->n_turns; t++) {
    if (r->turns[t].speaker > 1)
      continue; /* a third speaker counts as false alarm below */
    for (long i = lrint(r->turns[t].start * 100); i < lrint(r->turns[t].end * 100) && i < NF; i++)
      hyp[i][r->turns[t].speaker] = 1;
  }
  double best = 1e9, total = 0;
  for (int i = 0; i < NF; i++)
    total += ref[i][0] + ref[i][1];
  for (int swap = 0; swap < 2; swap++) {
    double err = 0;
    for (int i = 0; i < NF; i++) {
      const int h0 = hyp[i][swap], h1 = hyp[i][1 - swap];
      const int nr = ref[i][0] + ref[i][1], nh = h0 + h1;
      const int correct = (ref[i][0] && h0) + (ref[i][1] && h1);
      err += (nr > nh ? nr : nh) - correct; /* pyannote's DER per frame */
    }
    if (err < best)
      best = err;
  }
  return total > 0 ? best / total : 1.0;
}

WD_TEST(sample_two_speakers) {
  const int ready = setup();
  if (ready < 0)
    wd_test_skip("models/diar-*.safetensors not present (scripts/fetch-diarization.sh)");
  if (ready <= 0)
    return;
  wd_diar_params_t p;
  wd_diar_params_default(&p);
  wd_diar_result_t r;
  const double t0 = cpu_s();
  WD_CHECK_EQ_INT(wd_diar_run(g_d, g_pcm, g_n, &p, NULL, NULL, &r), 0);
  const double dt = cpu_s() - t0;
  printf("sample.wav: %d speakers, %zu turns, %.0f ms CPU (%.0f ms per 10 s of audio)\n",
         r.n_speakers, r.n_turns, dt * 1e3, dt * 1e3 / ((double)g_n / SR / 10.0));
  for (size_t i = 0; i < r.n_turns; i++)
    printf("  %6.2f %6.2f %c\n", r.turns[i].start, r.turns[i].end, 'A' + r.turns[i].speaker);
  WD_CHECK_EQ_INT(r.n_speakers, 2);
  for (size_t i = 0; i < r.n_turns; i++) {
    WD_CHECK(r.turns[i].start < r.turns[i].end);
    WD_CHECK(r.turns[i].end <= (double)g_n / SR + 1e-9);
    WD_CHECK(i == 0 || r.turns[i - 1].start <= r.turns[i].start);
  }
  const double der = frame_der(&r);
  printf("frame DER against sample.rttm (no collar, overlap scored): %.3f\n", der);
  WD_CHECK(der < 0.25);

  /* A clip of one speaker alone (speaker91, 14.8-17.8 s in the reference)
   * is nearest the centroid of the speaker the pipeline gave that time. */
  float emb[WD_DIAR_EMB_DIM];
  WD_CHECK_EQ_INT(wd_diar_embed_clip(g_d, g_pcm + 148 * SR / 10, 3 * SR, emb), 0);
  int at = -1;
  for (size_t i = 0; i < r.n_turns; i++)
    if (r.turns[i].start <= 16.0 && r.turns[i].end >= 16.0)
      at = r.turns[i].speaker;
  WD_CHECK(at >= 0);
  if (at >= 0 && r.centroids && r.n_speakers == 2) {
    double sim[2] = { 0, 0 }, n2 = 0;
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < WD_DIAR_EMB_DIM; i++)
        sim[k] += (double)emb[i] * r.centroids[k * WD_DIAR_EMB_DIM + i];
    for (int i = 0; i < WD_DIAR_EMB_DIM; i++)
      n2 += (double)emb[i] * emb[i];
    printf("clip at 14.8 s: cosine %.3f to its speaker, %.3f to the other\n", sim[at],
           sim[1 - at]);
    WD_CHECK_NEAR(n2, 1.0, 1e-4);
    WD_CHECK(sim[at] > sim[1 - at]);
  }
  wd_diar_result_free(&r);
}

WD_TEST(bounds_silence_cancel_and_clip_checks) {
  const int ready = setup();
  if (ready < 0)
    wd_test_skip("models/diar-*.safetensors not present (scripts/fetch-diarization.sh)");
  if (ready <= 0)
    return;
  wd_diar_params_t p;
  wd_diar_params_default(&p);
  wd_diar_result_t r;
  p.max_speakers = 1;
  WD_CHECK_EQ_INT(wd_diar_run(g_d, g_pcm, g_n, &p, NULL, NULL, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 1);
  wd_diar_result_free(&r);
  p.min_speakers = 2; /* crossed bounds */
  WD_CHECK_EQ_INT(wd_diar_run(g_d, g_pcm, g_n, &p, NULL, NULL, &r), WD_EINVAL);

  wd_diar_params_default(&p);
  float *zeros = calloc(5 * SR, sizeof *zeros);
  if (zeros) {
    WD_CHECK_EQ_INT(wd_diar_run(g_d, zeros, 5 * SR, &p, NULL, NULL, &r), 0);
    WD_CHECK_EQ_INT(r.n_speakers, 0);
    WD_CHECK_EQ_INT(r.n_turns, 0);
    wd_diar_result_free(&r);
    float emb[WD_DIAR_EMB_DIM];
    WD_CHECK_EQ_INT(wd_diar_embed_clip(g_d, zeros, SR / 4, emb), WD_EINVAL);
    free(zeros);
  }
  WD_CHECK_EQ_INT(wd_diar_run(g_d, g_pcm, 0, &p, NULL, NULL, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 0);
}

static int stop_now(void *arg) {
  (void)arg;
  return 1;
}

WD_TEST(cancel_between_windows) {
  const int ready = setup();
  if (ready < 0)
    wd_test_skip("models/diar-*.safetensors not present (scripts/fetch-diarization.sh)");
  if (ready <= 0)
    return;
  wd_diar_params_t p;
  wd_diar_params_default(&p);
  wd_diar_result_t r;
  WD_CHECK_EQ_INT(wd_diar_run(g_d, g_pcm, g_n, &p, stop_now, NULL, &r), WD_ECANCELED);
  WD_CHECK(r.turns == NULL && r.n_speakers == 0);
}

WD_TEST(teardown) {
  wd_diar_free(g_d);
  free(g_pcm);
  g_d = NULL;
  g_pcm = NULL;
}

int main(void) {
  return wd_test_main();
}
