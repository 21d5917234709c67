/*
 * quant.h - ggml's block-quantized weight types on the host: the plain-C
 * reference that the kernels are tested against, and the quantizer behind
 * `whisperd quantize`.
 *
 * Every quantized type packs 32 consecutive elements of a row into one block
 * (ref: ggml/src/ggml-common.h, block_q4_0 ... block_q8_0), little-endian:
 *   q4_0  18 B: f16 d, u8 qs[16]            x = (q - 8) * d
 *   q4_1  20 B: f16 d, f16 m, u8 qs[16]     x = q * d + m
 *   q5_0  22 B: f16 d, u8 qh[4], u8 qs[16]  x = (q - 16) * d
 *   q5_1  24 B: f16 d, f16 m, u8 qh[4], u8 qs[16]  x = q * d + m
 *   q8_0  34 B: f16 d, i8 qs[32]            x = q * d
 * For the 4- and 5-bit types, qs[j] holds element j in its low nibble and
 * element j + 16 in its high nibble; q5's fifth bit of element i is bit i of
 * the little-endian u32 qh. A row of n elements is n / 32 blocks back to back.
 *
 * The quantizers are ggml's reference ones (quantize_row_*_ref), rounding
 * included, so a file written by whisperd is byte-identical to one written by
 * whisper.cpp's quantize tool from the same f16/f32 data.
 *
 * Threading: pure functions, no state.
 */
#ifndef WD_QUANT_H
#define WD_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define WD_QK 32 /* elements per block of every quantized type */

/* 1 for q4_0 .. q8_0, 0 for f32 and f16. */
int wd_dtype_is_quant(wd_dtype_t type);

/*
 * Dequantizes one row of n elements of type t (f32, f16 or a block type)
 * from src (n elements' worth of bytes, wd_dtype_row_bytes; may be unaligned)
 * into dst. n must be a multiple of WD_QK for block types.
 * Returns 0 or WD_EINVAL for an unknown type or bad n.
 */
int wd_dequantize_row(wd_dtype_t t, const void *src, float *dst, int64_t n);

/*
 * Quantizes n floats into dst (wd_dtype_row_bytes(t, n) bytes) as type t,
 * with ggml's reference rounding. f16 and f32 are accepted too (a plain
 * conversion). Returns 0 or WD_EINVAL.
 */
int wd_quantize_row(wd_dtype_t t, const float *src, void *dst, int64_t n);

/* "q8_0" ... -> type; returns 0 or WD_EINVAL for an unknown name. */
int wd_dtype_parse(const char *name, wd_dtype_t *ret);

#endif
