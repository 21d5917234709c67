/*
 * test_gemm.c - every GEMM family against a double-precision C reference.
 *
 * Inputs are random with a fixed seed; B is rounded to f16 on the host so the
 * reference sees exactly the weights the device sees. Outputs sit inside a
 * larger buffer (a leading gap, ldc > N, trailing rows) filled with a
 * sentinel; the test checks that every sentinel survives. Tolerance: the
 * error of each output must be below 2e-5 of sum_k |a_k * b_k| (plus the
 * bias magnitude), the scale at which f32 accumulation error lives; NaN
 * never passes. The matrix-unit families (cm-*) round A to f16 on the
 * device: their reference rounds A the same way, so the tolerance still
 * measures the sums alone (1e-4 of the magnitude: the units' f32 sums are
 * not ordered as a loop's); they run where the device has matrix units and
 * are skipped elsewhere (lavapipe).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "f16.h"
#include "vk_buffer.h"
#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_gemm.h"
#include "vk_shaders.h"
#include "wd_test.h"

#define SENTINEL 1234.5f
#define C_GAP 16u /* floats before C's first element */

static wd_vk_device_t *g_dev;
static int g_no_device;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { return wd_test_uniform(&g_rng); }

static double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

typedef struct {
  uint32_t M, N, K, Z;
  uint32_t flags;
  float alpha;
} gemm_case_t;

/* Runs one case on one family; returns the number of failed elements. */
static int run_case(wd_vk_gemm_family_t fam, const gemm_case_t *tc, double *ret_max_err) {
  const uint32_t M = tc->M, N = tc->N, K = tc->K, Z = tc->Z;
  const uint32_t lda = K + 4, ldb = K + 8, ldc = N + 3; /* padded rows */
  const uint64_t na = (uint64_t)Z * M * lda, nb = (uint64_t)Z * N * ldb;
  const uint64_t nc = C_GAP + (uint64_t)Z * M * ldc + 64; /* trailing guard */
  float *a = malloc(na * 4), *bf = malloc(nb * 4), *bias = malloc((uint64_t)Z * N * 4);
  uint16_t *bh = malloc(nb * 2);
  float *c = malloc(nc * 4), *cin = malloc(nc * 4);
  wd_vk_buffer_t *ba = NULL, *bb = NULL, *bbias = NULL, *bc = NULL;
  wd_vk_gemm_t *g = NULL;
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  int bad = 0;
  WD_CHECK(a && bf && bias && bh && c && cin);

  for (uint64_t i = 0; i < na; i++)
    a[i] = frand();
  for (uint64_t i = 0; i < nb; i++) {
    bh[i] = wd_f32_to_f16(frand() * 0.5f);
    bf[i] = wd_f16_to_f32(bh[i]);
  }
  for (uint64_t i = 0; i < (uint64_t)Z * N; i++)
    bias[i] = frand();
  for (uint64_t i = 0; i < nc; i++)
    cin[i] = SENTINEL;
  if (tc->flags & WD_GEMM_ACCUMULATE) /* residual input inside the valid region */
    for (uint32_t z = 0; z < Z; z++)
      for (uint32_t m = 0; m < M; m++)
        for (uint32_t n = 0; n < N; n++)
          cin[C_GAP + ((uint64_t)z * M + m) * ldc + n] = frand();

  const bool f16a = wd_vk_gemm_family_f16(fam);
  int rc = wd_vk_gemm_new(g_dev, fam, &g);
  WD_CHECK_EQ_INT(rc, 0);
  rc |= wd_vk_buffer_new(g_dev, na * 4, WD_VK_BUF_TEXEL | WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &ba);
  rc |= wd_vk_buffer_new(g_dev, nb * 2, WD_VK_BUF_TEXEL | WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &bb);
  rc |= wd_vk_buffer_new(g_dev, (uint64_t)Z * N * 4, WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &bbias);
  rc |= wd_vk_buffer_new(g_dev, nc * 4, WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &bc);
  WD_CHECK_EQ_INT(rc, 0);
  if (rc)
    goto out;
  WD_CHECK_EQ_INT(wd_vk_buffer_write(ba, 0, a, na * 4), 0);
  WD_CHECK_EQ_INT(wd_vk_buffer_write(bb, 0, bh, nb * 2), 0);
  WD_CHECK_EQ_INT(wd_vk_buffer_write(bbias, 0, bias, (uint64_t)Z * N * 4), 0);
  WD_CHECK_EQ_INT(wd_vk_buffer_write(bc, 0, cin, nc * 4), 0);

  const wd_vk_arg_t aa = { .buf = ba }, ab = { .buf = bb }, abias = { .buf = bbias }, ac = { .buf = bc };
  WD_CHECK_EQ_INT(wd_vk_gemm_bind(g, &aa, &ab, &abias, &ac, &set), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_new(g_dev, 0, &cmd), 0);
  const wd_pc_gemm_t pc = {
    .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
    .a_off = 0, .b_off = 0, .c_off = C_GAP, .bias_off = 0,
    .a_bz = M * lda, .b_bz = N * ldb, .c_bz = M * ldc, .bias_bz = N,
    .flags = tc->flags, .alpha = tc->alpha,
  };
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_gemm_record(g, cmd, set, &pc, Z), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, 60ull * 1000000000ull), 0);
  WD_CHECK_EQ_INT(wd_vk_buffer_read(bc, 0, c, nc * 4), 0);

  double max_err = 0.0;
  for (uint64_t i = 0; i < nc; i++) {
    /* Where does element i belong? Inside the valid region or a guard. */
    int valid = 0;
    uint32_t z = 0, m = 0, n = 0;
    if (i >= C_GAP && i < C_GAP + (uint64_t)Z * M * ldc) {
      const uint64_t r = i - C_GAP;
      z = (uint32_t)(r / ((uint64_t)M * ldc));
      m = (uint32_t)((r / ldc) % M);
      n = (uint32_t)(r % ldc);
      valid = n < N;
    }
    if (!valid) {
      if (c[i] != SENTINEL)
        bad++;
      continue;
    }
    double acc = 0.0, mag = 0.0;
    const float *ar = a + ((uint64_t)z * M + m) * lda;
    const float *br = bf + ((uint64_t)z * N + n) * ldb;
    for (uint32_t k = 0; k < K; k++) {
      const double av = f16a ? (double)wd_f16_to_f32(wd_f32_to_f16(ar[k])) : (double)ar[k];
      acc += av * br[k];
      mag += fabs(av * br[k]);
    }
    double v = tc->alpha * acc;
    mag = fabs((double)tc->alpha) * mag;
    if (tc->flags & WD_GEMM_BIAS) {
      v += bias[(uint64_t)z * N + n];
      mag += fabs((double)bias[(uint64_t)z * N + n]);
    }
    if (tc->flags & WD_GEMM_GELU)
      v = gelu_ref(v);
    if (tc->flags & WD_GEMM_ACCUMULATE) {
      v += cin[i];
      mag += fabs((double)cin[i]);
    }
    const double err = fabs((double)c[i] - v) / (mag + 1e-6);
    if (!(err <= (f16a ? 1e-4 : 2e-5))) /* also catches NaN */
      bad++;
    if (err > max_err || isnan(err))
      max_err = err;
  }
  *ret_max_err = max_err;
out:
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  wd_vk_gemm_free(g);
  wd_vk_buffer_free(ba);
  wd_vk_buffer_free(bb);
  wd_vk_buffer_free(bbias);
  wd_vk_buffer_free(bc);
  free(a);
  free(bf);
  free(bias);
  free(bh);
  free(c);
  free(cin);
  return bad;
}

static const gemm_case_t cases[] = {
  { 1, 1, 4, 1, 0, 1.0f },                                  /* smallest */
  { 37, 53, 20, 1, WD_GEMM_BIAS, 1.0f },                     /* odd edges */
  { 130, 129, 68, 2, WD_GEMM_BIAS | WD_GEMM_GELU, 1.0f },    /* tiles + 1, batch */
  { 65, 200, 132, 3, WD_GEMM_ACCUMULATE, 0.125f },           /* residual, alpha */
  { 300, 384, 384, 1, WD_GEMM_BIAS | WD_GEMM_GELU | WD_GEMM_ACCUMULATE, 1.0f },
  { 70, 90, 100, 1, WD_GEMM_BIAS, 1.0f }, /* 4 K-slices of 32, the last partial */
};

static void check_family(wd_vk_gemm_family_t fam) {
  if (g_no_device)
    wd_test_skip("no Vulkan device");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double err = 0.0;
    int bad = run_case(fam, &cases[i], &err);
    fprintf(stderr, "  %-14s M=%-4u N=%-4u K=%-4u Z=%u flags=%u: max rel err %.2e, %d bad\n",
            wd_vk_gemm_family_name(fam), cases[i].M, cases[i].N, cases[i].K, cases[i].Z,
            cases[i].flags, err, bad);
    WD_CHECK_EQ_INT(bad, 0);
  }
}

WD_TEST(device_opens) {
  const wd_vk_device_opts_t opts = { .index = -1 };
  /* Keep lavapipe mapped after vkDestroyInstance so LeakSanitizer can name
   * (and tests/lsan.supp suppress) the driver's own exit-time leaks. */
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  int rc = wd_vk_device_new(&opts, &g_dev);
  if (rc == WD_ENODEVICE) {
    g_no_device = 1;
    wd_test_skip("no Vulkan device");
  }
  WD_CHECK_EQ_INT(rc, 0);
  fprintf(stderr, "  device: %s\n", wd_vk_device_info(g_dev)->name);
}

WD_TEST(gemm_texel_16x16) { check_family(WD_VK_GEMM_TEXEL); }
WD_TEST(gemm_texel_8x8) { check_family(WD_VK_GEMM_TEXEL_8X8); }
WD_TEST(gemm_tiled) { check_family(WD_VK_GEMM_TILED); }
WD_TEST(gemm_rb_64x64) { check_family(WD_VK_GEMM_RB64); }
WD_TEST(gemm_rb_128x64) { check_family(WD_VK_GEMM_RB128X64); }

static void check_matrix_family(wd_vk_gemm_family_t fam) {
  if (g_no_device)
    wd_test_skip("no Vulkan device");
  const wd_vk_device_info_t *d = wd_vk_device_info(g_dev);
  if (d->matrix_ext == WD_VK_CM_NONE) {
    /* The family refuses such a device rather than failing later. */
    wd_vk_gemm_t *g = NULL;
    WD_CHECK_EQ_INT(wd_vk_gemm_new(g_dev, fam, &g), WD_EUNSUP);
    wd_test_nothing_to_check("no matrix units");
  }
  fprintf(stderr, "  matrix units: %s\n", wd_vk_cm_ext_name(d->matrix_ext));
  check_family(fam);
}

WD_TEST(gemm_cm_128x128) { check_matrix_family(WD_VK_GEMM_CM128); }
WD_TEST(gemm_cm_64x64) { check_matrix_family(WD_VK_GEMM_CM64); }
/* The candidates (vk_gemm.h). */
WD_TEST(gemm_cm_128x128_dl) { check_matrix_family(WD_VK_GEMM_CM128_DL); }
WD_TEST(gemm_cm_64x64_dl) { check_matrix_family(WD_VK_GEMM_CM64_DL); }
WD_TEST(gemm_cm_128x128_pf2) { check_matrix_family(WD_VK_GEMM_CM128_PF2); }
WD_TEST(gemm_cm_64x64_pf2) { check_matrix_family(WD_VK_GEMM_CM64_PF2); }

/* The same kernels built for VK_KHR_cooperative_matrix, on a second device
 * made to use that extension (AUTO takes NV where both are listed). */
WD_TEST(gemm_cm_khr) {
  if (g_no_device)
    wd_test_skip("no Vulkan device");
  const wd_vk_device_info_t *d = wd_vk_device_info(g_dev);
  if (!(d->coopmat.khr_fit && wd_spirv_find("gemm_cm128_khr")) &&
      !(d->coopmat.khr8_fit && wd_spirv_find("gemm_cm64_khr8")))
    wd_test_nothing_to_check("no KHR cooperative matrices here, or no KHR kernels in this build");
  const wd_vk_device_opts_t opts = { .index = (int)d->index, .matrix = WD_VK_CM_WANT_KHR };
  wd_vk_device_t *khr = NULL;
  WD_CHECK_EQ_INT(wd_vk_device_new(&opts, &khr), 0);
  if (!khr)
    return;
  const wd_vk_cm_ext_t x = wd_vk_device_info(khr)->matrix_ext;
  if (x == WD_VK_CM_NONE) {
    wd_vk_device_free(khr);
    wd_test_nothing_to_check("the device's subgroups or features do not fit the kernels");
  }
  wd_vk_device_t *saved = g_dev;
  g_dev = khr;
  fprintf(stderr, "  matrix units: %s%s\n", wd_vk_cm_ext_name(x), wd_vk_cm_suffix(x));
  if (x == WD_VK_CM_KHR) { /* KHR8 (lavapipe) has the 64 x 64 tiles only */
    check_family(WD_VK_GEMM_CM128);
    check_family(WD_VK_GEMM_CM128_DL);
    check_family(WD_VK_GEMM_CM128_PF2);
  }
  check_family(WD_VK_GEMM_CM64);
  check_family(WD_VK_GEMM_CM64_DL);
  check_family(WD_VK_GEMM_CM64_PF2);
  g_dev = saved;
  wd_vk_device_free(khr);
}


WD_TEST(gemm_rejects_misaligned) {
  if (g_no_device)
    wd_test_skip("no Vulkan device");
  wd_vk_gemm_t *g = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemm_new(g_dev, WD_VK_GEMM_TEXEL, &g), 0);
  const wd_pc_gemm_t pc = { .M = 4, .N = 4, .K = 6, .lda = 6, .ldb = 6, .ldc = 4, .alpha = 1 };
  WD_CHECK_EQ_INT(wd_vk_gemm_record(g, NULL, NULL, &pc, 1), WD_EINVAL); /* K % 4 != 0 */
  wd_vk_gemm_free(g);
}

WD_TEST(dispatch_misuse_is_an_error_not_a_crash) {
  if (g_no_device)
    wd_test_skip("no Vulkan device");
  wd_vk_gemm_t *g = NULL;
  wd_vk_cmd_t *cmd = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemm_new(g_dev, WD_VK_GEMM_TEXEL, &g), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_new(g_dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  wd_vk_cmd_dispatch(cmd, NULL, NULL, 0, 1, 1, 1); /* no descriptor set */
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), WD_EINVAL);
  /* The same command buffer records and runs normally afterwards. */
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, 10ull * 1000000000ull), 0);
  wd_vk_cmd_free(cmd);
  wd_vk_gemm_free(g);
}

WD_TEST(unknown_shader_is_enoent) {
  if (g_no_device)
    wd_test_skip("no Vulkan device");
  wd_vk_pipeline_desc_t d = { .shader = "no_such_kernel", .local_size = { 1, 1, 1 } };
  wd_vk_pipeline_t *p = NULL;
  WD_CHECK_EQ_INT(wd_vk_pipeline_new(g_dev, &d, &p), WD_ENOENT);
  WD_CHECK(p == NULL);
}

WD_TEST(buffer_range_checks) {
  if (g_no_device)
    wd_test_skip("no Vulkan device");
  wd_vk_buffer_t *b = NULL;
  WD_CHECK_EQ_INT(wd_vk_buffer_new(g_dev, 0, WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &b), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_buffer_new(g_dev, 64, WD_VK_BUF_STORAGE, WD_VK_MEM_HOST, &b), 0);
  char tmp[128] = { 0 };
  WD_CHECK_EQ_INT(wd_vk_buffer_write(b, 32, tmp, 64), WD_ERANGE);
  WD_CHECK_EQ_INT(wd_vk_buffer_read(b, 65, tmp, 0), WD_ERANGE);
  WD_CHECK(wd_vk_buffer_map(b) != NULL);
  wd_vk_buffer_free(b);
}

WD_TEST(teardown) {
  wd_vk_device_free(g_dev);
  g_dev = NULL;
}

int main(void) { return wd_test_main(); }
