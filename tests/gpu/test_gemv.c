/*
 * test_gemv.c - vk_gemv (all three families) against a double-precision C
 * product over the same f16-rounded weights.
 *
 * Cases: Whisper's decoder shapes (fused QKV 1152x384, fc1 1536x384 + GELU,
 * fc2 384x1536 + residual), an odd 1001x388 with padded strides and
 * alpha != 1, a tiny 77x4, batches 1, 3, 5, 8, 16, and one realistic logits
 * GEMV 51866x384 (N divisible by nothing nice) for B = 3 on the AUTO choice.
 * Guards around every output. Tolerance: max |err| <= 1e-4 and NMSE <= 1e-10
 * (outputs O(1); f32 accumulation over K <= 1536 of f16-exact products).
 * Batch independence, per family: every row of a batch of nb = 2 .. 16 is
 * bit-identical to the same row computed alone (nb = 1), whichever batch
 * variant (NB = 1, 2, 4, 8, 16) runs it. The engine's promise that a job
 * decodes the same alone or batched rests on this.
 */
#include "gpu_util.h"
#include "vk_cmd.h"
#include "vk_gemv.h"

typedef struct {
  uint32_t N, K, nb, ldx, ldy, flags;
  float alpha;
} gemv_case_t;

static void run_case(wd_vk_device_t *dev, wd_vk_gemv_t *g, const gemv_case_t *c) {
  const size_t nw = (size_t)c->N * c->K, nx = (size_t)c->nb * c->ldx, ny = (size_t)c->nb * c->ldy;
  float *w = malloc(nw * 4), *x = malloc(nx * 4), *bias = malloc(c->N * 4), *y0 = malloc(ny * 4);
  float *got = malloc(ny * 4), *gotc = malloc((size_t)c->nb * c->N * 4);
  double *ref = malloc((size_t)c->nb * c->N * sizeof *ref);
  tg_fill(w, nw, 0.05f);
  tg_round_f16(w, nw);
  tg_fill(x, nx, 1.0f);
  tg_fill(bias, c->N, 0.5f);
  tg_fill(y0, ny, 1.0f);
  /* ref: Y = alpha * W.X (+bias) (gelu) (+Y0) */
  for (uint32_t b = 0; b < c->nb; b++)
    for (uint32_t n = 0; n < c->N; n++) {
      double s = 0.0;
      for (uint32_t k = 0; k < c->K; k++)
        s += (double)w[(size_t)n * c->K + k] * x[(size_t)b * c->ldx + k];
      s *= c->alpha;
      if (c->flags & WD_GEMM_BIAS)
        s += bias[n];
      if (c->flags & WD_GEMM_GELU)
        s = tg_gelu(s);
      if (c->flags & WD_GEMM_ACCUMULATE)
        s += y0[(size_t)b * c->ldy + n];
      ref[(size_t)b * c->N + n] = s;
    }

  tg_buf_t bw, bx, bb, by;
  WD_CHECK_EQ_INT(tg_buf_new(dev, nw, w, 1, &bw), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nx, x, 0, &bx), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, c->N, bias, 0, &bb), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, ny, (c->flags & WD_GEMM_ACCUMULATE) ? y0 : NULL, 0, &by), 0);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t ax = tg_all(&bx), aw = tg_all(&bw), ab = tg_all(&bb), ay = tg_all(&by);
  WD_CHECK_EQ_INT(wd_vk_gemv_bind(g, c->K, c->nb, &ax, &aw, &ab, &ay, &set), 0);
  const wd_pc_gemv_t pc = {
    .N = c->N, .K = c->K, .nb = c->nb, .x_off = TG_GUARD, .ldx = c->ldx, .w_off = TG_GUARD,
    .y_off = TG_GUARD, .ldy = c->ldy, .bias_off = TG_GUARD, .flags = c->flags, .alpha = c->alpha,
  };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &pc), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&by, got), 0);
  int pad_ok = 1;
  for (uint32_t b = 0; b < c->nb; b++) {
    memcpy(gotc + (size_t)b * c->N, got + (size_t)b * c->ldy, c->N * 4);
    for (uint32_t n = c->N; n < c->ldy && !(c->flags & WD_GEMM_ACCUMULATE); n++) {
      uint32_t bits;
      memcpy(&bits, &got[(size_t)b * c->ldy + n], 4);
      pad_ok = pad_ok && bits == TG_SENTINEL;
    }
  }
  char what[96];
  snprintf(what, sizeof what, "gemv %s N%u K%u B%u flags %u",
           wd_vk_gemv_family_name(wd_vk_gemv_choose(g, c->K)), c->N, c->K, c->nb, c->flags);
  WD_CHECK(tg_compare(what, gotc, ref, (size_t)c->nb * c->N, 1e-4, 1e-10));
  WD_CHECK(pad_ok);
  WD_CHECK(tg_guards_ok(&by));
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&bw), tg_buf_free(&bx), tg_buf_free(&bb), tg_buf_free(&by);
  free(w), free(x), free(bias), free(y0), free(got), free(gotc), free(ref);
}

static const gemv_case_t cases[] = {
  { 1152, 384, 1, 384, 1152, WD_GEMM_BIAS, 1.0f },
  { 1536, 384, 3, 384, 1536, WD_GEMM_BIAS | WD_GEMM_GELU, 1.0f },
  { 384, 1536, 8, 1536, 384, WD_GEMM_BIAS | WD_GEMM_ACCUMULATE, 1.0f },
  { 1001, 388, 16, 392, 1003, 0, 0.5f },
  { 77, 4, 5, 4, 77, WD_GEMM_BIAS | WD_GEMM_GELU | WD_GEMM_ACCUMULATE, 1.0f },
};

/* Rows of a batch against the same rows alone, bit for bit, at K. */
static void run_batch_independence(wd_vk_device_t *dev, wd_vk_gemv_t *g, uint32_t K) {
  enum { B = 16 };
  const uint32_t N = 1001, flags = WD_GEMM_BIAS | WD_GEMM_GELU | WD_GEMM_ACCUMULATE;
  const size_t nw = (size_t)N * K, nx = (size_t)B * K, ny = (size_t)B * N;
  float *w = malloc(nw * 4), *x = malloc(nx * 4), *bias = malloc(N * 4), *y0 = malloc(ny * 4);
  float *alone = malloc(ny * 4), *got = malloc(ny * 4);
  tg_fill(w, nw, 0.05f);
  tg_fill(x, nx, 1.0f);
  tg_fill(bias, N, 0.5f);
  tg_fill(y0, ny, 1.0f);
  tg_buf_t bw, bx, bb;
  WD_CHECK_EQ_INT(tg_buf_new(dev, nw, w, 1, &bw), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nx, x, 0, &bx), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, N, bias, 0, &bb), 0);
  const wd_vk_arg_t ax = tg_all(&bx), aw = tg_all(&bw), ab = tg_all(&bb);
  static const uint32_t nbs[] = { 1, 2, 3, 5, 8, 9, 16 };
  int n_diff = 0;
  for (size_t t = 0; t < sizeof nbs / sizeof nbs[0]; t++) {
    const uint32_t nb = nbs[t];
    tg_buf_t by;
    WD_CHECK_EQ_INT(tg_buf_new(dev, ny, y0, 0, &by), 0);
    const wd_vk_arg_t ay = tg_all(&by);
    wd_vk_dset_t *set = NULL;
    wd_vk_cmd_t *cmd = NULL;
    WD_CHECK_EQ_INT(wd_vk_gemv_bind(g, K, nb, &ax, &aw, &ab, &ay, &set), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
    /* nb = 1: each of the B rows alone, one dispatch per row (disjoint
     * outputs, so no barrier); otherwise rows 0 .. nb - 1 in one dispatch. */
    for (uint32_t r = 0; r < (nb == 1 ? (uint32_t)B : 1u); r++) {
      const wd_pc_gemv_t pc = {
        .N = N, .K = K, .nb = nb, .x_off = TG_GUARD + r * K, .ldx = K, .w_off = TG_GUARD,
        .y_off = TG_GUARD + r * N, .ldy = N, .bias_off = TG_GUARD, .flags = flags, .alpha = 1.0f,
      };
      WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &pc), 0);
    }
    WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
    WD_CHECK_EQ_INT(tg_buf_read(&by, nb == 1 ? alone : got), 0);
    if (nb > 1)
      for (size_t i = 0; i < (size_t)nb * N; i++)
        n_diff += memcmp(&got[i], &alone[i], 4) != 0;
    wd_vk_cmd_free(cmd);
    wd_vk_dset_free(set);
    tg_buf_free(&by);
  }
  if (n_diff)
    fprintf(stderr, "  gemv %s K%u: %d outputs differ between a batch and alone\n",
            wd_vk_gemv_family_name(wd_vk_gemv_choose(g, K)), K, n_diff);
  WD_CHECK_EQ_INT(n_diff, 0);
  tg_buf_free(&bw), tg_buf_free(&bx), tg_buf_free(&bb);
  free(w), free(x), free(bias), free(y0), free(alone), free(got);
}

static void run_family(wd_vk_gemv_family_t f) {
  TG_DEVICE(dev);
  wd_vk_gemv_t *g = NULL;
  const int rc = wd_vk_gemv_new(dev, f, &g);
  if (rc == WD_EUNSUP)
    wd_test_skip("no subgroup arithmetic on this device");
  WD_CHECK_EQ_INT(rc, 0);
  if (rc)
    return;
  WD_CHECK_EQ_INT(wd_vk_gemv_choose(g, 384), f);
  tg_srand(77 + (uint64_t)f);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(dev, g, &cases[i]);
  run_batch_independence(dev, g, 384);
  run_batch_independence(dev, g, 1536);
  wd_vk_gemv_free(g);
}

WD_TEST(gemv_row) { run_family(WD_VK_GEMV_ROW); }
WD_TEST(gemv_subgroup) { run_family(WD_VK_GEMV_SUBGROUP); }
WD_TEST(gemv_shared) { run_family(WD_VK_GEMV_SHARED); }

WD_TEST(gemv_auto_logits) {
  TG_DEVICE(dev);
  wd_vk_gemv_t *g = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemv_new(dev, WD_VK_GEMV_AUTO, &g), 0);
  if (!g)
    return;
  if (wd_vk_device_info(dev)->device_class == WD_VK_CLASS_CPU) {
    WD_CHECK_EQ_INT(wd_vk_gemv_choose(g, 384), WD_VK_GEMV_ROW);
    if (wd_vk_device_info(dev)->subgroup_arithmetic)
      WD_CHECK_EQ_INT(wd_vk_gemv_choose(g, 1536), WD_VK_GEMV_SUBGROUP);
  }
  tg_srand(4242);
  const gemv_case_t logits = { 51866, 384, 3, 384, 51868, 0, 1.0f };
  run_case(dev, g, &logits);
  const gemv_case_t fc2 = { 384, 1536, 1, 1536, 384, WD_GEMM_BIAS | WD_GEMM_ACCUMULATE, 1.0f };
  run_case(dev, g, &fc2);
  wd_vk_gemv_free(g);
}

WD_TEST(gemv_rejects_bad_shapes) {
  TG_DEVICE(dev);
  wd_vk_gemv_t *g = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemv_new(dev, WD_VK_GEMV_ROW, &g), 0);
  WD_CHECK_EQ_INT(wd_vk_gemv_new(dev, (wd_vk_gemv_family_t)9, &(wd_vk_gemv_t *){ NULL }),
                  WD_EINVAL);
  if (!g)
    return;
  tg_buf_t b;
  WD_CHECK_EQ_INT(tg_buf_new(dev, 256, NULL, 0, &b), 0);
  const wd_vk_arg_t a = tg_all(&b);
  wd_vk_dset_t *set = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemv_bind(g, 16, 0, &a, &a, &a, &a, &set), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_gemv_bind(g, 16, 17, &a, &a, &a, &a, &set), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_gemv_bind(g, 16, 2, &a, &a, &a, &a, &set), 0);
  wd_vk_cmd_t *cmd = NULL;
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  const wd_pc_gemv_t ok = { .N = 4, .K = 16, .nb = 2, .ldx = 16, .ldy = 4, .alpha = 1.0f };
  wd_pc_gemv_t bad = ok;
  bad.nb = 3; /* more than the set was bound for */
  WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &bad), WD_EINVAL);
  bad = ok;
  bad.K = 18; /* not a multiple of 4 */
  bad.ldx = 20;
  WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &bad), WD_EINVAL);
  bad = ok;
  bad.w_off = 2;
  WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &bad), WD_EINVAL);
  bad = ok;
  bad.ldy = 3;
  WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &bad), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_cmd_n_dispatches(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&b);
  wd_vk_gemv_free(g);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
