/*
 * bench_gemm.c - the encoder's GEMM shapes on the Vulkan device next to
 * OpenBLAS sgemm on the host, in the same run.
 *
 * C[M, N] = A[M, K] * B[N, K]^T for the Linear layers of tiny, base and
 * large-v3(-turbo), M = 1500 (audio frames per 30 s window), and a 224-token
 * prompt's prefill at the large shape. GPU time is the best of R
 * timestamp-query deltas around one dispatch; OpenBLAS time is the best of R
 * wall-clock runs of cblas_sgemm with B in f32. Prints GFLOP/s and the ratio.
 * A benchmark, not a test: it never fails on speed.
 *
 * Usage: bench_gemm [family: auto|texel|texel8|tiled] [blas threads, default 2]
 * The "grid" column counts 128 x 128 output tiles: how many workgroups a
 * wider tile would launch (on an NVIDIA H200, 132 SMs, a 128 x 128 tile
 * with 8 x 8 outputs per invocation was slower than tiled-64x64 on 13 of
 * these 15 shapes, up to 8x, both measured beside another GPU test,
 * 2026-11-25: a wider tile needs more than a bigger register block).
 */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "f16.h"
#include "vk_buffer.h"
#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_gemm.h"
#include "bench_util.h"

void openblas_set_num_threads(int n);

#define REPS 5

static int bench_shape(wd_vk_device_t *dev, wd_vk_gemm_t *g, uint32_t M, uint32_t N, uint32_t K,
                       const char *what) {
  const uint64_t na = (uint64_t)M * K, nb = (uint64_t)N * K, nc = (uint64_t)M * N;
  float *a = malloc(na * 4), *bf = malloc(nb * 4), *c = malloc(nc * 4), *bias = calloc(N, 4);
  uint16_t *bh = malloc(nb * 2);
  wd_vk_buffer_t *ba = NULL, *bb = NULL, *bbias = NULL, *bc = NULL;
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  int rc = (a && bf && c && bias && bh) ? 0 : WD_ENOMEM;
  if (rc)
    goto out;
  for (uint64_t i = 0; i < na; i++)
    a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  for (uint64_t i = 0; i < nb; i++) {
    bh[i] = wd_f32_to_f16((float)((i * 40503u) % 1000) / 1000.0f - 0.5f);
    bf[i] = wd_f16_to_f32(bh[i]);
  }
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
    rc = wd_vk_cmd_new(dev, 2, &cmd);
  const wd_pc_gemm_t pc = { .M = M, .N = N, .K = K, .lda = K, .ldb = K, .ldc = N,
                            .flags = WD_GEMM_BIAS, .alpha = 1.0f };
  if (!rc)
    rc = wd_vk_cmd_begin(cmd);
  if (!rc) {
    wd_vk_cmd_timestamp(cmd, 0);
    rc = wd_vk_gemm_record(g, cmd, set, &pc, 1);
    wd_vk_cmd_timestamp(cmd, 1);
    int rc2 = wd_vk_cmd_end(cmd);
    if (!rc)
      rc = rc2;
  }
  double gpu_best = 1e30;
  for (int r = 0; r <= REPS && !rc; r++) { /* r == 0 is a warm-up */
    double ns = 0;
    rc = wd_vk_cmd_submit(cmd, UINT64_MAX);
    if (!rc)
      rc = wd_vk_cmd_elapsed_ns(cmd, 0, 1, &ns);
    if (r > 0 && ns < gpu_best)
      gpu_best = ns;
  }
  if (rc)
    goto out;
  double blas_best = 1e30;
  for (int r = 0; r <= REPS; r++) {
    const double t0 = bench_now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, a, (int)K,
                bf, (int)K, 0.0f, c, (int)N);
    const double t = bench_now_s() - t0;
    if (r > 0 && t < blas_best)
      blas_best = t;
  }
  const double flop = 2.0 * M * N * K;
  const double gpu_gf = flop / gpu_best, blas_gf = flop / blas_best * 1e-9;
  printf("%-22s %5u x %-5u x %-5u grid %4u  %8.3f ms %7.1f GFLOP/s | OpenBLAS %7.2f ms %7.1f "
         "GFLOP/s | %5.1f%%\n",
         what, M, N, K, ((M + 127) / 128) * ((N + 127) / 128), gpu_best * 1e-6, gpu_gf,
         blas_best * 1e3, blas_gf, 100.0 * gpu_gf / blas_gf);
out:
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  wd_vk_buffer_free(ba);
  wd_vk_buffer_free(bb);
  wd_vk_buffer_free(bbias);
  wd_vk_buffer_free(bc);
  free(a);
  free(bf);
  free(c);
  free(bias);
  free(bh);
  if (rc)
    fprintf(stderr, "bench_gemm: %s: %s\n", what, wd_strerror(rc));
  return rc;
}

int main(int argc, char **argv) {
  wd_vk_gemm_family_t fam = WD_VK_GEMM_AUTO;
  if (argc > 1) {
    if (strcmp(argv[1], "texel") == 0)
      fam = WD_VK_GEMM_TEXEL;
    else if (strcmp(argv[1], "texel8") == 0)
      fam = WD_VK_GEMM_TEXEL_8X8;
    else if (strcmp(argv[1], "tiled") == 0)
      fam = WD_VK_GEMM_TILED;
  }
  const int threads = argc > 2 ? atoi(argv[2]) : 2;
  openblas_set_num_threads(threads);
  wd_vk_device_t *dev = NULL;
  const wd_vk_device_opts_t opts = { .index = -1 };
  int rc = wd_vk_device_new(&opts, &dev);
  if (rc) {
    fprintf(stderr, "bench_gemm: no Vulkan device: %s\n", wd_strerror(rc));
    return 1;
  }
  wd_vk_gemm_t *g = NULL;
  rc = wd_vk_gemm_new(dev, fam, &g);
  if (rc) {
    fprintf(stderr, "bench_gemm: pipeline: %s\n", wd_strerror(rc));
    wd_vk_device_free(dev);
    return 1;
  }
  printf("device: %s (%s); kernel %s; OpenBLAS %d thread(s); best of %d\n",
         wd_vk_device_info(dev)->name, wd_vk_class_name(wd_vk_device_info(dev)->device_class),
         wd_vk_gemm_family_name(wd_vk_gemm_family(g)), threads, REPS);
  static const struct { uint32_t m, n, k; const char *what; } shapes[] = {
    { 1500, 384, 384, "tiny attn q/k/v/out" }, { 1500, 1152, 384, "tiny fused qkv" },
    { 1500, 1536, 384, "tiny fc1" },           { 1500, 384, 1536, "tiny fc2" },
    { 1500, 512, 512, "base attn" },           { 1500, 2048, 512, "base fc1" },
    { 1500, 512, 2048, "base fc2" },
    { 1500, 1280, 1280, "large attn" },        { 1500, 3840, 1280, "large fused qkv" },
    { 1500, 5120, 1280, "large fc1" },         { 1500, 1280, 5120, "large fc2" },
    { 224, 1280, 1280, "large prefill attn" }, { 224, 5120, 1280, "large prefill fc1" },
    { 1500, 1500, 64, "attn QK^T, one head" }, { 1500, 64, 1500, "attn P.V, one head" },
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !rc; i++)
    rc = bench_shape(dev, g, shapes[i].m, shapes[i].n, shapes[i].k, shapes[i].what);
  wd_vk_gemm_free(g);
  wd_vk_device_free(dev);
  return rc ? 1 : 0;
}
