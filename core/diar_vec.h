/*
 * diar_vec.h - the element-wise passes of the diarization networks that
 * sit between their matrix products: a batch norm's scale and shift then a
 * ReLU (CAM++'s dense and transition layers, whose norms precede a ReLU and
 * cannot be folded into a weight), a ReLU, and a residual sum then a ReLU.
 *
 * Scalar loops with a compare per element were 15% of a diarization's CPU
 * time (a dense layer normalises up to 1000 channels of every frame, 52
 * layers per embedding). AVX2 on x86-64 hosts that have it, picked where
 * diar_gemm.h picks its AVX2 kernel (so wd_diar_gemm_force_portable forces
 * these too), portable C elsewhere. Both give the same bits: a multiply
 * then an add (no fused multiply-add), and max(v, 0) as v > 0 ? v : 0
 * (NaN and -0 give +0 in both).
 */
#ifndef WD_DIAR_VEC_H
#define WD_DIAR_VEC_H

#include <stddef.h>

/* y[r][c] = max(x[r][c] * scale[c] + shift[c], 0) for rows x n values, x
 * and y with row strides ldx and ldy (y may be x when ldy == ldx). */
void wd_diar_bn_relu(const float *x, size_t ldx, size_t rows, size_t n, const float *scale,
                     const float *shift, float *y, size_t ldy);

/* x[i] = max(x[i], 0). */
void wd_diar_relu(float *x, size_t n);

/* dst[i] = max(a[i] + b[i], 0); dst may be a or b. */
void wd_diar_add_relu(const float *a, const float *b, float *dst, size_t n);

#endif
