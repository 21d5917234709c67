/*
 * vk_misc.h - the small kernels around the big ones:
 *   embed      X[b] = tok_emb[token[b]] (f16) + pos_emb[pos[b]] (f32), from
 *              the step-parameter buffer (decoder input),
 *   im2col     the kernel-3 / padding-1 conv1d unfolding that turns the
 *              encoder's two convolutions into vk_gemm calls,
 *   transpose  batched 2-D transpose (V -> V^T per head for P.V),
 *   argmax     per-row argmax + log-sum-exp of masked logits (greedy
 *              decoding without reading the logits back).
 * One object owns the four pipelines; each kernel has a bind and a record.
 */
#ifndef WD_VK_MISC_H
#define WD_VK_MISC_H

#include "vk_cmd.h"
#include "vk_device.h"
#include "vk_pipeline.h"
#include "vk_push.h"

typedef struct wd_vk_misc wd_vk_misc_t;

int wd_vk_misc_new(wd_vk_device_t *dev, wd_vk_misc_t **ret_misc);
void wd_vk_misc_free(wd_vk_misc_t *m); /* accepts NULL */

/* step: wd_seq_t records; tok: f16 texel view (n_vocab, d); pos: f32 texel
 * view (n_pos, d); x: f32 output. */
int wd_vk_misc_bind_embed(wd_vk_misc_t *m, const wd_vk_arg_t *step, const wd_vk_arg_t *tok,
                          const wd_vk_arg_t *pos, const wd_vk_arg_t *x, wd_vk_dset_t **ret_set);
/* WD_EINVAL unless d, ldx, x_off are multiples of 4, ldx >= d, n_vocab and
 * n_pos are not zero. */
int wd_vk_misc_record_embed(wd_vk_misc_t *m, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                            const wd_pc_embed_t *pc, uint32_t nb);

int wd_vk_misc_bind_im2col(wd_vk_misc_t *m, const wd_vk_arg_t *in, const wd_vk_arg_t *out,
                           wd_vk_dset_t **ret_set);
/* WD_EINVAL for zero sizes, ldo < cin * 3, a stride of 0, or t_out larger
 * than the (t_in - 1) / stride + 1 frames padding 1 allows. */
int wd_vk_misc_record_im2col(wd_vk_misc_t *m, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                             const wd_pc_im2col_t *pc);

int wd_vk_misc_bind_transpose(wd_vk_misc_t *m, const wd_vk_arg_t *in, const wd_vk_arg_t *out,
                              wd_vk_dset_t **ret_set);
/* Transposes n_z matrices. WD_EINVAL when ldi < C or ldo < R. */
int wd_vk_misc_record_transpose(wd_vk_misc_t *m, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                                const wd_pc_transpose_t *pc, uint32_t n_z);

/* logits: f32 texel view; mask: f32 (n_vocab) storage (any valid range
 * without WD_ARGMAX_MASK); out: wd_argmax_out_t per row. */
int wd_vk_misc_bind_argmax(wd_vk_misc_t *m, const wd_vk_arg_t *logits, const wd_vk_arg_t *mask,
                           const wd_vk_arg_t *out, wd_vk_dset_t **ret_set);
/* WD_EINVAL unless off and ld are multiples of 4 and ld >= n_vocab. */
int wd_vk_misc_record_argmax(wd_vk_misc_t *m, wd_vk_cmd_t *cmd, const wd_vk_dset_t *set,
                             const wd_pc_argmax_t *pc);

#endif
