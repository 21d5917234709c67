/*
 * vk_wquant.h - weight element types on the device: which kernel variant
 * reads which wd_dtype_t, and the repacking of ggml's quantized blocks into
 * the word-aligned layout the kernels read (shaders/wquant.glsl has the
 * layout; this is its host side).
 *
 * Only the block framing changes: every block keeps its f16 scale (and
 * minimum), quants and high bits bit for bit, and blocks stay in row order,
 * so a row of K elements is still K / 32 consecutive blocks. Types whose
 * ggml block is not a multiple of 4 bytes (q4_0 18 B, q5_0 22 B, q8_0 34 B)
 * get two zero bytes after the scale (20, 24, 36 B); q4_1 (20 B) and q5_1
 * (24 B) are unchanged. f32 and f16 are uploaded as they are.
 *
 * Threading: pure functions.
 */
#ifndef WD_VK_WQUANT_H
#define WD_VK_WQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "vk_pipeline.h"

/* The kernels' name for a tensor type; WD_VK_W_DEFAULT for a type they
 * cannot read as weights. */
wd_vk_wtype_t wd_vk_wtype_of(wd_dtype_t t);
/* 1 for the block-quantized wtypes. */
int wd_vk_wtype_is_quant(wd_vk_wtype_t w);
/* Shader-name suffix of a quantized wtype ("q8_0"), NULL otherwise. */
const char *wd_vk_wtype_suffix(wd_vk_wtype_t w);

/* Device bytes of n elements of type t (n a multiple of 32 for block types):
 * the repacked size for block types, the ggml size otherwise; 0 when n does
 * not fit the type. */
size_t wd_vk_wquant_bytes(wd_dtype_t t, int64_t n);

/* Copies n elements of type t from src (ggml layout, any alignment) into dst
 * (wd_vk_wquant_bytes(t, n) bytes) in the device layout. WD_EINVAL when n
 * does not fit the type. */
int wd_vk_wquant_pack(wd_dtype_t t, const void *src, int64_t n, void *dst);

#endif
