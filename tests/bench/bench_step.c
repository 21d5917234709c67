/*
 * bench_step.c - one whole tiny.en decoder step from the gpu/ kernels,
 * recorded once into one command buffer and replayed.
 *
 * Random weights of the real shapes (4 layers, d = 384, 6 heads, vocab
 * 51864, 1500 audio frames): embedding; per layer LN + fused QKV GEMV + KV
 * append + self-attention + out GEMV (+residual) + LN + cross-Q GEMV +
 * cross-attention + out GEMV (+residual) + LN + fc1 (+GELU) + fc2
 * (+residual); final LN and the logits GEMV (tied embedding). Prints the
 * dispatch count and ms per step (GPU timestamps and wall clock around the
 * submit) for B = 1, 4, 8. The step-parameter buffer is rewritten before
 * every replay (positions advance), as the engine will do.
 *
 * Usage: bench_step [iterations]   (LP_NUM_THREADS applies on lavapipe)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "log.h"
#include "vk_attn.h"
#include "vk_buffer.h"
#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_gemv.h"
#include "vk_kv.h"
#include "vk_misc.h"
#include "vk_norm.h"

#define L 4u
#define D 384u
#define NH 6u
#define FF 1536u
#define NV 51864u
#define NCTX 448u
#define NAUD 1500u
#define BMAX 8u
#define MAX_SETS 256

/* f16 weight offsets (elements) inside one buffer, per layer. */
enum { W_QKV, W_OUT, W_CQ, W_COUT, W_FC1, W_FC2, W_N };
static const uint32_t w_rows[W_N] = { 3 * D, D, D, D, FF, D };
static const uint32_t w_cols[W_N] = { D, D, D, D, D, FF };

typedef struct {
  wd_vk_device_t *dev;
  wd_vk_norm_t *norm;
  wd_vk_gemv_t *gemv;
  wd_vk_attn_t *attn;
  wd_vk_kv_t *kv;
  wd_vk_misc_t *misc;
  wd_vk_buffer_t *step, *tok, *pos, *w, *bias, *ln, *kc, *vc, *kx, *vx;
  wd_vk_buffer_t *x, *h, *qkv, *ao, *qc, *ffn, *logits;
  uint64_t w_off[L][W_N], b_off[L][W_N]; /* elements */
  wd_vk_dset_t *sets[MAX_SETS];
  int n_sets;
} bench_t;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Profile mode (WD_BENCH_PROFILE set): a timestamp after every op. */
#define MAX_MARKS 64
static int profile;
static const char *mark_names[MAX_MARKS];
static uint32_t n_marks;
static void mark(wd_vk_cmd_t *cmd, const char *name) {
  if (!profile || n_marks + 2 >= MAX_MARKS)
    return;
  mark_names[n_marks] = name;
  wd_vk_cmd_timestamp(cmd, 2 + n_marks++);
}

static uint64_t rng = 88172645463325252ull;
static float frand(float scale) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return scale * ((float)(rng >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
}

/* Buffer of n elements of es bytes, filled with random values (f16 when es == 2). */
static int make_buf(wd_vk_device_t *dev, uint64_t n, int es, float scale, wd_vk_buffer_t **ret) {
  int rc = wd_vk_buffer_new(dev, n * (uint64_t)es, WD_VK_BUF_STORAGE | WD_VK_BUF_TEXEL,
                            WD_VK_MEM_DEVICE, ret);
  if (rc < 0 || scale == 0.0f)
    return rc;
  void *host = malloc(n * (uint64_t)es);
  if (!host)
    return WD_ENOMEM;
  for (uint64_t i = 0; i < n; i++) {
    if (es == 2) {
      /* Random f16 in (-scale, scale): exponent 12..14 (0.0078..0.06), random mantissa. */
      const uint16_t hv = (uint16_t)((rng & 1 ? 0x8000u : 0u) | ((12u + (uint32_t)(rng % 3)) << 10) |
                                     ((uint32_t)(rng >> 20) & 0x3ffu));
      (void)frand(1.0f);
      ((uint16_t *)host)[i] = hv;
    } else {
      ((float *)host)[i] = frand(scale);
    }
  }
  rc = wd_vk_buffer_write(*ret, 0, host, n * (uint64_t)es);
  free(host);
  return rc;
}

static wd_vk_arg_t arg(wd_vk_buffer_t *b) { return (wd_vk_arg_t){ .buf = b }; }

/* Keeps a set for freeing; returns it (NULL on failure, reported once). */
/* Call as keep(bt, bind(..., &s), &s): s is read after the bind ran. */
static wd_vk_dset_t *keep(bench_t *bt, int rc, wd_vk_dset_t **ps) {
  wd_vk_dset_t *s = *ps;
  if (rc < 0 || bt->n_sets >= MAX_SETS) {
    fprintf(stderr, "bench_step: bind failed: %s\n", wd_strerror(rc));
    wd_vk_dset_free(s);
    *ps = NULL;
    return NULL;
  }
  bt->sets[bt->n_sets++] = s;
  return s;
}

static int gemv(bench_t *bt, wd_vk_cmd_t *cmd, uint32_t nb, wd_vk_buffer_t *in, uint32_t K,
                uint64_t w_off, uint32_t N, uint64_t b_off, wd_vk_buffer_t *out, uint32_t ldy,
                uint32_t flags) {
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t ax = arg(in), aw = arg(bt->w), ab = arg(bt->bias), ay = arg(out);
  keep(bt, wd_vk_gemv_bind(bt->gemv, K, nb, &ax, &aw, &ab, &ay, &s), &s);
  if (!s)
    return WD_EINVAL;
  const wd_pc_gemv_t pc = { .N = N, .K = K, .nb = nb, .ldx = K, .w_off = (uint32_t)w_off,
                            .ldy = ldy, .bias_off = (uint32_t)b_off, .flags = flags,
                            .alpha = 1.0f };
  return wd_vk_gemv_record(bt->gemv, cmd, s, &pc);
}

static int norm(bench_t *bt, wd_vk_cmd_t *cmd, uint32_t nb, uint32_t idx) {
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t ax = arg(bt->x), ah = arg(bt->h);
  const wd_vk_arg_t ag = { .buf = bt->ln, .offset = (uint64_t)idx * 2 * D * 4, .range = D * 4 };
  const wd_vk_arg_t ab = { .buf = bt->ln, .offset = ((uint64_t)idx * 2 + 1) * D * 4, .range = D * 4 };
  keep(bt, wd_vk_norm_bind(bt->norm, &ax, &ah, &ag, &ab, &s), &s);
  if (!s)
    return WD_EINVAL;
  const wd_pc_norm_t pc = { .n_rows = nb, .d = D, .ldx = D, .ldy = D, .eps = 1e-5f };
  return wd_vk_norm_record(bt->norm, cmd, s, &pc);
}

static int attn(bench_t *bt, wd_vk_cmd_t *cmd, uint32_t nb, uint32_t l, int cross) {
  wd_vk_dset_t *s = NULL;
  const wd_vk_arg_t as = arg(bt->step), aq = arg(cross ? bt->qc : bt->qkv),
                    ak = arg(cross ? bt->kx : bt->kc), av = arg(cross ? bt->vx : bt->vc),
                    ao = arg(bt->ao);
  keep(bt, wd_vk_attn_bind(bt->attn, &as, &aq, &ak, &av, &ao, &ao, &s), &s);
  if (!s)
    return WD_EINVAL;
  const wd_pc_attn_t pc = {
    .n_head = NH, .n_ctx = cross ? NAUD : NCTX, .n_keys = cross ? NAUD : 0,
    .flags = cross ? WD_ATTN_CROSS : 0, .ldq = cross ? D : 3 * D,
    .kv_off = cross ? l * NAUD * D : l * BMAX * NCTX * D, .ldkv = D, .ldo = D, .scale = 0.125f,
  };
  return wd_vk_attn_record(bt->attn, cmd, s, &pc, nb);
}

/* Records the whole step for nb sequences. */
static int record_step(bench_t *bt, wd_vk_cmd_t *cmd, uint32_t nb) {
  int rc = 0;
  wd_vk_dset_t *s = NULL;
  if ((rc = wd_vk_cmd_begin(cmd)) < 0)
    return rc;
  wd_vk_cmd_timestamp(cmd, 0);
  const wd_vk_arg_t astep = arg(bt->step), atok = arg(bt->tok), apos = arg(bt->pos),
                    ax = arg(bt->x), aqkv = arg(bt->qkv), akc = arg(bt->kc), avc = arg(bt->vc);
  keep(bt, wd_vk_misc_bind_embed(bt->misc, &astep, &atok, &apos, &ax, &s), &s);
  const wd_pc_embed_t pe = { .d = D, .ldx = D, .n_vocab = NV, .n_pos = NCTX };
  rc |= s ? wd_vk_misc_record_embed(bt->misc, cmd, s, &pe, nb) : WD_EINVAL;
  mark(cmd, "wd_vk_misc_record_embed");
  for (uint32_t l = 0; l < L; l++) {
    wd_vk_cmd_barrier(cmd);
    rc |= norm(bt, cmd, nb, 3 * l);
    mark(cmd, "norm");
    wd_vk_cmd_barrier(cmd);
    rc |= gemv(bt, cmd, nb, bt->h, D, bt->w_off[l][W_QKV], 3 * D, bt->b_off[l][W_QKV], bt->qkv,
               3 * D, WD_GEMM_BIAS);
    mark(cmd, "gemv/W_QKV");
    wd_vk_cmd_barrier(cmd);
    s = NULL;
    keep(bt, wd_vk_kv_bind_append(bt->kv, &astep, &aqkv, &akc, &avc, &s), &s);
    const wd_pc_kv_t pk = { .d = D, .n_ctx = NCTX, .in_off = D, .ldi = 3 * D,
                            .cache_off = l * BMAX * NCTX * D, .v_in_off = 2 * D };
    rc |= s ? wd_vk_kv_record_append(bt->kv, cmd, s, &pk, nb) : WD_EINVAL;
    mark(cmd, "wd_vk_kv_record_append");
    wd_vk_cmd_barrier(cmd);
    rc |= attn(bt, cmd, nb, l, 0);
    mark(cmd, "attn_self");
    wd_vk_cmd_barrier(cmd);
    rc |= gemv(bt, cmd, nb, bt->ao, D, bt->w_off[l][W_OUT], D, bt->b_off[l][W_OUT], bt->x, D,
               WD_GEMM_BIAS | WD_GEMM_ACCUMULATE);
    mark(cmd, "gemv/W_OUT");
    wd_vk_cmd_barrier(cmd);
    rc |= norm(bt, cmd, nb, 3 * l + 1);
    mark(cmd, "norm");
    wd_vk_cmd_barrier(cmd);
    rc |= gemv(bt, cmd, nb, bt->h, D, bt->w_off[l][W_CQ], D, bt->b_off[l][W_CQ], bt->qc, D,
               WD_GEMM_BIAS);
    mark(cmd, "gemv/W_CQ");
    wd_vk_cmd_barrier(cmd);
    rc |= attn(bt, cmd, nb, l, 1);
    mark(cmd, "attn_cross");
    wd_vk_cmd_barrier(cmd);
    rc |= gemv(bt, cmd, nb, bt->ao, D, bt->w_off[l][W_COUT], D, bt->b_off[l][W_COUT], bt->x, D,
               WD_GEMM_BIAS | WD_GEMM_ACCUMULATE);
    mark(cmd, "gemv/W_COUT");
    wd_vk_cmd_barrier(cmd);
    rc |= norm(bt, cmd, nb, 3 * l + 2);
    mark(cmd, "norm");
    wd_vk_cmd_barrier(cmd);
    rc |= gemv(bt, cmd, nb, bt->h, D, bt->w_off[l][W_FC1], FF, bt->b_off[l][W_FC1], bt->ffn, FF,
               WD_GEMM_BIAS | WD_GEMM_GELU);
    mark(cmd, "gemv/W_FC1");
    wd_vk_cmd_barrier(cmd);
    rc |= gemv(bt, cmd, nb, bt->ffn, FF, bt->w_off[l][W_FC2], D, bt->b_off[l][W_FC2], bt->x, D,
               WD_GEMM_BIAS | WD_GEMM_ACCUMULATE);
    mark(cmd, "gemv/W_FC2");
  }
  wd_vk_cmd_barrier(cmd);
  rc |= norm(bt, cmd, nb, 3 * L);
  mark(cmd, "norm");
  wd_vk_cmd_barrier(cmd);
  /* Logits against the tied token embedding (the tok buffer, f16). */
  wd_vk_dset_t *sl = NULL;
  const wd_vk_arg_t ah = arg(bt->h), ab = arg(bt->bias), alg = arg(bt->logits);
  keep(bt, wd_vk_gemv_bind(bt->gemv, D, nb, &ah, &atok, &ab, &alg, &sl), &sl);
  const wd_pc_gemv_t pl = { .N = NV, .K = D, .nb = nb, .ldx = D, .ldy = NV, .alpha = 1.0f };
  rc |= sl ? wd_vk_gemv_record(bt->gemv, cmd, sl, &pl) : WD_EINVAL;
  mark(cmd, "wd_vk_gemv_record");
  wd_vk_cmd_timestamp(cmd, 1);
  const int rc_end = wd_vk_cmd_end(cmd);
  return rc ? WD_EINVAL : rc_end;
}

static int setup(bench_t *bt) {
  int rc;
  const wd_vk_device_opts_t opts = { .index = -1 };
  if ((rc = wd_vk_device_new(&opts, &bt->dev)) < 0)
    return rc;
  wd_vk_device_t *d = bt->dev;
  if ((rc = wd_vk_norm_new(d, WD_VK_NORM_AUTO, &bt->norm)) < 0 ||
      (rc = wd_vk_gemv_new(d, WD_VK_GEMV_AUTO, &bt->gemv)) < 0 ||
      (rc = wd_vk_attn_new(d, WD_VK_ATTN_AUTO, &bt->attn)) < 0 ||
      (rc = wd_vk_kv_new(d, &bt->kv)) < 0 || (rc = wd_vk_misc_new(d, &bt->misc)) < 0)
    return rc;
  uint64_t nw = 0, nbias = 0;
  for (uint32_t l = 0; l < L; l++)
    for (int i = 0; i < W_N; i++) {
      bt->w_off[l][i] = nw;
      bt->b_off[l][i] = nbias;
      nw += (uint64_t)w_rows[i] * w_cols[i];
      nbias += w_rows[i];
    }
  rc = wd_vk_buffer_new(d, BMAX * sizeof(wd_seq_t), WD_VK_BUF_STORAGE, WD_VK_MEM_HOST, &bt->step);
  if (rc < 0 || (rc = make_buf(d, (uint64_t)NV * D, 2, 1.0f, &bt->tok)) < 0 ||
      (rc = make_buf(d, (uint64_t)NCTX * D, 4, 0.1f, &bt->pos)) < 0 ||
      (rc = make_buf(d, nw, 2, 1.0f, &bt->w)) < 0 ||
      (rc = make_buf(d, nbias + 4, 4, 0.1f, &bt->bias)) < 0 ||
      (rc = make_buf(d, (3 * L + 1) * 2 * D, 4, 1.0f, &bt->ln)) < 0 ||
      (rc = make_buf(d, (uint64_t)L * BMAX * NCTX * D, 4, 1.0f, &bt->kc)) < 0 ||
      (rc = make_buf(d, (uint64_t)L * BMAX * NCTX * D, 4, 1.0f, &bt->vc)) < 0 ||
      (rc = make_buf(d, (uint64_t)L * NAUD * D, 4, 1.0f, &bt->kx)) < 0 ||
      (rc = make_buf(d, (uint64_t)L * NAUD * D, 4, 1.0f, &bt->vx)) < 0 ||
      (rc = make_buf(d, BMAX * D, 4, 0.0f, &bt->x)) < 0 ||
      (rc = make_buf(d, BMAX * D, 4, 0.0f, &bt->h)) < 0 ||
      (rc = make_buf(d, BMAX * 3 * D, 4, 0.0f, &bt->qkv)) < 0 ||
      (rc = make_buf(d, BMAX * D, 4, 0.0f, &bt->ao)) < 0 ||
      (rc = make_buf(d, BMAX * D, 4, 0.0f, &bt->qc)) < 0 ||
      (rc = make_buf(d, BMAX * FF, 4, 0.0f, &bt->ffn)) < 0 ||
      (rc = make_buf(d, (uint64_t)BMAX * NV, 4, 0.0f, &bt->logits)) < 0)
    return rc;
  return 0;
}

static void teardown(bench_t *bt) {
  for (int i = 0; i < bt->n_sets; i++)
    wd_vk_dset_free(bt->sets[i]);
  wd_vk_buffer_t *bufs[] = { bt->step, bt->tok, bt->pos, bt->w, bt->bias, bt->ln, bt->kc, bt->vc,
                             bt->kx, bt->vx, bt->x, bt->h, bt->qkv, bt->ao, bt->qc, bt->ffn,
                             bt->logits };
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    wd_vk_buffer_free(bufs[i]);
  wd_vk_norm_free(bt->norm);
  wd_vk_gemv_free(bt->gemv);
  wd_vk_attn_free(bt->attn);
  wd_vk_kv_free(bt->kv);
  wd_vk_misc_free(bt->misc);
  wd_vk_device_free(bt->dev);
}

int main(int argc, char **argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 20;
  bench_t bt = { .n_sets = 0 };
  profile = getenv("WD_BENCH_PROFILE") != NULL;
  if (getenv("WD_BENCH_DEBUG"))
    wd_log_set_level(WD_LOG_DEBUG);
  int rc = setup(&bt);
  if (rc < 0) {
    fprintf(stderr, "bench_step: setup failed: %s\n", wd_strerror(rc));
    teardown(&bt);
    return rc == WD_ENODEVICE ? 77 : 1;
  }
  const char *lp = getenv("LP_NUM_THREADS");
  printf("device: %s, LP_NUM_THREADS=%s, %d iterations\n", wd_vk_device_info(bt.dev)->name,
         lp ? lp : "(unset)", iters);
  const uint32_t batches[] = { 1, 4, 8 };
  for (size_t bi = 0; bi < 3 && rc == 0; bi++) {
    const uint32_t nb = batches[bi];
    wd_vk_cmd_t *cmd = NULL;
    n_marks = 0;
    if ((rc = wd_vk_cmd_new(bt.dev, 2 + MAX_MARKS, &cmd)) < 0 || (rc = record_step(&bt, cmd, nb)) < 0) {
      fprintf(stderr, "bench_step: recording failed: %s\n", wd_strerror(rc));
      wd_vk_cmd_free(cmd);
      break;
    }
    wd_seq_t *seq = wd_vk_buffer_map(bt.step);
    double best_gpu = 1e30, sum_gpu = 0.0, best_wall = 1e30, sum_wall = 0.0;
    int n = 0;
    for (int it = -2; it < iters && rc == 0; it++) {
      /* The per-step values: positions advance, lengths follow. */
      for (uint32_t b = 0; b < nb; b++) {
        const uint32_t pos = 64 + (uint32_t)(it + 2);
        seq[b] = (wd_seq_t){ .token = 50257 + b, .pos = pos, .len = pos + 1, .audio = 0,
                             .slot = b };
      }
      const double t0 = now_ms();
      rc = wd_vk_cmd_submit(cmd, UINT64_MAX);
      const double wall = now_ms() - t0;
      double ns = 0.0;
      if (rc == 0)
        rc = wd_vk_cmd_elapsed_ns(cmd, 0, 1, &ns);
      if (it < 0 || rc < 0)
        continue; /* warm-up */
      const double gpu = ns / 1e6;
      best_gpu = gpu < best_gpu ? gpu : best_gpu;
      best_wall = wall < best_wall ? wall : best_wall;
      sum_gpu += gpu;
      sum_wall += wall;
      n++;
    }
    if (rc == 0 && n > 0)
      printf("B=%u: %u dispatches, GPU %.2f ms/step (best %.2f), wall %.2f ms (best %.2f)\n", nb,
             wd_vk_cmd_n_dispatches(cmd), sum_gpu / n, best_gpu, sum_wall / n, best_wall);
    else
      fprintf(stderr, "bench_step: B=%u failed: %s\n", nb, wd_strerror(rc));
    for (uint32_t i = 0; profile && rc == 0 && i < n_marks; i++) {
      double ns = 0.0;
      if (wd_vk_cmd_elapsed_ns(cmd, i ? 2 + i - 1 : 0, 2 + i, &ns) == 0)
        printf("  %2u %-16s %.3f ms\n", i, mark_names[i], ns / 1e6);
    }
    wd_vk_cmd_free(cmd);
  }
  teardown(&bt);
  return rc < 0 ? 1 : 0;
}
