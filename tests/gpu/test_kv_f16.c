/*
 * test_kv_f16.c - the f16 KV-cache kernels against C, bit-exact: append
 * (kv_append_f16) rounds each K and V element to f16 as wd_f32_to_f16 does
 * (nearest even) into the row slot[b], pos[b] and nowhere else; gather
 * (kv_gather_f16) copies f16 rows bit for bit; kv_to_f16 converts a
 * window's f32 K and V rows. Caches start filled with an f16 NaN pattern
 * no kernel writes, so any stray write shows.
 */
#include "f16.h"
#include "gpu_util.h"
#include "vk_cmd.h"
#include "vk_kv.h"

#define SENT 0x7e5au /* f16 NaN */

/* A host-visible buffer of n bytes, filled with src or the sentinel. */
static wd_vk_buffer_t *hbuf(wd_vk_device_t *dev, size_t n, const void *src) {
  wd_vk_buffer_t *b = NULL;
  WD_CHECK_EQ_INT(wd_vk_buffer_new(dev, n, WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL, WD_VK_MEM_HOST,
                                   &b), 0);
  uint16_t *m = b ? wd_vk_buffer_map(b) : NULL;
  WD_CHECK(m != NULL);
  if (m && src)
    memcpy(m, src, n);
  for (size_t i = 0; m && !src && i < n / 2; i++)
    m[i] = SENT;
  return b;
}

static int run(wd_vk_device_t *dev, int (*rec)(wd_vk_cmd_t *, void *), void *arg) {
  wd_vk_cmd_t *cmd = NULL;
  int rc = wd_vk_cmd_new(dev, 0, &cmd);
  if (!rc) rc = wd_vk_cmd_begin(cmd);
  if (!rc) rc = rec(cmd, arg);
  if (!rc) rc = wd_vk_cmd_end(cmd);
  if (!rc) rc = wd_vk_cmd_submit(cmd, UINT64_MAX);
  wd_vk_cmd_free(cmd);
  return rc;
}

typedef struct {
  wd_vk_kv_t *kv;
  wd_vk_dset_t *set;
  wd_pc_kv_t pc;
  uint32_t nb, n4;
} op_t;

static int rec_append(wd_vk_cmd_t *cmd, void *a) {
  op_t *o = a;
  return wd_vk_kv_record_append(o->kv, cmd, o->set, &o->pc, o->nb);
}
static int rec_gather(wd_vk_cmd_t *cmd, void *a) {
  op_t *o = a;
  return wd_vk_kv_record_gather(o->kv, cmd, o->set, &o->pc, o->nb, 1);
}
static int rec_cvt(wd_vk_cmd_t *cmd, void *a) {
  op_t *o = a;
  return wd_vk_kv_record_to_f16(o->kv, cmd, o->set, o->n4);
}

WD_TEST(append_gather_convert_f16) {
  TG_DEVICE(dev);
  wd_vk_kv_t *kv = NULL, *kv32 = NULL;
  WD_CHECK_EQ_INT(wd_vk_kv_new_fmt(dev, true, &kv), 0);
  WD_CHECK_EQ_INT(wd_vk_kv_new(dev, &kv32), 0);
  if (!kv || !kv32)
    return;
  tg_srand(11);
  enum { D = 128, CTX = 8, SLOTS = 4, NB = 3 };
  const size_t nc = (size_t)SLOTS * CTX * D; /* elements per cache */
  float in[NB * 3 * D];
  tg_fill(in, NB * 3 * D, 3.0f);
  /* Row 2's position is past n_ctx: it writes nothing. */
  const wd_seq_t seq[NB] = { { .pos = 5, .len = 6, .slot = 2 },
                             { .pos = 0, .len = 1, .slot = 0 },
                             { .pos = CTX, .len = CTX + 1, .slot = 3 } };
  wd_vk_buffer_t *bin = hbuf(dev, sizeof in, in), *bst = hbuf(dev, sizeof seq, seq);
  wd_vk_buffer_t *bk = hbuf(dev, nc * 2, NULL), *bv = hbuf(dev, nc * 2, NULL);
  op_t o = { .kv = kv, .nb = NB,
             .pc = { .d = D, .n_ctx = CTX, .in_off = D, .v_in_off = 2 * D, .ldi = 3 * D } };
  wd_vk_arg_t as = { .buf = bst }, ai = { .buf = bin }, ak = { .buf = bk }, av = { .buf = bv };
  WD_CHECK_EQ_INT(wd_vk_kv_bind_append(kv, &as, &ai, &ak, &av, &o.set), 0);
  WD_CHECK_EQ_INT(run(dev, rec_append, &o), 0);
  wd_vk_dset_free(o.set);
  const uint16_t *k = wd_vk_buffer_map(bk), *v = wd_vk_buffer_map(bv);
  size_t bad = 0;
  for (size_t s = 0; s < SLOTS; s++)
    for (size_t p = 0; p < CTX; p++)
      for (size_t i = 0; i < D; i++) {
        const size_t at = (s * CTX + p) * D + i;
        int b = -1;
        for (int r = 0; r < NB; r++)
          if (seq[r].slot == s && seq[r].pos == p)
            b = r;
        const uint16_t wk = b < 0 ? SENT : wd_f32_to_f16(in[b * 3 * D + D + i]);
        const uint16_t wv = b < 0 ? SENT : wd_f32_to_f16(in[b * 3 * D + 2 * D + i]);
        bad += k[at] != wk || v[at] != wv;
      }
  WD_CHECK_EQ_INT((long long)bad, 0);

  /* Gather: slot 1 <- slot 2 (6 rows), slot 3 <- slot 0 (1 row), into
   * fresh caches; f32 kernels refuse to convert. */
  const wd_seq_t g[2] = { { .len = 6, .src = 2, .slot = 1 }, { .len = 1, .src = 0, .slot = 3 } };
  wd_vk_buffer_t *bg = hbuf(dev, sizeof g, g);
  wd_vk_buffer_t *dk = hbuf(dev, nc * 2, NULL), *dv = hbuf(dev, nc * 2, NULL);
  wd_vk_arg_t ag = { .buf = bg }, adk = { .buf = dk }, adv = { .buf = dv };
  o = (op_t){ .kv = kv, .nb = 2, .pc = { .d = D, .n_ctx = CTX } };
  WD_CHECK_EQ_INT(wd_vk_kv_bind_gather(kv, &ag, &ak, &av, &adk, &adv, &o.set), 0);
  WD_CHECK_EQ_INT(run(dev, rec_gather, &o), 0);
  wd_vk_dset_free(o.set);
  const uint16_t *gk = wd_vk_buffer_map(dk), *gv = wd_vk_buffer_map(dv);
  bad = 0;
  for (size_t s = 0; s < SLOTS; s++)
    for (size_t p = 0; p < CTX; p++)
      for (size_t i = 0; i < D; i++) {
        const size_t at = (s * CTX + p) * D + i;
        int r = -1;
        for (int j = 0; j < 2; j++)
          if (g[j].slot == s && p < g[j].len)
            r = j;
        const size_t from = r < 0 ? 0 : (g[r].src * CTX + p) * D + i;
        bad += gk[at] != (r < 0 ? SENT : k[from]) || gv[at] != (r < 0 ? SENT : v[from]);
      }
  WD_CHECK_EQ_INT((long long)bad, 0);

  /* kv_to_f16 over 1500 x 64 elements, as one window of a tiny layer. */
  const size_t n = 1500 * 64;
  float *ks = malloc(n * 4), *vs = malloc(n * 4);
  if (ks && vs) {
    tg_fill(ks, n, 2.0f);
    tg_fill(vs, n, 70000.0f); /* some overflow to inf, as f16 rounding does */
    wd_vk_buffer_t *bks = hbuf(dev, n * 4, ks), *bvs = hbuf(dev, n * 4, vs);
    wd_vk_buffer_t *ck = hbuf(dev, n * 2, NULL), *cv = hbuf(dev, n * 2, NULL);
    wd_vk_arg_t a0 = { .buf = bks }, a1 = { .buf = bvs }, a2 = { .buf = ck }, a3 = { .buf = cv };
    wd_vk_dset_t *s32 = NULL;
    WD_CHECK_EQ_INT(wd_vk_kv_bind_to_f16(kv32, &a0, &a1, &a2, &a3, &s32), WD_EINVAL);
    o = (op_t){ .kv = kv, .n4 = (uint32_t)(n / 4) };
    WD_CHECK_EQ_INT(wd_vk_kv_bind_to_f16(kv, &a0, &a1, &a2, &a3, &o.set), 0);
    WD_CHECK_EQ_INT(run(dev, rec_cvt, &o), 0);
    wd_vk_dset_free(o.set);
    const uint16_t *hk = wd_vk_buffer_map(ck), *hv = wd_vk_buffer_map(cv);
    bad = 0;
    for (size_t i = 0; hk && hv && i < n; i++)
      bad += hk[i] != wd_f32_to_f16(ks[i]) || hv[i] != wd_f32_to_f16(vs[i]);
    WD_CHECK_EQ_INT((long long)bad, 0);
    wd_vk_buffer_t *f[] = { bks, bvs, ck, cv };
    for (size_t i = 0; i < 4; i++)
      wd_vk_buffer_free(f[i]);
  }
  free(ks);
  free(vs);
  wd_vk_buffer_t *all[] = { bin, bst, bk, bv, bg, dk, dv };
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    wd_vk_buffer_free(all[i]);
  wd_vk_kv_free(kv);
  wd_vk_kv_free(kv32);
}

WD_TEST(teardown) { tg_dev_free(); }

int main(void) { return wd_test_main(); }
