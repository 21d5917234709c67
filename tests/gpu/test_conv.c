/*
 * test_conv.c - the encoder's convolutions as im2col + vk_gemm (+ bias +
 * GELU) against a direct C conv1d with exact erf GELU.
 *
 * conv1 at its real size (80 mels x 3000 frames -> 3000 x 384, stride 1)
 * from the channel-major mel; conv2 from a frame-major activation at a
 * reduced size (301 frames x 64 channels -> 151 x 72, stride 2: odd frame
 * counts exercise the zero padding at both ends). conv1 runs on the device's
 * AUTO gemm family, conv2 on both TEXEL and TILED. The weight is the ggml
 * layout (cout, cin, 3), in f16. Tolerance: max |err| <= 2e-4 and
 * NMSE <= 1e-10 (the GLSL erf approximation is within 1.5e-7; the rest is
 * f32 accumulation over K = cin * 3).
 */
#include "gpu_util.h"
#include "vk_cmd.h"
#include "vk_gemm.h"
#include "vk_misc.h"

/* ref: openai/whisper model.py AudioEncoder: gelu(conv1d(x, w, b, stride, padding=1)). */
static void ref_conv(const float *in, uint32_t cs, uint32_t ts, uint32_t cin, uint32_t t_in,
                     const float *w, const float *bias, uint32_t cout, uint32_t stride,
                     uint32_t t_out, double *out) {
  for (uint32_t t = 0; t < t_out; t++)
    for (uint32_t o = 0; o < cout; o++) {
      double s = bias[o];
      for (uint32_t c = 0; c < cin; c++)
        for (uint32_t k = 0; k < 3; k++) {
          const int64_t src = (int64_t)t * stride + k - 1;
          if (src >= 0 && src < (int64_t)t_in)
            s += (double)w[((size_t)o * cin + c) * 3 + k] * in[(size_t)c * cs + (size_t)src * ts];
        }
      out[(size_t)t * cout + o] = tg_gelu(s);
    }
}

static void run_conv(wd_vk_device_t *dev, wd_vk_misc_t *m, wd_vk_gemm_family_t fam, uint32_t cin,
                     uint32_t t_in, uint32_t cout, uint32_t stride, int channel_major) {
  const uint32_t t_out = (t_in - 1) / stride + 1, K = cin * 3;
  const uint32_t in_cs = channel_major ? t_in : 1, in_ts = channel_major ? 1 : cin;
  const size_t nin = (size_t)cin * t_in, ncol = (size_t)t_out * K, nw = (size_t)cout * K;
  const size_t nout = (size_t)t_out * cout;
  float *in = malloc(nin * 4), *w = malloc(nw * 4), *bias = malloc(cout * 4), *got = malloc(nout * 4);
  double *ref = malloc(nout * sizeof *ref);
  tg_fill(in, nin, 1.0f);
  tg_fill(w, nw, 0.1f);
  tg_round_f16(w, nw);
  tg_fill(bias, cout, 0.2f);
  ref_conv(in, in_cs, in_ts, cin, t_in, w, bias, cout, stride, t_out, ref);

  wd_vk_gemm_t *g = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemm_new(dev, fam, &g), 0);
  tg_buf_t bi, bc, bw, bb, bo;
  WD_CHECK_EQ_INT(tg_buf_new(dev, nin, in, 0, &bi), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, ncol, NULL, 0, &bc), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nw, w, 1, &bw), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, cout, bias, 0, &bb), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nout, NULL, 0, &bo), 0);
  if (!g) {
    tg_buf_free(&bi), tg_buf_free(&bc), tg_buf_free(&bw), tg_buf_free(&bb), tg_buf_free(&bo);
    free(in), free(w), free(bias), free(got), free(ref);
    return;
  }
  wd_vk_dset_t *s_col = NULL, *s_mm = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t ai = tg_all(&bi), acol = tg_data(&bc), acol_all = tg_all(&bc),
                    aw = tg_all(&bw), ab = tg_all(&bb), ao = tg_all(&bo);
  WD_CHECK_EQ_INT(wd_vk_misc_bind_im2col(m, &ai, &acol, &s_col), 0);
  WD_CHECK_EQ_INT(wd_vk_gemm_bind(g, &acol_all, &aw, &ab, &ao, &s_mm), 0);
  const wd_pc_im2col_t pi = { .cin = cin, .t_in = t_in, .t_out = t_out, .stride = stride,
                              .in_off = TG_GUARD, .in_cs = in_cs, .in_ts = in_ts, .ldo = K };
  const wd_pc_gemm_t pg = { .M = t_out, .N = cout, .K = K, .lda = K, .ldb = K, .ldc = cout,
                            .a_off = TG_GUARD, .b_off = TG_GUARD, .c_off = TG_GUARD,
                            .bias_off = TG_GUARD, .flags = WD_GEMM_BIAS | WD_GEMM_GELU,
                            .alpha = 1.0f };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_misc_record_im2col(m, cmd, s_col, &pi), 0);
  wd_vk_cmd_barrier(cmd);
  WD_CHECK_EQ_INT(wd_vk_gemm_record(g, cmd, s_mm, &pg, 1), 0);
  wd_pc_im2col_t bad = pi;
  bad.t_out = t_out + 1;
  WD_CHECK_EQ_INT(wd_vk_misc_record_im2col(m, cmd, s_col, &bad), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bo, got), 0);
  char what[96];
  snprintf(what, sizeof what, "conv %s %ux%u s%u -> %ux%u", wd_vk_gemm_family_name(wd_vk_gemm_family(g)),
           cin, t_in, stride, t_out, cout);
  WD_CHECK(tg_compare(what, got, ref, nout, 2e-4, 1e-10));
  WD_CHECK(tg_guards_ok(&bo));
  WD_CHECK(tg_guards_ok(&bc));
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(s_col), wd_vk_dset_free(s_mm);
  wd_vk_gemm_free(g);
  tg_buf_free(&bi), tg_buf_free(&bc), tg_buf_free(&bw), tg_buf_free(&bb), tg_buf_free(&bo);
  free(in), free(w), free(bias), free(got), free(ref);
}

WD_TEST(conv1_full) {
  TG_DEVICE(dev);
  wd_vk_misc_t *m = NULL;
  WD_CHECK_EQ_INT(wd_vk_misc_new(dev, &m), 0);
  if (!m)
    return;
  tg_srand(21);
  run_conv(dev, m, WD_VK_GEMM_AUTO, 80, 3000, 384, 1, 1);
  wd_vk_misc_free(m);
}

WD_TEST(conv2_texel_and_tiled) {
  TG_DEVICE(dev);
  wd_vk_misc_t *m = NULL;
  WD_CHECK_EQ_INT(wd_vk_misc_new(dev, &m), 0);
  if (!m)
    return;
  tg_srand(22);
  run_conv(dev, m, WD_VK_GEMM_TEXEL, 64, 301, 72, 2, 0);
  run_conv(dev, m, WD_VK_GEMM_TILED, 64, 301, 72, 2, 0);
  run_conv(dev, m, WD_VK_GEMM_TEXEL_8X8, 20, 30, 12, 2, 0);
  wd_vk_misc_free(m);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
