/*
 * test_layernorm.c - vk_norm against a double-precision C LayerNorm.
 *
 * All three variants (subgroup and shared-memory reductions, one row per
 * invocation), rows of Whisper's widths and an odd one, B = 1, 3, 8 rows plus
 * one encoder-sized 1500 x 384, in place and out of place, with guards
 * around the output. Tolerance: max
 * |err| <= 2e-5 and NMSE <= 1e-10 (outputs are O(1); f32 two-pass statistics
 * differ from double by ~1e-7 relative).
 */
#include "gpu_util.h"
#include "vk_cmd.h"
#include "vk_norm.h"

/* ref: torch.nn.LayerNorm, biased variance. */
static void ref_layernorm(const float *x, const float *g, const float *bta, uint32_t rows,
                          uint32_t d, uint32_t ld, double *y) {
  for (uint32_t r = 0; r < rows; r++) {
    double m = 0.0, v = 0.0;
    for (uint32_t i = 0; i < d; i++)
      m += x[r * ld + i];
    m /= d;
    for (uint32_t i = 0; i < d; i++)
      v += (x[r * ld + i] - m) * (x[r * ld + i] - m);
    v /= d;
    for (uint32_t i = 0; i < d; i++)
      y[r * d + i] = (x[r * ld + i] - m) / sqrt(v + 1e-5) * g[i] + bta[i];
  }
}

/* One case: rows x d with row stride ld, in place or into a separate y. */
static void run_case(wd_vk_device_t *dev, wd_vk_norm_t *norm, uint32_t rows, uint32_t d,
                     uint32_t ld, int in_place) {
  const size_t n = (size_t)rows * ld;
  float *x = malloc(n * 4), *g = malloc(d * 4), *bt = malloc(d * 4), *got = malloc(n * 4);
  double *ref = malloc((size_t)rows * d * sizeof *ref);
  float *gotc = malloc((size_t)rows * d * 4);
  tg_fill(x, n, 3.0f);
  for (size_t i = 0; i < n; i++)
    x[i] += 1.5f; /* a non-zero mean */
  tg_fill(g, d, 1.0f);
  tg_fill(bt, d, 0.5f);
  ref_layernorm(x, g, bt, rows, d, ld, ref);

  tg_buf_t bx, by, bg, bb;
  WD_CHECK_EQ_INT(tg_buf_new(dev, n, x, 0, &bx), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, n, NULL, 0, &by), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, d, g, 0, &bg), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, d, bt, 0, &bb), 0);
  const tg_buf_t *out = in_place ? &bx : &by;
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t ax = tg_all(&bx), ay = tg_all(out), ag = tg_data(&bg), ab = tg_data(&bb);
  WD_CHECK_EQ_INT(wd_vk_norm_bind(norm, &ax, &ay, &ag, &ab, &set), 0);
  const wd_pc_norm_t pc = { .n_rows = rows, .d = d, .x_off = TG_GUARD, .ldx = ld,
                            .y_off = TG_GUARD, .ldy = ld, .eps = 1e-5f };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_norm_record(norm, cmd, set, &pc), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(out, got), 0);
  for (uint32_t r = 0; r < rows; r++)
    memcpy(gotc + (size_t)r * d, got + (size_t)r * ld, d * 4);
  char what[96];
  snprintf(what, sizeof what, "layernorm %ux%u ld %u %s", rows, d, ld, in_place ? "in place" : "");
  WD_CHECK(tg_compare(what, gotc, ref, (size_t)rows * d, 2e-5, 1e-10));
  WD_CHECK(tg_guards_ok(out));
  if (!in_place) {
    /* The padding between rows (ld > d) must be untouched too. */
    uint32_t bits;
    int pad_ok = 1;
    for (uint32_t r = 0; r < rows && ld > d; r++) {
      memcpy(&bits, &got[(size_t)r * ld + d], 4);
      pad_ok = pad_ok && bits == TG_SENTINEL;
    }
    WD_CHECK(pad_ok);
  }
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&bx);
  tg_buf_free(&by);
  tg_buf_free(&bg);
  tg_buf_free(&bb);
  free(x), free(g), free(bt), free(got), free(ref), free(gotc);
}

static void run_variant(wd_vk_norm_variant_t v) {
  TG_DEVICE(dev);
  wd_vk_norm_t *norm = NULL;
  const int rc = wd_vk_norm_new(dev, v, &norm);
  if (rc == WD_EUNSUP)
    wd_test_skip("no subgroup arithmetic on this device");
  WD_CHECK_EQ_INT(rc, 0);
  if (rc)
    return;
  WD_CHECK_EQ_INT(wd_vk_norm_variant(norm), v);
  tg_srand(1234 + (uint64_t)v);
  run_case(dev, norm, 1, 384, 384, 0);
  run_case(dev, norm, 3, 1280, 1284, 0);
  run_case(dev, norm, 8, 100, 104, 1);
  run_case(dev, norm, 8, 512, 512, 1);
  run_case(dev, norm, 1500, 384, 384, 0);
  wd_vk_norm_free(norm);
}

WD_TEST(layernorm_subgroup) { run_variant(WD_VK_NORM_SUBGROUP); }
WD_TEST(layernorm_shared) { run_variant(WD_VK_NORM_SHARED); }
WD_TEST(layernorm_row) { run_variant(WD_VK_NORM_ROW); }

WD_TEST(layernorm_rejects_bad_shapes) {
  TG_DEVICE(dev);
  wd_vk_norm_t *norm = NULL;
  WD_CHECK_EQ_INT(wd_vk_norm_new(dev, WD_VK_NORM_AUTO, &norm), 0);
  WD_CHECK_EQ_INT(wd_vk_norm_new(dev, (wd_vk_norm_variant_t)7, &(wd_vk_norm_t *){ NULL }),
                  WD_EINVAL);
  tg_buf_t b;
  WD_CHECK_EQ_INT(tg_buf_new(dev, 64, NULL, 0, &b), 0);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t a = tg_all(&b);
  WD_CHECK_EQ_INT(wd_vk_norm_bind(norm, &a, &a, &a, &a, &set), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  const wd_pc_norm_t short_ld = { .n_rows = 1, .d = 64, .ldx = 32, .ldy = 64, .eps = 1e-5f };
  const wd_pc_norm_t no_rows = { .n_rows = 0, .d = 64, .ldx = 64, .ldy = 64, .eps = 1e-5f };
  const wd_pc_norm_t nan_eps = { .n_rows = 1, .d = 64, .ldx = 64, .ldy = 64, .eps = NAN };
  WD_CHECK_EQ_INT(wd_vk_norm_record(norm, cmd, set, &short_ld), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_norm_record(norm, cmd, set, &no_rows), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_norm_record(norm, cmd, set, &nan_eps), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_cmd_n_dispatches(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&b);
  wd_vk_norm_free(norm);
  wd_vk_norm_free(NULL);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
