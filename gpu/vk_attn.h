/*
 * vk_attn.h - decoder attention for one step (self and cross).
 *
 * One workgroup per (sequence b, head h), head dimension 64:
 *   O[b][h] = softmax(scale * q . K[row0 + j]) . V[row0 + j], j < n_keys
 * Self-attention reads n_keys = len[b] keys of the KV cache of sequence slot
 * slot[b] (row0 = slot[b] * n_ctx), both from the step-parameter buffer
 * (wd_seq_t records); cross-attention (WD_ATTN_CROSS) uses pc->n_keys keys
 * of the encoder output audio[b]. WD_ATTN_SAVE_QK / WD_ATTN_SAVE_P also write
 * the scaled scores / softmax weights of the heads in pc->save_heads.
 *
 * Variants: SUBGROUP (subgroup reductions) and SHARED (shared-memory tree);
 * AUTO picks SUBGROUP where the device has subgroup arithmetic.
 */
#ifndef WD_VK_ATTN_H
#define WD_VK_ATTN_H

#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "vk_push.h"

typedef enum {
  WD_VK_ATTN_AUTO = 0,
  WD_VK_ATTN_SUBGROUP = 1,
  WD_VK_ATTN_SHARED = 2,
} wd_vk_attn_variant_t;

#define WD_VK_ATTN_MAX_KEYS 1536u

typedef struct wd_vk_attn wd_vk_attn_t;

int wd_vk_attn_new(wd_vk_device_t *dev, wd_vk_attn_variant_t variant, wd_vk_attn_t **ret_attn);
/* The same kernel reading K and V through RGBA16F views (f16 caches) when
 * kv_f16: texelFetch converts, so only the views' format differs. */
int wd_vk_attn_new_fmt(wd_vk_device_t *dev, wd_vk_attn_variant_t variant, bool kv_f16,
                       wd_vk_attn_t **ret_attn);
void wd_vk_attn_free(wd_vk_attn_t *a); /* accepts NULL */
wd_vk_attn_variant_t wd_vk_attn_variant(const wd_vk_attn_t *a);

/* Binds step (wd_seq_t records), q (f32 texel view), k, v (f32 or f16
 * texel views, as made), o (f32) and
 * save (f32; any valid range when nothing is saved). */
int wd_vk_attn_bind(wd_vk_attn_t *a, const wd_vk_arg_t *step, const wd_vk_arg_t *q,
                    const wd_vk_arg_t *k, const wd_vk_arg_t *v, const wd_vk_arg_t *o,
                    const wd_vk_arg_t *save, wd_vk_dset_t **ret_set);

/* Records attention for nb sequences and pc->n_head heads. WD_EINVAL when
 * q_off, ldq, kv_off or ldkv is not a multiple of 4, ldkv or ldq is below
 * n_head * 64, n_ctx exceeds WD_VK_ATTN_MAX_KEYS (self) or n_keys exceeds
 * n_ctx (cross), or save_heads names a head >= n_head. */
int wd_vk_attn_record(wd_vk_attn_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                      const wd_pc_attn_t *pc, uint32_t nb);

/* Many rows of one sequence (prefill, align): on GPUs, 16 rows per
 * workgroup read each key and value once (shaders/attn_rows.comp); on CPU
 * drivers the one-row kernel runs (faster there). Every row of a group of
 * 16 must have the same seq[].audio (cross) or seq[].slot (self); the
 * self-attention mask is each row's len, as in wd_vk_attn_record. WD_EINVAL
 * as wd_vk_attn_record, and when nb is not a multiple of WD_VK_ATTN_ROWS or
 * pc->flags asks to save scores (only wd_vk_attn_record saves them).
 * wd_vk_attn_use_rows overrides the device's choice (tests): call it
 * before binding, as sets and recordings follow the choice made then. */
#define WD_VK_ATTN_ROWS 16u
#define WD_VK_ATTN_MAX_SPLIT 16u /* vk_plan.h WD_PLAN_ATTN_SPLIT sizes the engine's partials */
void wd_vk_attn_use_rows(wd_vk_attn_t *a, bool on);
int wd_vk_attn_bind_rows(wd_vk_attn_t *a, const wd_vk_arg_t *step, const wd_vk_arg_t *q,
                         const wd_vk_arg_t *k, const wd_vk_arg_t *v, const wd_vk_arg_t *o,
                         wd_vk_dset_t **ret_set);
int wd_vk_attn_record_rows(wd_vk_attn_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                           const wd_pc_attn_t *pc, uint32_t nb);

/* Key chunks (flash-decoding): pc->n_split workgroups per (row, head),
 * each over a contiguous chunk of the keys, write partial results to part
 * (nb * n_head * n_split * WD_ATTN_PART floats from pc->save_off), then a merge writes O:
 * the same result as wd_vk_attn_record (to rounding) with n_split times
 * the workgroups. wd_vk_attn_splits: the chunks this device wants for a
 * step's cross-attention (1: use wd_vk_attn_record; 8 on GPUs);
 * wd_vk_attn_set_splits overrides it (tests). WD_EINVAL as
 * wd_vk_attn_record, and for n_split outside 2..WD_VK_ATTN_MAX_SPLIT or
 * saved scores. Records a barrier between its two dispatches. */
uint32_t wd_vk_attn_splits(const wd_vk_attn_t *a);
void wd_vk_attn_set_splits(wd_vk_attn_t *a, uint32_t n);
int wd_vk_attn_bind_split(wd_vk_attn_t *a, const wd_vk_arg_t *step, const wd_vk_arg_t *q,
                          const wd_vk_arg_t *k, const wd_vk_arg_t *v, const wd_vk_arg_t *o,
                          const wd_vk_arg_t *part, wd_vk_dset_t **ret_set);
int wd_vk_attn_record_split(wd_vk_attn_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                            const wd_pc_attn_t *pc, uint32_t nb);

#endif
