/*
 * vk_kv.h - the decoder's self-attention KV caches: append and beam gather.
 *
 * Caches are (B slots, n_ctx, d) f32 or f16 per layer (all layers may share one
 * buffer, layer l at cache_off + l * layer_stride). Append writes this
 * step's K and V rows of batch row b into slot slot[b] at row pos[b]; gather
 * copies, for every layer and record b, cache[slot[b]] <- cache[src[b]] for
 * rows < len[b] from one cache set into another (never in place). slot, pos,
 * len and src come from the step-parameter buffer (wd_seq_t), so the
 * recording is replayed unchanged every step; the host keeps slots below B,
 * and distinct within a step except for a prefill's rows, which share a
 * slot at distinct positions (padding rows at pos >= n_ctx write nothing).
 */
#ifndef WD_VK_KV_H
#define WD_VK_KV_H

#include <stdbool.h>

#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "vk_push.h"

typedef struct wd_vk_kv wd_vk_kv_t;

int wd_vk_kv_new(wd_vk_device_t *dev, wd_vk_kv_t **ret_kv); /* f32 caches */
/* kv_f16: caches of f16 elements (four to 8 bytes), written by append with
 * round-to-nearest-even and copied bit for bit by gather; the f32 -> f16
 * conversion of cross K/V below exists only then. */
int wd_vk_kv_new_fmt(wd_vk_device_t *dev, bool kv_f16, wd_vk_kv_t **ret_kv);
void wd_vk_kv_free(wd_vk_kv_t *kv); /* accepts NULL */

/* step: wd_seq_t records; in: the rows to append (f32); k, v: caches. */
int wd_vk_kv_bind_append(wd_vk_kv_t *kv, const wd_vk_arg_t *step, const wd_vk_arg_t *in,
                         const wd_vk_arg_t *k, const wd_vk_arg_t *v, wd_vk_dset_t **ret_set);
/* Uses d, n_ctx, in_off, v_in_off, ldi, cache_off. WD_EINVAL unless all
 * of them (but n_ctx) are multiples of 4 and ldi >= d. */
int wd_vk_kv_record_append(wd_vk_kv_t *kv, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                           const wd_pc_kv_t *pc, uint32_t nb);

/* k_src/v_src are read, k_dst/v_dst written; they must not overlap. */
int wd_vk_kv_bind_gather(wd_vk_kv_t *kv, const wd_vk_arg_t *step, const wd_vk_arg_t *k_src,
                         const wd_vk_arg_t *v_src, const wd_vk_arg_t *k_dst,
                         const wd_vk_arg_t *v_dst, wd_vk_dset_t **ret_set);
/* Uses d, n_ctx, cache_off, layer_stride over n_layer layers. */
int wd_vk_kv_record_gather(wd_vk_kv_t *kv, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                           const wd_pc_kv_t *pc, uint32_t nb, uint32_t n_layer);

/* kv_to_f16.comp: one window's K and V rows, f32 -> f16 (n4 vec4s each).
 * ks/vs f32 storage, kd/vd the f16 destinations. WD_EINVAL for an f32 kv. */
typedef struct {
  uint32_t n4, pad0, pad1, pad2;
} wd_pc_cvt_t;
_Static_assert(sizeof(wd_pc_cvt_t) == 16, "wd_pc_cvt_t must match kv_to_f16.comp");
int wd_vk_kv_bind_to_f16(wd_vk_kv_t *kv, const wd_vk_arg_t *ks, const wd_vk_arg_t *vs,
                         const wd_vk_arg_t *kd, const wd_vk_arg_t *vd, wd_vk_dset_t **ret_set);
int wd_vk_kv_record_to_f16(wd_vk_kv_t *kv, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                           uint32_t n4);

#endif
