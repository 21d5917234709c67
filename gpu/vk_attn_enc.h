/*
 * vk_attn_enc.h - the encoder's self-attention fused on the matrix units
 * (shaders/attn_cm.comp): for every head h of n_head,
 *   O[:, h] = softmax(scale * Q[:, h] . K[:, h]^T) . V[:, h]
 * over n rows of (n, ld) f32 buffers, head h being columns h*64 .. h*64+63,
 * without writing the n x n scores. Q, K, V and the softmax weights are
 * rounded to f16 (the f32 path is vk_gemm + vk_softmax). Only on devices
 * whose matrix_ext is not NONE (vk_coopmat.h): elsewhere wd_vk_attn_enc_new
 * is WD_EUNSUP.
 */
#ifndef WD_VK_ATTN_ENC_H
#define WD_VK_ATTN_ENC_H

#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "vk_push.h"

typedef struct wd_vk_attn_enc wd_vk_attn_enc_t;

int wd_vk_attn_enc_new(wd_vk_device_t *dev, wd_vk_attn_enc_t **ret);
void wd_vk_attn_enc_free(wd_vk_attn_enc_t *a); /* accepts NULL */

/* Binds q, k, v (f32) and o (f32), each a whole storage range. */
int wd_vk_attn_enc_bind(wd_vk_attn_enc_t *a, const wd_vk_arg_t *q, const wd_vk_arg_t *k,
                        const wd_vk_arg_t *v, const wd_vk_arg_t *o, wd_vk_dset_t **ret_set);

/* Records the attention of n_head heads. WD_EINVAL when n or n_head is 0,
 * ld is below n_head * 64, or ld or an offset is not a multiple of 4. */
int wd_vk_attn_enc_record(wd_vk_attn_enc_t *a, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                          const wd_pc_attn_enc_t *pc, uint32_t n_head);

#endif
