#version 450
// gemm_rb.comp - register-blocked, double-buffered shared-memory GEMM
// (discrete-GPU family; the same operation, push constants and bindings as
// gemm_tiled.comp, which it replaces on GPUs).
//
// Why it is faster than gemm_tiled: there an invocation keeps 4 x 4 outputs
// and reads 8 scalars from shared memory for 16 FMAs, so the kernel is bound
// by shared-memory bandwidth (about 20 TFLOP/s on an H200, 2026-11-25).
// Here an invocation keeps 8 x 8 outputs and reads 4 vec4 (128-bit) values
// for 64 FMAs, and the next K-slice's global loads are in flight while the
// current slice is multiplied (two shared buffers, one barrier per slice).
// H200, large-v3-turbo encoder, the Linear layers: 67.2 ms per window here,
// 91.0 ms in gemm_tiled (2026-11-26). A first version whose loads were not
// coalesced (one row per invocation) and whose epilogue loops left early
// (not unrollable, so the accumulators were indexed at run time) ran them in
// 351 ms: keep both properties.
//
// Tile: BM x BN outputs per workgroup (defines, 64 or 128), BK = 16.
// Invocations: (BN / 8) x (BM / 8), as one dimension; invocation (tx, ty)
// owns rows ty*4 .. ty*4+3 and BM/2 + ty*4 .. +3 of the tile, and columns
// tx*4 .. +3 and BN/2 + tx*4 .. +3: each quarter is one vec4 of a shared
// row, and neighbouring invocations read neighbouring vec4s.
// Shared tiles are k-major (sA[k][m]), written transposed from the K-major
// global rows (at most a 2-way bank conflict with the padding below).
// Built through spirv-opt (OPT in shaders.cmake): every [[unroll]] loop is
// unrolled and the register arrays become scalars before the driver sees
// them.
// Grid: (ceil(N / BN), ceil(M / BM), Z).
// Requirements: as gemm_tiled (K, lda, ldb and the offsets multiples of 4;
// with WTYPE, multiples of 32).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#define BK 16
#define TX (BN / 8)
#define TY (BM / 8)
#define NT (TX * TY)
// vec4 loads per invocation per K-slice: A is BM x BK, B is BN x BK.
#define LA (BM * BK / 4 / NT)
#define LB (BN * BK / 4 / NT)

layout(local_size_x = NT, local_size_y = 1, local_size_z = 1) in;
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
// The epilogue bits (WD_GEMM_*), one pipeline per value: see gemm_tiled.comp.
layout(constant_id = 0) const uint EPI = 0u;

// One vec4 of padding per k-row: the transposing stores of four invocations
// that hold the four k-quads of one row would otherwise hit one bank.
#define PAD 1
shared vec4 sA[2][BK][BM / 4 + PAD];
shared vec4 sB[2][BK][BN / 4 + PAD];

vec4 ra[LA], rb[LB];

// Global -> registers: slice k0's vec4 number i (of LA) is k-quad
// (idx % (BK / 4)) of row (idx / (BK / 4)) with idx = tid + NT * i, so four
// neighbouring invocations read one row's 64 contiguous bytes (coalesced);
// rows past M (N) repeat the last row (their outputs are never stored), k
// past K reads zeros.
void load_slice(const uint tid, const uint z, const uint mt, const uint nt, const uint k0) {
  [[unroll]] for (uint i = 0; i < LA; i++) {
    const uint idx = tid + NT * i, r = idx / (BK / 4), k = k0 + (idx % (BK / 4)) * 4u;
    const uint am = min(mt + r, p.M - 1);
    ra[i] = k < p.K ? a4[(p.a_off + z * p.a_bz + am * p.lda + k) / 4u] : vec4(0.0);
  }
  [[unroll]] for (uint i = 0; i < LB; i++) {
    const uint idx = tid + NT * i, r = idx / (BK / 4), k = k0 + (idx % (BK / 4)) * 4u;
    const uint bn = min(nt + r, p.N - 1);
    const uint bbase = p.b_off + z * p.b_bz + bn * p.ldb;
    vec4 v = vec4(0.0);
    if (k < p.K) {
#if defined(WD_WQUANT)
      v = wd_wfetch(int(bbase / 32u), int(k / 4u));
#elif defined(B_F32)
      v = b4[(bbase + k) / 4u];
#else
      const uvec2 h = b4[(bbase + k) / 4u];
      v = vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
#endif
    }
    rb[i] = v;
  }
}

// Registers -> shared buffer s, transposed to k-major.
void store_slice(const uint tid, const uint s) {
  [[unroll]] for (uint i = 0; i < LA; i++) {
    const uint idx = tid + NT * i, r = idx / (BK / 4), kq = (idx % (BK / 4)) * 4u;
    [[unroll]] for (uint j = 0; j < 4; j++) sA[s][kq + j][r >> 2][r & 3u] = ra[i][j];
  }
  [[unroll]] for (uint i = 0; i < LB; i++) {
    const uint idx = tid + NT * i, r = idx / (BK / 4), kq = (idx % (BK / 4)) * 4u;
    [[unroll]] for (uint j = 0; j < 4; j++) sB[s][kq + j][r >> 2][r & 3u] = rb[i][j];
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x, tx = tid % TX, ty = tid / TX;
  const uint z = gl_WorkGroupID.z;
  const uint mt = gl_WorkGroupID.y * BM, nt = gl_WorkGroupID.x * BN;
  // acc[i][j]: row (i < 4 ? ty*4 + i : BM/2 + ty*4 + i-4), column likewise.
  vec4 acc[8][2];
  [[unroll]] for (uint i = 0; i < 8; i++) acc[i][0] = acc[i][1] = vec4(0.0);

  load_slice(tid, z, mt, nt, 0u);
  store_slice(tid, 0u);
  barrier();
  uint s = 0u;
  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    const bool more = k0 + BK < p.K; // uniform across the workgroup
    if (more)
      load_slice(tid, z, mt, nt, k0 + BK); // in flight during the products below
    [[unroll]] for (uint k = 0; k < BK; k++) {
      const vec4 a0 = sA[s][k][ty], a1 = sA[s][k][ty + TY];
      const vec4 b0 = sB[s][k][tx], b1 = sB[s][k][tx + TX];
      [[unroll]] for (uint i = 0; i < 4; i++) {
        acc[i][0] = fma(vec4(a0[i]), b0, acc[i][0]);
        acc[i][1] = fma(vec4(a0[i]), b1, acc[i][1]);
        acc[i + 4][0] = fma(vec4(a1[i]), b0, acc[i + 4][0]);
        acc[i + 4][1] = fma(vec4(a1[i]), b1, acc[i + 4][1]);
      }
    }
    // The other buffer was last read in the previous slice, before the
    // barrier that ended it; this barrier publishes it for the next slice.
    if (more)
      store_slice(tid, s ^ 1u);
    barrier();
    s ^= 1u;
  }

  // No `continue` here: a loop that leaves early is one spirv-opt cannot
  // unroll, and acc indexed by a loop counter at run time is an array in
  // memory rather than 64 registers (see the header).
  [[unroll]] for (uint i = 0; i < 8; i++) {
    const uint m = mt + (i < 4 ? ty * 4u + i : BM / 2 + ty * 4u + (i - 4u));
    [[unroll]] for (uint h = 0; h < 2; h++) {
      [[unroll]] for (uint j = 0; j < 4; j++) {
        const uint n = nt + h * (BN / 2) + tx * 4u + j;
        if (m < p.M && n < p.N) {
          float v = p.alpha * acc[i][h][j];
          if ((EPI & WD_GEMM_BIAS) != 0u) v += bias[p.bias_off + z * p.bias_bz + n];
          if ((EPI & WD_GEMM_GELU) != 0u) v = wd_gelu(v);
          const uint ci = p.c_off + z * p.c_bz + m * p.ldc + n;
          if ((EPI & WD_GEMM_ACCUMULATE) != 0u) v += c[ci];
          c[ci] = v;
        }
      }
    }
  }
}
