// common.glsl - push-constant blocks and helpers shared by the kernels.
//
// Every push-constant struct here is mirrored by a C struct in gpu/vk_push.h
// with _Static_assert checks on size and offsets; change both together.
#ifndef WD_COMMON_GLSL
#define WD_COMMON_GLSL

// GEMM / batched GEMM: C[z][m][n] = alpha * sum_k A[z][m][k] * B[z][n][k]
//                                  (+ bias[z][n]) (then GELU) (+ C_old)
// All matrices are row-major with K contiguous (the ggml / PyTorch Linear
// layout: B is the weight, one output feature per row). Offsets and leading
// dimensions are in elements; texel kernels need them to be multiples of 4.
struct wd_pc_gemm {
  uint M, N, K;
  uint lda, ldb, ldc;
  uint a_off, b_off, c_off, bias_off;
  uint a_bz, b_bz, c_bz, bias_bz; // strides between batch entries (z)
  uint flags;                     // WD_GEMM_* below
  float alpha;
};
#define WD_GEMM_BIAS 1u        // add bias[n]
#define WD_GEMM_GELU 2u        // apply GELU after the bias
#define WD_GEMM_ACCUMULATE 4u  // add the old value of C (residual connection)

// erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7); GLSL has no erf().
float wd_erf(float x) {
  float s = sign(x);
  x = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * x);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t
                    - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return s * y;
}

// Exact (erf) GELU, as torch.nn.GELU() in Whisper's MLP blocks.
float wd_gelu(float x) { return 0.5 * x * (1.0 + wd_erf(x * 0.70710678118654752)); }

#endif
