/*
 * test_attn.c - vk_attn (decoder attention, one step) against C.
 *
 * Self-attention with a different cache length per sequence (read from the
 * step-parameter buffer: 1, a middle length, the full n_ctx = 448), each
 * batch row reading the cache of its own slot through a permuted,
 * non-contiguous slot map (2 * B + 1 slots, row b -> (5b + 2) mod that), and
 * cross-attention over 1500 keys where sequences map to encoder outputs
 * through audio[b] (two beams sharing one output). B = 1, 3, 8; tiny's
 * 6 heads of 64. Both reduction variants. The saved scores (QK) and weights
 * (P) of chosen heads are checked too, and heads not chosen must leave the
 * save buffer untouched. The rows kernel (prefill, align: 16 rows of one
 * sequence per workgroup) on 32 rows of self-attention (causal lengths,
 * padding rows of zeros) and 48 of cross-attention. Tolerance: max |err| <= 2e-5, NMSE <= 1e-10
 * (outputs are convex combinations of V in [-1, 1]).
 */
#include "gpu_util.h"
#include "vk_attn.h"
#include "vk_cmd.h"

#define NH 6u
#define D (NH * 64u)

/* ref: softmax(scale q.k) . v for one (b, h); writes 64 outputs, and the
 * scores and weights (n_keys each). */
static void ref_attn(const float *q, const float *k, const float *v, uint32_t ld, uint32_t n_keys,
                     double *out, double *qk, double *pw) {
  double m = -INFINITY, s = 0.0;
  for (uint32_t j = 0; j < n_keys; j++) {
    double t = 0.0;
    for (uint32_t i = 0; i < 64; i++)
      t += (double)q[i] * k[(size_t)j * ld + i];
    qk[j] = t / 8.0;
    m = fmax(m, qk[j]);
  }
  for (uint32_t j = 0; j < n_keys; j++)
    s += (pw[j] = exp(qk[j] - m));
  for (uint32_t j = 0; j < n_keys; j++)
    pw[j] /= s;
  for (uint32_t i = 0; i < 64; i++) {
    double o = 0.0;
    for (uint32_t j = 0; j < n_keys; j++)
      o += pw[j] * v[(size_t)j * ld + i];
    out[i] = o;
  }
}

/* One case: nb sequences, self (lens) or cross (audio map, n_audio outputs);
 * with rows = 1, nb rows of one sequence through the rows kernel instead: a
 * prompt of nb - 5 tokens after 400 cached ones in slot 3 (self) or over
 * audio 1 (cross), behind 5 padding rows (len 0: zeros); with rows = -n,
 * the sequences of the first form in n key chunks (the save buffer holds
 * the partials). */
static void run_case(wd_vk_device_t *dev, wd_vk_attn_t *a, uint32_t nb, int cross,
                     uint32_t save_flag, uint32_t save_heads, int rows) {
  const uint32_t n_split = rows < 0 ? (uint32_t)-rows : 0;
  rows = rows > 0;
  /* Self: more cache slots than rows, so rows and slots cannot coincide. */
  const uint32_t n_ctx = cross ? 1500 : 448, n_src = cross ? 2 : rows ? 5 : 2 * nb + 1;
  const uint32_t ldq = 3 * D; /* q inside a fused QKV row */
  const size_t nq = (size_t)nb * ldq, nkv = (size_t)n_src * n_ctx * D, no = (size_t)nb * D;
  const size_t save_ld = n_split * WD_ATTN_PART > n_ctx ? n_split * WD_ATTN_PART : n_ctx;
  const size_t ns = (size_t)nb * NH * save_ld;
  float *q = malloc(nq * 4), *k = malloc(nkv * 4), *v = malloc(nkv * 4);
  float *got = malloc(no * 4), *gs = malloc(ns * 4);
  double *ref = calloc(no, sizeof *ref), *qk = malloc(n_ctx * sizeof *qk),
         *pw = malloc(n_ctx * sizeof *pw);
  tg_fill(q, nq, 2.0f);
  tg_fill(k, nkv, 1.0f);
  tg_fill(v, nkv, 1.0f);
  wd_seq_t seq[64];
  for (uint32_t b = 0; b < nb; b++) {
    const uint32_t len = b == 0 ? (nb == 1 ? 37 : 1) : b == nb - 1 ? n_ctx : 5 + 41 * b;
    seq[b] = (wd_seq_t){ .token = 0, .pos = len - 1, .len = len, .audio = (b / 2) % 2,
                         .slot = (5 * b + 2) % n_src }; /* distinct: gcd(5, 2B + 1) = 1 */
    if (rows) /* one sequence: padding, then consecutive positions */
      seq[b] = (wd_seq_t){ .pos = b < 5 ? n_ctx : 400 + b - 5, .len = b < 5 ? 0 : 401 + b - 5,
                           .audio = 1, .slot = 3 };
  }
  /* The saved rows are compared only where written: keep a copy to compare. */
  double *ref_s = malloc(ns * sizeof *ref_s);
  for (size_t i = 0; i < ns; i++)
    ref_s[i] = NAN; /* stays NaN where the kernel must not write */
  for (uint32_t b = 0; b < nb; b++)
    for (uint32_t h = 0; h < NH; h++) {
      const uint32_t row0 = (cross ? seq[b].audio : seq[b].slot) * n_ctx;
      const uint32_t nk = cross ? n_ctx : seq[b].len;
      ref_attn(q + (size_t)b * ldq + h * 64, k + (size_t)row0 * D + h * 64,
               v + (size_t)row0 * D + h * 64, D, nk, ref + (size_t)b * D + h * 64, qk, pw);
      if (save_flag && ((save_heads >> h) & 1u))
        for (uint32_t j = 0; j < nk; j++)
          ref_s[((size_t)b * NH + h) * save_ld + j] = save_flag == WD_ATTN_SAVE_QK ? qk[j] : pw[j];
    }

  tg_buf_t bq, bk, bv, bo, bs, bstep;
  float stepf[64 * 8];
  memcpy(stepf, seq, nb * sizeof seq[0]);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nq, q, 0, &bq), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nkv, k, 0, &bk), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nkv, v, 0, &bv), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, no, NULL, 0, &bo), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, ns, NULL, 0, &bs), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nb * 8, stepf, 0, &bstep), 0);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t astep = tg_data(&bstep), aq = tg_all(&bq), ak = tg_all(&bk), av = tg_all(&bv),
                    ao = tg_all(&bo), as = tg_all(&bs);
  if (rows)
    WD_CHECK_EQ_INT(wd_vk_attn_bind_rows(a, &astep, &aq, &ak, &av, &ao, &set), 0);
  else if (n_split)
    WD_CHECK_EQ_INT(wd_vk_attn_bind_split(a, &astep, &aq, &ak, &av, &ao, &as, &set), 0);
  else
    WD_CHECK_EQ_INT(wd_vk_attn_bind(a, &astep, &aq, &ak, &av, &ao, &as, &set), 0);
  const wd_pc_attn_t pc = {
    .n_head = NH, .n_ctx = n_ctx, .n_keys = cross ? n_ctx : 0,
    .flags = (cross ? WD_ATTN_CROSS : 0u) | save_flag,
    .q_off = TG_GUARD, .ldq = ldq, .kv_off = TG_GUARD, .ldkv = D, .o_off = TG_GUARD, .ldo = D,
    .save_heads = save_heads, .save_off = TG_GUARD, .save_ld = (uint32_t)save_ld,
    .scale = 0.125f, .n_split = n_split,
  };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(rows      ? wd_vk_attn_record_rows(a, cmd, set, &pc, nb)
                  : n_split ? wd_vk_attn_record_split(a, cmd, set, &pc, nb)
                            : wd_vk_attn_record(a, cmd, set, &pc, nb),
                  0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bo, got), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bs, gs), 0);
  char what[96];
  snprintf(what, sizeof what, "attn%s%.0u %s B%u %s", rows ? " rows" : n_split ? " split " : "",
           n_split, cross ? "cross" : "self", nb,
           save_flag == WD_ATTN_SAVE_QK ? "save QK" : save_flag ? "save P" : "");
  WD_CHECK(tg_compare(what, got, ref, no, 2e-5, 1e-10));
  WD_CHECK(tg_guards_ok(&bo));
  WD_CHECK(tg_guards_ok(&bs));
  if (n_split) /* the save buffer held the partials */
    for (size_t i = 0; i < ns; i++)
      ref_s[i] = NAN, memcpy(&gs[i], &(uint32_t){ TG_SENTINEL }, 4);
  /* Saved values where expected; sentinels elsewhere. */
  size_t n_saved = 0, bad = 0;
  double max_err = 0.0;
  for (size_t i = 0; i < ns; i++) {
    uint32_t bits;
    memcpy(&bits, &gs[i], 4);
    if (isnan(ref_s[i])) {
      bad += bits != TG_SENTINEL;
    } else {
      n_saved++;
      const double e = fabs(gs[i] - ref_s[i]);
      if (!(e <= max_err))
        max_err = e;
    }
  }
  WD_CHECK_EQ_INT(bad, 0);
  WD_CHECK(max_err <= 2e-5);
  if (save_flag)
    WD_CHECK(n_saved > 0);
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&bq), tg_buf_free(&bk), tg_buf_free(&bv), tg_buf_free(&bo), tg_buf_free(&bs);
  tg_buf_free(&bstep);
  free(q), free(k), free(v), free(got), free(gs), free(ref), free(qk), free(pw), free(ref_s);
}

static void run_variant(wd_vk_attn_variant_t var) {
  TG_DEVICE(dev);
  wd_vk_attn_t *a = NULL;
  const int rc = wd_vk_attn_new(dev, var, &a);
  if (rc == WD_EUNSUP)
    wd_test_skip("no subgroup arithmetic on this device");
  WD_CHECK_EQ_INT(rc, 0);
  if (rc)
    return;
  WD_CHECK_EQ_INT(wd_vk_attn_variant(a), var);
  tg_srand(99 + (uint64_t)var);
  run_case(dev, a, 1, 0, 0, 0, 0);
  run_case(dev, a, 3, 0, WD_ATTN_SAVE_P, 0x5, 0);
  run_case(dev, a, 8, 0, 0, 0, 0);
  run_case(dev, a, 1, 1, 0, 0, 0);
  run_case(dev, a, 3, 1, WD_ATTN_SAVE_QK, 0x22, 0);
  run_case(dev, a, 8, 1, WD_ATTN_SAVE_P, 0x1, 0);
  wd_vk_attn_free(a);
}

/* The rows kernel (prefill and align), made to run on every device
 * (mode 1), and key chunks with their merge (mode -n): 8 (the GPUs'
 * choice) and an odd 3, every sequence's keys (1 for one row) split, some
 * chunks empty. */
WD_TEST(attn_rows_and_split) {
  TG_DEVICE(dev);
  wd_vk_attn_t *a = NULL;
  WD_CHECK_EQ_INT(wd_vk_attn_new(dev, WD_VK_ATTN_AUTO, &a), 0);
  if (!a)
    return;
  wd_vk_attn_use_rows(a, true);
  tg_srand(7);
  static const struct { uint32_t nb; int cross, mode; } cases[] = {
    { 32, 0, 1 }, { 48, 1, 1 }, { 3, 0, -8 }, { 8, 1, -8 }, { 8, 0, -3 }, { 1, 1, -3 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(dev, a, cases[i].nb, cases[i].cross, 0, 0, cases[i].mode);
  wd_vk_attn_free(a);
}

WD_TEST(attn_subgroup) { run_variant(WD_VK_ATTN_SUBGROUP); }
WD_TEST(attn_shared) { run_variant(WD_VK_ATTN_SHARED); }

WD_TEST(attn_rejects_bad_shapes) {
  TG_DEVICE(dev);
  wd_vk_attn_t *a = NULL;
  WD_CHECK_EQ_INT(wd_vk_attn_new(dev, WD_VK_ATTN_AUTO, &a), 0);
  if (!a)
    return;
  tg_buf_t b;
  WD_CHECK_EQ_INT(tg_buf_new(dev, 4096, NULL, 0, &b), 0);
  const wd_vk_arg_t x = tg_all(&b);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  WD_CHECK_EQ_INT(wd_vk_attn_bind(a, &x, &x, &x, &x, &x, &x, &set), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  const wd_pc_attn_t ok = { .n_head = 2, .n_ctx = 4, .ldq = 128, .ldkv = 128, .ldo = 128,
                            .save_ld = 4, .scale = 0.125f };
  wd_pc_attn_t bad = ok;
  bad.q_off = 2;
  WD_CHECK_EQ_INT(wd_vk_attn_record(a, cmd, set, &bad, 1), WD_EINVAL);
  bad = ok;
  bad.ldkv = 64; /* narrower than n_head * 64 */
  WD_CHECK_EQ_INT(wd_vk_attn_record(a, cmd, set, &bad, 1), WD_EINVAL);
  bad = ok;
  bad.flags = WD_ATTN_CROSS;
  bad.n_keys = 5; /* more keys than rows per audio */
  WD_CHECK_EQ_INT(wd_vk_attn_record(a, cmd, set, &bad, 1), WD_EINVAL);
  bad = ok;
  bad.n_ctx = 2000;
  WD_CHECK_EQ_INT(wd_vk_attn_record(a, cmd, set, &bad, 1), WD_EINVAL);
  bad = ok;
  bad.flags = WD_ATTN_SAVE_QK;
  bad.save_heads = 0x4; /* head 2 of 2 */
  WD_CHECK_EQ_INT(wd_vk_attn_record(a, cmd, set, &bad, 1), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_attn_record(a, cmd, set, &ok, 0), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_cmd_n_dispatches(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&b);
  wd_vk_attn_free(a);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
