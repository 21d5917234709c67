#version 450
// gemm_tiled.comp - shared-memory tiled GEMM (discrete-GPU family).
//
// Same operation and push constants as gemm_tex.comp (wd_pc_gemm), but read
// from storage buffers: A as f32, B as f16 packed two per uint (so no 16-bit
// storage feature is needed). On GPUs, staging tiles in shared memory and
// reusing them across the workgroup is what makes a GEMM fast; on lavapipe
// it is the slowest choice, which is why the texel kernel exists.
//
// Bindings (set 0):
//   0  buffer vec4   A     (Z, M, lda) f32, K contiguous                  read
//   1  buffer uvec2  B     (Z, N, ldb) f16 x4 per uvec2, K contiguous     read
//                          (variant B_F32: buffer vec4, f32 B, e.g. attention K / V^T;
//                          variant WTYPE: buffer uint, quantized blocks, see wquant.glsl)
//   2  buffer float  bias  (Z, N) f32                                     read
//   3  buffer float  C     (Z, M, ldc) f32                               read/write
// Requirements: K, lda, ldb, a_off, b_off, a_bz, b_bz multiples of 4 (with
// WTYPE: K, ldb, b_off, b_bz multiples of 32).
//
// Workgroup: 16 x 16 invocations computing a BM x BN = 64 x 64 tile, 4 x 4
// outputs each, stepping K by BK = 16.
// Grid: (ceil(N / 64), ceil(M / 64), Z).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

#define BM 64
#define BN 64
#define BK 16
layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer BufA { vec4 a4[]; };
#if defined(WTYPE) && WTYPE != 0
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint bq[]; };
#define WD_WLOAD(i) bq[i]
#include "wquant.glsl"
#elif defined(B_F32)
layout(std430, set = 0, binding = 1) readonly buffer BufB { vec4 b4[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer BufB { uvec2 b4[]; };
#endif
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, set = 0, binding = 3) buffer BufC { float c[]; };
layout(push_constant) uniform PC { wd_pc_gemm p; };
// The epilogue (WD_GEMM_* bits) is a specialization constant, not read from
// p.flags: lavapipe executes both sides of every branch under a lane mask, so
// a runtime flag would cost the GELU, the bias and the residual loads on
// every output even when off. gpu/vk_gemm.c keeps one pipeline per value.
layout(constant_id = 0) const uint EPI = 0u;

// Tiles stored k-major so the inner loop reads consecutive m / n; +1 column
// of padding avoids bank conflicts on the transposing store.
shared float sA[BK][BM + 1];
shared float sB[BK][BN + 1];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, z = gl_WorkGroupID.z;
  const uint tid = ty * 16u + tx;
  const uint mt = gl_WorkGroupID.y * BM, nt = gl_WorkGroupID.x * BN;
  float acc[4][4];
  [[unroll]] for (uint i = 0; i < 4; i++)
    [[unroll]] for (uint j = 0; j < 4; j++) acc[i][j] = 0.0;

  // Each invocation loads one vec4 of A and one of B per K step:
  // 256 invocations x 4 = 64 rows x 16 k.
  const uint lr = tid / 4u, lk = (tid % 4u) * 4u;
  const uint am = min(mt + lr, p.M - 1), bn = min(nt + lr, p.N - 1);
  const uint abase = p.a_off + z * p.a_bz + am * p.lda;
  const uint bbase = p.b_off + z * p.b_bz + bn * p.ldb;

  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    vec4 va = vec4(0.0), vb = vec4(0.0);
    if (k0 + lk < p.K) {
      va = a4[(abase + k0 + lk) / 4u];
#if defined(WD_WQUANT)
      vb = wd_wfetch(int(bbase / 32u), int((k0 + lk) / 4u));
#elif defined(B_F32)
      vb = b4[(bbase + k0 + lk) / 4u];
#else
      uvec2 hb = b4[(bbase + k0 + lk) / 4u];
      vb = vec4(unpackHalf2x16(hb.x), unpackHalf2x16(hb.y));
#endif
    }
    sA[lk + 0][lr] = va.x; sA[lk + 1][lr] = va.y; sA[lk + 2][lr] = va.z; sA[lk + 3][lr] = va.w;
    sB[lk + 0][lr] = vb.x; sB[lk + 1][lr] = vb.y; sB[lk + 2][lr] = vb.z; sB[lk + 3][lr] = vb.w;
    // The tile must be complete before anyone reads it.
    barrier();
    [[unroll]] for (uint k = 0; k < BK; k++) {
      float ra[4], rb[4];
      [[unroll]] for (uint i = 0; i < 4; i++) ra[i] = sA[k][ty + 16u * i];
      [[unroll]] for (uint j = 0; j < 4; j++) rb[j] = sB[k][tx + 16u * j];
      [[unroll]] for (uint i = 0; i < 4; i++)
        [[unroll]] for (uint j = 0; j < 4; j++) acc[i][j] = fma(ra[i], rb[j], acc[i][j]);
    }
    // Everyone must be done reading before the next tile overwrites it.
    barrier();
  }

  [[unroll]] for (uint i = 0; i < 4; i++) {
    const uint m = mt + ty + 16u * i;
    if (m >= p.M) continue;
    [[unroll]] for (uint j = 0; j < 4; j++) {
      const uint n = nt + tx + 16u * j;
      if (n >= p.N) continue;
      float v = p.alpha * acc[i][j];
      if ((EPI & WD_GEMM_BIAS) != 0u) v += bias[p.bias_off + z * p.bias_bz + n];
      if ((EPI & WD_GEMM_GELU) != 0u) v = wd_gelu(v);
      const uint ci = p.c_off + z * p.c_bz + m * p.ldc + n;
      if ((EPI & WD_GEMM_ACCUMULATE) != 0u) v += c[ci];
      c[ci] = v;
    }
  }
}
