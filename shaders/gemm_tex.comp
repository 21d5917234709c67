#version 450
// gemm_tex.comp - register-blocked GEMM over texel buffers (CPU-driver family).
//
// C[z][m][n] = alpha * dot(A[z][m][:], B[z][n][:]) (+bias, GELU, +C): see
// wd_pc_gemm in common.glsl.
//
// Bindings (set 0):
//   0  samplerBuffer  A     RGBA32F texels, f32 activations, (Z, M, lda), K contiguous   read
//   1  samplerBuffer  B     RGBA16F texels, f16 weights,     (Z, N, ldb), K contiguous   read
//                           (RGBA32F for f32; with WTYPE, a usamplerBuffer of R32UI
//                           words holding quantized blocks: see wquant.glsl)
//   2  buffer vec4    bias  (Z, N) f32                                                  read
//   3  buffer vec4    C     (Z, M, ldc) f32, N contiguous                              read/write
// Requirements: K, lda, ldb, a_off, b_off, a_bz, b_bz multiples of 4; TN a
// multiple of 4; with WTYPE, K, ldb, b_off and b_bz multiples of 32. C and bias are read and written as vec4s when ldc, the
// offsets and the batch strides are multiples of 4, else one float at a time.
//
// Why this shape: on lavapipe every SSBO load is a scalar per-lane loop while
// texelFetch is vectorised (reference/lavapipe.md), so the loads, not the
// FMAs, set the speed. Each invocation owns TM rows of A and TN rows of B
// (TM x TN outputs) and per vec4 step fetches TM + TN texels for TM*TN*4
// FMAs. No shared memory: it is the slowest path on that driver. An
// invocation's TN columns are consecutive, so its outputs leave as vec4s.
//
// What the JIT makes of it (Mesa 22.3, read from the generated x86): every
// texelFetch is a call to a ~40-instruction gather routine, fma() becomes a
// separate multiply and add, and each loop-carried accumulator is blended
// with the execution mask once per k step. Both blocks spill accumulators
// (64 or 256 live vectors against 16 registers); 16x16 runs no faster per
// core and compiles 5x slower, so the CPU family uses 8x8 (gpu/vk_gemm.c).
//
// Workgroup: WGX x WGY = 8 x 8 invocations, one tile of (WGY*TM) x (WGX*TN).
// Grid: (ceil(N / (WGX*TN)), ceil(M / (WGY*TM)), Z).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

#ifndef TM
#define TM 16
#endif
#ifndef TN
#define TN 16
#endif
#define WGX 8
#define WGY 8

layout(local_size_x = WGX, local_size_y = WGY, local_size_z = 1) in;
layout(set = 0, binding = 0) uniform samplerBuffer tA;
#if defined(WTYPE) && WTYPE != 0
layout(set = 0, binding = 1) uniform usamplerBuffer tB;
#define WD_WLOAD(i) texelFetch(tB, (i)).x
#include "wquant.glsl"
#define BDIV 32u // a B row's start is a block index
#define BFETCH(row, k) wd_wfetch(row, k)
#else
layout(set = 0, binding = 1) uniform samplerBuffer tB;
#define BDIV 4u  // a B row's start is a texel index
#define BFETCH(row, k) texelFetch(tB, (row) + (k))
#endif
// Bias and C are declared as vec4 arrays: on lavapipe each SSBO access is a
// per-lane scalar loop whatever its width, so one vec4 access costs what one
// float access does. Unaligned shapes fall back to component accesses.
layout(std430, set = 0, binding = 2) readonly buffer Bias { vec4 bias4[]; };
layout(std430, set = 0, binding = 3) buffer BufC { vec4 c4[]; };
layout(push_constant) uniform PC { wd_pc_gemm p; };
// The epilogue (WD_GEMM_* bits) is a specialization constant, not read from
// p.flags: lavapipe executes both sides of every branch under a lane mask, so
// a runtime flag would cost the GELU, the bias and the residual loads on
// every output even when off. gpu/vk_gemm.c keeps one pipeline per value.
layout(constant_id = 0) const uint EPI = 0u;

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, z = gl_WorkGroupID.z;
  const uint m0 = gl_WorkGroupID.y * (WGY * TM) + ty;
  // Each invocation owns TN consecutive columns so that its outputs leave in
  // vec4 stores.
  const uint n0 = gl_WorkGroupID.x * (WGX * TN) + tx * TN;
  const int K4 = int(p.K / 4);

  // Rows past the edge are clamped to the last row: they load valid data and
  // their results are simply not stored.
  int arow[TM], brow[TN];
  [[unroll]] for (uint i = 0; i < TM; i++)
    arow[i] = int((p.a_off + z * p.a_bz + min(m0 + i * WGY, p.M - 1) * p.lda) / 4);
  [[unroll]] for (uint j = 0; j < TN; j++)
    brow[j] = int((p.b_off + z * p.b_bz + min(n0 + j, p.N - 1) * p.ldb) / BDIV);

  float acc[TM * TN];
  [[unroll]] for (uint i = 0; i < TM * TN; i++) acc[i] = 0.0;

  for (int k = 0; k < K4; k++) {
    vec4 va[TM], vb[TN];
    [[unroll]] for (uint i = 0; i < TM; i++) va[i] = texelFetch(tA, arow[i] + k);
    [[unroll]] for (uint j = 0; j < TN; j++) vb[j] = BFETCH(brow[j], k);
    [[unroll]] for (uint i = 0; i < TM; i++)
      [[unroll]] for (uint j = 0; j < TN; j++) {
        float s = acc[i * TN + j];
        s = fma(va[i].x, vb[j].x, s);
        s = fma(va[i].y, vb[j].y, s);
        s = fma(va[i].z, vb[j].z, s);
        s = fma(va[i].w, vb[j].w, s);
        acc[i * TN + j] = s;
      }
  }

  const bool has_bias = (EPI & WD_GEMM_BIAS) != 0u;
  const bool has_gelu = (EPI & WD_GEMM_GELU) != 0u;
  const bool has_acc = (EPI & WD_GEMM_ACCUMULATE) != 0u;
  const uint bias_base = p.bias_off + z * p.bias_bz;
  const bool aligned = ((p.ldc | p.c_off | p.c_bz | bias_base) & 3u) == 0u;
  [[unroll]] for (uint i = 0; i < TM; i++) {
    const uint m = m0 + i * WGY;
    if (m >= p.M) continue;
    const uint crow = p.c_off + z * p.c_bz + m * p.ldc;
    [[unroll]] for (uint j = 0; j < TN; j += 4) {
      const uint n = n0 + j;
      vec4 v = p.alpha * vec4(acc[i * TN + j], acc[i * TN + j + 1], acc[i * TN + j + 2],
                              acc[i * TN + j + 3]);
      if (aligned && n + 3u < p.N) {
        if (has_bias) v += bias4[(bias_base + n) >> 2];
        if (has_gelu) v = vec4(wd_gelu(v.x), wd_gelu(v.y), wd_gelu(v.z), wd_gelu(v.w));
        if (has_acc) v += c4[(crow + n) >> 2];
        c4[(crow + n) >> 2] = v;
      } else {
        [[unroll]] for (uint q = 0; q < 4u; q++) {
          if (n + q >= p.N) break;
          float s = v[q];
          const uint bi = bias_base + n + q, ci = crow + n + q;
          if (has_bias) s += bias4[bi >> 2][bi & 3u];
          if (has_gelu) s = wd_gelu(s);
          if (has_acc) s += c4[ci >> 2][ci & 3u];
          c4[ci >> 2][ci & 3u] = s;
        }
      }
    }
  }
}
