/*
 * test_win_ahead.c - a window made from the last window and the frames
 * made ahead (core/win_ahead.c) is bit for bit wd_mel_pcm_window's.
 *
 * 100 s of a chirp with noise (every frame different, a real maximum for
 * the clamp), 80 bins. The windows follow openai's seek loop: the next one
 * starts inside the last (at a timestamp), exactly at its end, past its end
 * (within the frames made ahead), the last one short and zero-padded, and a
 * jump the two cannot cover (the next VAD clip) is left to the caller. A
 * queue that refuses the task (its place held by another task), and a
 * free while the task still runs, are handled too.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "mel.h"
#include "mel_filters.h"
#include "taskq.h"
#include "wd_test.h"
#include "win_ahead.h"

#define W WD_MEL_N_PAD_FRAMES
#define N_MELS 80
#define SECONDS 100

static wd_mel_t *g_mel;
static wd_mel_pcm_t *g_pcm;
static wd_taskq_t *g_q;
static float *g_win, *g_ref;

static void setup(void) {
  if (g_pcm)
    return;
  float *filters = malloc(sizeof(float) * N_MELS * WD_MEL_N_BINS);
  WD_CHECK_EQ_INT(wd_mel_filters_slaney(N_MELS, WD_MEL_N_FFT, WD_MEL_SAMPLE_RATE, filters), 0);
  WD_CHECK_EQ_INT(wd_mel_new(N_MELS, filters, &g_mel), 0);
  free(filters);
  const size_t n = (size_t)SECONDS * WD_MEL_SAMPLE_RATE;
  int16_t *s = malloc(n * sizeof *s);
  uint32_t x = 7;
  for (size_t i = 0; i < n; i++) {
    const double t = (double)i / WD_MEL_SAMPLE_RATE;
    x = x * 1664525u + 1013904223u;
    const double v = 0.4 * sin(2 * 3.141592653589793 * (200 + 30 * t) * t) + 0.05 * ((double)(x >> 8) / 16777216.0 - 0.5);
    s[i] = (int16_t)lrint(v * 32767 * (0.5 + 0.5 * sin(t / 7)));
  }
  WD_CHECK_EQ_INT(wd_mel_pcm_new(g_mel, s, n, 1, &g_pcm), 0);
  WD_CHECK_EQ_INT(wd_taskq_new(1, 4, "test-ahead", &g_q), 0);
  g_win = malloc(sizeof(float) * N_MELS * W);
  g_ref = malloc(sizeof(float) * N_MELS * W);
}

/* The decoder's way: take, else compute; then note. Returns take's answer. */
static int next(wd_win_ahead_t *a, int seek, int size, int limit) {
  int took = wd_win_ahead_take(a, seek, size, g_win);
  if (!took)
    WD_CHECK_EQ_INT(wd_mel_pcm_window(g_pcm, seek, size, g_win), 0);
  WD_CHECK_EQ_INT(wd_mel_pcm_window(g_pcm, seek, size, g_ref), 0);
  WD_CHECK(memcmp(g_win, g_ref, sizeof(float) * N_MELS * W) == 0);
  wd_win_ahead_note(a, seek, size, limit);
  return took;
}

WD_TEST(windows_from_the_frames_made_ahead_are_the_direct_ones) {
  setup();
  const int content = SECONDS * 100; /* frames of audio; the padding follows */
  wd_win_ahead_t *a = NULL;
  WD_CHECK_EQ_INT(wd_win_ahead_new(g_pcm, g_q, &a), 0);
  WD_CHECK_EQ_INT(next(a, 0, W, content), 0);         /* the first: nothing noted yet */
  WD_CHECK_EQ_INT(next(a, 1234, W, content), 1);      /* inside the last: both parts */
  WD_CHECK_EQ_INT(next(a, 1234 + W, W, content), 1);  /* exactly at its end: the block alone */
  WD_CHECK_EQ_INT(next(a, 4234 + 2500, W, content), 1);
  /* The last window, one frame back from the last one's end: short and
   * zero-padded. */
  WD_CHECK_EQ_INT(next(a, 9733, content - 9733, content), 1);
  int served = 0, made = 0;
  wd_win_ahead_counts(a, &served, &made);
  WD_CHECK_EQ_INT(served, 4);
  WD_CHECK_EQ_INT(made, 4); /* nothing is made past the content's end */
  wd_win_ahead_free(a);
}

WD_TEST(windows_not_covered_are_left_to_the_caller) {
  setup();
  wd_win_ahead_t *a = NULL;
  WD_CHECK_EQ_INT(wd_win_ahead_new(g_pcm, g_q, &a), 0);
  WD_CHECK_EQ_INT(next(a, 0, W, 5000), 0);
  /* limit 5000 (the clip's end): the block stops there, so a window
   * reaching past it, or one in the next clip, is computed directly. */
  WD_CHECK_EQ_INT(wd_win_ahead_take(a, 2500, W, g_win), 0);
  WD_CHECK_EQ_INT(next(a, 2000, W, 5000), 1);
  WD_CHECK_EQ_INT(next(a, 7000, 2000, 9000), 0); /* a jump to the next clip */
  WD_CHECK_EQ_INT(wd_win_ahead_take(a, 6000, 100, g_win), 0); /* before the window noted */
  /* The detection window (real frames past a short file's end), then the
   * first window within it, shorter and padded. */
  WD_CHECK_EQ_INT(next(a, 0, W, W), 0);
  WD_CHECK_EQ_INT(next(a, 0, 1100, 1100), 1);
  /* A window that starts past the last one's end, within the block. */
  WD_CHECK_EQ_INT(next(a, 0, 2000, 10000), 0);
  WD_CHECK_EQ_INT(next(a, 2500, 2000, 10000), 1);
  wd_win_ahead_free(a);
}

/* A task that holds the queue's one place until released. */
static atomic_int g_release;
static void blocker(void *arg) {
  (void)arg;
  while (!atomic_load(&g_release))
    nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

WD_TEST(a_full_queue_and_a_free_while_running) {
  setup();
  wd_taskq_t *q = NULL;
  WD_CHECK_EQ_INT(wd_taskq_new(1, 1, "test-full", &q), 0);
  wd_win_ahead_t *a = NULL, *b = NULL;
  WD_CHECK_EQ_INT(wd_win_ahead_new(g_pcm, q, &a), 0);
  WD_CHECK_EQ_INT(wd_win_ahead_new(g_pcm, g_q, &b), 0);
  /* The queue's one place is taken: a's push is refused, so a's next
   * window is computed directly, and still right. */
  atomic_store(&g_release, 0);
  WD_CHECK_EQ_INT(wd_taskq_push(q, blocker, NULL), 0);
  WD_CHECK_EQ_INT(next(a, 0, W, SECONDS * 100), 0);
  int served = 0, made = 0;
  wd_win_ahead_counts(a, &served, &made);
  WD_CHECK_EQ_INT(made, 0);
  WD_CHECK_EQ_INT(next(a, 2000, W, SECONDS * 100), 0); /* past the window, no block */
  atomic_store(&g_release, 1);
  /* Free while the block is being made: b's task (on the other queue) is
   * queued or running. */
  WD_CHECK_EQ_INT(next(b, 0, W, SECONDS * 100), 0);
  wd_win_ahead_counts(b, &served, &made);
  WD_CHECK_EQ_INT(made, 1);
  wd_win_ahead_free(b); /* waits for its block */
  wd_win_ahead_free(a);
  wd_win_ahead_free(NULL);
  wd_taskq_free(q);
  WD_CHECK_EQ_INT(wd_win_ahead_new(NULL, g_q, &a), WD_EINVAL);
}

WD_TEST(teardown) {
  wd_taskq_free(g_q);
  wd_mel_pcm_free(g_pcm);
  wd_mel_free(g_mel);
  free(g_win);
  free(g_ref);
}

int main(void) { return wd_test_main(); }
