/*
 * bench_wgemv.c - the decoder's GEMV shapes on every weight type: GPU ms
 * per dispatch (best of R replays of a one-dispatch recording; best, not
 * median, because the point is the kernel's cost on a shared machine) for
 * tiny.en's logits (51864 x 384), fc1 (1536 x 384) and fc2 (384 x 1536) at
 * batch 1 and 8, on the AUTO family. Weights are random, quantized with
 * wd_quantize_row and repacked as vk_weights does.
 *
 * Usage: bench_wgemv [replays, default 30]   (LP_NUM_THREADS applies on lavapipe)
 */
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "quant.h"
#include "vk_buffer.h"
#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_gemv.h"
#include "vk_wquant.h"

static int upload(wd_vk_device_t *dev, const void *host, size_t bytes, wd_vk_buffer_t **ret) {
  const size_t alloc = (bytes + 15) / 16 * 16;
  int rc = wd_vk_buffer_new(dev, alloc, WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL, WD_VK_MEM_DEVICE, ret);
  if (rc == 0 && host)
    rc = wd_vk_buffer_write(*ret, 0, host, bytes);
  return rc;
}

/* Best GPU ms of one GEMV (N, K) at batch nb with weights of type t. */
static int bench(wd_vk_device_t *dev, wd_vk_gemv_t *g, wd_dtype_t t, uint32_t N, uint32_t K,
                 uint32_t nb, int reps, double *ret_ms) {
  const size_t n = (size_t)N * K, qrow = wd_dtype_row_bytes(t, K);
  const size_t dev_bytes = wd_vk_wquant_bytes(t, (int64_t)n);
  float *w = malloc(K * sizeof *w), *x = malloc((size_t)nb * K * sizeof *x);
  unsigned char *q = malloc(qrow * N), *packed = malloc(dev_bytes + 16);
  wd_vk_buffer_t *bw = NULL, *bx = NULL, *bb = NULL, *by = NULL;
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  int rc = w && x && q && packed ? 0 : WD_ENOMEM;
  unsigned s = 12345;
  for (size_t i = 0; rc == 0 && i < (size_t)nb * K; i++)
    x[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
  for (uint32_t r = 0; rc == 0 && r < N; r++) {
    for (uint32_t k = 0; k < K; k++)
      w[k] = ((float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f) * 0.1f;
    rc = wd_quantize_row(t, w, q + (size_t)r * qrow, K);
  }
  if (rc == 0) rc = wd_vk_wquant_pack(t, q, (int64_t)n, packed);
  if (rc == 0) rc = upload(dev, packed, dev_bytes, &bw);
  if (rc == 0) rc = upload(dev, x, (size_t)nb * K * 4, &bx);
  if (rc == 0) rc = upload(dev, NULL, (size_t)N * 4, &bb);
  if (rc == 0) rc = upload(dev, NULL, (size_t)nb * N * 4, &by);
  const wd_vk_arg_t ax = { .buf = bx }, ab = { .buf = bb }, ay = { .buf = by };
  const wd_vk_arg_t aw = { .buf = bw, .range = (dev_bytes + 15) / 16 * 16,
                           .wtype = wd_vk_wtype_of(t) };
  if (rc == 0) rc = wd_vk_gemv_bind(g, K, nb, &ax, &aw, &ab, &ay, &set);
  if (rc == 0) rc = wd_vk_cmd_new(dev, 2, &cmd);
  if (rc == 0) rc = wd_vk_cmd_begin(cmd);
  const wd_pc_gemv_t pc = { .N = N, .K = K, .nb = nb, .ldx = K, .ldy = N, .alpha = 1.0f };
  if (rc == 0) {
    wd_vk_cmd_timestamp(cmd, 0);
    rc = wd_vk_gemv_record(g, cmd, set, &pc);
    wd_vk_cmd_timestamp(cmd, 1);
  }
  if (rc == 0) rc = wd_vk_cmd_end(cmd);
  double best = 1e30;
  for (int i = 0; rc == 0 && i < reps; i++) {
    double ns = 0;
    rc = wd_vk_cmd_submit(cmd, UINT64_MAX);
    if (rc == 0) rc = wd_vk_cmd_elapsed_ns(cmd, 0, 1, &ns);
    if (rc == 0 && ns * 1e-6 < best)
      best = ns * 1e-6;
  }
  *ret_ms = best;
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  wd_vk_buffer_free(bw), wd_vk_buffer_free(bx), wd_vk_buffer_free(bb), wd_vk_buffer_free(by);
  free(w), free(x), free(q), free(packed);
  return rc;
}

int main(int argc, char **argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 30;
  wd_vk_device_t *dev = NULL;
  wd_vk_gemv_t *g = NULL;
  const wd_vk_device_opts_t o = { .index = -1 };
  int rc = wd_vk_device_new(&o, &dev);
  if (rc == 0) rc = wd_vk_gemv_new(dev, WD_VK_GEMV_AUTO, &g);
  if (rc < 0) {
    fprintf(stderr, "bench_wgemv: %s\n", wd_strerror(rc));
    wd_vk_device_free(dev);
    return 1;
  }
  static const wd_dtype_t types[] = { WD_DTYPE_F16, WD_DTYPE_F32, WD_DTYPE_Q8_0, WD_DTYPE_Q5_0,
                                      WD_DTYPE_Q5_1, WD_DTYPE_Q4_0, WD_DTYPE_Q4_1 };
  static const struct { const char *name; uint32_t N, K; } shapes[] = {
    { "logits", 51864, 384 }, { "fc1", 1536, 384 }, { "fc2", 384, 1536 },
  };
  printf("GPU ms per GEMV on %s (best of %d)\n%-6s", wd_vk_device_info(dev)->name, reps, "type");
  for (size_t s = 0; s < 3; s++)
    printf("  %8s b1 %8s b8", shapes[s].name, shapes[s].name);
  printf("\n");
  for (size_t t = 0; t < sizeof types / sizeof types[0] && rc == 0; t++) {
    printf("%-6s", wd_dtype_name(types[t]));
    for (size_t s = 0; s < 3 && rc == 0; s++)
      for (uint32_t nb = 1; nb <= 8 && rc == 0; nb += 7) {
        double ms = 0;
        rc = bench(dev, g, types[t], shapes[s].N, shapes[s].K, nb, reps, &ms);
        printf("  %11.3f", ms);
      }
    printf("\n");
  }
  if (rc < 0)
    fprintf(stderr, "bench_wgemv: %s\n", wd_strerror(rc));
  wd_vk_gemv_free(g);
  wd_vk_device_free(dev);
  return rc < 0;
}
