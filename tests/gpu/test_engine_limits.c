/*
 * test_engine_limits.c - the Vulkan engine planned against a device's real
 * limits (gpu/vk_plan.c), for every released model size.
 *
 * Without a device: every release (tiny .. large-v3, large-v3-turbo) plans
 * at 16 sequences and 16 audio windows under NVIDIA/Intel-like limits (2^27
 * texels, 128 MiB of storage range, 64-byte offset alignment), where the old
 * whole-cache views could not; a batch too large for the heap is refused
 * with the largest batch that fits; the override string parses.
 *
 * With a device (lavapipe in CI): random-weight models with large-v3's and
 * large-v3-turbo's exact per-layer shapes (128 mel bands, d 1280, 20 heads,
 * 51866 tokens) but one encoder layer and few decoder layers (to stay fast),
 * built under lowered limits (small heap, 64-byte alignments, few texels,
 * small allocations, so caches are split across buffers), match the C
 * reference's encoder output and step logits, with f16 caches where f32
 * ones do not fit the heap and f32 ones otherwise; the same model at a
 * batch the lowered heap cannot hold is refused with the planner's
 * message.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "model.h"
#include "ref_engine.h"
#include "vk_attn.h"
#include "vk_engine.h"
#include "vk_limits.h"
#include "vk_plan.h"
#include "wd_synth_random.h"
#include "wd_test.h"

#define MIB(b) ((double)(b) / 1048576.0)

typedef struct {
  const char *name;
  wd_hparams_t hp;
} release_t;

/* OpenAI's released shapes (ftype 1: f16 weights, as ggml files ship). */
#define HP(nv, d, h, la, lt, nm)                                                         \
  { .n_vocab = nv, .n_audio_ctx = 1500, .n_audio_state = d, .n_audio_head = h,           \
    .n_audio_layer = la, .n_text_ctx = 448, .n_text_state = d, .n_text_head = h,          \
    .n_text_layer = lt, .n_mels = nm, .ftype = 1 }
static const release_t releases[] = {
  { "tiny", HP(51865, 384, 6, 4, 4, 80) },
  { "base", HP(51865, 512, 8, 6, 6, 80) },
  { "small", HP(51865, 768, 12, 12, 12, 80) },
  { "medium", HP(51865, 1024, 16, 24, 24, 80) },
  { "large-v2", HP(51865, 1280, 20, 32, 32, 80) },
  { "large-v3", HP(51866, 1280, 20, 32, 32, 128) },
  { "large-v3-turbo", HP(51866, 1280, 20, 32, 4, 128) },
};

/* Bytes of hp's weights on the device, as gpu/vk_weights.c packs them. */
static uint64_t weight_bytes(const wd_hparams_t *hp) {
  wd__tensor_spec_t *specs = NULL;
  size_t n = 0;
  uint64_t b = 0;
  if (wd__model_expect(hp, &specs, &n) < 0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    wd_dtype_t t;
    if (wd__model_expect_type(hp, specs[i].kind, &t) < 0)
      continue;
    uint64_t e = t == WD_DTYPE_F32 ? 4 : 2;
    for (int k = 0; k < specs[i].n_dims; k++)
      e *= (uint64_t)specs[i].ne[k];
    b += (e + 255) / 256 * 256;
  }
  free(specs);
  return b;
}

static wd_vk_limits_t limits(const char *s) {
  wd_vk_limits_t l = { 0 };
  WD_CHECK_EQ_INT(wd_vk_limits_parse(s, &l), 0);
  return l;
}

WD_TEST(override_parses) {
  wd_vk_limits_t l = limits("nvidia");
  WD_CHECK(l.max_texel_elements == 1ull << 27 && l.max_storage_range == 1ull << 27);
  WD_CHECK(l.texel_align == 64 && l.storage_align == 64 && l.max_alloc == 1ull << 30);
  WD_CHECK(l.heap_bytes == 0);
  l = limits("texels=1M,heap=3G,storage=1048576,texel_align=256");
  WD_CHECK(l.max_texel_elements == 1ull << 20 && l.heap_bytes == 3ull << 30);
  WD_CHECK(l.max_storage_range == 1ull << 20 && l.texel_align == 256 && l.max_alloc == 0);
  l = limits("nvidia,sets=256");
  WD_CHECK(l.desc_sets == 256 && l.max_alloc == 1ull << 30);
  static const char *bad[] = { "foo=1", "texel_align=48", "storage=", "heap=1T", "texels",
                               "heap=0", "texel_align=512" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    WD_CHECK_EQ_INT(wd_vk_limits_parse(bad[i], &l), WD_EINVAL);
  /* Lowering never raises a size nor lowers an alignment. */
  wd_vk_limits_t dev = { .max_storage_range = 1ull << 30, .max_texel_elements = 1ull << 20,
                         .texel_align = 16, .storage_align = 256, .max_alloc = 1ull << 31,
                         .heap_bytes = 1ull << 33 };
  const wd_vk_limits_t o = limits("nvidia,heap=4G");
  wd_vk_limits_lower(&dev, &o);
  WD_CHECK(dev.max_storage_range == 1ull << 27 && dev.max_texel_elements == 1ull << 20);
  WD_CHECK(dev.texel_align == 64 && dev.storage_align == 256);
  WD_CHECK(dev.max_alloc == 1ull << 30 && dev.heap_bytes == 4ull << 30);
}

/* Every layout's layers sit at aligned offsets within their limits. */
static void check_layout(const wd_vk_layout_t *y, const wd_vk_limits_t *l) {
  WD_CHECK(y->stride % 64 == 0 && y->stride >= y->layer_bytes);
  WD_CHECK(y->per_buf >= 1 && (uint64_t)y->per_buf * (y->n_bufs - 1) < y->n_layers);
  WD_CHECK(y->buf_bytes <= l->max_alloc && y->last_bytes <= l->max_alloc);
}

WD_TEST(every_release_plans_under_nvidia_limits) {
  const wd_vk_limits_t l = limits("nvidia,heap=80G");
  fprintf(stderr, "  %-15s %9s %9s %9s %9s %9s %9s  (MiB at max_seqs 16, max_audio 16)\n",
          "model", "weights", "self-KV", "cross-KV", "scratch", "total", "f32 KV");
  for (size_t i = 0; i < sizeof releases / sizeof releases[0]; i++) {
    const wd_hparams_t *hp = &releases[i].hp;
    wd_vk_plan_t p;
    char err[512] = "";
    wd_vk_plan_t p32;
    const int rc = wd_vk_plan_make(hp, weight_bytes(hp), &l, 16, 16, true, &p, err, sizeof err);
    if (rc < 0)
      fprintf(stderr, "  %s: %s\n", releases[i].name, err);
    WD_CHECK_EQ_INT(rc, 0);
    WD_CHECK_EQ_INT(wd_vk_plan_make(hp, weight_bytes(hp), &l, 16, 16, false, &p32, NULL, 0), 0);
    check_layout(&p32.self, &l);
    check_layout(&p32.cross, &l);
    check_layout(&p.self, &l);
    check_layout(&p.cross, &l);
    check_layout(&p.scratch, &l);
    fprintf(stderr, "  %-15s %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f\n", releases[i].name,
            MIB(p.weights), MIB(p.self_bytes), MIB(p.cross_bytes), MIB(p.act_bytes),
            MIB(p.total), MIB(p32.total));
  }
  /* What the issue saw: one view over every layer and window of large-v3's
   * cross K/V passes 2^27 texels beyond 8 windows, and one self cache is
   * 1.2 GB at 16 sequences; one layer is far below either limit. */
  const wd_hparams_t *v3 = &releases[5].hp;
  const uint64_t whole9 = 32ull * 9 * 1500 * 1280 / 4, whole8 = 32ull * 8 * 1500 * 1280 / 4;
  WD_CHECK(whole9 > 1ull << 27 && whole8 <= 1ull << 27);
  wd_vk_plan_t p;
  WD_CHECK_EQ_INT(wd_vk_plan_make(v3, weight_bytes(v3), &l, 16, 64, false, &p, NULL, 0), 0);
  WD_CHECK(p.cross.layer_bytes / 16 <= 1ull << 27 && p.self.layer_bytes <= 1ull << 27);
  WD_CHECK(p.self.total > 1100ull << 20);
}

/* The largest batch on heaps of NVIDIA-like sizes; and the refusal. */
WD_TEST(too_big_a_batch_is_refused_with_the_largest_that_fits) {
  const wd_hparams_t *v3 = &releases[5].hp;
  const uint64_t wb = weight_bytes(v3);
  static const int heaps[] = { 4, 6, 8, 12, 16, 24 };
  for (int f16 = 0; f16 < 2; f16++)
    for (size_t i = 0; i < sizeof heaps / sizeof heaps[0]; i++) {
      char s[64];
      snprintf(s, sizeof s, "nvidia,heap=%dG", heaps[i]);
      const wd_vk_limits_t l = limits(s);
      int bs = 0, ba = 0;
      const int b = wd_vk_plan_fit(v3, wb, &l, 16, 16, f16, &bs, &ba);
      fprintf(stderr, "  large-v3, %2d GiB heap, %s caches: largest batch %d\n", heaps[i],
              f16 ? "f16" : "f32", b);
    }
  const wd_vk_limits_t l = limits("nvidia,heap=8G");
  int bs = 0, ba = 0;
  const int b = wd_vk_plan_fit(v3, wb, &l, 16, 16, false, &bs, &ba);
  WD_CHECK(b >= 1 && b < 16 && bs == b && ba == b);
  wd_vk_plan_t p;
  char err[512] = "", want[96];
  WD_CHECK_EQ_INT(wd_vk_plan_make(v3, wb, &l, 16, 16, false, &p, err, sizeof err), WD_ENOMEM);
  fprintf(stderr, "  refused: %s\n", err);
  snprintf(want, sizeof want, "the largest batch that fits is %d (max_seqs %d, max_audio %d", b,
           b, b);
  WD_CHECK(strstr(err, want) != NULL);
  WD_CHECK_EQ_INT(wd_vk_plan_make(v3, wb, &l, b, b, false, &p, NULL, 0), 0);
  WD_CHECK_EQ_INT(wd_vk_plan_make(v3, wb, &l, b + 1, b + 1, false, &p, NULL, 0), WD_ENOMEM);
  /* Uneven requests shrink together: max_seqs 4 with 16 windows. */
  int b2 = wd_vk_plan_fit(v3, wb, &l, 4, 16, false, &bs, &ba);
  WD_CHECK(b2 >= 1 && bs == (b2 < 4 ? b2 : 4) && ba == b2);
  /* A heap smaller than the weights: nothing fits. */
  const wd_vk_limits_t tiny = limits("nvidia,heap=2G");
  WD_CHECK_EQ_INT(wd_vk_plan_make(v3, wb, &tiny, 1, 1, false, &p, err, sizeof err), WD_ENOMEM);
  WD_CHECK(strstr(err, "not even a batch of 1 fits") != NULL);
  /* A binding limit, not the heap: too few texels for one layer. */
  const wd_vk_limits_t few = limits("texels=6M");
  WD_CHECK_EQ_INT(wd_vk_plan_make(v3, wb, &few, 16, 16, false, &p, err, sizeof err), WD_ERANGE);
  fprintf(stderr, "  refused: %s\n", err);
  WD_CHECK(strstr(err, "a cross-attention layer") != NULL);
}

/* ---- with a device ---------------------------------------------------------- */

/* The override reaches the device: its info, and the binding checks
 * (gpu/vk_pipeline.c), which then refuse offsets the lowered device would
 * not take and ranges it could not bind. The device list applies it too. */
WD_TEST(binding_checks_obey_lowered_limits) {
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  const wd_vk_limits_t lo = limits("texel_align=64,storage_align=64,storage=1M,texels=64K");
  const wd_vk_device_opts_t o = { .index = -1, .limits = &lo };
  wd_vk_device_t *dev = NULL;
  int rc = wd_vk_device_new(&o, &dev);
  if (rc == WD_ENODEVICE)
    wd_test_skip("no Vulkan device");
  WD_CHECK_EQ_INT(rc, 0);
  if (!dev)
    return;
  const wd_vk_limits_t *l = &wd_vk_device_info(dev)->limits;
  WD_CHECK(l->texel_align >= 64 && l->storage_align >= 64);
  WD_CHECK(l->max_storage_range == 1u << 20 && l->max_texel_elements == 1u << 16);
  wd_vk_attn_t *at = NULL;
  wd_vk_buffer_t *b = NULL;
  WD_CHECK_EQ_INT(wd_vk_attn_new(dev, WD_VK_ATTN_AUTO, &at), 0);
  WD_CHECK_EQ_INT(wd_vk_buffer_new(dev, 4u << 20, WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL,
                                   WD_VK_MEM_DEVICE, &b), 0);
  if (at && b) {
    /* step, q, k, v, o, save: q is a texel view, o a storage range. */
    const wd_vk_arg_t ok = { .buf = b, .range = 4096 };
    const wd_vk_arg_t q16 = { .buf = b, .offset = 16, .range = 4096 };
    const wd_vk_arg_t q64 = { .buf = b, .offset = 64, .range = 4096 };
    const wd_vk_arg_t o16 = { .buf = b, .offset = 16, .range = 4096 };
    const wd_vk_arg_t big = { .buf = b, .range = 2u << 20 };
    const wd_vk_arg_t tex_big = { .buf = b, .range = (64u << 10) * 16 + 16 };
    wd_vk_dset_t *set = NULL;
    WD_CHECK_EQ_INT(wd_vk_attn_bind(at, &ok, &q64, &ok, &ok, &ok, &ok, &set), 0);
    wd_vk_dset_free(set);
    set = NULL;
    WD_CHECK_EQ_INT(wd_vk_attn_bind(at, &ok, &q16, &ok, &ok, &ok, &ok, &set), WD_ERANGE);
    WD_CHECK_EQ_INT(wd_vk_attn_bind(at, &ok, &ok, &ok, &ok, &o16, &ok, &set), WD_ERANGE);
    WD_CHECK_EQ_INT(wd_vk_attn_bind(at, &ok, &ok, &ok, &ok, &big, &ok, &set), WD_ERANGE);
    WD_CHECK_EQ_INT(wd_vk_attn_bind(at, &ok, &tex_big, &ok, &ok, &ok, &ok, &set), WD_ERANGE);
  }
  wd_vk_buffer_free(b);
  wd_vk_attn_free(at);
  wd_vk_device_free(dev);
  /* The override, seen by the device list as by the device. */
  const wd_vk_limits_t small = limits("texels=1M,heap=512M");
  wd_vk_device_info_t *infos = NULL;
  uint32_t n = 0;
  WD_CHECK_EQ_INT(wd_vk_device_list(&small, &infos, &n), 0);
  for (uint32_t i = 0; i < n; i++)
    WD_CHECK(infos[i].limits.max_texel_elements <= 1u << 20 &&
             infos[i].limits.heap_bytes <= 512u << 20 && infos[i].max_texel_elements <= 1u << 20);
  free(infos);
  wd_vk_limits_t bad;
  WD_CHECK_EQ_INT(wd_vk_limits_parse("texels=lots", &bad), WD_EINVAL);
}

/* ---- with a device: large shapes under lowered limits -------------------- */

/* A large-shaped model: large-v3's per-layer shapes, n_text_layer lt. */
static wd_model_t *large_model(int lt, const char *path) {
  wd_hparams_t hp = releases[5].hp;
  hp.n_audio_layer = 1;
  hp.n_text_layer = lt;
  wd_model_t *m = NULL;
  char err[256] = "";
  WD_CHECK_EQ_INT(wd_synth_write_random(path, &hp, 7), 0);
  WD_CHECK_EQ_INT(wd_model_load(path, &m, err, sizeof err), 0);
  if (!m)
    fprintf(stderr, "  load: %s\n", err);
  unlink(path);
  return m;
}

/* max |a - b| / max |b|. */
static double rel_diff(const float *a, const float *b, size_t n) {
  double max_ref = 0, max_d = 0;
  for (size_t k = 0; k < n; k++) {
    max_ref = fmax(max_ref, fabs((double)b[k]));
    const double dd = fabs((double)a[k] - b[k]);
    if (!(dd <= max_d))
      max_d = dd;
  }
  return max_d / max_ref;
}

/* Encodes a window into audio slot a_slot on both engines, then steps two
 * sequences (slots 0 and max_seqs - 1, batched) and compares logits. */
static void compare(const wd_model_t *m, wd_vk_engine_t *eng, int max_seqs, int max_audio,
                    int a_slot) {
  const wd_hparams_t *hp = wd_model_hparams(m);
  wd_ref_engine_t *ref = NULL;
  WD_CHECK_EQ_INT(wd_ref_engine_new(m, max_seqs, max_audio, &ref), 0);
  if (!ref)
    return;
  const wd_engine_t *v = wd_vk_engine_iface(eng), *r = wd_ref_engine_iface(ref);
  const size_t nm = (size_t)hp->n_mels;
  float *mel = malloc(nm * 3000 * sizeof *mel);
  uint64_t s = 99;
  for (size_t i = 0; mel && i < nm * 3000; i++)
    mel[i] = 0.6f * wd_synth_rand(&s);
  WD_CHECK_EQ_INT(v->encode(v->self, a_slot, mel), 0);
  WD_CHECK_EQ_INT(r->encode(r->self, a_slot, mel), 0);
  if (a_slot == 0) {
    const size_t n = (size_t)hp->n_audio_ctx * (size_t)hp->n_audio_state;
    float *got = malloc(n * sizeof *got);
    WD_CHECK_EQ_INT(wd_vk_engine_read_encoded(eng, got), 0);
    const double rel = rel_diff(got, wd_ref_engine_encoded(ref, 0), n);
    fprintf(stderr, "  encoder: max diff / max = %.3g\n", rel);
    WD_CHECK(rel < 1e-3);
    free(got);
  }
  const int seqs[2] = { 0, max_seqs - 1 };
  const int32_t toks[4][2] = { { 50258, 50258 }, { 50259, 50260 }, { 50360, 50360 }, { 440, 2221 } };
  const size_t nv = (size_t)hp->n_vocab;
  for (int i = 0; i < 2; i++) {
    WD_CHECK_EQ_INT(v->seq_reset(v->self, seqs[i], a_slot), 0);
    WD_CHECK_EQ_INT(r->seq_reset(r->self, seqs[i], a_slot), 0);
  }
  double worst = 0;
  for (int t = 0; t < 4; t++) {
    const float *lv = NULL, *lr = NULL;
    WD_CHECK_EQ_INT(v->step(v->self, 2, seqs, toks[t], &lv), 0);
    WD_CHECK_EQ_INT(r->step(r->self, 2, seqs, toks[t], &lr), 0);
    if (!lv || !lr)
      break;
    for (int i = 0; i < 2; i++)
      worst = fmax(worst, rel_diff(lv + (size_t)i * nv, lr + (size_t)i * nv, nv));
  }
  fprintf(stderr, "  decoder steps: max |logit diff| / max |logit| = %.3g\n", worst);
  WD_CHECK(worst < 1e-3);
  /* The rows recordings (prefill over GEMMs, align over the scratch
   * cache) and seq_copy (gather through the scratch's start) on the same
   * per-layer bindings: a 20-token prefill into slot 1 against the
   * reference, then slot 0 <- slot 1 continues bit for bit as slot 1. */
  int32_t pt[20];
  for (int i = 0; i < 20; i++)
    pt[i] = i < 3 ? toks[i][0] : 400 + 37 * i;
  const int s1 = 1;
  WD_CHECK_EQ_INT(v->seq_reset(v->self, s1, a_slot), 0);
  WD_CHECK_EQ_INT(r->seq_reset(r->self, s1, a_slot), 0);
  const float *lv = NULL, *lr = NULL;
  WD_CHECK_EQ_INT(v->prefill(v->self, s1, 20, pt, &lv), 0);
  WD_CHECK_EQ_INT(r->prefill(r->self, s1, 20, pt, &lr), 0);
  if (lv && lr) {
    const double rel = rel_diff(lv, lr, nv);
    fprintf(stderr, "  prefill of 20: max |logit diff| / max |logit| = %.3g\n", rel);
    WD_CHECK(rel < 1e-3);
  }
  WD_CHECK_EQ_INT(v->seq_copy(v->self, 1, (const int[]){ 0 }, (const int[]){ 1 }), 0);
  const int both[2] = { 0, 1 };
  const int32_t same[2] = { 290, 290 };
  WD_CHECK_EQ_INT(v->step(v->self, 2, both, same, &lv), 0);
  WD_CHECK(lv && memcmp(lv, lv + nv, nv * sizeof *lv) == 0);
  /* align: two heads (first and last layer) against the reference. */
  const int heads[2][2] = { { 0, 0 }, { hp->n_text_layer - 1, hp->n_text_head - 1 } };
  const size_t nq = 2 * 8 * (size_t)hp->n_audio_ctx;
  float *qv = malloc(nq * sizeof *qv), *qr = malloc(nq * sizeof *qr), pv[7], pr[7];
  if (qv && qr) {
    WD_CHECK_EQ_INT(v->align(v->self, a_slot, 8, pt, 50257, 2, heads, qv, pv), 0);
    WD_CHECK_EQ_INT(r->align(r->self, a_slot, 8, pt, 50257, 2, heads, qr, pr), 0);
    const double rq = rel_diff(qv, qr, nq), rp = rel_diff(pv, pr, 7);
    fprintf(stderr, "  align: qk max diff / max = %.3g, probs %.3g\n", rq, rp);
    WD_CHECK(rq < 1e-3 && rp < 1e-3);
  }
  free(qv);
  free(qr);
  free(mel);
  wd_ref_engine_free(ref);
}

/* kv_f32: f32 caches; else AUTO (f32 where they fit the heap, f16 where not). */
static int new_engine(const wd_model_t *m, int max_seqs, int max_audio, const char *lim_s,
                      bool kv_f32, wd_vk_engine_t **e, char *err, size_t err_len) {
  const wd_vk_limits_t lim = limits(lim_s);
  const wd_vk_engine_opts_t o = { .device = -1, .max_seqs = max_seqs, .max_audio = max_audio,
                                  .limits = &lim, .kv = kv_f32 ? WD_VK_KV_F32 : WD_VK_KV_AUTO };
  return wd_vk_engine_new(m, &o, e, err, err_len);
}

WD_TEST(large_v3_shape_under_lowered_limits) {
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  wd_model_t *m = large_model(2, "/tmp/wd_test_limits_v3.bin");
  if (!m)
    return;
  const wd_hparams_t *hp = wd_model_hparams(m);
  const uint64_t wb = wd_vk_plan_weight_bytes(m);
  /* 16 sequences and 16 windows on a 1 GiB heap: f32 caches would not fit,
   * f16 ones do, and AUTO (the default) takes them. */
  const char *lim = "nvidia,heap=1G";
  const wd_vk_limits_t l = limits(lim);
  wd_vk_plan_t p, p32;
  WD_CHECK_EQ_INT(wd_vk_plan_make(hp, wb, &l, 16, 16, false, &p32, NULL, 0), WD_ENOMEM);
  WD_CHECK_EQ_INT(wd_vk_plan_make(hp, wb, &l, 16, 16, true, &p, NULL, 0), 0);
  wd_vk_engine_t *e = NULL;
  char err[512] = "";
  const wd_vk_engine_opts_t o = { .device = -1, .max_seqs = 16, .max_audio = 16, .limits = &l };
  int rc = wd_vk_engine_new(m, &o, &e, err, sizeof err);
  if (rc == WD_ENODEVICE) {
    wd_model_free(m);
    wd_test_skip("no Vulkan device");
  }
  if (rc < 0)
    fprintf(stderr, "  engine: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  if (e) {
    /* What it allocated is the f16 plan. */
    wd_vk_engine_stats_t st;
    wd_vk_engine_stats(e, &st);
    fprintf(stderr, "  planned %.1f MiB (f32 caches: %.1f), allocated %.1f MiB\n",
            MIB(p.total), MIB(p32.total), st.device_mib);
    WD_CHECK_NEAR(st.device_mib, MIB(p.total), 0.01);
    compare(m, e, 16, 16, 0);
  }
  wd_vk_engine_free(e);
  /* A 768 MiB heap holds neither: refused before any upload, naming the
   * largest batch that would fit (with f16 caches). */
  e = NULL;
  const char *small = "nvidia,heap=768M";
  rc = new_engine(m, 16, 16, small, false, &e, err, sizeof err);
  WD_CHECK_EQ_INT(rc, WD_ENOMEM);
  WD_CHECK(e == NULL);
  fprintf(stderr, "  refused: %s\n", err);
  const wd_vk_limits_t ls = limits(small);
  int bs = 0, ba = 0;
  const int b = wd_vk_plan_fit(hp, wb, &ls, 16, 16, true, &bs, &ba);
  char want[96];
  snprintf(want, sizeof want, "the largest batch that fits is %d (", b);
  WD_CHECK(b >= 2 && strstr(err, want) != NULL);
  wd_vk_engine_free(e);
  wd_model_free(m);
}

/* large-v3-turbo's shape (4 decoder layers) with f32 caches (the
 * fallback) and allocations capped at 64 MiB, so each cross K/V is split
 * over buffers, 2^24 texels (just above the token embedding's 16.6 M f16
 * texels) and 256-byte alignments. */
WD_TEST(turbo_shape_with_split_caches) {
  wd_model_t *m = large_model(4, "/tmp/wd_test_limits_turbo.bin");
  if (!m)
    return;
  const char *lim = "texels=16M,storage=128M,texel_align=256,storage_align=256,alloc=64M";
  wd_vk_plan_t p;
  const wd_vk_limits_t l = limits(lim);
  WD_CHECK_EQ_INT(wd_vk_plan_make(wd_model_hparams(m), wd_vk_plan_weight_bytes(m), &l, 3, 3,
                                  false, &p, NULL, 0), 0);
  fprintf(stderr, "  cross K/V: %u layers of %.1f MiB in %u buffers of %u layers\n",
          p.cross.n_layers, MIB(p.cross.layer_bytes), p.cross.n_bufs, p.cross.per_buf);
  WD_CHECK(p.cross.n_bufs > 1 && p.cross.stride % 256 == 0);
  wd_vk_engine_t *e = NULL;
  char err[512] = "";
  const int rc = new_engine(m, 3, 3, lim, true, &e, err, sizeof err);
  if (rc == WD_ENODEVICE) {
    wd_model_free(m);
    wd_test_skip("no Vulkan device");
  }
  if (rc < 0)
    fprintf(stderr, "  engine: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  if (e)
    compare(m, e, 3, 3, 2); /* the last window: in the last buffer */
  wd_vk_engine_free(e);
  wd_model_free(m);
}

int main(void) { return wd_test_main(); }
