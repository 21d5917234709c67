/*
 * bench_gemm.c - the encoder's GEMM shapes on the Vulkan device next to
 * OpenBLAS sgemm on the host, in the same run.
 *
 * C[M, N] = A[M, K] * B[N, K]^T for the Linear layers of tiny, base and
 * large-v3(-turbo), M = 1500 (audio frames per 30 s window), the 256-row
 * prefill recording (prompts of 129..256 tokens) at the large shape, and one
 * head's attention products.
 * GPU time: one command buffer holds GPU_REPS dispatches of the shape, a
 * barrier and a timestamp after each; it is submitted 3 times and the best
 * delta counts. All GPU shapes run first, back to back, then OpenBLAS (best
 * of REPS wall-clock runs of cblas_sgemm with B in f32): a GPU left idle
 * while the host computes drops its clocks, and single dispatches then
 * measure the idle clock (an NVIDIA H200 ran the same kernel 5x slower in
 * the second half of such a run, 2026-11-26). Prints ms and GFLOP/s.
 * A benchmark, not a test: it never fails on speed.
 *
 * Usage: bench_gemm [families, comma-separated: auto, texel-16x16, texel-8x8,
 *        tiled-64x64, rb-64x64, rb-128x64, and with matrix units cm-128x128,
 *        cm-64x64 and the candidates cm-128x128-dl, cm-64x64-dl,
 *        cm-128x128-pf2, cm-64x64-pf2] [blas threads, default 2]
 * A family that cannot run is reported and left out of the table.
 */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_blas.h"
#include "error.h"
#include "f16.h"
#include "vk_buffer.h"
#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_gemm.h"
#include "bench_util.h"

void openblas_set_num_threads(int n);

#define REPS 5
#define GPU_REPS_MAX 32
static uint32_t GPU_REPS = GPU_REPS_MAX; /* BENCH_GEMM_REPS (1..32) sets it: lavapipe */

/* The operands every product here multiplies: A (n_a values) and B, in f16
 * (bh) and, where bf is not NULL, the same values in f32. */
static void fill_operands(float *a, uint64_t n_a, uint16_t *bh, float *bf, uint64_t n_b) {
  for (uint64_t i = 0; i < n_a; i++)
    a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  for (uint64_t i = 0; i < n_b; i++) {
    bh[i] = wd_f32_to_f16((float)((i * 40503u) % 1000) / 1000.0f - 0.5f);
    if (bf)
      bf[i] = wd_f16_to_f32(bh[i]);
  }
}

/* Best GPU ns of one M x N x K product with g (see the header). */
static int gpu_time(wd_vk_device_t *dev, wd_vk_gemm_t *g, uint32_t M, uint32_t N, uint32_t K,
                    double *ret_ns) {
  const uint64_t na = (uint64_t)M * K, nb = (uint64_t)N * K, nc = (uint64_t)M * N;
  float *a = malloc(na * 4), *bias = calloc(N, 4);
  uint16_t *bh = malloc(nb * 2);
  wd_vk_buffer_t *ba = NULL, *bb = NULL, *bbias = NULL, *bc = NULL;
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  int rc = (a && bias && bh) ? 0 : WD_ENOMEM;
  if (rc)
    goto out;
  fill_operands(a, na, bh, NULL, nb);
  rc = wd_vk_buffer_new(dev, na * 4, WD_VK_BUF_TEXEL | WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &ba);
  if (!rc)
    rc = wd_vk_buffer_new(dev, nb * 2, WD_VK_BUF_TEXEL | WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &bb);
  if (!rc)
    rc = wd_vk_buffer_new(dev, (uint64_t)N * 4, WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &bbias);
  if (!rc)
    rc = wd_vk_buffer_new(dev, nc * 4, WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &bc);
  if (!rc)
    rc = wd_vk_buffer_write(ba, 0, a, na * 4);
  if (!rc)
    rc = wd_vk_buffer_write(bb, 0, bh, nb * 2);
  if (!rc)
    rc = wd_vk_buffer_write(bbias, 0, bias, (uint64_t)N * 4);
  const wd_vk_arg_t aa = { .buf = ba }, ab = { .buf = bb }, abias = { .buf = bbias }, ac = { .buf = bc };
  if (!rc)
    rc = wd_vk_gemm_bind(g, &aa, &ab, &abias, &ac, &set);
  if (!rc)
    rc = wd_vk_cmd_new(dev, GPU_REPS_MAX + 1, &cmd);
  const wd_pc_gemm_t pc = { .M = M, .N = N, .K = K, .lda = K, .ldb = K, .ldc = N,
                            .flags = WD_GEMM_BIAS, .alpha = 1.0f };
  if (!rc)
    rc = wd_vk_cmd_begin(cmd);
  if (!rc) {
    wd_vk_cmd_timestamp(cmd, 0);
    for (uint32_t r = 0; r < GPU_REPS && !rc; r++) {
      rc = wd_vk_gemm_record(g, cmd, set, &pc, 1);
      wd_vk_cmd_barrier(cmd);
      wd_vk_cmd_timestamp(cmd, r + 1);
    }
    int rc2 = wd_vk_cmd_end(cmd);
    if (!rc)
      rc = rc2;
  }
  double best = 1e30;
  for (int s = 0; s < 3 && !rc; s++) {
    rc = wd_vk_cmd_submit(cmd, UINT64_MAX);
    for (uint32_t r = 0; r < GPU_REPS && !rc; r++) {
      double ns = 0;
      rc = wd_vk_cmd_elapsed_ns(cmd, r, r + 1, &ns);
      if (!rc && ns > 0 && ns < best)
        best = ns;
    }
  }
  *ret_ns = best;
out:
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  wd_vk_buffer_free(ba);
  wd_vk_buffer_free(bb);
  wd_vk_buffer_free(bbias);
  wd_vk_buffer_free(bc);
  free(a);
  free(bias);
  free(bh);
  return rc;
}

/* Best wall-clock seconds of the same product in OpenBLAS (B in f32). */
static double blas_time(uint32_t M, uint32_t N, uint32_t K) {
  const uint64_t na = (uint64_t)M * K, nb = (uint64_t)N * K, nc = (uint64_t)M * N;
  float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4);
  uint16_t *bh = malloc(nb * 2);
  double best = 1e30;
  if (a && b && c && bh) {
    fill_operands(a, na, bh, b, nb);
    for (int r = 0; r <= REPS; r++) { /* r == 0 is a warm-up */
      const double t0 = bench_now_s();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, a,
                  (int)K, b, (int)K, 0.0f, c, (int)N);
      const double t = bench_now_s() - t0;
      if (r > 0 && t < best)
        best = t;
    }
  }
  free(a);
  free(b);
  free(c);
  free(bh);
  return best;
}

static const struct { uint32_t m, n, k; const char *what; } shapes[] = {
  { 1500, 384, 384, "tiny attn q/k/v/out" }, { 1500, 1152, 384, "tiny fused qkv" },
  { 1500, 1536, 384, "tiny fc1" },           { 1500, 384, 1536, "tiny fc2" },
  { 1500, 512, 512, "base attn" },           { 1500, 2048, 512, "base fc1" },
  { 1500, 512, 2048, "base fc2" },
  { 1500, 1280, 1280, "large attn" },        { 1500, 3840, 1280, "large fused qkv" },
  { 1500, 5120, 1280, "large fc1" },         { 1500, 1280, 5120, "large fc2" },
  { 256, 1280, 1280, "large prefill attn" }, { 256, 5120, 1280, "large prefill fc1" },
  { 256, 1280, 5120, "large prefill fc2" },
  { 1500, 1500, 64, "attn QK^T, one head" }, { 1500, 64, 1500, "attn P.V, one head" },
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])
#define MAX_FAMS 12

int main(int argc, char **argv) {
  /* argv[1]: comma-separated families (names as wd_vk_gemm_family_name
   * prints them, or auto); each runs every shape. */
  char fams[256] = "auto";
  if (argc > 1)
    snprintf(fams, sizeof fams, "%s", argv[1]);
  const int threads = argc > 2 ? atoi(argv[2]) : 2;
  const char *reps = getenv("BENCH_GEMM_REPS");
  if (reps && atoi(reps) >= 1 && atoi(reps) <= GPU_REPS_MAX)
    GPU_REPS = (uint32_t)atoi(reps);
  openblas_set_num_threads(threads);
  wd_vk_device_t *dev = NULL;
  const wd_vk_device_opts_t opts = { .index = -1 };
  int rc = wd_vk_device_new(&opts, &dev);
  if (rc) {
    fprintf(stderr, "bench_gemm: no Vulkan device: %s\n", wd_strerror(rc));
    return 1;
  }
  char *save = NULL;
  double gpu_ns[MAX_FAMS][N_SHAPES];
  const char *fam_name[MAX_FAMS];
  int n_fam = 0;
  /* A family that cannot run here (no matrix units, a pipeline the driver
   * refuses, a failed dispatch) is reported and left out of the table, so
   * one candidate's failure does not lose the others' figures. */
  for (char *f = strtok_r(fams, ",", &save); f && n_fam < MAX_FAMS;
       f = strtok_r(NULL, ",", &save)) {
    wd_vk_gemm_family_t fam;
    if (wd_vk_gemm_family_parse(f, &fam) < 0) {
      fprintf(stderr,
              "bench_gemm: unknown family '%s' (auto, texel-16x16, texel-8x8, tiled-64x64, rb-64x64, "
              "rb-128x64, cm-128x128, cm-64x64, and the candidates cm-128x128-dl, cm-64x64-dl, "
              "cm-128x128-pf2, cm-64x64-pf2)\n", f);
      continue;
    }
    wd_vk_gemm_t *g = NULL;
    rc = wd_vk_gemm_new(dev, fam, &g);
    if (rc) {
      fprintf(stderr, "bench_gemm: pipeline %s: %s (left out)\n", f, wd_strerror(rc));
      continue;
    }
    printf("device: %s (%s); kernel %s; %d dispatches per submit, best of 3 submits\n",
           wd_vk_device_info(dev)->name, wd_vk_class_name(wd_vk_device_info(dev)->device_class),
           wd_vk_gemm_family_name(wd_vk_gemm_family(g)), GPU_REPS);
    rc = 0;
    for (size_t i = 0; i < N_SHAPES && !rc; i++) {
      rc = gpu_time(dev, g, shapes[i].m, shapes[i].n, shapes[i].k, &gpu_ns[n_fam][i]);
      if (rc)
        fprintf(stderr, "bench_gemm: %s: %s: %s (left out)\n", f, shapes[i].what, wd_strerror(rc));
    }
    if (!rc)
      fam_name[n_fam++] = wd_vk_gemm_family_name(wd_vk_gemm_family(g));
    wd_vk_gemm_free(g);
  }
  wd_vk_device_free(dev);
  if (n_fam == 0)
    return 1;
  /* The host's products after every GPU one (see the header). */
  printf("%s; %d thread(s), best of %d; per shape: GPU ms and GFLOP/s per family, then "
         "OpenBLAS\n", wd_cpu_blas_path(), threads, REPS);
  for (size_t i = 0; i < N_SHAPES; i++) {
    const uint32_t M = shapes[i].m, N = shapes[i].n, K = shapes[i].k;
    const double flop = 2.0 * M * N * K, blas = blas_time(M, N, K);
    printf("%-22s %5u x %-5u x %-5u", shapes[i].what, M, N, K);
    for (int f = 0; f < n_fam; f++)
      printf(" | %s %7.3f ms %7.1f GFLOP/s", fam_name[f], gpu_ns[f][i] * 1e-6,
             flop / gpu_ns[f][i]);
    printf(" | OpenBLAS %7.2f ms %6.1f GFLOP/s\n", blas * 1e3, flop / blas * 1e-9);
  }
  return 0;
}
