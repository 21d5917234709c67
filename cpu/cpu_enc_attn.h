/*
 * cpu_enc_attn.h - the encoder's self-attention a block of queries at a
 * time (cpu_enc_attn.c).
 *
 * The plain way (one head: S = Q K^T as a 1500 x 1500 sgemm, a softmax
 * pass, O = S V as a second sgemm) moves each head's 9 MiB score matrix
 * through memory five times (zeroed, written, softmaxed, packed by the BLAS
 * for the second product, read): about 1.3 GB a window for tiny.en, a
 * third of its encoder time on a 2-core host. Here a block of 64 queries
 * is scored against every key, softmaxed and multiplied by V while its
 * 64 x 1500 scores (376 KiB) stay in L2; the keys of a head are packed
 * once into panels of 32 keys x 64 columns so that the scoring kernel
 * reads them as whole vectors, and its values are copied once into rows
 * of their own. In the Q K V buffer a head's value rows lie 3 d floats
 * apart (6 KiB for base): such a stride reaches only a 32nd of the L2's
 * sets, so 1500 of them never stayed in L2 from one block to the next and
 * the value products ran at two thirds of their speed on contiguous rows
 * (measured on a 2-core Xeon 6 model 207, base: the attention of a window
 * 155 ms as sgemm, 140 blocked with strided values, 112 with the copy).
 * The scoring kernel keeps each row's running maximum as it stores the
 * scores, so the softmax reads them once, not twice.
 *
 * AVX-512 only: a head is 64 columns wide in every Whisper model; other
 * widths and hosts without AVX-512 take the sgemm path. Where both run,
 * the engine times them at load on the model's shape and keeps the
 * faster (cpu/cpu_pick.c, cached per CPU model and model shape);
 * WHISPERD_CPU_ENC_ATTN=blocked|sgemm forces one. On AVX2 the same
 * blocking with 8-lane tiles measured no faster than OpenBLAS's Haswell
 * sgemm (tiny.en, 2-core Zen 5 with AVX-512 masked: 184 against 183 ms a
 * window), so it was not kept; nor when tried again with the values
 * copied and 4 x 16 tiles (16 YMM registers hold no larger ones): 11.9
 * against 9.8 ms for 2 heads of base at load, Xeon family 6 model 207
 * with AVX-512 masked, though 15 % faster than the sgemm pair on one
 * thread alone.
 */
#ifndef WD_CPU_ENC_ATTN_H
#define WD_CPU_ENC_ATTN_H

#include <stddef.h>

#define WD_ENC_ATTN_DH 64     /* the head width the kernels serve */
#define WD_ENC_ATTN_PANEL 32  /* keys per packed panel */
#define WD_ENC_ATTN_BLOCK 64  /* queries per block */
#define WD_ENC_ATTN_TASKS 16  /* most blocks in flight at once, each with its own scratch */

/* 1 where the kernels serve a head of width dh on this CPU: AVX-512 as the
 * GEMV sees it (WHISPERD_CPU_NO_AVX512 and WHISPERD_CPU_PORTABLE mask it). */
int wd_cpu_enc_attn_available(int dh);

/* n keys rounded up to whole panels. */
int wd_cpu_enc_attn_npad(int n);
/* Floats of one head's packed keys and values, and of one block's scratch. */
size_t wd_cpu_enc_attn_kv_elems(int n);
size_t wd_cpu_enc_attn_scratch_elems(int n);

/* One head's keys K and values V (n rows each, stride ld, 64 columns) into
 * kv: first the keys, panel p holding keys 32p .. 32p+31 as 64 rows (one
 * per column) of 32, zero past n; then the values, n rows of 64. */
void wd_cpu_enc_attn_pack(const float *K, const float *V, int n, int ld, float *kv);

/* rows (1 .. 64) queries q (stride ldq) of one head against its n (>= 1) packed
 * keys and values kv: o (rows, stride ldo) = softmax(scale * q K^T) V, the
 * softmax over each row as in cpu_vmath.h but divided by the row's sum
 * after the products; call only where wd_cpu_enc_attn_available. scratch:
 * wd_cpu_enc_attn_scratch_elems(n) floats. */
void wd_cpu_enc_attn_block(const float *q, int rows, int ldq, const float *kv, int n, float scale,
                           float *scratch, float *o, int ldo);

typedef void (*wd_cpu_enc_attn_block_fn)(const float *q, int rows, int ldq, const float *kv, int n,
                                         float scale, float *scratch, float *o, int ldo);
/* Tests only (NULL otherwise): the same kernels compiled against SIMDe's
 * portable AVX-512 (tests/cpu/enc_attn_simde.c). While set, on a host with
 * AVX2, wd_cpu_enc_attn_available says yes for dh 64 and
 * wd_cpu_enc_attn_block runs it: the kernels' numerics and the engine's
 * measured choice of them (cpu_pick.c) are then tested without AVX-512. */
extern wd_cpu_enc_attn_block_fn wd_cpu_enc_attn_test_kernel;

#endif
