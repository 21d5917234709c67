/*
 * test_kv.c - KV-cache append and beam gather against C, bit-exact (both
 * kernels only copy f32 values).
 *
 * Append: 4 batch rows writing into a cache of 6 sequence slots through a
 * permuted, non-contiguous slot map (row b -> slot[b] = 3, 0, 5, 1), each at
 * its own position (all from the step-parameter buffer), K and V taken from
 * a fused QKV row; every other cache row (slots 2 and 4 entirely) must keep
 * its old contents, and a position past n_ctx must write nothing.
 * Gather: 2 layers, 10 slots, 8 records with destination slots slot[] (a
 * permutation of 8 of the 10), a beam map src[] and lengths len[]; rows at
 * or past len[b] and the slots no record names stay untouched.
 */
#include "gpu_util.h"
#include "vk_cmd.h"
#include "vk_kv.h"

static int bits_equal(const float *a, const float *b, size_t n) {
  return memcmp(a, b, n * 4) == 0;
}

WD_TEST(kv_append) {
  TG_DEVICE(dev);
  wd_vk_kv_t *kv = NULL;
  WD_CHECK_EQ_INT(wd_vk_kv_new(dev, &kv), 0);
  if (!kv)
    return;
  tg_srand(5);
  const uint32_t nb = 4, n_slots = 6, d = 384, n_ctx = 448, ldi = 3 * d;
  const size_t nc = (size_t)n_slots * n_ctx * d, ni = (size_t)nb * ldi;
  float *in = malloc(ni * 4), *k0 = malloc(nc * 4), *v0 = malloc(nc * 4);
  float *k1 = malloc(nc * 4), *v1 = malloc(nc * 4);
  tg_fill(in, ni, 1.0f);
  tg_fill(k0, nc, 1.0f);
  tg_fill(v0, nc, 1.0f);
  /* The last sequence's position is out of range: nothing may be written. */
  const wd_seq_t seq[4] = { { .pos = 0, .len = 1, .slot = 3 },
                            { .pos = 17, .len = 18, .slot = 0 },
                            { .pos = 447, .len = 448, .slot = 5 },
                            { .pos = 448, .len = 449, .slot = 1 } };
  tg_buf_t bin, bk, bv, bstep;
  WD_CHECK_EQ_INT(tg_buf_new(dev, ni, in, 0, &bin), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nc, k0, 0, &bk), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nc, v0, 0, &bv), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nb * 8, (const float *)(const void *)seq, 0, &bstep), 0);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t as = tg_data(&bstep), ai = tg_all(&bin), ak = tg_all(&bk), av = tg_all(&bv);
  WD_CHECK_EQ_INT(wd_vk_kv_bind_append(kv, &as, &ai, &ak, &av, &set), 0);
  const wd_pc_kv_t pc = { .d = d, .n_ctx = n_ctx, .in_off = TG_GUARD + d, .ldi = ldi,
                          .cache_off = TG_GUARD, .v_in_off = TG_GUARD + 2 * d };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_kv_record_append(kv, cmd, set, &pc, nb), 0);
  wd_pc_kv_t bad = pc;
  bad.in_off = 3;
  WD_CHECK_EQ_INT(wd_vk_kv_record_append(kv, cmd, set, &bad, nb), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bk, k1), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bv, v1), 0);
  /* ref: the old caches with one row of slot[b] replaced per in-range row b. */
  for (uint32_t b = 0; b < nb; b++)
    if (seq[b].pos < n_ctx) {
      const size_t dst = ((size_t)seq[b].slot * n_ctx + seq[b].pos) * d;
      memcpy(k0 + dst, in + (size_t)b * ldi + d, d * 4);
      memcpy(v0 + dst, in + (size_t)b * ldi + 2 * d, d * 4);
    }
  WD_CHECK(bits_equal(k1, k0, nc));
  WD_CHECK(bits_equal(v1, v0, nc));
  WD_CHECK(tg_guards_ok(&bk));
  WD_CHECK(tg_guards_ok(&bv));
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&bin), tg_buf_free(&bk), tg_buf_free(&bv), tg_buf_free(&bstep);
  free(in), free(k0), free(v0), free(k1), free(v1);
  wd_vk_kv_free(kv);
}

WD_TEST(kv_gather) {
  TG_DEVICE(dev);
  wd_vk_kv_t *kv = NULL;
  WD_CHECK_EQ_INT(wd_vk_kv_new(dev, &kv), 0);
  if (!kv)
    return;
  tg_srand(6);
  const uint32_t nb = 8, n_slots = 10, d = 64, n_ctx = 37, n_layer = 2;
  const uint32_t stride = n_slots * n_ctx * d + 16; /* a gap between layers */
  const size_t nc = (size_t)n_layer * stride;
  float *ks = malloc(nc * 4), *vs = malloc(nc * 4), *kd = malloc(nc * 4), *vd = malloc(nc * 4);
  float *kg = malloc(nc * 4), *vg = malloc(nc * 4);
  tg_fill(ks, nc, 1.0f), tg_fill(vs, nc, 1.0f), tg_fill(kd, nc, 1.0f), tg_fill(vd, nc, 1.0f);
  wd_seq_t seq[8];
  /* Slots 4 and 8 are named by no record: they must stay as they were. */
  const uint32_t src[8] = { 3, 3, 0, 9, 1, 1, 1, 6 };
  const uint32_t slot[8] = { 7, 0, 9, 2, 5, 1, 6, 3 };
  for (uint32_t b = 0; b < nb; b++)
    seq[b] = (wd_seq_t){ .src = src[b], .slot = slot[b], .len = 1 + 5 * b }; /* <= 36 < n_ctx */
  tg_buf_t bks, bvs, bkd, bvd, bstep;
  WD_CHECK_EQ_INT(tg_buf_new(dev, nc, ks, 0, &bks), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nc, vs, 0, &bvs), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nc, kd, 0, &bkd), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nc, vd, 0, &bvd), 0);
  WD_CHECK_EQ_INT(tg_buf_new(dev, nb * 8, (const float *)(const void *)seq, 0, &bstep), 0);
  wd_vk_dset_t *set = NULL;
  wd_vk_cmd_t *cmd = NULL;
  const wd_vk_arg_t as = tg_data(&bstep), a1 = tg_all(&bks), a2 = tg_all(&bvs), a3 = tg_all(&bkd),
                    a4 = tg_all(&bvd);
  WD_CHECK_EQ_INT(wd_vk_kv_bind_gather(kv, &as, &a1, &a2, &a1, &a4, &set), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_vk_kv_bind_gather(kv, &as, &a1, &a2, &a3, &a4, &set), 0);
  const wd_pc_kv_t pc = { .d = d, .n_ctx = n_ctx, .cache_off = TG_GUARD, .layer_stride = stride };
  WD_CHECK_EQ_INT(wd_vk_cmd_new(dev, 0, &cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_begin(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_kv_record_gather(kv, cmd, set, &pc, nb, n_layer), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_end(cmd), 0);
  WD_CHECK_EQ_INT(wd_vk_cmd_submit(cmd, UINT64_MAX), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bkd, kg), 0);
  WD_CHECK_EQ_INT(tg_buf_read(&bvd, vg), 0);
  for (uint32_t l = 0; l < n_layer; l++)
    for (uint32_t b = 0; b < nb; b++) {
      const size_t dst = (size_t)l * stride + (size_t)slot[b] * n_ctx * d;
      const size_t s = (size_t)l * stride + (size_t)src[b] * n_ctx * d;
      memcpy(kd + dst, ks + s, (size_t)seq[b].len * d * 4);
      memcpy(vd + dst, vs + s, (size_t)seq[b].len * d * 4);
    }
  WD_CHECK(bits_equal(kg, kd, nc));
  WD_CHECK(bits_equal(vg, vd, nc));
  WD_CHECK(tg_guards_ok(&bkd));
  WD_CHECK(tg_guards_ok(&bvd));
  wd_vk_cmd_free(cmd);
  wd_vk_dset_free(set);
  tg_buf_free(&bks), tg_buf_free(&bvs), tg_buf_free(&bkd), tg_buf_free(&bvd);
  tg_buf_free(&bstep);
  free(ks), free(vs), free(kd), free(vd), free(kg), free(vg);
  wd_vk_kv_free(kv);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
