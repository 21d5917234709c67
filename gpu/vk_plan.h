/*
 * vk_plan.h - how the Vulkan engine lays out its caches and activations
 * for one model, one batch and one device's limits, worked out before
 * anything is allocated (pure arithmetic: no device needed, so `whisperd
 * info` and the tests can plan for devices they do not have).
 *
 * The large buffers are per decoder layer: the self-attention K and V
 * caches (max_seqs slots x n_text_ctx x d per layer), the cross-attention K
 * and V (max_audio windows x n_audio_ctx x d per layer) and the scratch
 * caches of align and seq_copy. Kernels bind one layer at a time (their
 * descriptor sets are per layer anyway), so a binding spans one layer, not
 * the whole cache: large-v3's cross K/V for 16 windows is 7.9 GB in f32,
 * one layer of it 123 MB. A layer starts at a multiple of both offset
 * alignments; layers are packed into buffers of at most min(1 GiB,
 * maxMemoryAllocationSize), so a cache is split across several
 * allocations when it must be.
 *
 * Every binding is checked against the limits here: a layer (or a window's
 * block of one) against maxStorageBufferRange where a kernel binds it as a
 * storage buffer, against maxTexelBufferElements where one reads it through
 * a texel view; every activation buffer against both. The sum (weights,
 * caches, activations) must fit the largest device-local heap. When it
 * does not, the plan says which batch would: wd_vk_plan_fit().
 *
 * Weights are not split here: gpu/vk_weights.c packs them into chunks of
 * at most 1 GiB, the allocation size every Vulkan device allows.
 *
 * Caches hold f16 (kv_f16) or f32 elements; the attention kernels read
 * either through RGBA16F / RGBA32F texel views.
 */
#ifndef WD_VK_PLAN_H
#define WD_VK_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "vk_limits.h"

/* Rows of the largest prefill / align recording (vk_engine_rows.c). */
#define WD_PLAN_PREFILL 256u
/* Bytes of encoder attention scores per head group, at most. */
#define WD_PLAN_SCORES_MAX (120ull << 20)
/* Largest buffer the plan asks for (below every driver's allocation limit). */
#define WD_PLAN_BUF_MAX (1ull << 30)
/* align: rows per chunk of the all-row logits, and (head, token) rows of qk
 * per submit (vk_engine_rows.c). */
#define WD_PLAN_LG_ROWS 32u
#define WD_PLAN_QK_ROWS 1024u
/* A step's cross-attention in key chunks: chunks per (row, head), at most
 * (vk_attn.h WD_VK_ATTN_MAX_SPLIT). */
#define WD_PLAN_ATTN_SPLIT 16u

/* The engine's activation buffers, one entry each: vk_engine*.c allocate
 * every one at its entry's size (wd_vk_plan_t.act_floats) and nothing else,
 * and the plan sums the entries, so the two cannot disagree. Shapes in
 * vk_engine_internal.h; R below is max(max_seqs, WD_PLAN_PREFILL). */
typedef enum {
  WD_ACT_DUMMY,                                         /* 64 floats, unused bindings */
  WD_ACT_MEL, WD_ACT_COL, WD_ACT_X1,                    /* encoder input, im2col, conv1 */
  WD_ACT_XA, WD_ACT_HA, WD_ACT_QA, WD_ACT_KA, WD_ACT_VA, WD_ACT_OA, WD_ACT_VT, /* (n, d) */
  WD_ACT_SCORES, WD_ACT_FA,                             /* attention scores, MLP */
  WD_ACT_STEP, WD_ACT_X, WD_ACT_H, WD_ACT_O,            /* decoder: records, (R, d) rows */
  WD_ACT_Q, WD_ACT_QKV, WD_ACT_F, WD_ACT_LOGITS,        /* cross queries, qkv, MLP, logits */
  WD_ACT_QALL, WD_ACT_CP_IN, WD_ACT_CP_OUT,             /* prefill queries, seq_copy records */
  WD_ACT_LGC, WD_ACT_MASK, WD_ACT_STATS, WD_ACT_TGT, WD_ACT_QK, /* align */
  WD_ACT_PART,                                          /* cross-attention key chunks */
  WD_ACT_N
} wd_vk_act_t;

/* One per-layer buffer set: layer l lives in buffer l / per_buf at byte
 * offset (l % per_buf) * stride, layer_bytes long. */
typedef struct {
  uint64_t layer_bytes; /* bytes of one layer */
  uint64_t stride;      /* layer_bytes rounded up to the offset alignments */
  uint32_t n_layers, per_buf, n_bufs;
  uint64_t buf_bytes;   /* size of every buffer but maybe the last */
  uint64_t last_bytes;  /* size of the last buffer */
  uint64_t total;       /* bytes of all buffers */
} wd_vk_layout_t;

typedef struct {
  int max_seqs, max_audio;
  bool kv_f16;
  uint32_t kv_elem;       /* bytes per cache element: 2 or 4 */
  uint32_t score_group;   /* encoder heads per attention-score group */
  wd_vk_layout_t self;    /* one of kc, vc: (max_seqs, n_text_ctx, d) per layer */
  wd_vk_layout_t cross;   /* one of xk, xv: (max_audio, n_audio_ctx, d) per layer */
  wd_vk_layout_t scratch; /* one of kx, vx: (256, d) per layer for align; its
                           * first (max_seqs, n_text_ctx, d) for seq_copy */
  uint64_t weights;       /* bytes of uploaded weights */
  uint64_t self_bytes;    /* both self caches */
  uint64_t cross_bytes;   /* both cross caches */
  uint64_t act_floats[WD_ACT_N]; /* each activation buffer's size, in 4-byte units */
  uint64_t act_bytes;     /* activations, both scratch caches, readback */
  uint64_t total;
  uint64_t heap;          /* the heap it was checked against (0: not checked) */
} wd_vk_plan_t;

/* Device bytes of m's weights as gpu/vk_weights.c packs them (each tensor
 * at a 256-byte boundary). */
uint64_t wd_vk_plan_weight_bytes(const wd_model_t *m);

/* Plans hp's engine for max_seqs / max_audio against lim (heap_bytes 0: no
 * heap check). WD_ERANGE when a binding exceeds a limit, WD_ENOMEM when the
 * total exceeds the heap; err says which and, for the heap, the largest
 * batch that fits. *ret is filled in either case (sizes as planned). */
int wd_vk_plan_make(const wd_hparams_t *hp, uint64_t weight_bytes, const wd_vk_limits_t *lim,
                    int max_seqs, int max_audio, bool kv_f16, wd_vk_plan_t *ret, char *err,
                    size_t err_len);

/* The largest batch b <= max(max_seqs, max_audio) for which max_seqs' =
 * min(max_seqs, b), max_audio' = min(max_audio, b) plan; 0 when not even
 * b = 1 does. Its seqs/audio in *ret_seqs / *ret_audio. */
int wd_vk_plan_fit(const wd_hparams_t *hp, uint64_t weight_bytes, const wd_vk_limits_t *lim,
                   int max_seqs, int max_audio, bool kv_f16, int *ret_seqs, int *ret_audio);

#endif
