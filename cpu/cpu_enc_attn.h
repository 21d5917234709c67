/*
 * cpu_enc_attn.h - the encoder's self-attention of one layer as one
 * parallel pass over blocks of queries, with AVX-512 or AVX2 tiles.
 *
 * The plain way is, per head, three calls: S = Q K^T (1500 x 1500 x 64,
 * an sgemm whose k of 64 leaves OpenBLAS packing more than it computes),
 * a softmax pass, O = S V; 2 x n_head sgemm calls a layer, each handing
 * the cores between OpenBLAS's threads and ours. Here the work items are
 * blocks of CPU_EA_QB queries; each runs every head on its own rows of the
 * score matrix (so items never share a row) with register tiles:
 *   scores  4 queries x 64 keys (AVX-512: 16 accumulators; AVX2 4 x 16),
 *           over K^T (d, n), transposed once per layer (keys contiguous);
 *   softmax cpu_softmax_vec on the row;
 *   output  4 queries x 64 dims (AVX-512; AVX2 2 x 32, twice) over V's
 *           rows, each probability broadcast once per tile.
 * Sums run over the head's 64 dimensions (scores) and the keys (output) in
 * order, with FMA: results differ from the sgemm path by rounding only
 * (tests/cpu checks the encoder against the double reference either way).
 * Heads of 64 dimensions (every published Whisper) on x86 with AVX2 or
 * AVX-512; otherwise cpu_enc_attn_ok says no and the caller keeps sgemm.
 */
#ifndef WD_CPU_ENC_ATTN_H
#define WD_CPU_ENC_ATTN_H

typedef struct wd_cpu_engine wd_cpu_engine_t;

#define CPU_EA_QB 32 /* queries per work item (a multiple of 4) */

/* 1 when the fused pass runs for heads of dh dimensions on this host. */
int cpu_enc_attn_ok(int dh);

/* O (n, d) = the attention of every head, Q K V in qkv (n, 3 d) (row
 * stride 3 d), scale applied to the scores. kt: (d, n) scratch for K^T;
 * s: (n, n) scratch (each item uses its own CPU_EA_QB rows). */
void cpu_enc_attn(wd_cpu_engine_t *e, const float *qkv, int n, int d, int nh, float scale,
                  float *kt, float *s, float *o);

/* The same on a chosen path: wide 1 the AVX-512 tiles (the host must have
 * AVX-512), 0 the AVX2 ones (tests run both). */
void cpu_enc_attn_path(wd_cpu_engine_t *e, const float *qkv, int n, int d, int nh, float scale,
                       float *kt, float *s, float *o, int wide);

#endif
