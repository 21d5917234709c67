/*
 * vk_engine_internal.h - the engine's struct and the helpers its two files
 * share: vk_engine.c (load, encoder, cross K/V, the decoder step) and
 * vk_engine_rows.c (prefill, align and seq_copy: the recordings over many
 * rows of one sequence and over whole caches). Nothing outside these two
 * files includes it.
 *
 * Threading: one thread (the GPU worker) owns the engine and everything in
 * it.
 */
#ifndef WD_VK_ENGINE_INTERNAL_H
#define WD_VK_ENGINE_INTERNAL_H

#include "vk_attn.h"
#include "vk_buffer.h"
#include "vk_cmd.h"
#include "vk_engine.h"
#include "vk_attn_enc.h"
#include "vk_gemm.h"
#include "vk_gemv.h"
#include "vk_kv.h"
#include "vk_layers.h"
#include "vk_misc.h"
#include "vk_norm.h"
#include "vk_plan.h"
#include "vk_push.h"
#include "vk_softmax.h"
#include "vk_weights.h"

#define WD_ENG_FRAMES 3000         /* mel frames per window */
#define WD_ENG_MAX_SEQS WD_ENGINE_MAX_SEQS
#define WD_ENG_MAX_SETS 16384 /* large-v3 with 16 batch sizes records about 8,600 */
#define WD_ENG_PROF_MAX 1024       /* profiled operations per recording */

/* Prefill and align (vk_engine_rows.c). */
#define WD_ENG_MAX_PREFILL WD_PLAN_PREFILL /* rows of the largest prefill recording */
#define WD_ENG_N_BUCKETS 5      /* prefill recordings of 16, 32, 64, 128, 256 rows */
#define WD_ENG_LG_ROWS WD_PLAN_LG_ROWS /* align: rows per chunk of the all-row logits */
#define WD_ENG_QK_ROWS WD_PLAN_QK_ROWS /* align: (head, token) rows of qk per submit */

/* Profile marks of one recording: timestamp slot 2 + i ends operation i. */
typedef struct {
  const char *kind[WD_ENG_PROF_MAX];
  int n;
} wd_eng_prof_t;

struct wd_vk_engine {
  wd_engine_t iface;
  wd_vk_device_t *dev;
  wd_vk_weights_t *w;
  wd_hparams_t hp;
  int max_seqs, max_audio;
  wd_vk_plan_t plan; /* layouts and sizes, checked against the device (vk_plan.h) */
  /* kernels */
  wd_vk_gemm_t *gemm, *gemm_f32b;
  wd_vk_gemm_t *gemm_rows; /* the Linear layers of the prefill and align recordings */
  wd_vk_attn_enc_t *attn_enc; /* the encoder's fused attention, where the attention
                               * products run on the matrix units; else NULL */
  wd_vk_gemv_t *gemv;
  wd_vk_norm_t *norm;
  wd_vk_softmax_t *softmax;
  wd_vk_attn_t *attn;
  wd_vk_kv_t *kv;
  wd_vk_misc_t *misc;
  wd_vk_buffer_t *dummy; /* bound where a kernel's optional operand is unused */
  /* encoder activations */
  wd_vk_buffer_t *mel;    /* (n_mels, 3000), host-visible */
  wd_vk_buffer_t *col;    /* im2col rows: max(3000 x n_mels*3, 1500 x d*3) */
  wd_vk_buffer_t *x1;     /* (3000, d) conv1 output */
  wd_vk_buffer_t *xa, *ha, *qa, *ka, *va, *oa; /* (1500, d) */
  wd_vk_buffer_t *vt;     /* (heads, 64, 1500) V transposed per head */
  wd_vk_buffer_t *scores; /* (plan.score_group, 1500, 1500) */
  wd_vk_buffer_t *fa;     /* (1500, 4d) */
  wd_vk_layers_t *xk, *xv; /* per layer (max_audio, 1500, d) cross K/V (plan.cross) */
  /* decoder activations; rows = max(max_seqs, WD_ENG_MAX_PREFILL) */
  wd_vk_buffer_t *step;   /* (rows) wd_seq_t, host-visible */
  wd_vk_buffer_t *x, *h, *o; /* (rows, d) */
  wd_vk_buffer_t *q;      /* (max_seqs, d) the step's cross-attention queries */
  wd_vk_buffer_t *qkv;    /* (rows, 3d) */
  wd_vk_buffer_t *f;      /* (rows, 4d) */
  wd_vk_layers_t *kc, *vc; /* per layer (max_seqs slots, n_text_ctx, d) self K/V (plan.self) */
  wd_vk_buffer_t *logits; /* (max_seqs, n_vocab), host-visible */
  wd_vk_buffer_t *part;   /* (max_seqs, n_text_head, splits, WD_ATTN_PART) cross chunks */
  /* recordings */
  wd_vk_cmd_t *enc_cmd;
  wd_vk_cmd_t **cross_cmd; /* [max_audio] */
  wd_vk_cmd_t **step_cmd;  /* [max_seqs]: batch size nb at index nb - 1 */
  wd_vk_dset_t *sets[WD_ENG_MAX_SETS];
  int n_sets;
  /* ---- vk_engine_rows.c ---- */
  int n_buckets;
  uint32_t bucket[WD_ENG_N_BUCKETS];       /* rows of each recording, ascending */
  wd_vk_cmd_t *pf_cmd[WD_ENG_N_BUCKETS];   /* prefill into a sequence slot (NULL: unneeded) */
  wd_vk_cmd_t *al_cmd[WD_ENG_N_BUCKETS];   /* the same pass over the align scratch cache */
  wd_vk_cmd_t *al_tail;    /* re-recorded by each align(): qk products, logits chunks */
  wd_vk_cmd_t **cp_cmd;    /* [max_seqs]: seq_copy of k slots at index k - 1 */
  wd_vk_buffer_t *qall;    /* (n_text_layer, WD_ENG_MAX_PREFILL, d) cross-attention queries */
  wd_vk_layers_t *kx, *vx; /* scratch caches (plan.scratch): per layer (WD_ENG_MAX_PREFILL,
                            * d) for align; their start (max_seqs, n_text_ctx, d) for seq_copy */
  wd_vk_buffer_t *cp_in, *cp_out; /* (max_seqs) wd_seq_t gather records, host-visible */
  wd_vk_buffer_t *lgc;     /* (WD_ENG_LG_ROWS, ldv) one chunk of align's logits */
  wd_vk_buffer_t *mask;    /* (n_vocab) 0 below n_text, -inf from it, host-visible */
  wd_vk_buffer_t *stats;   /* (WD_ENG_MAX_PREFILL) wd_argmax_out_t, readback */
  wd_vk_buffer_t *tgt;     /* (WD_ENG_MAX_PREFILL) logit of the next token, readback */
  wd_vk_buffer_t *qk;      /* (WD_ENG_QK_ROWS, n_audio_ctx) align scores, readback */
  wd_vk_dset_t **set_qk;   /* [n_text_layer] the align tail's score GEMM over layer l */
  wd_vk_dset_t *set_lg;    /* its logits GEMM */
  wd_vk_dset_t *set_am[WD_ENG_MAX_PREFILL / WD_ENG_LG_ROWS]; /* its argmax, per chunk */
  int mask_n_text;         /* n_text the mask holds, 0 for none yet */
  /* sequence state, host side */
  int len[WD_ENG_MAX_SEQS];   /* per sequence slot: tokens in its KV cache */
  int audio[WD_ENG_MAX_SEQS]; /* per sequence slot: its audio slot */
  int encoded[64];          /* audio slot holds an encoded window */
  double encode_ms, cross_ms, step_ms, prefill_ms, align_ms, copy_ms;
  int profile;
  wd_eng_prof_t *prof_enc, *prof_step; /* marks of enc_cmd and step_cmd[0] */
  wd_eng_prof_t *prof_pf;              /* marks of the largest prefill recording */
  wd_eng_prof_t *prof_cur;             /* the recording being made, or NULL */
  unsigned long long n_steps;
  uint64_t act_bytes;
  /* ---- vk_engine_io.c: the host boundary; vk_engine_reset.c ---- */
  wd_vk_buffer_t *lg_rb;    /* (max_seqs, n_vocab) logits, copied out of `logits` */
  wd_vk_buffer_t *stats_rb, *tgt_rb, *qk_rb; /* align's results, copied out of theirs */
  const wd_model_t *model;  /* the weights a reset uploads again */
  wd_vk_engine_opts_t opts;
  int lost;                 /* a submit saw the device lost (or hung): all fail until reset */
  unsigned long long n_resets;
};

static inline wd_vk_arg_t wd__eng_whole(wd_vk_buffer_t *b) { return (wd_vk_arg_t){ .buf = b }; }

static inline wd_vk_arg_t wd__eng_slice(wd_vk_buffer_t *b, uint64_t off_floats,
                                        uint64_t n_floats) {
  return (wd_vk_arg_t){ .buf = b, .offset = off_floats * 4, .range = n_floats * 4 };
}

/* vk_engine.c: keeps the set *ps for freeing with the engine (rc passes
 * through); allocates an activation buffer of n_floats and counts it; finds
 * weight tensor `fmt` formatted with layer l; finds a LayerNorm's gain and
 * bias; GPU milliseconds between a recording's timestamps 0 and 1. */
int wd__eng_keep(wd_vk_engine_t *e, int rc, wd_vk_dset_t **ps);
int wd__eng_buf(wd_vk_engine_t *e, uint64_t n_floats, wd_vk_mem_t mem, wd_vk_buffer_t **ret);
/* Activation buffer `id` of the plan, at the plan's size (vk_plan.h). */
int wd__eng_act(wd_vk_engine_t *e, wd_vk_act_t id, wd_vk_mem_t mem, wd_vk_buffer_t **ret);
int wd__eng_wt(const wd_vk_engine_t *e, wd_vk_arg_t *a, const char *fmt, int l)
    __attribute__((format(printf, 3, 0)));
int wd__eng_norm_args(const wd_vk_engine_t *e, const char *fmt, int l, wd_vk_arg_t *g,
                      wd_vk_arg_t *b) __attribute__((format(printf, 2, 0)));
double wd__eng_elapsed_ms(wd_vk_cmd_t *cmd);

/* vk_engine_io.c: the readback buffers (sized from hp and max_seqs; before
 * the recordings, which copy into them); a submit of cmd with the device's
 * timeout, where a timeout or a lost device marks the engine lost and says
 * WD_EDEVLOST (and a lost engine submits nothing); a recorded copy of the
 * first `bytes` of src into readback buffer rb; rb's first `bytes` made
 * visible to the host, or NULL. */
int wd__eng_io_new(wd_vk_engine_t *e);
void wd__eng_io_free(wd_vk_engine_t *e);
int wd__eng_submit(wd_vk_engine_t *e, wd_vk_cmd_t *cmd);
int wd__eng_rec_readback(wd_vk_cmd_t *cmd, wd_vk_buffer_t *src, wd_vk_buffer_t *rb,
                         uint64_t bytes);
const void *wd__eng_host(wd_vk_buffer_t *rb, uint64_t bytes);
/* vk_engine_reset.c: engine.h's reset(). */
int wd__eng_reset(void *self);

/* vk_engine_rows.c: allocates its buffers and records its command buffers
 * (after the step recordings); frees what it made (accepts a partial one). */
int wd__eng_rows_new(wd_vk_engine_t *e);
void wd__eng_rows_free(wd_vk_engine_t *e);
/* The wd_engine_t operations (see core/engine.h). */
int wd__eng_prefill(void *self, int s, int n, const int32_t *tokens, const float **ret_logits);
int wd__eng_seq_copy(void *self, int n, const int *dst, const int *src);
int wd__eng_align(void *self, int a, int n, const int32_t *tokens, int n_text, int n_heads,
                  const int (*heads)[2], float *qk, float *probs);

#endif
