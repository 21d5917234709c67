/*
 * test_attn_enc.c - the encoder's fused self-attention on the matrix units
 * (vk_attn_enc.h, shaders/attn_cm.comp) against a double-precision softmax
 * attention of the same f16-rounded inputs.
 *
 * Cases: n not a multiple of the 64-query and 32-key blocks (the masks),
 * n = 1500 (the encoder's), several heads in rows wider than the heads
 * (ld > n_head * 64, offsets), large score ranges (a peaked softmax).
 * The output sits in a guarded buffer whose other columns must survive.
 * Tolerance: the kernel rounds P to f16 (relative 2^-11) and sums in f32:
 * max error 3e-3 of max |V| and NMSE 1e-5. Skipped without matrix units
 * (lavapipe), where the engine keeps the unfused path; there the test only
 * checks that the object refuses the device.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpu_util.h"
#include "vk_attn_enc.h"
#include "vk_cmd.h"
#include "vk_shaders.h"
#include "wd_test.h"

typedef struct {
  uint32_t n, n_head, ld, off;
  float amp; /* inputs are uniform in [-amp, amp) */
} ae_case_t;

static void run_case(wd_vk_device_t *dev, wd_vk_attn_enc_t *a, const ae_case_t *tc) {
  const uint32_t n = tc->n, nh = tc->n_head, ld = tc->ld, off = tc->off;
  const size_t total = (size_t)off + (size_t)n * ld;
  float *q = malloc(total * 4), *k = malloc(total * 4), *v = malloc(total * 4);
  float *got = malloc(total * 4), *init = malloc(total * 4);
  double *ref = malloc(total * sizeof *ref), *s = malloc((size_t)n * sizeof *s);
  WD_CHECK(q && k && v && got && init && ref && s);
  if (!q || !k || !v || !got || !init || !ref || !s)
    goto out;
  tg_fill(q, total, tc->amp);
  tg_fill(k, total, tc->amp);
  tg_fill(v, total, 1.0f);
  tg_fill(init, total, 1.0f);
  /* The device reads Q (scaled by 1/8 first: exact), K and V as f16. */
  tg_round_f16(q, total);
  tg_round_f16(k, total);
  tg_round_f16(v, total);
  const double scale = 0.125;
  for (size_t i = 0; i < total; i++)
    ref[i] = init[i];
  for (uint32_t h = 0; h < nh; h++)
    for (uint32_t i = 0; i < n; i++) {
      const float *qi = q + off + (size_t)i * ld + h * 64u;
      double mx = -1e300, sum = 0.0;
      for (uint32_t j = 0; j < n; j++) {
        const float *kj = k + off + (size_t)j * ld + h * 64u;
        double d = 0.0;
        for (uint32_t c = 0; c < 64u; c++)
          d += (double)qi[c] * kj[c];
        s[j] = d * scale;
        if (s[j] > mx)
          mx = s[j];
      }
      for (uint32_t j = 0; j < n; j++)
        sum += (s[j] = exp(s[j] - mx));
      for (uint32_t c = 0; c < 64u; c++) {
        double o = 0.0;
        for (uint32_t j = 0; j < n; j++)
          o += s[j] * v[off + (size_t)j * ld + h * 64u + c];
        ref[off + (size_t)i * ld + h * 64u + c] = o / sum;
      }
    }
  tg_buf_t bq, bk, bv, bo;
  WD_CHECK_EQ_INT(tg_buf_new(dev, total, q, 0, &bq), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, total, k, 0, &bk), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, total, v, 0, &bv), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, total, init, 0, &bo), 0);
  const wd_vk_arg_t aq = tg_all(&bq), ak = tg_all(&bk), av = tg_all(&bv), ao = tg_all(&bo);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  WD_CHECK_EQ_INT(wd_vk_attn_enc_bind(a, &aq, &ak, &av, &ao, &set), 0);
  const uint32_t o0 = TG_GUARD + off;
  const wd_pc_attn_enc_t pc = { .n = n, .ld = ld, .q_off = o0, .k_off = o0, .v_off = o0,
                                .o_off = o0, .scale = (float)scale };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_attn_enc_record(a, cmd, set, &pc, nh), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bo, got), 0);
  char what[96];
  snprintf(what, sizeof what, "attn n=%u heads=%u ld=%u amp=%g", n, nh, ld, (double)tc->amp);
  WD_CHECK(tg_compare(what, got, ref, total, 3e-3, 1e-5));
  WD_CHECK(tg_guards_ok(&bo));
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&bq), tg_buf_free(&bk), tg_buf_free(&bv), tg_buf_free(&bo);
out:
  free(q), free(k), free(v), free(got), free(init), free(ref), free(s);
}

static const ae_case_t cases[] = {
  { 37, 1, 64, 0, 1.0f },      /* one partial block each way */
  { 100, 2, 136, 4, 2.0f },    /* two heads in wider rows, an offset */
  { 1500, 2, 128, 0, 1.0f },   /* the encoder's length */
  { 300, 1, 64, 0, 6.0f },     /* peaked: scores of tens */
};

WD_TEST(attn_enc_matches_reference) {
  TG_DEVICE(dev);
  wd_vk_attn_enc_t *a = NULL;
  const int rc = wd_vk_attn_enc_new(dev, &a);
  if (wd_vk_device_info(dev)->matrix_ext == WD_VK_CM_NONE) {
    WD_CHECK_EQ_INT(rc, WD_EUNSUP);
    wd_test_nothing_to_check("no matrix units");
  }
  WD_CHECK_EQ_INT(rc, 0);
  if (!a)
    return;
  tg_srand(40);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(dev, a, &cases[i]);
  wd_vk_attn_enc_free(a);
}

/* The kernel built for VK_KHR_cooperative_matrix, on a second device made
 * to use that extension (AUTO takes NV where both are listed). */
WD_TEST(attn_enc_khr) {
  TG_DEVICE(dev);
  const wd_vk_device_info_t *d = wd_vk_device_info(dev);
  if (!(d->coopmat.khr_fit && wd_spirv_find("attn_cm_khr")) &&
      !(d->coopmat.khr8_fit && wd_spirv_find("attn_cm_khr8")))
    wd_test_nothing_to_check("no KHR cooperative matrices here, or no KHR kernels in this build");
  const wd_vk_device_opts_t opts = { .index = (int)d->index, .matrix = WD_VK_CM_WANT_KHR };
  wd_vk_device_t *khr = NULL;
  WD_CHECK_EQ_INT(wd_vk_device_new(&opts, &khr), 0);
  if (!khr)
    return;
  wd_vk_attn_enc_t *a = NULL;
  if (wd_vk_device_info(khr)->matrix_ext == WD_VK_CM_NONE) {
    wd_vk_device_free(khr);
    wd_test_nothing_to_check("the device's subgroups or features do not fit the kernels");
  }
  WD_CHECK_EQ_INT(wd_vk_attn_enc_new(khr, &a), 0);
  tg_srand(41);
  for (size_t i = 0; a && i < sizeof cases / sizeof cases[0]; i++)
    run_case(khr, a, &cases[i]);
  wd_vk_attn_enc_free(a);
  wd_vk_device_free(khr);
}

WD_TEST(attn_enc_rejects_bad_shapes) {
  TG_DEVICE(dev);
  wd_vk_attn_enc_t *a = NULL;
  if (wd_vk_attn_enc_new(dev, &a) == WD_EUNSUP)
    wd_test_nothing_to_check("no matrix units");
  const wd_pc_attn_enc_t narrow = { .n = 10, .ld = 64, .scale = 1.0f };
  const wd_pc_attn_enc_t odd = { .n = 10, .ld = 130, .scale = 1.0f };
  wd_vk_cmd_t *cmd = NULL;
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  /* No set: refused before anything is recorded. */
  WD_CHECK_EQ_INT(wd_vk_attn_enc_record(a, cmd, NULL, &narrow, 1), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_attn_enc_record(a, cmd, (const wd_vk_dset_t *)1, &narrow, 2), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_attn_enc_record(a, cmd, (const wd_vk_dset_t *)1, &odd, 1), WD_EINVAL);
  wd_vk_cmd_free(cmd);
  wd_vk_attn_enc_free(a);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
