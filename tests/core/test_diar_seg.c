/*
 * test_diar_seg.c - core/diar_seg.c against pyannote's segmentation-3.0 as
 * pyannote.audio 4.0.7 runs it: the log-probabilities in
 * tests/data/diar/seg_*.logp.f32 (and SincNet's output of one window) were
 * written by tests/data/diar/make_seg_reference.py (PyTorch, float32, CPU)
 * for the windows listed in tests/data/diar/seg_windows.txt. Needs
 * models/diar-segmentation-3.0.safetensors (scripts/fetch-diarization.sh);
 * skips without it. Also: bad files, the powerset masks, the time per
 * window (printed, never checked).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audio.h"
#include "diar_gemm.h"
#include "diar_seg.h"
#include "error.h"
#include "vad_gemm.h"
#include "wd_diar_test.h"
#include "wd_test.h"

#define MODEL WD_SOURCE_DIR "/models/diar-segmentation-3.0.safetensors"
#define N_WIN 3
#define OUT (WD_DIAR_SEG_FRAMES * WD_DIAR_SEG_CLASSES)
/* Our f32 sums run in another order than PyTorch's (oneDNN convolutions,
 * MKL/OpenBLAS products), and the 4-layer bidirectional LSTM carries a
 * difference along 589 frames each way. Measured on these windows: SincNet's
 * features (instance-normalised, of order 1) within 2.1e-5 (7.3e-6 before
 * the sinc filters were folded by their symmetry, diar_seg.c fold()), the
 * log-probabilities within 6.8e-5 with the AVX2 kernels and 7.8e-5 with the
 * portable ones. The bounds leave about 2.5x of room for other CPUs and
 * compilers; a real error (a wrong tap, gate or norm) is off by 1e-2 or
 * more. */
#define TOL_FEATS 2e-4
#define TOL_LOGP 2e-4
/* Frames whose most likely class may differ from PyTorch's: a tie within
 * the tolerance above can flip an argmax; none did here. */
#define MAX_ARGMAX_FLIPS 2

static wd_diar_seg_t *g_seg;
static float *g_win[N_WIN];     /* the windows' samples */
static float *g_want[N_WIN];    /* PyTorch's log-probabilities */
static char g_name[N_WIN][32];

/* Window i of seg_windows.txt: name, WAV under tests/data, first sample,
 * samples taken; zeros after them. */
static int read_windows(void) {
  FILE *f = fopen(WD_TEST_DATA_DIR "/diar/seg_windows.txt", "r");
  if (!f)
    return -1;
  int rc = 0;
  for (size_t i = 0; i < N_WIN && !rc; i++) {
    char rel[128], path[512], err[256];
    size_t start, n;
    if (fscanf(f, "%31s %127s %zu %zu", g_name[i], rel, &start, &n) != 4 ||
        n > WD_DIAR_SEG_WINDOW) {
      rc = -1;
      break;
    }
    snprintf(path, sizeof path, WD_TEST_DATA_DIR "/%s", rel);
    int16_t *pcm = NULL;
    size_t len = 0;
    g_win[i] = calloc(WD_DIAR_SEG_WINDOW, sizeof(float));
    if (!g_win[i] || wd_audio_decode_file(path, NULL, &pcm, &len, err, sizeof err) < 0 ||
        start + n > len) {
      rc = -1;
    } else {
      for (size_t j = 0; j < n; j++)
        g_win[i][j] = (float)pcm[start + j] / 32768.0f;
      snprintf(path, sizeof path, WD_TEST_DATA_DIR "/diar/seg_%s.logp.f32", g_name[i]);
      if (!(g_want[i] = wd_diar_read_f32(path, OUT)))
        rc = -1;
    }
    free(pcm);
  }
  fclose(f);
  return rc;
}

WD_TEST(powerset_masks) {
  /* pyannote's Powerset(3, 2): sets by size, then lexicographically */
  static const unsigned want[WD_DIAR_SEG_CLASSES] = { 0x0, 0x1, 0x2, 0x4, 0x3, 0x5, 0x6 };
  for (int c = 0; c < WD_DIAR_SEG_CLASSES; c++)
    WD_CHECK_EQ_INT((int)wd_diar_powerset_mask(c), (int)want[c]);
  WD_CHECK_EQ_INT((int)wd_diar_powerset_mask(-1), 0);
  WD_CHECK_EQ_INT((int)wd_diar_powerset_mask(WD_DIAR_SEG_CLASSES), 0);
}

/* vad_gemm's lone-row kernel (the recurrence at batch 1) sums each output
 * in the same order as its 4-row block: the same bits, so a window's
 * log-probabilities do not depend on the batch it came in. */
WD_TEST(gemm_rows_same_bits) {
  enum { M = 5, N = 80, K = 37 };
  static float a[M * K], b[K * N], bias[N], c[M * N], r[N];
  uint64_t st = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < M * K; i++)
    a[i] = wd_test_uniform(&st);
  for (size_t i = 0; i < K * N; i++)
    b[i] = wd_test_uniform(&st);
  for (size_t i = 0; i < N; i++)
    bias[i] = wd_test_uniform(&st);
  wd_vad_gemm(a, K, b, N, bias, c, N, M, N, K);
  for (size_t m = 0; m < M; m++) {
    wd_vad_gemm(a + m * K, K, b, N, bias, r, N, 1, N, K);
    WD_CHECK(memcmp(r, c + m * N, sizeof r) == 0);
  }
}

WD_TEST(setup) {
  char err[256] = "";
  FILE *f = fopen(MODEL, "rb");
  if (!f)
    wd_test_skip("models/diar-segmentation-3.0.safetensors not present "
                 "(scripts/fetch-diarization.sh)");
  fclose(f);
  WD_CHECK_EQ_INT(wd_diar_seg_load(MODEL, &g_seg, err, sizeof err), 0);
  WD_CHECK_EQ_INT(read_windows(), 0);
  fprintf(stderr, "  kernel: %s\n", wd_vad_gemm_kernel());
}

WD_TEST(sincnet_matches_pytorch) {
  if (!g_seg || !g_win[2])
    wd_test_skip("no model");
  const size_t n = WD_DIAR_SEG_FRAMES * 60;
  float *want = wd_diar_read_f32(WD_TEST_DATA_DIR "/diar/seg_jfk_5s.sincnet.f32", n);
  float *got = malloc(n * sizeof *got);
  WD_CHECK(want && got);
  if (want && got) {
    WD_CHECK_EQ_INT(wd__diar_seg_sincnet(g_seg, g_win[2], got), 0);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++)
      worst = fmax(worst, fabs((double)got[i] - want[i]));
    fprintf(stderr, "  jfk_5s SincNet: max |ours - pytorch| %.2e\n", worst);
    WD_CHECK(worst <= TOL_FEATS);
  }
  free(want), free(got);
}

/* Max |diff| and argmax disagreements of out (n_win windows) against the
 * reference, printed per window. */
static void compare(const float *out, const char *what) {
  for (size_t w = 0; w < N_WIN; w++) {
    double worst = 0.0;
    int flips = 0;
    for (size_t f = 0; f < WD_DIAR_SEG_FRAMES; f++) {
      const float *a = out + w * OUT + f * WD_DIAR_SEG_CLASSES,
                  *b = g_want[w] + f * WD_DIAR_SEG_CLASSES;
      int ia = 0, ib = 0;
      for (int c = 0; c < WD_DIAR_SEG_CLASSES; c++) {
        worst = fmax(worst, fabs((double)a[c] - b[c]));
        ia = a[c] > a[ia] ? c : ia;
        ib = b[c] > b[ib] ? c : ib;
      }
      flips += ia != ib;
    }
    fprintf(stderr, "  %s %s: max |ours - pytorch| %.2e, argmax differs on %d of %d frames\n",
            what, g_name[w], worst, flips, WD_DIAR_SEG_FRAMES);
    WD_CHECK(worst <= TOL_LOGP);
    WD_CHECK(flips <= MAX_ARGMAX_FLIPS);
  }
}

WD_TEST(logp_matches_pytorch) {
  if (!g_seg || !g_want[N_WIN - 1])
    wd_test_skip("no model");
  float *out = malloc(N_WIN * OUT * sizeof *out), *one = malloc(OUT * sizeof *one);
  WD_CHECK(out && one);
  if (!out || !one)
    goto out;
  const float *const *wins = (const float *const *)g_win;
  WD_CHECK_EQ_INT(wd_diar_seg_forward(g_seg, wins, N_WIN, out), 0);
  compare(out, "batch of 3");
  /* A window alone gives the same bits as in a batch: every product's row
   * is summed in the same order whatever the batch. */
  for (size_t w = 0; w < N_WIN; w++) {
    WD_CHECK_EQ_INT(wd_diar_seg_forward(g_seg, wins + w, 1, one), 0);
    WD_CHECK(memcmp(one, out + w * OUT, OUT * sizeof *one) == 0);
  }
out:
  free(out), free(one);
}

/* The portable kernel (arm64, x86 without AVX2) gives the same answers. */
WD_TEST(portable_kernel_matches_pytorch) {
  if (!g_seg || !g_want[N_WIN - 1])
    wd_test_skip("no model");
  float *out = malloc(N_WIN * OUT * sizeof *out);
  WD_CHECK(out != NULL);
  if (out) {
    wd_vad_gemm_force_portable(1);
    wd_diar_gemm_force_portable(1);
    WD_CHECK_EQ_INT(wd_diar_seg_forward(g_seg, (const float *const *)g_win, N_WIN, out), 0);
    wd_diar_gemm_force_portable(0);
    wd_vad_gemm_force_portable(0);
    compare(out, "portable");
  }
  free(out);
}

WD_TEST(zero_windows) {
  if (!g_seg)
    wd_test_skip("no model");
  float x = -1.0f;
  WD_CHECK_EQ_INT(wd_diar_seg_forward(g_seg, NULL, 0, &x), 0);
  WD_CHECK(x == -1.0f);
  /* silence: finite log-probabilities, "nobody speaks" most likely */
  float *z = calloc(WD_DIAR_SEG_WINDOW, sizeof *z), *out = malloc(OUT * sizeof *out);
  WD_CHECK(z && out);
  if (z && out) {
    const float *w = z;
    WD_CHECK_EQ_INT(wd_diar_seg_forward(g_seg, &w, 1, out), 0);
    int finite = 1, silent = 1;
    for (size_t f = 0; f < WD_DIAR_SEG_FRAMES; f++)
      for (int c = 0; c < WD_DIAR_SEG_CLASSES; c++) {
        finite &= isfinite(out[f * WD_DIAR_SEG_CLASSES + c]) != 0;
        silent &= out[f * WD_DIAR_SEG_CLASSES] >= out[f * WD_DIAR_SEG_CLASSES + c];
      }
    WD_CHECK(finite);
    WD_CHECK(silent);
  }
  free(z), free(out);
}

/* ------------------------------------------------------------------------ */
/* Bad files                                                                 */

static unsigned char *g_file;
static size_t g_file_len;

/* The model file with the first occurrence of from replaced by to (same
 * length), the first len bytes of it written to path; 0 or -1. */
static int write_variant(const char *path, size_t len, const char *from, const char *to) {
  if (!g_file) {
    FILE *f = fopen(MODEL, "rb");
    if (!f)
      return -1;
    fseek(f, 0, SEEK_END);
    g_file_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g_file = malloc(g_file_len);
    const size_t got = g_file ? fread(g_file, 1, g_file_len, f) : 0;
    fclose(f);
    if (got != g_file_len)
      return -1;
  }
  unsigned char *buf = malloc(g_file_len);
  if (!buf)
    return -1;
  memcpy(buf, g_file, g_file_len);
  if (from) {
    const size_t n = strlen(from);
    unsigned char *at = NULL;
    for (size_t i = 0; i + n <= 65536 && i + n <= g_file_len && !at; i++)
      if (memcmp(buf + i, from, n) == 0)
        at = buf + i;
    if (!at || strlen(to) != n) {
      free(buf);
      return -1;
    }
    memcpy(at, to, n);
  }
  FILE *f = fopen(path, "wb");
  const int ok = f && fwrite(buf, 1, len, f) == len;
  if (f)
    fclose(f);
  free(buf);
  return ok ? 0 : -1;
}

/* Loading path fails with code and an error containing want. */
static void check_refused(const char *path, int code, const char *want) {
  char err[512] = "";
  wd_diar_seg_t *m = (wd_diar_seg_t *)&err; /* must be reset to NULL */
  const int rc = wd_diar_seg_load(path, &m, err, sizeof err);
  fprintf(stderr, "  refused: %s\n", err);
  WD_CHECK_EQ_INT(rc, code);
  WD_CHECK(m == NULL);
  WD_CHECK(strstr(err, want) != NULL);
}

WD_TEST(bad_files_refused_clearly) {
  if (!g_seg)
    wd_test_skip("no model");
  char path[64];
  snprintf(path, sizeof path, "/tmp/wd_test_diar_seg_%ld.safetensors", (long)getpid());
  check_refused("/nonexistent/seg.safetensors", WD_ENOENT, "cannot open");
  /* truncated: the tensors' bytes end early */
  WD_CHECK_EQ_INT(write_variant(path, 3000000, NULL, NULL), 0);
  check_refused(path, WD_EMODEL, "data offsets out of the file");
  /* truncated inside the header */
  WD_CHECK_EQ_INT(write_variant(path, 100, NULL, NULL), 0);
  check_refused(path, WD_EMODEL, "not a safetensors file");
  /* another format, another model of the same format */
  WD_CHECK_EQ_INT(write_variant(path, g_file_len, "\"format\":\"whisperd-diarization\"",
                                "\"format\":\"whisperd-silero-vadX\""), 0);
  check_refused(path, WD_EMODEL, "not a whisperd-diarization file of version 1");
  WD_CHECK_EQ_INT(write_variant(path, g_file_len, "\"model\":\"pyannote-segmentation-3.0\"",
                                "\"model\":\"campplus-zh-en-common-3.0\""), 0);
  check_refused(path, WD_EMODEL, "not a pyannote segmentation-3.0 file");
  /* a tensor of the wrong shape, a missing one */
  WD_CHECK_EQ_INT(write_variant(path, g_file_len, "\"shape\":[7,128]", "\"shape\":[7,127]"), 0);
  check_refused(path, WD_EMODEL, "classifier.weight has another shape than the expected [7, 128]");
  WD_CHECK_EQ_INT(write_variant(path, g_file_len, "\"linear.1.bias\"", "\"linear.1.bia_\""), 0);
  check_refused(path, WD_EMODEL, "tensor linear.1.bias missing");
  /* the unchanged bytes load */
  WD_CHECK_EQ_INT(write_variant(path, g_file_len, NULL, NULL), 0);
  char err[256];
  wd_diar_seg_t *m = NULL;
  WD_CHECK_EQ_INT(wd_diar_seg_load(path, &m, err, sizeof err), 0);
  wd_diar_seg_free(m);
  wd_diar_seg_free(NULL);
  remove(path);
}

/* This thread's CPU time: the machines that run the suite are shared, and
 * wall time counts the other processes' turns. */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ms per 10 s window on this thread, batches of 1 and 8 (printed only). */
WD_TEST(speed) {
  if (!g_seg || !g_win[0])
    wd_test_skip("no model");
  const float *wins[8];
  for (size_t i = 0; i < 8; i++)
    wins[i] = g_win[i % N_WIN];
  float *out = malloc(8 * OUT * sizeof *out);
  WD_CHECK(out != NULL);
  if (!out)
    return;
  static const size_t batch[2] = { 1, 8 };
  for (size_t b = 0; b < 2; b++) {
    /* best of 3, or of fewer where a run takes seconds (the sanitizer trees) */
    double best = 1e30, spent = 0.0;
    int reps = 0;
    while (reps < 3 && spent < 2000.0) {
      const double t0 = now_ms();
      WD_CHECK_EQ_INT(wd_diar_seg_forward(g_seg, wins, batch[b], out), 0);
      const double t = now_ms() - t0;
      best = fmin(best, t / (double)batch[b]);
      spent += t;
      reps++;
    }
    fprintf(stderr, "  batch %zu: %.1f ms of CPU per 10 s window (one thread, best of %d)\n",
            batch[b], best, reps);
  }
  free(out);
}

WD_TEST(teardown) {
  wd_diar_seg_free(g_seg);
  for (size_t i = 0; i < N_WIN; i++)
    free(g_win[i]), free(g_want[i]);
  free(g_file);
}

int main(void) { return wd_test_main(); }
