/*
 * cpu_vmath.h - the element-wise math over whole rows: softmax, GELU and
 * LayerNorm, vectorised with AVX2+FMA where the host has it (picked at run
 * time), plain libm otherwise.
 *
 * The AVX2 exp is a range reduction x = k ln2 + r (|r| <= ln2 / 2, ln2 in
 * two parts) and the degree-6 Taylor polynomial of e^r, scaled by 2^k
 * through the exponent bits: about 1 ulp. erf is Abramowitz & Stegun
 * 7.1.26 (absolute error below 1.5e-7) on that exp. Both are well inside
 * the 1e-3 the engine is held to against the double-precision reference.
 */
#ifndef WD_CPU_VMATH_H
#define WD_CPU_VMATH_H

#include <stddef.h>
#include <stdint.h>

/* s[0 .. n) = e^(s[i] - mx), in place; returns their sum (softmax's
 * numerator and denominator, for a caller that knows the row's maximum). */
float wd_cpu_exp_sum_vec(float *s, int n, float mx);

/* s[0 .. n) = softmax(s), in place. */
void wd_cpu_softmax_vec(float *s, int n);
/* wd_cpu_layernorm_row (cpu_attn.h), its double sums in 16 lanes where
 * the host has AVX2: the same f32 results but where the order of a double
 * sum moves one across a rounding boundary. x and y may alias. */
void wd_cpu_layernorm_vec(const float *x, int d, const float *g, const float *b, float *y);

/* y[0 .. n) = gelu(y[i] + b[i]) (erf form), in place; b may be NULL. */
void wd_cpu_bias_gelu_vec(float *y, const float *b, int n);

/* y[0 .. n) = x as f16, round to nearest even (F16C where there is one). */
void wd_cpu_f32_to_f16_vec(const float *x, uint16_t *y, size_t n);

/* y[0 .. n) = the f16 values at x (any address), widened exactly. */
void wd_cpu_f16_to_f32_vec(const void *x, float *y, size_t n);

#endif
