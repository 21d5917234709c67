/*
 * cpu_attn.h - row-wise pieces of the forward pass: LayerNorm, a softmax
 * row, and one query's attention over cached keys and values.
 *
 * All of them work on one row at a time in a fixed order, so that a
 * sequence's results never depend on the batch it runs in.
 */
#ifndef WD_CPU_ATTN_H
#define WD_CPU_ATTN_H

#include <stdint.h>

/* y (d) = LayerNorm(x (d)) * g + b; statistics in double, eps 1e-5 (as the
 * reference). x and y may alias. */
void wd_cpu_layernorm_row(const float *x, int d, const float *g, const float *b, float *y);

/* s[0 .. n) = softmax(s) in place, f32. */
void wd_cpu_softmax_row(float *s, int n);

/* One head of one query: q (dh), keys K and values V (n, ld) starting at
 * this head's column; o (dh) = softmax(q.K^T * scale) V. s: n floats of
 * scratch; the pre-softmax scores are left in keep (n) when it is not NULL. */
void wd_cpu_attend_one(const float *q, const float *K, const float *V, int n, int ld, int dh,
                       float scale, float *s, float *o, float *keep);

/* The same with K and V stored as f16 (the cross-attention cache). */
void wd_cpu_attend_one_f16(const float *q, const uint16_t *K, const uint16_t *V, int n, int ld,
                           int dh, float scale, float *s, float *o, float *keep);

/* Queries one head's wd_cpu_attend_rows_f16 takes at once at most. */
#define WD_CPU_ATTN_ROWS 8

/* R queries q[r] (R <= WD_CPU_ATTN_ROWS) of the same f16 keys and values
 * (rows of a step on one audio slot: beams, samples, fallback attempts):
 * o[r] and keep[r] (keep or keep[r] may be NULL) bit for bit what
 * wd_cpu_attend_one_f16 gives for q[r] alone, with each key and value read
 * from memory once for all R rather than R times. s: R * n floats. */
void wd_cpu_attend_rows_f16(int R, const float *const *q, const uint16_t *K, const uint16_t *V,
                            int n, int ld, int dh, float scale, float *s, float *const *o,
                            float *const *keep);

#endif
