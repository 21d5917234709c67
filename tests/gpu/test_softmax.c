/*
 * test_softmax.c - row softmax, and one whole encoder self-attention
 * head-batch built from vk_gemm (B in f32), vk_softmax and the transpose.
 *
 * Softmax alone: odd N (37 in rows of 40), Z = 3, scale, with and without
 * the causal mask (offsets 0 and 5), every variant; max |err| <= 1e-6.
 * Encoder attention: tiny's 1500 frames x 6 heads of 64 from a fused QKV
 * activation (1500, 1152): S = Q K^T / 8 (gemm over z = heads), softmax,
 * V^T per head, O = P V^T^T (gemm) into (1500, 384). Checked against a
 * double-precision C attention on 24 sampled query rows of every head
 * (all 1500 x 1500 scores are computed on the GPU; the C side samples
 * rows to keep the test short under ASan). A smaller 203-frame case runs
 * the TILED gemm with the workgroup softmax variants. Tolerance:
 * max |err| <= 2e-5, NMSE <= 1e-10 (outputs are convex combinations of V).
 */
#include "gpu_util.h"
#include "vk_cmd.h"
#include "vk_gemm.h"
#include "vk_misc.h"
#include "vk_softmax.h"

static void run_softmax(wd_vk_device_t *dev, wd_vk_softmax_variant_t var, uint32_t flags,
                        uint32_t causal_off) {
  wd_vk_softmax_t *sm = NULL;
  const int rc = wd_vk_softmax_new(dev, var, &sm);
  if (rc == WD_EUNSUP)
    return; /* no subgroup arithmetic: the SHARED variant covers it */
  WD_CHECK_EQ_INT(rc, 0);
  if (!sm)
    return;
  const uint32_t Z = 3, M = 29, N = 37, ld = 40, zs = M * ld + 4;
  const size_t n = (size_t)Z * zs;
  const float scale = 0.7f;
  float *x = malloc(n * 4), *got = malloc(n * 4), *gc = malloc((size_t)Z * M * N * 4);
  double *ref = malloc((size_t)Z * M * N * sizeof *ref);
  tg_fill(x, n, 4.0f);
  for (uint32_t z = 0; z < Z; z++)
    for (uint32_t i = 0; i < M; i++) {
      const float *r = x + (size_t)z * zs + (size_t)i * ld;
      const uint32_t lim = (flags & WD_SOFTMAX_CAUSAL) ? (i + causal_off + 1 < N ? i + causal_off + 1 : N) : N;
      double m = -INFINITY, s = 0.0;
      for (uint32_t j = 0; j < lim; j++)
        m = fmax(m, scale * (double)r[j]);
      for (uint32_t j = 0; j < lim; j++)
        s += exp(scale * (double)r[j] - m);
      for (uint32_t j = 0; j < N; j++)
        ref[((size_t)z * M + i) * N + j] = j < lim ? exp(scale * (double)r[j] - m) / s : 0.0;
    }
  tg_buf_t b;
  WD_CHECK_EQ_INT(tg_buf_new(dev, n, x, 0, &b), 0);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t a = tg_all(&b);
  WD_CHECK_EQ_INT(wd_vk_softmax_bind(sm, &a, &set), 0);
  const wd_pc_softmax_t pc = { .M = M, .N = N, .ld = ld, .off = TG_GUARD, .z_stride = zs,
                               .flags = flags, .causal_off = causal_off, .scale = scale };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_softmax_record(sm, cmd, set, &pc, Z), 0);
  wd_pc_softmax_t bad = pc;
  bad.ld = 38;
  WD_CHECK_EQ_INT(wd_vk_softmax_record(sm, cmd, set, &bad, Z), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&b, got), 0);
  int pad_ok = 1; /* columns N..ld and the z gap keep the input */
  for (uint32_t z = 0; z < Z; z++)
    for (uint32_t i = 0; i < M; i++) {
      memcpy(gc + ((size_t)z * M + i) * N, got + (size_t)z * zs + (size_t)i * ld, N * 4);
      pad_ok = pad_ok && memcmp(got + (size_t)z * zs + (size_t)i * ld + N,
                                x + (size_t)z * zs + (size_t)i * ld + N, (ld - N) * 4) == 0;
    }
  char what[96];
  snprintf(what, sizeof what, "softmax variant %d causal %u+%u", (int)var, flags, causal_off);
  WD_CHECK(tg_compare(what, gc, ref, (size_t)Z * M * N, 1e-6, 1e-10));
  WD_CHECK(pad_ok);
  WD_CHECK(tg_guards_ok(&b));
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&b);
  free(x), free(got), free(gc), free(ref);
  wd_vk_softmax_free(sm);
}

WD_TEST(softmax_variants) {
  TG_DEVICE(dev);
  tg_srand(31);
  for (int v = WD_VK_SOFTMAX_ROW; v <= WD_VK_SOFTMAX_SHARED; v++) {
    run_softmax(dev, (wd_vk_softmax_variant_t)v, 0, 0);
    run_softmax(dev, (wd_vk_softmax_variant_t)v, WD_SOFTMAX_CAUSAL, 0);
    run_softmax(dev, (wd_vk_softmax_variant_t)v, WD_SOFTMAX_CAUSAL, 5);
  }
}

/* One encoder self-attention over T frames and H heads of 64. */
static void run_enc_attn(wd_vk_device_t *dev, uint32_t T, uint32_t H, wd_vk_gemm_family_t fam,
                         wd_vk_softmax_variant_t smv, uint32_t n_sample) {
  const uint32_t D = H * 64, ldqkv = 3 * D;
  const size_t nqkv = (size_t)T * ldqkv, ns = (size_t)H * T * T, nvt = (size_t)H * 64 * T;
  const size_t no = (size_t)T * D;
  float *qkv = malloc(nqkv * 4), *got = malloc(no * 4);
  tg_fill(qkv, nqkv, 1.0f);
  wd_vk_gemm_t *g = NULL;
  wd_vk_softmax_t *sm = NULL;
  wd_vk_misc_t *m = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemm_new_fmt(dev, fam, WD_VK_GEMM_B_F32, &g), 0);
  WD_CHECK_EQ_INT(wd_vk_softmax_new(dev, smv, &sm), 0);
  WD_CHECK_EQ_INT(wd_vk_misc_new(dev, &m), 0);
  tg_buf_t bqkv, bs, bvt, bo, bz;
  WD_CHECK_EQ_INT(tg_buf_new(dev, nqkv, qkv, 0, &bqkv), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, ns, NULL, 0, &bs), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nvt, NULL, 0, &bvt), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, no, NULL, 0, &bo), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, 4, NULL, 0, &bz), 0); /* unused bias */
  wd_vk_dset_t *s_qk = NULL, *s_sm = NULL, *s_tr = NULL, *s_pv = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t aqkv = tg_all(&bqkv), as = tg_all(&bs), avt = tg_all(&bvt), ao = tg_all(&bo),
                    az = tg_all(&bz);
  if (g && sm && m) {
    WD_CHECK_EQ_INT(wd_vk_gemm_bind(g, &aqkv, &aqkv, &az, &as, &s_qk), 0);
    WD_CHECK_EQ_INT(wd_vk_softmax_bind(sm, &as, &s_sm), 0);
    WD_CHECK_EQ_INT(wd_vk_misc_bind_transpose(m, &aqkv, &avt, &s_tr), 0);
    WD_CHECK_EQ_INT(wd_vk_gemm_bind(g, &as, &avt, &az, &ao, &s_pv), 0);
  }
  if (s_qk && s_sm && s_tr && s_pv) {
    /* S[h] = (Q_h K_h^T) / 8: Q_h and K_h are column blocks of the QKV rows. */
    const wd_pc_gemm_t qk = { .M = T, .N = T, .K = 64, .lda = ldqkv, .ldb = ldqkv, .ldc = T,
                              .a_off = TG_GUARD, .b_off = TG_GUARD + D, .c_off = TG_GUARD,
                              .a_bz = 64, .b_bz = 64, .c_bz = T * T, .alpha = 0.125f };
    const wd_pc_softmax_t ps = { .M = T, .N = T, .ld = T, .off = TG_GUARD, .z_stride = T * T,
                                 .scale = 1.0f };
    const wd_pc_transpose_t pt = { .R = T, .C = 64, .in_off = TG_GUARD + 2 * D, .ldi = ldqkv,
                                   .in_bz = 64, .out_off = TG_GUARD, .ldo = T, .out_bz = 64 * T };
    const wd_pc_gemm_t pv = { .M = T, .N = 64, .K = T, .lda = T, .ldb = T, .ldc = D,
                              .a_off = TG_GUARD, .b_off = TG_GUARD, .c_off = TG_GUARD,
                              .a_bz = T * T, .b_bz = 64 * T, .c_bz = 64, .alpha = 1.0f };
    WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
    WD_CHECK_EQ_INT(wd_vk_gemm_record(g, cmd, s_qk, &qk, H), 0);
    WD_CHECK_EQ_INT(wd_vk_misc_record_transpose(m, cmd, s_tr, &pt, H), 0);
    wd_vk_cmd_barrier(cmd);
    WD_CHECK_EQ_INT(wd_vk_softmax_record(sm, cmd, s_sm, &ps, H), 0);
    wd_vk_cmd_barrier(cmd);
    WD_CHECK_EQ_INT(wd_vk_gemm_record(g, cmd, s_pv, &pv, H), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
    WD_CHECK_EQ_INT(tg_buf_read(&bo, got), 0);

    /* ref on sampled rows: first, last, and a spread between. */
    float *gs = malloc((size_t)n_sample * D * 4);
    double *ref = malloc((size_t)n_sample * D * sizeof *ref), *p = malloc(T * sizeof *p);
    for (uint32_t si = 0; si < n_sample; si++) {
      const uint32_t i = n_sample >= T ? si : (uint32_t)((uint64_t)si * (T - 1) / (n_sample - 1));
      memcpy(gs + (size_t)si * D, got + (size_t)i * D, D * 4);
      for (uint32_t h = 0; h < H; h++) {
        const float *q = qkv + (size_t)i * ldqkv + h * 64;
        double mx = -INFINITY, s = 0.0;
        for (uint32_t j = 0; j < T; j++) {
          const float *k = qkv + (size_t)j * ldqkv + D + h * 64;
          double t = 0.0;
          for (uint32_t c = 0; c < 64; c++)
            t += (double)q[c] * k[c];
          p[j] = t / 8.0;
          mx = fmax(mx, p[j]);
        }
        for (uint32_t j = 0; j < T; j++)
          s += (p[j] = exp(p[j] - mx));
        for (uint32_t c = 0; c < 64; c++) {
          double o = 0.0;
          for (uint32_t j = 0; j < T; j++)
            o += p[j] * qkv[(size_t)j * ldqkv + 2 * D + h * 64 + c];
          ref[(size_t)si * D + h * 64 + c] = o / s;
        }
      }
    }
    char what[96];
    snprintf(what, sizeof what, "enc attn %s T%u H%u (%u rows)",
             wd_vk_gemm_family_name(wd_vk_gemm_family(g)), T, H, n_sample);
    WD_CHECK(tg_compare(what, gs, ref, (size_t)n_sample * D, 2e-5, 1e-10));
    WD_CHECK(tg_guards_ok(&bo));
    WD_CHECK(tg_guards_ok(&bs));
    WD_CHECK(tg_guards_ok(&bvt));
    free(gs), free(ref), free(p);
  }
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(s_qk), wd_vk_dset_free(s_sm), wd_vk_dset_free(s_tr), wd_vk_dset_free(s_pv);
  tg_buf_free(&bqkv), tg_buf_free(&bs), tg_buf_free(&bvt), tg_buf_free(&bo), tg_buf_free(&bz);
  wd_vk_gemm_free(g);
  wd_vk_softmax_free(sm);
  wd_vk_misc_free(m);
  free(qkv), free(got);
}

WD_TEST(encoder_attention_tiny) {
  TG_DEVICE(dev);
  tg_srand(32);
  run_enc_attn(dev, 1500, 6, WD_VK_GEMM_AUTO, WD_VK_SOFTMAX_AUTO, 24);
}

WD_TEST(encoder_attention_small_tiled) {
  TG_DEVICE(dev);
  tg_srand(33);
  run_enc_attn(dev, 204, 2, WD_VK_GEMM_TILED, WD_VK_SOFTMAX_SHARED, 204);
  if (wd_vk_device_info(dev)->subgroup_arithmetic)
    run_enc_attn(dev, 204, 2, WD_VK_GEMM_TEXEL_8X8, WD_VK_SOFTMAX_SUBGROUP, 204);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
