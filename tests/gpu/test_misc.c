/*
 * test_misc.c - embedding lookup, argmax/log-sum-exp and transpose against C.
 *
 * Embedding: the real tiny.en table shapes (51864 x 384 f16 tokens, 448 x 384
 * f32 positions), B = 1, 3, 8 with tokens and positions from the step
 * buffer, including the last token and position; exact up to the one f32
 * addition (max |err| <= 1e-6). Argmax: B = 3 rows of 51866 logits
 * (not a multiple of 4) with a mask of -inf entries, one masked row maximum,
 * and a tie; the index must be exact, max and lse within 1e-4. Transpose:
 * odd shapes with strides and z batches, bit-exact.
 */
#include "gpu_util.h"
#include "vk_cmd.h"
#include "vk_misc.h"

static wd_vk_cmd_t *begin(wd_vk_device_t *dev) {
  wd_vk_cmd_t *cmd = NULL;
  if (wd_vk_cmd_new(dev, 0, &cmd) < 0)
    return NULL;
  if (wd_vk_cmd_begin(cmd) < 0) {
    wd_vk_cmd_free(cmd);
    return NULL;
  }
  return cmd;
}

static int finish(wd_vk_cmd_t *cmd) {
  int rc = wd_vk_cmd_end(cmd);
  if (rc == 0)
    rc = wd_vk_cmd_submit(cmd, UINT64_MAX);
  wd_vk_cmd_free(cmd);
  return rc;
}

static void run_embed(wd_vk_device_t *dev, wd_vk_misc_t *m, uint32_t nb) {
  const uint32_t nv = 51864, np = 448, d = 384, ldx = 388;
  const size_t nt = (size_t)nv * d, npos = (size_t)np * d, nx = (size_t)nb * ldx;
  float *tok = malloc(nt * 4), *pos = malloc(npos * 4), *got = malloc(nx * 4);
  float *gotc = malloc((size_t)nb * d * 4);
  double *ref = malloc((size_t)nb * d * sizeof *ref);
  tg_fill(tok, nt, 0.1f);
  tg_round_f16(tok, nt);
  tg_fill(pos, npos, 0.1f);
  wd_seq_t seq[8];
  for (uint32_t b = 0; b < nb; b++)
    seq[b] = (wd_seq_t){ .token = b == 0 ? nv - 1 : 50257 - 977 * b, .pos = b == 1 ? np - 1 : 3 * b };
  for (uint32_t b = 0; b < nb; b++)
    for (uint32_t i = 0; i < d; i++)
      ref[(size_t)b * d + i] =
          (double)tok[(size_t)seq[b].token * d + i] + pos[(size_t)seq[b].pos * d + i];
  tg_buf_t bt, bp, bx, bs;
  WD_CHECK_EQ_INT(tg_buf_new(dev, nt, tok, 1, &bt), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, npos, pos, 0, &bp), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nx, NULL, 0, &bx), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nb * 8, (const float *)(const void *)seq, 0, &bs), 0);
  wd_vk_dset_t *set = NULL;
  const wd_vk_arg_t as = tg_data(&bs), at = tg_data(&bt), ap = tg_data(&bp), ax = tg_all(&bx);
  WD_CHECK_EQ_INT(wd_vk_misc_bind_embed(m, &as, &at, &ap, &ax, &set), 0);
  const wd_pc_embed_t pc = { .d = d, .ldx = ldx, .x_off = TG_GUARD, .n_vocab = nv, .n_pos = np };
  wd_vk_cmd_t *cmd = begin(dev);
  WD_CHECK(cmd != NULL);
  if (!cmd)
    return;
  WD_CHECK_EQ_INT(wd_vk_misc_record_embed(m, cmd, set, &pc, nb), 0);
  wd_pc_embed_t bad = pc;
  bad.d = 382;
  WD_CHECK_EQ_INT(wd_vk_misc_record_embed(m, cmd, set, &bad, nb), WD_EINVAL);
  WD_CHECK_EQ_INT(finish(cmd), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bx, got), 0);
  int pad_ok = 1;
  for (uint32_t b = 0; b < nb; b++) {
    memcpy(gotc + (size_t)b * d, got + (size_t)b * ldx, d * 4);
    uint32_t bits;
    memcpy(&bits, &got[(size_t)b * ldx + d], 4);
    pad_ok = pad_ok && bits == TG_SENTINEL;
  }
  char what[64];
  snprintf(what, sizeof what, "embed B%u", nb);
  WD_CHECK(tg_compare(what, gotc, ref, (size_t)nb * d, 1e-6, 1e-12));
  WD_CHECK(pad_ok);
  WD_CHECK(tg_guards_ok(&bx));
  wd_vk_dset_free(set);
  tg_buf_free(&bt), tg_buf_free(&bp), tg_buf_free(&bx), tg_buf_free(&bs);
  free(tok), free(pos), free(got), free(gotc), free(ref);
}

WD_TEST(embed) {
  TG_DEVICE(dev);
  wd_vk_misc_t *m = NULL;
  WD_CHECK_EQ_INT(wd_vk_misc_new(dev, &m), 0);
  if (!m)
    return;
  tg_srand(11);
  run_embed(dev, m, 1);
  run_embed(dev, m, 3);
  run_embed(dev, m, 8);
  wd_vk_misc_free(m);
}

WD_TEST(argmax) {
  TG_DEVICE(dev);
  wd_vk_misc_t *m = NULL;
  WD_CHECK_EQ_INT(wd_vk_misc_new(dev, &m), 0);
  if (!m)
    return;
  tg_srand(12);
  const uint32_t nv = 51866, ld = 51868, nb = 3;
  float *lg = malloc((size_t)nb * ld * 4), *mask = malloc(nv * 4);
  tg_fill(lg, (size_t)nb * ld, 8.0f);
  for (uint32_t v = 0; v < nv; v++)
    mask[v] = (v % 7 == 3 || v >= 50257) ? -INFINITY : 0.0f; /* a suppression-like pattern */
  mask[50362] = 0.0f;
  lg[0 * ld + 11] = 20.0f;        /* row 0: plain maximum */
  lg[1 * ld + 3] = 30.0f;         /* row 1: the largest logit is masked ... */
  lg[1 * ld + 50362] = 25.0f;     /* ... so this one wins */
  lg[2 * ld + 900] = 21.0f;       /* row 2: a tie, the lower index wins */
  lg[2 * ld + 901] = 21.0f;
  uint32_t want[3];
  double wmax[3], wlse[3];
  for (uint32_t b = 0; b < nb; b++) {
    double mx = -INFINITY, s = 0.0;
    want[b] = 0;
    for (uint32_t v = 0; v < nv; v++) {
      const double x = (double)lg[(size_t)b * ld + v] + mask[v];
      if (x > mx) {
        mx = x;
        want[b] = v;
      }
    }
    for (uint32_t v = 0; v < nv; v++)
      s += exp((double)lg[(size_t)b * ld + v] + mask[v] - mx);
    wmax[b] = mx;
    wlse[b] = mx + log(s);
  }
  tg_buf_t bl, bm, bo;
  WD_CHECK_EQ_INT(tg_buf_new(dev, (size_t)nb * ld, lg, 0, &bl), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nv, mask, 0, &bm), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nb * 4, NULL, 0, &bo), 0);
  wd_vk_dset_t *set = NULL;
  const wd_vk_arg_t al = tg_all(&bl), am = tg_data(&bm), ao = tg_data(&bo);
  WD_CHECK_EQ_INT(wd_vk_misc_bind_argmax(m, &al, &am, &ao, &set), 0);
  const wd_pc_argmax_t pc = { .n_vocab = nv, .nb = nb, .off = TG_GUARD, .ld = ld,
                              .flags = WD_ARGMAX_MASK };
  wd_vk_cmd_t *cmd = begin(dev);
  WD_CHECK(cmd != NULL);
  if (cmd) {
    WD_CHECK_EQ_INT(wd_vk_misc_record_argmax(m, cmd, set, &pc), 0);
    wd_pc_argmax_t bad = pc;
    bad.ld = 51866;
    WD_CHECK_EQ_INT(wd_vk_misc_record_argmax(m, cmd, set, &bad), WD_EINVAL);
    WD_CHECK_EQ_INT(finish(cmd), 0);
  }
  wd_argmax_out_t out[3];
  WD_CHECK_EQ_INT(wd_vk_buffer_read(bo.buf, TG_GUARD * 4, out, sizeof out), 0);
  for (uint32_t b = 0; b < nb; b++) {
    fprintf(stderr, "  argmax row %u: idx %u (want %u) max %.6f (%.6f) lse %.6f (%.6f)\n", b,
            out[b].idx, want[b], (double)out[b].max, wmax[b], (double)out[b].lse, wlse[b]);
    WD_CHECK_EQ_INT(out[b].idx, want[b]);
    WD_CHECK_NEAR(out[b].max, wmax[b], 1e-4);
    WD_CHECK_NEAR(out[b].lse, wlse[b], 1e-4);
  }
  WD_CHECK_EQ_INT(want[1], 50362);
  WD_CHECK_EQ_INT(want[2], 900);
  WD_CHECK(tg_guards_ok(&bo));
  wd_vk_dset_free(set);
  tg_buf_free(&bl), tg_buf_free(&bm), tg_buf_free(&bo);
  free(lg), free(mask);
  wd_vk_misc_free(m);
}

WD_TEST(transpose) {
  TG_DEVICE(dev);
  wd_vk_misc_t *m = NULL;
  WD_CHECK_EQ_INT(wd_vk_misc_new(dev, &m), 0);
  if (!m)
    return;
  tg_srand(13);
  const uint32_t R = 1500, C = 64, Z = 3, ldi = 3 * 64 * 2, in_bz = 64, ldo = 1503;
  const uint32_t out_bz = C * ldo;
  const size_t nin = (size_t)R * ldi, nout = (size_t)Z * out_bz;
  float *in = malloc(nin * 4), *got = malloc(nout * 4), *want = malloc(nout * 4);
  tg_fill(in, nin, 1.0f);
  tg_buf_t bi, bo;
  WD_CHECK_EQ_INT(tg_buf_new(dev, nin, in, 0, &bi), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nout, NULL, 0, &bo), 0);
  WD_CHECK_EQ_INT(wd_vk_buffer_read(bo.buf, TG_GUARD * 4, want, nout * 4), 0); /* sentinels */
  for (uint32_t z = 0; z < Z; z++)
    for (uint32_t r = 0; r < R; r++)
      for (uint32_t c = 0; c < C; c++)
        want[(size_t)z * out_bz + (size_t)c * ldo + r] = in[(size_t)z * in_bz + (size_t)r * ldi + c];
  wd_vk_dset_t *set = NULL;
  const wd_vk_arg_t ai = tg_all(&bi), ao = tg_all(&bo);
  WD_CHECK_EQ_INT(wd_vk_misc_bind_transpose(m, &ai, &ao, &set), 0);
  const wd_pc_transpose_t pc = { .R = R, .C = C, .in_off = TG_GUARD, .ldi = ldi, .in_bz = in_bz,
                                 .out_off = TG_GUARD, .ldo = ldo, .out_bz = out_bz };
  wd_vk_cmd_t *cmd = begin(dev);
  WD_CHECK(cmd != NULL);
  if (cmd) {
    WD_CHECK_EQ_INT(wd_vk_misc_record_transpose(m, cmd, set, &pc, Z), 0);
    wd_pc_transpose_t bad = pc;
    bad.ldo = R - 1;
    WD_CHECK_EQ_INT(wd_vk_misc_record_transpose(m, cmd, set, &bad, Z), WD_EINVAL);
    WD_CHECK_EQ_INT(finish(cmd), 0);
  }
  WD_CHECK_EQ_INT(tg_buf_read(&bo, got), 0);
  WD_CHECK(memcmp(got, want, nout * 4) == 0); /* includes the untouched padding */
  WD_CHECK(tg_guards_ok(&bo));
  wd_vk_dset_free(set);
  tg_buf_free(&bi), tg_buf_free(&bo);
  free(in), free(got), free(want);
  wd_vk_misc_free(m);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
