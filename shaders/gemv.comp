#version 450
// gemv.comp - batched GEMV ("skinny GEMM") for the decoder step.
//
// Y[b][n] = alpha * sum_k W[n][k] * X[b][k] (+ bias[n]) (GELU) (+ Y_old[b][n])
// for b < nb <= NB and n < N: see wd_pc_gemv in common.glsl. Every weight
// texel is fetched once per step and used for all nb sequences: the weights
// dominate the bytes moved, so a batch of 8 costs far less than 8 steps.
//
// Bindings (set 0):
//   0  samplerBuffer  X     RGBA32F texels, f32 activations (nb, ldx), K contiguous  read
//   1  samplerBuffer  W     RGBA16F texels, f16 weights (N, K) at w_off, K contiguous read
//                           (RGBA32F for f32 weights; with WTYPE, a usamplerBuffer of
//                           RGBA32UI texels holding quantized blocks: see wquant.glsl;
//                           the bound range a multiple of 16 bytes)
//   2  buffer float   bias  (N) f32 at bias_off                                     read
//   3  buffer float   Y     (nb, ldy) f32 at y_off, N contiguous                   read/write
// Requirements: K, x_off, ldx, w_off multiples of 4; nb <= NB. With WTYPE
// (quantized W), K and w_off multiples of 32.
//
// NB (1, 2, 4, 8, 16) is a compile-time variant rather than a specialization
// constant: the per-sequence accumulators must be registers, and a define
// guarantees the loops over b are unrolled by glslang instead of relying on
// the driver's unroller after specialization. A batch between two variants
// runs on the larger one (rows past nb are clamped loads, never stored).
//
// MODE selects how a row's dot products are split:
//   MODE 0 (ROW): one invocation per RPI output rows, a vec4 loop over K.
//     Best on lavapipe for K < 1536: no reduction at all, loads vectorised
//     across the 8 SIMD lanes (reference/lavapipe.md: GEMV, texel, one row
//     per lane), and each X texel reused for RPI rows.
//   MODE 1 (SUBGROUP): one subgroup per row, K split over its lanes, then
//     subgroupAdd. On lavapipe this is the 8-lane split that is 2x faster for
//     K >= 1536; on discrete GPUs it is the coalesced variant (consecutive
//     lanes read consecutive texels of one row).
//   MODE 2 (SHARED): one 64-invocation workgroup per row, shared-memory tree
//     reduction: GPUs without subgroup arithmetic.
// Batch independence: in every MODE, the products of output (b, n) are
// summed in an order fixed by MODE and K alone (ROW: k ascending in vec4
// lanes, then the 4 lanes; SUBGROUP / SHARED: strided per invocation, then
// the same reduction tree), never by NB, nb, RPI or b. A sequence's outputs
// are therefore bit-identical alone or batched (tests/gpu/test_gemv.c); keep
// it so, the server promises a job the same tokens alone or batched.
// Workgroup: 64 invocations.
// Grid: MODE 0: (ceil(N / (64 * RPI)), 1, 1); MODE 1: (ceil(N / ROWS), 1, 1) with
// ROWS = specialization constant 0 (rows per workgroup, 64 / subgroup size);
// MODE 2: (N, 1, 1).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"
#ifndef RPI
#define RPI 1
#endif
#if MODE == 1
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(set = 0, binding = 0) uniform samplerBuffer tX;
#if defined(WTYPE) && WTYPE != 0
// An RGBA32UI view: 16 bytes per fetch. ROW mode reads 4 blocks at a time
// as whole texels (below); single words come out of a texel.
layout(set = 0, binding = 1) uniform usamplerBuffer tW;
#define WD_WLOAD(i) texelFetch(tW, (i) >> 2)[(i) & 3]
#include "wquant.glsl"
// A row's start is a block index; wfetch(row, k) gives its k-th vec4.
#define WROW(n) int((p.w_off + (n) * p.K) / 32u)
#define WFETCH(row, k) wd_wfetch(row, k)
#else
layout(set = 0, binding = 1) uniform samplerBuffer tW;
// A row's start is a texel index.
#define WROW(n) int((p.w_off + (n) * p.K) / 4u)
#define WFETCH(row, k) texelFetch(tW, (row) + (k))
#endif
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, set = 0, binding = 3) buffer BufY { float y[]; };
layout(push_constant) uniform PC { wd_pc_gemv p; };
layout(constant_id = 0) const uint ROWS = 8u;

#if MODE == 2
shared vec4 red[64][NB];
#endif

// The fused epilogue, applied once per output.
void store(uint b, uint n, float s) {
  float v = p.alpha * s;
  if ((p.flags & WD_GEMM_BIAS) != 0u) v += bias[p.bias_off + n];
  if ((p.flags & WD_GEMM_GELU) != 0u) v = wd_gelu(v);
  const uint i = p.y_off + b * p.ldy + n;
  if ((p.flags & WD_GEMM_ACCUMULATE) != 0u) v += y[i];
  y[i] = v;
}

// Accumulates W[n][k4 range] . X[b][same] for all b into acc, k4 = k0, k0 + step, ...
void dot_rows(uint n, int k0, int step, inout vec4 acc[NB]) {
  const int K4 = int(p.K / 4u);
  const int wrow = WROW(n);
  int xrow[NB];
  [[unroll]] for (uint b = 0; b < NB; b++)
    xrow[b] = int((p.x_off + min(b, p.nb - 1u) * p.ldx) / 4u);
  for (int k = k0; k < K4; k += step) {
    const vec4 w = WFETCH(wrow, k);
    [[unroll]] for (uint b = 0; b < NB; b++) acc[b] = fma(w, texelFetch(tX, xrow[b] + k), acc[b]);
  }
}

#if defined(WD_WQUANT) && MODE == 1
// SUBGROUP mode on narrow subgroups (lavapipe's 8 lanes): lane i takes whole
// blocks i, i + lanes, ... so that a block's scale and quant words are
// loaded once (q8_0 9 word loads per 32 weights, q4 5) instead of the scale
// again with every vec4. Sum order: per lane, blocks and k ascending, then
// the subgroup reduction: fixed by K and the device, never by the batch
// (so every NB variant takes this path, though from NB = 8 on it measured
// ~10% slower than the per-vec4 split on lavapipe and ~20-30% faster at
// NB = 1: bench_wgemv, fc2 q8_0 b1 0.48 vs 0.57 ms, b8 2.15 vs 1.88).
void dot_blocks(uint n, int lane, int lanes, inout vec4 acc[NB]) {
  const int wrow = WROW(n);
  int xrow[NB];
  [[unroll]] for (uint b = 0; b < NB; b++)
    xrow[b] = int((p.x_off + min(b, p.nb - 1u) * p.ldx) / 4u);
  for (int kb = lane; kb < int(p.K / 32u); kb += lanes) {
    const wd_wblk blk = wd_wblk_load(wrow + kb);
    [[unroll]] for (uint kk = 0; kk < 8u; kk++) {
      const vec4 w = wd_wblk_vec4(blk, kk);
      const int k = kb * 8 + int(kk);
      [[unroll]] for (uint b = 0; b < NB; b++) acc[b] = fma(w, texelFetch(tX, xrow[b] + k), acc[b]);
    }
  }
}
#endif

void main() {
  vec4 acc[NB];
  [[unroll]] for (uint b = 0; b < NB; b++) acc[b] = vec4(0.0);
#if MODE == 0
  // RPI rows per invocation (rows n0, n0 + 64, ...: neighbouring lanes read
  // neighbouring rows): each X texel fetched serves RPI rows, which cuts the
  // loads per output (the cost that matters on lavapipe) from 1 + NB to
  // 1 + NB / RPI. Rows past N are clamped loads, never stored.
  const uint n0 = gl_WorkGroupID.x * (64u * RPI) + gl_LocalInvocationIndex;
  if (n0 >= p.N) return; // no barriers in this mode
  const int K4 = int(p.K / 4u);
  int wrow[RPI], xrow[NB];
  [[unroll]] for (uint r = 0; r < RPI; r++)
    wrow[r] = WROW(min(n0 + 64u * r, p.N - 1u));
  [[unroll]] for (uint b = 0; b < NB; b++)
    xrow[b] = int((p.x_off + min(b, p.nb - 1u) * p.ldx) / 4u);
  vec4 accr[RPI * NB];
  [[unroll]] for (uint i = 0; i < RPI * NB; i++) accr[i] = vec4(0.0);
#ifdef WD_WQUANT
  // When rows are whole groups of 4 blocks (K and w_off multiples of 128,
  // true of every Whisper matrix), a group is WD_WBS 16-byte texels: on
  // lavapipe, where every fetch is a gather call, 9 fetches per 128 weights
  // for q8_0 and 5 for q4 against 32 for f16. Otherwise block by block,
  // word by word. Either way k ascends: the same sum order.
  const bool groups = ((p.K | p.w_off) & 127u) == 0u;
  for (int ks = 0; groups && ks < K4 / 32; ks++) {
    uvec4 u[RPI][WD_WBS];
    [[unroll]] for (uint r = 0; r < RPI; r++)
      [[unroll]] for (int i = 0; i < WD_WBS; i++)
        u[r][i] = texelFetch(tW, (wrow[r] + ks * 4) / 4 * WD_WBS + i);
    [[unroll]] for (int sb = 0; sb < 4; sb++) {
      wd_wblk blk[RPI];
      [[unroll]] for (uint r = 0; r < RPI; r++) {
        const int w0 = sb * WD_WBS; // this block's first word in the group
        blk[r].dm = unpackHalf2x16(u[r][w0 >> 2][w0 & 3]);
#if WTYPE == 6 || WTYPE == 7
        blk[r].qh = u[r][(w0 + 1) >> 2][(w0 + 1) & 3];
#else
        blk[r].qh = 0u;
#endif
        [[unroll]] for (int j = 0; j < WD_WQW; j++)
          blk[r].q[j] = u[r][(w0 + WD_WQS + j) >> 2][(w0 + WD_WQS + j) & 3];
      }
      [[unroll]] for (uint kk = 0; kk < 8u; kk++) {
        const int k = ks * 32 + sb * 8 + int(kk);
        vec4 w[RPI];
        [[unroll]] for (uint r = 0; r < RPI; r++) w[r] = wd_wblk_vec4(blk[r], kk);
        [[unroll]] for (uint b = 0; b < NB; b++) {
          const vec4 x = texelFetch(tX, xrow[b] + k);
          [[unroll]] for (uint r = 0; r < RPI; r++) accr[r * NB + b] = fma(w[r], x, accr[r * NB + b]);
        }
      }
    }
  }
  for (int kb = 0; !groups && kb < K4 / 8; kb++) {
    wd_wblk blk[RPI];
    [[unroll]] for (uint r = 0; r < RPI; r++) blk[r] = wd_wblk_load(wrow[r] + kb);
    [[unroll]] for (uint kk = 0; kk < 8u; kk++) {
      const int k = kb * 8 + int(kk);
      vec4 w[RPI];
      [[unroll]] for (uint r = 0; r < RPI; r++) w[r] = wd_wblk_vec4(blk[r], kk);
      [[unroll]] for (uint b = 0; b < NB; b++) {
        const vec4 x = texelFetch(tX, xrow[b] + k);
        [[unroll]] for (uint r = 0; r < RPI; r++) accr[r * NB + b] = fma(w[r], x, accr[r * NB + b]);
      }
    }
  }
#else
  for (int k = 0; k < K4; k++) {
    vec4 w[RPI];
    [[unroll]] for (uint r = 0; r < RPI; r++) w[r] = WFETCH(wrow[r], k);
    [[unroll]] for (uint b = 0; b < NB; b++) {
      const vec4 x = texelFetch(tX, xrow[b] + k);
      [[unroll]] for (uint r = 0; r < RPI; r++) accr[r * NB + b] = fma(w[r], x, accr[r * NB + b]);
    }
  }
#endif
  [[unroll]] for (uint r = 0; r < RPI; r++) {
    const uint n = n0 + 64u * r;
    if (n < p.N)
      [[unroll]] for (uint b = 0; b < NB; b++)
        if (b < p.nb) store(b, n, dot(accr[r * NB + b], vec4(1.0)));
  }
#elif MODE == 1
  // Loop so that any subgroup size covers all ROWS rows of the workgroup.
  for (uint r = gl_SubgroupID; r < ROWS; r += gl_NumSubgroups) {
    const uint n = gl_WorkGroupID.x * ROWS + r;
    if (n >= p.N) break; // uniform within the subgroup
    [[unroll]] for (uint b = 0; b < NB; b++) acc[b] = vec4(0.0);
#ifdef WD_WQUANT
    // Wide subgroups (GPUs) keep the per-vec4 split: K = 384 is only 12
    // blocks, too few for 32 lanes.
    if (gl_SubgroupSize <= 16u)
      dot_blocks(n, int(gl_SubgroupInvocationID), int(gl_SubgroupSize), acc);
    else
#endif
    dot_rows(n, int(gl_SubgroupInvocationID), int(gl_SubgroupSize), acc);
    float s[NB];
    [[unroll]] for (uint b = 0; b < NB; b++) s[b] = subgroupAdd(dot(acc[b], vec4(1.0)));
    if (subgroupElect())
      [[unroll]] for (uint b = 0; b < NB; b++)
        if (b < p.nb) store(b, n, s[b]);
  }
#else
  const uint n = gl_WorkGroupID.x, l = gl_LocalInvocationIndex;
  if (n >= p.N) return; // whole workgroup: uniform
  dot_rows(n, int(l), 64, acc);
  [[unroll]] for (uint b = 0; b < NB; b++) red[l][b] = acc[b];
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (l < s) [[unroll]] for (uint b = 0; b < NB; b++) red[l][b] += red[l + s][b];
    barrier();
  }
  if (l < NB && l < p.nb) store(l, n, dot(red[0][l], vec4(1.0)));
#endif
}
