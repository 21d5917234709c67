/*
 * test_wquant.c - the GEMV and GEMM kernels reading every weight type
 * (f32, f16, q8_0, q5_0, q5_1, q4_0, q4_1), dequantized inside the kernel,
 * against a double-precision C product over the same weights as
 * wd_dequantize_row (core/quant.h) gives them.
 *
 * Weights: random rows quantized with wd_quantize_row (ggml's rounding),
 * then repacked for the device with wd_vk_wquant_pack, exactly as
 * vk_weights does at upload; the reference multiplies the dequantized rows.
 * A block's values are small integers times an f16 scale (plus an f16
 * minimum), exact in f32 on both sides, so the only difference left is f32
 * accumulation: the tolerances are the f16 tests' (test_gemv.c, test_gemm.c).
 *
 * GEMV: every family the device has (ROW, SUBGROUP, SHARED), batches 1, 3,
 * 5, 16, odd N, K across the ROW/SUBGROUP split, a non-zero w_off (one
 * leading junk row), and batch independence (each row of a batch of 5 bit
 * for bit the same as alone). GEMM: TEXEL 16x16, TEXEL 8x8 and TILED, odd M
 * and N, Z = 2 batch entries, padded ldb, all epilogues. Output guards are
 * sentinels that must survive. The quantized types run every case with the
 * whole epilogue (bias, GELU, accumulate), f32 and f16 each epilogue.
 */
#include "f16.h"
#include "gpu_util.h"
#include "quant.h"
#include "vk_cmd.h"
#include "vk_gemm.h"
#include "vk_gemv.h"
#include "vk_wquant.h"

static const wd_dtype_t k_types[] = { WD_DTYPE_F32,  WD_DTYPE_F16,  WD_DTYPE_Q8_0, WD_DTYPE_Q5_0,
                                      WD_DTYPE_Q5_1, WD_DTYPE_Q4_0, WD_DTYPE_Q4_1 };
#define N_TYPES (sizeof k_types / sizeof k_types[0])

/* rows x cols weights of type t: *ret_ref the dequantized values (what the
 * kernel must see), *ret_buf a device buffer in the vk_wquant.h layout,
 * *ret_arg its binding with wtype set. cols is a multiple of 32. */
static int make_weights(wd_vk_device_t *dev, wd_dtype_t t, size_t rows, size_t cols, float scale,
                        float **ret_ref, wd_vk_buffer_t **ret_buf, wd_vk_arg_t *ret_arg) {
  const size_t n = rows * cols;
  const size_t qrow = wd_dtype_row_bytes(t, (int64_t)cols);
  const size_t dev_bytes = wd_vk_wquant_bytes(t, (int64_t)n);
  /* Whole 16-byte texels for every view format. */
  const size_t alloc = (dev_bytes + 15) / 16 * 16;
  float *src = malloc(n * 4), *ref = malloc(n * 4);
  unsigned char *q = malloc(qrow * rows), *dv = calloc(1, alloc);
  int rc = src && ref && q && dv ? 0 : WD_ENOMEM;
  if (rc == 0) {
    tg_fill(src, n, scale);
    /* Some rows with an offset, so that q4_1 / q5_1 minima matter. */
    for (size_t r = 0; r < rows; r += 3)
      for (size_t c = 0; c < cols; c++)
        src[r * cols + c] += scale;
  }
  for (size_t r = 0; r < rows && rc == 0; r++) {
    rc = wd_quantize_row(t, src + r * cols, q + r * qrow, (int64_t)cols);
    if (rc == 0)
      rc = wd_dequantize_row(t, q + r * qrow, ref + r * cols, (int64_t)cols);
  }
  if (rc == 0)
    rc = wd_vk_wquant_pack(t, q, (int64_t)n, dv);
  if (rc == 0)
    rc = wd_vk_buffer_new(dev, alloc, WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL, WD_VK_MEM_DEVICE,
                          ret_buf);
  if (rc == 0)
    rc = wd_vk_buffer_write(*ret_buf, 0, dv, alloc);
  free(src), free(q), free(dv);
  if (rc < 0) {
    free(ref);
    return rc;
  }
  /* A texel view's range must be whole texels of its format (f16 8 B, f32
   * 16 B, words 4 B): the padded size is all three. */
  *ret_arg = (wd_vk_arg_t){ .buf = *ret_buf, .range = alloc, .wtype = wd_vk_wtype_of(t) };
  *ret_ref = ref;
  return 0;
}

/* ---- GEMV --------------------------------------------------------------- */

typedef struct {
  uint32_t N, K, nb, flags;
} wq_gemv_case_t;

static const wq_gemv_case_t gemv_cases[] = {
  { 1001, 384, 1, WD_GEMM_BIAS },
  { 77, 64, 3, WD_GEMM_BIAS | WD_GEMM_GELU | WD_GEMM_ACCUMULATE },
  { 384, 1536, 5, WD_GEMM_BIAS | WD_GEMM_ACCUMULATE },
  { 515, 416, 16, 0 },
};

/* One case: W has N + 1 rows, the first junk, read at w_off = K. */
static void gemv_case(wd_vk_device_t *dev, wd_vk_gemv_t *g, wd_dtype_t t, const wq_gemv_case_t *c) {
  const uint32_t N = c->N, K = c->K, nb = c->nb;
  const size_t nx = (size_t)nb * K, ny = (size_t)nb * N;
  float *wref = NULL, *x = malloc(nx * 4), *bias = malloc(N * 4), *y0 = malloc(ny * 4);
  float *got = malloc(ny * 4), *alone = malloc(ny * 4);
  double *ref = malloc(ny * sizeof *ref);
  wd_vk_buffer_t *wb = NULL;
  wd_vk_arg_t aw;
  WD_CHECK(x && bias && y0 && got && alone && ref);
  WD_CHECK_EQ_INT(make_weights(dev, t, (size_t)N + 1, K, 0.05f, &wref, &wb, &aw), 0);
  if (!wb || !x || !bias || !y0 || !got || !alone || !ref)
    goto out;
  tg_fill(x, nx, 1.0f);
  tg_fill(bias, N, 0.5f);
  tg_fill(y0, ny, 1.0f);
  for (uint32_t b = 0; b < nb; b++)
    for (uint32_t n = 0; n < N; n++) {
      double s = 0.0;
      for (uint32_t k = 0; k < K; k++)
        s += (double)wref[(size_t)(n + 1) * K + k] * x[(size_t)b * K + k];
      if (c->flags & WD_GEMM_BIAS)
        s += bias[n];
      if (c->flags & WD_GEMM_GELU)
        s = tg_gelu(s);
      if (c->flags & WD_GEMM_ACCUMULATE)
        s += y0[(size_t)b * N + n];
      ref[(size_t)b * N + n] = s;
    }
  tg_buf_t bx, bb, by;
  WD_CHECK_EQ_INT(tg_buf_new(dev, nx, x, 0, &bx), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, N, bias, 0, &bb), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, ny, y0, 0, &by), 0);
  const wd_vk_arg_t ax = tg_all(&bx), ab = tg_all(&bb), ay = tg_all(&by);
  /* Twice: the whole batch in one dispatch, then each row alone (a set
   * bound for nb = 1, one dispatch per row) from the same y0. */
  for (int pass = 0; pass < 2; pass++) {
    wd_vk_dset_t *set = NULL;
    wd_vk_cmd_t *cmd = NULL;
    const uint32_t bnb = pass == 0 ? nb : 1;
    WD_CHECK_EQ_INT(wd_vk_buffer_write(by.buf, TG_GUARD * 4, y0, ny * 4), 0);
    WD_CHECK_EQ_INT(wd_vk_gemv_bind(g, K, bnb, &ax, &aw, &ab, &ay, &set), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
    for (uint32_t r = 0; r < (pass == 0 ? 1u : nb); r++) {
      const wd_pc_gemv_t pc = {
        .N = N, .K = K, .nb = bnb, .x_off = TG_GUARD + r * K, .ldx = K, .w_off = K,
        .y_off = TG_GUARD + r * N, .ldy = N, .bias_off = TG_GUARD, .flags = c->flags,
        .alpha = 1.0f,
      };
      WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &pc), 0);
    }
    WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
    WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
    WD_CHECK_EQ_INT(tg_buf_read(&by, pass == 0 ? got : alone), 0);
    wd_vk_cmd_free(cmd);
    wd_vk_dset_free(set);
  }
  char what[96];
  snprintf(what, sizeof what, "gemv %s %s N%u K%u B%u", wd_dtype_name(t),
           wd_vk_gemv_family_name(wd_vk_gemv_choose(g, K)), N, K, nb);
  WD_CHECK(tg_compare(what, got, ref, ny, 1e-4, 1e-10));
  WD_CHECK(tg_guards_ok(&by));
  int n_diff = 0;
  for (size_t i = 0; i < ny; i++)
    n_diff += memcmp(&got[i], &alone[i], 4) != 0;
  if (n_diff)
    fprintf(stderr, "  %s: %d outputs differ between the batch and alone\n", what, n_diff);
  WD_CHECK_EQ_INT(n_diff, 0);
  tg_buf_free(&bx), tg_buf_free(&bb), tg_buf_free(&by);
out:
  wd_vk_buffer_free(wb);
  free(wref), free(x), free(bias), free(y0), free(got), free(alone), free(ref);
}

static void gemv_family(wd_vk_gemv_family_t f) {
  TG_DEVICE(dev);
  wd_vk_gemv_t *g = NULL;
  const int rc = wd_vk_gemv_new(dev, f, &g);
  if (rc == WD_EUNSUP)
    wd_test_skip("no subgroup arithmetic on this device");
  WD_CHECK_EQ_INT(rc, 0);
  if (rc)
    return;
  tg_srand(1234 + (uint64_t)f);
  for (size_t t = 0; t < N_TYPES; t++)
    for (size_t i = 0; i < sizeof gemv_cases / sizeof gemv_cases[0]; i++)
      gemv_case(dev, g, k_types[t], &gemv_cases[i]);
  wd_vk_gemv_free(g);
}

WD_TEST(gemv_row_types) { gemv_family(WD_VK_GEMV_ROW); }
WD_TEST(gemv_subgroup_types) { gemv_family(WD_VK_GEMV_SUBGROUP); }
WD_TEST(gemv_shared_types) { gemv_family(WD_VK_GEMV_SHARED); }

/* A quantized W needs K and w_off in whole blocks. */
WD_TEST(gemv_quant_rejects_partial_blocks) {
  TG_DEVICE(dev);
  wd_vk_gemv_t *g = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemv_new(dev, WD_VK_GEMV_ROW, &g), 0);
  if (!g)
    return;
  float *wref = NULL;
  wd_vk_buffer_t *wb = NULL;
  wd_vk_arg_t aw;
  tg_buf_t b;
  WD_CHECK_EQ_INT(make_weights(dev, WD_DTYPE_Q4_0, 4, 64, 1.0f, &wref, &wb, &aw), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, 256, NULL, 0, &b), 0);
  const wd_vk_arg_t a = tg_all(&b);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemv_bind(g, 64, 1, &a, &aw, &a, &a, &set), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  const wd_pc_gemv_t ok = { .N = 4, .K = 64, .nb = 1, .ldx = 64, .ldy = 4, .alpha = 1.0f };
  wd_pc_gemv_t bad = ok;
  bad.K = bad.ldx = 48;
  WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &bad), WD_EINVAL);
  bad = ok;
  bad.w_off = 16;
  WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &bad), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_gemv_record(g, cmd, set, &ok), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_n_dispatches(cmd), 1);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&b);
  wd_vk_buffer_free(wb);
  free(wref);
  wd_vk_gemv_free(g);
}

/* ---- GEMM --------------------------------------------------------------- */

typedef struct {
  uint32_t M, N, K, Z, flags;
} wq_gemm_case_t;

static const wq_gemm_case_t gemm_cases[] = {
  { 37, 53, 64, 1, WD_GEMM_BIAS },
  { 130, 129, 96, 2, WD_GEMM_BIAS | WD_GEMM_GELU },
  { 65, 200, 384, 1, WD_GEMM_BIAS | WD_GEMM_GELU | WD_GEMM_ACCUMULATE },
};

static void gemm_case(wd_vk_device_t *dev, wd_vk_gemm_t *g, wd_dtype_t t,
                      const wq_gemm_case_t *c) {
  const uint32_t M = c->M, N = c->N, K = c->K, Z = c->Z;
  const uint32_t lda = K + 4, ldb = K + 32, ldc = N + 3; /* padded rows */
  const bool f16a = wd_vk_gemm_family_f16(wd_vk_gemm_family(g));
  const size_t na = (size_t)Z * M * lda, nc = (size_t)Z * M * ldc;
  float *bref = NULL, *a = malloc(na * 4), *bias = malloc((size_t)Z * N * 4);
  float *c0 = malloc(nc * 4), *got = malloc(nc * 4);
  double *ref = malloc(nc * sizeof *ref);
  wd_vk_buffer_t *bb = NULL;
  wd_vk_arg_t ab;
  WD_CHECK(a && bias && c0 && got && ref);
  WD_CHECK_EQ_INT(make_weights(dev, t, (size_t)Z * N, ldb, 0.5f, &bref, &bb, &ab), 0);
  if (!bb || !a || !bias || !c0 || !got || !ref)
    goto out;
  /* The matrix units see the dequantized weights rounded to f16 too. */
  if (f16a)
    for (size_t i = 0; i < (size_t)Z * N * ldb; i++)
      bref[i] = wd_f16_to_f32(wd_f32_to_f16(bref[i]));
  tg_fill(a, na, 1.0f);
  tg_fill(bias, (size_t)Z * N, 1.0f);
  tg_fill(c0, nc, 1.0f);
  /* Padding columns of C keep c0; ref mirrors that. */
  for (size_t i = 0; i < nc; i++)
    ref[i] = c0[i];
  for (uint32_t z = 0; z < Z; z++)
    for (uint32_t m = 0; m < M; m++)
      for (uint32_t n = 0; n < N; n++) {
        double s = 0.0;
        const float *ar = a + ((size_t)z * M + m) * lda, *br = bref + ((size_t)z * N + n) * ldb;
        for (uint32_t k = 0; k < K; k++) /* the matrix units see A in f16 */
          s += (f16a ? (double)wd_f16_to_f32(wd_f32_to_f16(ar[k])) : (double)ar[k]) * br[k];
        if (c->flags & WD_GEMM_BIAS)
          s += bias[(size_t)z * N + n];
        if (c->flags & WD_GEMM_GELU)
          s = tg_gelu(s);
        const size_t ci = ((size_t)z * M + m) * ldc + n;
        if (c->flags & WD_GEMM_ACCUMULATE)
          s += c0[ci];
        ref[ci] = s;
      }
  tg_buf_t ba, bbias, bc;
  WD_CHECK_EQ_INT(tg_buf_new(dev, na, a, 0, &ba), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, (size_t)Z * N, bias, 0, &bbias), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nc, c0, 0, &bc), 0);
  const wd_vk_arg_t aa = tg_all(&ba), abias = tg_all(&bbias), ac = tg_all(&bc);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemm_bind(g, &aa, &ab, &abias, &ac, &set), 0);
  const wd_pc_gemm_t pc = {
    .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
    .a_off = TG_GUARD, .b_off = 0, .c_off = TG_GUARD, .bias_off = TG_GUARD,
    .a_bz = M * lda, .b_bz = N * ldb, .c_bz = M * ldc, .bias_bz = N,
    .flags = c->flags, .alpha = 1.0f,
  };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_gemm_record(g, cmd, set, &pc, Z), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bc, got), 0);
  char what[96];
  snprintf(what, sizeof what, "gemm %s %s M%u N%u K%u Z%u", wd_dtype_name(t),
           wd_vk_gemm_family_name(wd_vk_gemm_family(g)), M, N, K, Z);
  /* Outputs O(10) here (K up to 384 of |a b| ~ 0.25): f32 accumulation
   * error ~1e-5 relative. */
  WD_CHECK(tg_compare(what, got, ref, nc, 2e-3, 1e-10));
  WD_CHECK(tg_guards_ok(&bc));
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&ba), tg_buf_free(&bbias), tg_buf_free(&bc);
out:
  wd_vk_buffer_free(bb);
  free(bref), free(a), free(bias), free(c0), free(got), free(ref);
}

static void gemm_family(wd_vk_gemm_family_t f) {
  TG_DEVICE(dev);
  if (wd_vk_gemm_family_f16(f) && wd_vk_device_info(dev)->matrix_ext == WD_VK_CM_NONE)
    wd_test_nothing_to_check("no matrix units");
  wd_vk_gemm_t *g = NULL;
  WD_CHECK_EQ_INT(wd_vk_gemm_new(dev, f, &g), 0);
  if (!g)
    return;
  tg_srand(99 + (uint64_t)f);
  /* f32 and f16 B with each epilogue of the cases; the quantized types,
   * whose kernels differ from those only in how B is loaded, with every
   * epilogue step at once in each case's shape. Each (type, epilogue) is
   * a pipeline that lavapipe compiles with LLVM, and compiling, not
   * running, is this test's cost on a CPU (a cold shader cache: minutes). */
  const uint32_t all_epi = WD_GEMM_BIAS | WD_GEMM_GELU | WD_GEMM_ACCUMULATE;
  for (size_t t = 0; t < N_TYPES; t++)
    for (size_t i = 0; i < sizeof gemm_cases / sizeof gemm_cases[0]; i++) {
      wq_gemm_case_t c = gemm_cases[i];
      if (k_types[t] != WD_DTYPE_F32 && k_types[t] != WD_DTYPE_F16)
        c.flags = all_epi;
      gemm_case(dev, g, k_types[t], &c);
    }
  wd_vk_gemm_free(g);
}

WD_TEST(gemm_tex_types) { gemm_family(WD_VK_GEMM_TEXEL); }
WD_TEST(gemm_tex_8x8_types) { gemm_family(WD_VK_GEMM_TEXEL_8X8); }
WD_TEST(gemm_tiled_types) { gemm_family(WD_VK_GEMM_TILED); }
WD_TEST(gemm_rb_types) { gemm_family(WD_VK_GEMM_RB64); }
WD_TEST(gemm_cm_types) { gemm_family(WD_VK_GEMM_CM128); }

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
