/*
 * bench_engine.c - the Vulkan engine (or the CPU engine) on a real model and real audio:
 * encoder ms per 30 s window, cross-K/V ms, decoder ms per token and
 * dispatches per token (GPU timestamps), the encoder's achieved GFLOP/s, and
 * the end-to-end real-time factor of a transcription (model load included).
 * A benchmark, not a test: it prints figures and never fails on speed.
 *
 * Usage: bench_engine MODEL AUDIO [repeats, default 3] [cpu[:COMPUTE] | vk:GEMM]
 * (vk:GEMM: the Vulkan engine with that GEMM kernel, e.g. vk:tiled-64x64)
 * With `cpu` the native CPU engine (cpu/) runs instead of the Vulkan one
 * (cpu:int8, cpu:bf16: with that --compute-type);
 * its times are host wall-clock, and the Vulkan-only figures (dispatches,
 * GPU profile) are left out.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode.h"
#include "error.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "cpu_engine.h"
#include "vk_engine.h"
#include "bench_util.h"
#include "wd_audio_f32.h"
#include "wd_transcribe.h"

/* The figures both engines give, as the Vulkan engine's stats name them. */
typedef struct {
  wd_vk_engine_t *vk;
  wd_cpu_engine_t *cpu;
} bench_eng_t;

static void eng_stats(const bench_eng_t *b, wd_vk_engine_stats_t *st) {
  if (b->vk) {
    wd_vk_engine_stats(b->vk, st);
    return;
  }
  wd_cpu_engine_stats_t cs;
  wd_cpu_engine_stats(b->cpu, &cs);
  memset(st, 0, sizeof *st);
  st->encode_ms = cs.encode_ms;
  st->cross_ms = cs.cross_ms;
  st->step_ms = cs.step_ms;
  st->n_steps = cs.n_steps;
  st->device_mib = cs.weight_mib;
  st->device_name = cs.kernel;
}

/* The CPU engine's self-attention ms in its last encode (-1 on Vulkan). */
static double eng_attn_ms(const bench_eng_t *b) {
  if (!b->cpu)
    return -1.0;
  wd_cpu_engine_stats_t cs;
  wd_cpu_engine_stats(b->cpu, &cs);
  return cs.attn_ms;
}

static const wd_engine_t *eng_iface(const bench_eng_t *b) {
  return b->vk ? wd_vk_engine_iface(b->vk) : wd_cpu_engine_iface(b->cpu);
}

/* FLOPs of one encoder window: convolutions, projections, attention, MLP. */
static double encoder_flops(const wd_hparams_t *hp) {
  const double d = hp->n_audio_state, n = hp->n_audio_ctx, T = 2 * n, L = hp->n_audio_layer;
  const double conv = 2.0 * T * d * hp->n_mels * 3 + 2.0 * n * d * d * 3;
  const double layer = 2.0 * n * d * d * 4 /* q k v out */ + 2.0 * n * n * d * 2 /* QK, PV */ +
                       2.0 * n * d * 4 * d * 2 /* fc1 fc2 */;
  return conv + L * layer;
}

void openblas_set_num_threads(int n);

/* OpenBLAS sgemm (2 threads) over the encoder's matrix products for one
 * window, same shapes as the engine runs: the CPU baseline, in this run.
 * Returns seconds (best of 3). */
static double openblas_encoder_s(const wd_hparams_t *hp) {
  const int d = hp->n_audio_state, n = hp->n_audio_ctx, nm = hp->n_mels, nh = hp->n_audio_head;
  const int dh = d / nh;
  struct { int M, N, K, reps; } sh[] = {
    { 2 * n, d, nm * 3, 1 },                  /* conv1 as im2col GEMM */
    { n, d, d * 3, 1 },                       /* conv2 */
    { n, d, d, 4 * hp->n_audio_layer },       /* q, k, v, out */
    { n, 4 * d, d, hp->n_audio_layer },       /* fc1 */
    { n, d, 4 * d, hp->n_audio_layer },       /* fc2 */
    { n, n, dh, nh * hp->n_audio_layer },     /* Q.K^T per head */
    { n, dh, n, nh * hp->n_audio_layer },     /* P.V per head */
  };
  const size_t big = (size_t)2 * n * 4 * d + (size_t)n * n;
  float *a = calloc(big, 4), *b = calloc(big, 4), *c = calloc(big, 4);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return -1.0;
  }
  for (size_t i = 0; i < big; i++)
    a[i] = b[i] = (float)(i % 97) * 0.01f;
  openblas_set_num_threads(2);
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    const double t0 = bench_now_s();
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
      for (int k = 0; k < sh[i].reps; k++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sh[i].M, sh[i].N, sh[i].K, 1.0f, a,
                    sh[i].K, b, sh[i].K, 0.0f, c, sh[i].N);
    const double t = bench_now_s() - t0;
    if (t < best)
      best = t;
  }
  free(a), free(b), free(c);
  return best;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_engine MODEL AUDIO [repeats] [cpu]\n");
    return 2;
  }
  const int reps = argc > 3 && atoi(argv[3]) > 0 ? atoi(argv[3]) : 3;
  const int use_cpu = argc > 4 && strncmp(argv[4], "cpu", 3) == 0;
  wd_cpu_compute_t compute = WD_CPU_COMPUTE_F32;
  if (use_cpu && argv[4][3] && (argv[4][3] != ':' || wd_cpu_compute_parse(argv[4] + 4, &compute) < 0)) {
    fprintf(stderr, "bench_engine: %s: cpu, cpu:f32, cpu:bf16 or cpu:int8\n", argv[4]);
    return 2;
  }
  char err[512] = "";
  const double t0 = bench_now_s();
  wd_model_t *m = NULL;
  wd_tokenizer_t *tok = NULL;
  wd_mel_t *mel = NULL;
  bench_eng_t be = { 0 };
  float *pcm = NULL;
  size_t n = 0;
  int n_mel = 0, n_fft = 0, rc;
  const wd_audio_opts_t ao = { 0 };
  wd_vk_engine_opts_t eo = { .device = -1, .max_seqs = 1, .max_audio = 1, .profile = true };
  /* vk:f32 is --vk-precision f32; vk:fused the encoder's fused attention
   * (vk_engine.h attn_fused); vk:NAME forces one GEMM family. */
  if (argc > 4 && strcmp(argv[4], "vk:f32") == 0)
    eo.exact = true;
  else if (argc > 4 && strcmp(argv[4], "vk:fused") == 0)
    eo.attn_fused = true;
  else if (argc > 4 && strncmp(argv[4], "vk:", 3) == 0 &&
           wd_vk_gemm_family_parse(argv[4] + 3, &eo.gemm) < 0) {
    fprintf(stderr, "bench_engine: %s: unknown GEMM kernel\n", argv[4]);
    return 2;
  }
  const float *filters = NULL;
  if ((rc = wd_model_load(argv[1], &m, err, sizeof err)) == 0)
    filters = wd_model_mel_filters(m, &n_mel, &n_fft);
  if (rc < 0 || (rc = wd_model_tokenizer_new(m, &tok)) < 0 ||
      (rc = wd_mel_new(n_mel, filters, &mel)) < 0 ||
      (rc = use_cpu ? wd_cpu_engine_new(m,
                                        &(wd_cpu_engine_opts_t){ .max_seqs = 1, .max_audio = 1,
                                                                 .compute = compute },
                                        &be.cpu, err, sizeof err)
                    : wd_vk_engine_new(m, &eo, &be.vk, err, sizeof err)) < 0) {
    fprintf(stderr, "bench_engine: %s %s\n", wd_strerror(rc), err);
    return 1;
  }
  const double t_load = bench_now_s() - t0;
  wd_vk_engine_stats_t st;
  eng_stats(&be, &st);
  if (be.vk)
    printf("model %s on %s: load + plan %.0f ms, %.1f MiB on the device, GEMM %s, "
           "attention %s, prefill %s\n",
           wd_model_name(m), st.device_name, t_load * 1e3, st.device_mib, st.gemm, st.gemm_attn,
           st.gemm_rows);
  else
    printf("model %s on the CPU engine (%s): load + plan %.0f ms, %.1f MiB of weights\n",
           wd_model_name(m), st.device_name, t_load * 1e3, st.device_mib);
  double best_total = 1e30, best_enc = 1e30, best_cross = 1e30, best_attn = 1e30, sum_step = 0;
  unsigned long long steps = 0;
  double dur = 0;
  for (int r = 0; r < reps; r++) {
    const double a = bench_now_s();
    wd_transcript_t tr;
    free(pcm);
    pcm = NULL;
    if ((rc = wd_test_audio_decode_file(argv[2], &ao, &pcm, &n, err, sizeof err)) < 0) {
      fprintf(stderr, "bench_engine: %s %s\n", wd_strerror(rc), err);
      return 1;
    }
    wd_decode_opts_t o;
    wd_decode_opts_default(&o);
    const unsigned long long s0 = (eng_stats(&be, &st), st.n_steps);
    if ((rc = wd_test_transcribe(eng_iface(&be), tok, mel, pcm, n, &o, &tr)) < 0) {
      fprintf(stderr, "bench_engine: decode: %s\n", wd_strerror(rc));
      return 1;
    }
    const double t = bench_now_s() - a;
    eng_stats(&be, &st);
    dur = tr.duration;
    if (r == 0)
      printf("text:%s\n", tr.text);
    wd_transcript_free(&tr);
    if (t < best_total)
      best_total = t;
    if (st.encode_ms < best_enc)
      best_enc = st.encode_ms;
    if (st.cross_ms < best_cross)
      best_cross = st.cross_ms;
    if (eng_attn_ms(&be) < best_attn)
      best_attn = eng_attn_ms(&be);
    sum_step += st.step_ms;
    steps += st.n_steps - s0;
  }
  const double gf = encoder_flops(wd_model_hparams(m)) / (best_enc * 1e6);
  const double blas_s = openblas_encoder_s(wd_model_hparams(m));
  printf("encoder:        %8.1f ms per 30 s window (%u dispatches, %.1f GFLOP/s)\n", best_enc,
         st.encode_dispatches, gf);
  if (best_attn >= 0.0) {
    const wd_hparams_t *hp = wd_model_hparams(m);
    const double af = 4.0 * hp->n_audio_ctx * hp->n_audio_ctx * (double)hp->n_audio_state *
                      hp->n_audio_layer;
    printf("                of which self-attention %.1f ms (%.1f GFLOP/s)\n", best_attn,
           af / (best_attn * 1e6));
  }
  printf("                OpenBLAS sgemm, 2 threads, the same matrix products: %.1f ms "
         "(%.1f GFLOP/s); the engine reaches %.0f%% of it\n",
         blas_s * 1e3, encoder_flops(wd_model_hparams(m)) / (blas_s * 1e9),
         100.0 * blas_s * 1e3 / best_enc);
  printf("cross K/V:      %8.1f ms per window, all decoder layers\n", best_cross);
  printf("decoder step:   %8.2f ms per token (last step of each run, %u dispatches)\n",
         sum_step / reps, st.step_dispatches);
  printf("tokens:         %llu decoder steps per transcription\n", steps / (unsigned)reps);
  printf("end to end:     %8.0f ms for %.2f s of audio (best of %d), real-time factor %.3f;\n"
         "                with model load and planning: %.0f ms\n",
         best_total * 1e3, dur, reps, best_total / dur, (best_total + t_load) * 1e3);
  /* A 224-token prompt (the longest openai sends) in one prefill vs 224
   * steps, on the window of the last run; best of the repeats, wall clock
   * around the calls and GPU time of the prefill. */
  {
    const wd_engine_t *e = eng_iface(&be);
    enum { NP = 224 };
    int32_t toks[NP];
    for (int i = 0; i < NP; i++)
      toks[i] = i < 2 ? (i ? 50363 : 50257) : 200 + (i * 7919) % 20000;
    double best_pf = 1e30, best_pf_gpu = 1e30, best_st = 1e30;
    const float *lg = NULL;
    const int s0 = 0;
    for (int r = 0; r < reps && rc == 0; r++) {
      double a = bench_now_s();
      if ((rc = e->seq_reset(e->self, 0, 0)) == 0)
        rc = e->prefill(e->self, 0, NP, toks, &lg);
      const double t_pf = bench_now_s() - a;
      eng_stats(&be, &st);
      a = bench_now_s();
      if (rc == 0)
        rc = e->seq_reset(e->self, 0, 0);
      for (int i = 0; i < NP && rc == 0; i++)
        rc = e->step(e->self, 1, &s0, &toks[i], &lg);
      const double t_st = bench_now_s() - a;
      best_pf = t_pf < best_pf ? t_pf : best_pf;
      best_pf_gpu = st.prefill_ms < best_pf_gpu ? st.prefill_ms : best_pf_gpu;
      best_st = t_st < best_st ? t_st : best_st;
    }
    if (rc == 0)
      printf("prompt of %d:  %8.1f ms in one prefill (GPU %.1f ms) vs %.1f ms in %d steps "
             "(%.1fx)\n",
             NP, best_pf * 1e3, best_pf_gpu, best_st * 1e3, NP, best_st / best_pf);
    else
      fprintf(stderr, "bench_engine: prefill: %s\n", wd_strerror(rc));
  }
  static const char *const prof_name[] = { "encoder", "decoder step", "prefill of 224" };
  for (int which = 0; which < 3; which++) {
    wd_vk_prof_row_t rows[32];
    int nr = 0;
    if (!be.vk || wd_vk_engine_profile(be.vk, which, rows, 32, &nr) < 0)
      continue;
    printf("%s, by operation (last run, GPU ms):\n", prof_name[which]);
    for (int i = 0; i < nr; i++)
      printf("  %-14s %9.2f ms  (%u)\n", rows[i].kind, rows[i].ms, rows[i].count);
  }
  free(pcm);
  wd_vk_engine_free(be.vk);
  wd_cpu_engine_free(be.cpu);
  wd_mel_free(mel);
  wd_tokenizer_free(tok);
  wd_model_free(m);
  return 0;
}
