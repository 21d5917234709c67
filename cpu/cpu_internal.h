/*
 * cpu_internal.h - the CPU engine's state, shared by its modules:
 * cpu_engine.c (load, plan, slots), cpu_encoder.c (encode + cross K/V),
 * cpu_decoder.c (step, prefill, align).
 */
#ifndef WD_CPU_INTERNAL_H
#define WD_CPU_INTERNAL_H

#include <stdint.h>

#include "cpu_engine.h"
#include "cpu_gemv.h"
#include "cpu_mat.h"
#include "pool.h"

#define CPU_MAX_PREFILL 256
#define CPU_GEMV_PICK_ROWS 16 /* gemv_path's rows: the largest decoder batch */
/* Decoder rows of one call at most: a prompt's, or WD_CPU_MAX_SEQS steps'. */
#define CPU_MAX_ROWS 256
#define CPU_ATTN_TASKS 64 /* attention work items per loop, each with its own scores buffer */

/* Encoder layer: the file's type as stored, widened per product for sgemm
 * (cpu_gemm.h). qkv is (3d, d): Q, K, V stacked. */
typedef struct {
  cpu_mat_t qkv, o, fc1, fc2;
  float *bqkv, *bo, *b1, *b2, *attn_g, *attn_b, *mlp_g, *mlp_b;
} cpu_enc_layer_t;

/* Decoder layer: the file's type as stored (f16 or quantized blocks; f32
 * for f32 files) for the GEMV; the cross K/V projection (2d, d_audio) is
 * used once per window by sgemm (widened per product, cpu_gemm.h). */
typedef struct {
  cpu_mat_t qkv, o, xq, xo, fc1, fc2, xkv;
  float *bqkv, *bo, *bxq, *bxo, *bxkv, *b1, *b2;
  float *attn_g, *attn_b, *x_g, *x_b, *mlp_g, *mlp_b;
} cpu_dec_layer_t;

struct wd_cpu_engine {
  wd_engine_t iface;
  const wd_model_t *m;
  wd_hparams_t hp;
  int n_threads;
  wd_pool_t *pool;
  int max_seqs, max_audio, max_rows; /* max_rows: max(max_seqs, CPU_MAX_PREFILL) */

  /* ---- weights ---- */
  cpu_mat_t conv1, conv2; /* (d_a, n_mels * 3), (d_a, d_a * 3): im2col order c * 3 + k; as
                             stored, f32 where the file has a block type (rows of n_mels * 3
                             are not whole blocks) */
  float *conv1_b, *conv2_b, *enc_pos, *enc_ln_g, *enc_ln_b;
  cpu_enc_layer_t *enc;
  cpu_mat_t emb; /* (n_vocab, d): the token embedding and the tied output projection */
  float *dec_pos, *dec_ln_g, *dec_ln_b;
  cpu_dec_layer_t *dec;
  double weight_bytes, mapped_bytes; /* what the matrices read; of it, in place */
  double state_bytes; /* what plan_buffers allocated for caches and scratch */

  /* ---- state ---- */
  /* Cross K/V per audio slot: (max_audio, n_layer, n_audio_ctx, d), f16:
   * every row of a step reads its slot's whole cache (18 MiB a row for
   * tiny.en in f32), so half the bytes is most of the per-row cost. */
  uint16_t *xk, *xv;
  int *audio_ok; /* (max_audio): encoded since load */
  /* Self K/V buffers: n_bufs = max_seqs + 2 of (n_layer, n_ctx, d) each.
   * Slot s uses buffer phys[s]: seq_copy moves buffers where it can and
   * copies only the rows in use into spare ones; align runs in a spare. */
  int n_bufs;
  float *kc, *vc;
  int *phys, *len, *audio; /* (max_seqs) */
  int *t_phys, *t_len, *t_audio, *t_used, *t_isdst, *t_copy; /* seq_copy scratch */

  /* ---- products of many rows (cpu_gemm.h) ---- */
  float *w_f32; /* wd_cpu_gemm_scratch_elems: the matrix being multiplied, widened to f32 */
  /* --compute-type (cpu_rgemm.h): the linear layers' arithmetic, its
   * kernels, and the activations converted for one product: (max(n_audio_ctx,
   * max_rows), the widest layer input) rows and their int8 scales. */
  wd_cpu_compute_t compute;
  int rpath; /* cpu_rpath_t */
  void *r_xq;
  float *r_xs;

  /* ---- encoder scratch ---- */
  float *e_melT; /* (2 n_audio_ctx, n_mels) */
  float *e_col;  /* im2col: max(2 n_ctx * n_mels * 3, n_ctx * d_a * 3) */
  float *e_x1;   /* conv1 out (2 n_ctx, d_a) */
  float *e_x, *e_h, *e_o; /* (n_ctx, d_a): residual stream, normed, attention out */
  float *e_qkv;  /* (n_ctx, max(3 d_a, 2 d)): Q K V, then the cross K and V in f32 */
  float *e_f;    /* (n_ctx, 4 d_a) */
  float *e_s;    /* (n_ctx, n_ctx) one head's scores, or the blocked attention's keys, values and scratch */

  /* ---- decoder scratch, max_rows rows ---- */
  float *d_x, *d_h, *d_o; /* (rows, d) */
  float *d_qkv;           /* (rows, 3d) */
  float *d_f;             /* (rows, 4d) */
  float *d_logits;        /* (max_seqs, n_vocab) */
  float *d_scores;        /* (CPU_ATTN_TASKS, WD_CPU_ATTN_ROWS, max(n_ctx, n_audio_ctx)) */
  float *d_keep;          /* align: kept scores when a head is asked */
  int *r_buf, *r_pos, *r_audio; /* per row: KV buffer, position, audio slot */

  /* ---- the GEMV's kernels, by rows (cpu_gemv_pick.c) ---- */
  /* gemv_path[r]: wd_cpu_gemv_range_path's path for r rows (r > CPU_GEMV_PICK_ROWS:
   * that entry's), the fastest measured at load where the CPU has more than one */
  signed char gemv_path[CPU_GEMV_PICK_ROWS + 1];
  char gemv_choice[320]; /* what was measured and chosen ("" where nothing was): 5 buckets
                         * of the widest model fit, and a cache value holds it */

  /* ---- the encoder attention's kernel (cpu_pick.c) ---- */
  int enc_blocked;       /* 1: blocked (cpu_enc_attn.h, only where available), 0: sgemm */
  char attn_choice[160]; /* what was measured and chosen ("" where nothing was) */

  /* ---- where the choices came from (cpu_pick.c) ---- */
  const char *pick_source; /* "measured", "cache", "forced" or "one candidate" */
  char pick_note[1536];    /* the whole story for the start-up log ("" where none) */

  /* ---- figures ---- */
  double encode_ms, cross_ms, attn_ms, step_ms_sum;
  unsigned long long n_steps;
};

/* The engine's caches and scratch, one row each: plan_buffers (cpu_engine.c)
 * allocates from this table and wd_cpu_engine_plan (cpu_plan.c) sums it, so
 * the plan `whisperd info` prints and what the engine takes cannot differ. */
typedef enum {
  CPU_BUF_XK, CPU_BUF_XV,                                     /* cross K/V, f16 */
  CPU_BUF_KC, CPU_BUF_VC,                                     /* self K/V, f32 */
  CPU_BUF_W_F32,                                              /* the rest: scratch */
  CPU_BUF_E_MELT, CPU_BUF_E_COL, CPU_BUF_E_X1, CPU_BUF_E_X, CPU_BUF_E_H, CPU_BUF_E_O,
  CPU_BUF_E_QKV, CPU_BUF_E_F, CPU_BUF_E_S,
  CPU_BUF_D_X, CPU_BUF_D_H, CPU_BUF_D_O, CPU_BUF_D_QKV, CPU_BUF_D_F, CPU_BUF_D_LOGITS,
  CPU_BUF_D_SCORES,
  CPU_BUF_R_XQ, CPU_BUF_R_XS,                                 /* --compute-type int8/bf16 only */
  CPU_BUF_N
} cpu_buf_id_t;

typedef enum { CPU_PLAN_CROSS, CPU_PLAN_SELF, CPU_PLAN_SCRATCH } cpu_plan_line_t;

typedef struct {
  size_t bytes; /* 0: not allocated for these options */
  cpu_plan_line_t line;
} cpu_buf_t;

/* Every buffer's size for a model of shape hp under these options (see the
 * engine struct for each one's shape). Also the self-attention buffer count
 * (max_seqs + 2: seq_copy's spares) and the decoder's rows. */
void wd_cpu_buffers(const wd_hparams_t *hp, const wd_cpu_engine_opts_t *o, cpu_buf_t b[CPU_BUF_N],
                    int *ret_n_self_bufs, int *ret_max_rows);

/* Splits rows into at most 4 chunks a thread (uneven threads even out):
 * returns the number of chunks, *rows_per the rows of each but the last. */
int wd_cpu_row_chunks(const wd_cpu_engine_t *e, int rows, int *rows_per);
/* Runs fn(arg, i) for i in [0, n) on the engine's threads. */
void wd_cpu_parallel(wd_cpu_engine_t *e, int n, void (*fn)(void *arg, int i), void *arg);
/* The GEMV over the pool, outputs split in chunks, on e->gemv_path's
 * kernels for g's rows; _path on a given path (the measurement's runs). */
void wd_cpu_gemv_run(wd_cpu_engine_t *e, const cpu_gemv_t *g);
void wd_cpu_gemv_run_path(wd_cpu_engine_t *e, const cpu_gemv_t *g, int path);
/* Fills e->gemv_path: the widest path for every row count, or, where the
 * CPU offers two (AVX-512 and AVX2) for the decoder's weights, the faster
 * on the model's own fc1 at 1, 2, 4, 8 and 16 rows (cpu_gemv_pick.c). */
void wd_cpu_gemv_pick(wd_cpu_engine_t *e);
/* Whether wd_cpu_gemv_pick has two candidates to measure on this model. */
int wd_cpu_gemv_pick_candidates(const wd_cpu_engine_t *e);
/* Tests only (0 otherwise): 1 gives both measured kernels two candidates
 * on any CPU, twins that run the same code, so that the measurement and
 * the cache run end to end on hosts without AVX-512: the GEMV's path 2
 * runs the AVX2 (or portable) kernels where the CPU lacks AVX-512
 * (cpu_gemv.h), and the attention's "blocked" candidate runs the sgemm
 * path unless the blocked kernel is available (cpu_pick.c). Any choice
 * then computes what the one real candidate does. */
extern int wd_cpu_pick_test_twins;
/* The encoder's self-attention of heads 0 .. nh-1 from e_qkv into e_o:
 * blocked (only where wd_cpu_enc_attn_available) or an sgemm pair a head
 * (cpu_encoder.c). The encoder runs every head; the measurement fewer. */
void wd_cpu_enc_attn_heads(wd_cpu_engine_t *e, int blocked, int nh, float scale);
/* Every kernel choice at load: forced by the environment, read from the
 * cache (cpu_pick_cache.h), or measured and cached; fills gemv_path,
 * enc_blocked and the notes (cpu_pick.c). */
void wd_cpu_kernels_pick(wd_cpu_engine_t *e);
/* The cache key for e's choices (cpu_pick.c): the kernel version, the CPU
 * model and features, the model's shape and weight type, the batch and
 * threads, OpenBLAS's version and kernels. */
void wd_cpu_pick_key(const wd_cpu_engine_t *e, char *key, size_t len);
/* The same from a model's shape and the options (`whisperd info`). */
void wd_cpu_pick_key_hp(const wd_hparams_t *hp, int max_seqs, int n_threads,
                        wd_cpu_compute_t compute, char *key, size_t len);

int wd_cpu_encode(void *self, int a, const float *mel);
int wd_cpu_step(void *self, int n, const int *seqs, const int32_t *tokens,
                const float **ret_logits);
int wd_cpu_prefill(void *self, int s, int n, const int32_t *tokens, const float **ret_logits);
int wd_cpu_align(void *self, int a, int n, const int32_t *tokens, int n_text, int n_heads,
                 const int (*heads)[2], float *qk, float *probs);

#endif
