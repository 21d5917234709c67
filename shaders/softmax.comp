#version 450
// softmax.comp - row softmax in place over (Z, M, N) f32, with scale and an
// optional causal mask (the encoder's and a prompt pass's attention).
//
// x[z][i][j] = exp(s_ij - max_i) / sum_j exp(s_ij - max_i), where
// s_ij = scale * x[z][i][j], and -inf when WD_SOFTMAX_CAUSAL and
// j > i + causal_off. ref: openai/whisper model.py qkv_attention
// (qk + mask, then softmax in f32).
//
// Bindings (set 0), two views of the same memory:
//   0  samplerBuffer  XT  RGBA32F view of X: the loads (vectorised texels)  read
//   1  buffer float   X   (Z, M, ld) f32 at off, z_stride                   write
// Requirements: ld, off, z_stride multiples of 4 (a row's texels never reach
// into the next row's); N <= ld. Every element is read by the invocation
// that later writes it, so in-place use is safe.
//
// ROWS_PER_WG == 64 (MODE 0, lavapipe): one invocation per row, no
//   reductions, no shared memory. Grid: (ceil(M / 64), Z, 1).
// MODE 1 (GPUs): one 64-invocation workgroup per row, texels strided over the
//   lanes, reduce.glsl reductions. Grid: (M, Z, 1).
#extension GL_GOOGLE_include_directive : enable
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"
#if MODE == 1
#define WD_RED_N 64u
#include "reduce.glsl"
#endif

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(set = 0, binding = 0) uniform samplerBuffer tX;
// Written as vec4s: each storage access is a per-lane scalar loop on
// lavapipe whatever its width, so a vec4 store costs what a float store does.
layout(std430, set = 0, binding = 1) writeonly buffer BufX { vec4 x4[]; };
layout(push_constant) uniform PC { wd_pc_softmax p; };

const float NEG_INF = -1.0 / 0.0;

// The scaled, masked scores of texel t of row i (columns 4t .. 4t+3).
vec4 scores(int base4, uint i, uint t) {
  vec4 v = p.scale * texelFetch(tX, base4 + int(t));
  const uint lim = (p.flags & WD_SOFTMAX_CAUSAL) != 0u ? min(p.N, i + p.causal_off + 1u) : p.N;
  const uint j = 4u * t;
  if (j + 0u >= lim) v.x = NEG_INF;
  if (j + 1u >= lim) v.y = NEG_INF;
  if (j + 2u >= lim) v.z = NEG_INF;
  if (j + 3u >= lim) v.w = NEG_INF;
  return v;
}

void main() {
#if MODE == 0
  const uint i = gl_GlobalInvocationID.x, lane = 0u, step = 1u;
  if (i >= p.M) return;
#else
  const uint i = gl_WorkGroupID.x, lane = gl_LocalInvocationIndex, step = 64u;
#endif
  const uint z = gl_WorkGroupID.y;
  const uint row = p.off + z * p.z_stride + i * p.ld;
  const int base4 = int(row / 4u);
  const uint n4 = (p.N + 3u) / 4u;

  vec4 m4 = vec4(NEG_INF);
  for (uint t = lane; t < n4; t += step) m4 = max(m4, scores(base4, i, t));
  float m = max(max(m4.x, m4.y), max(m4.z, m4.w));
#if MODE == 1
  m = wd_wg_max(m);
#endif
  // A fully masked row (only possible with a negative causal offset) gives
  // zeros rather than NaN.
  if (m == NEG_INF) m = 0.0;

  vec4 s4 = vec4(0.0);
  for (uint t = lane; t < n4; t += step) s4 += exp(scores(base4, i, t) - m);
  float s = dot(s4, vec4(1.0));
#if MODE == 1
  s = wd_wg_sum(s);
#endif
  const float inv = s > 0.0 ? 1.0 / s : 0.0;

  const bool aligned = ((row | p.N) & 3u) == 0u;
  for (uint t = lane; t < n4; t += step) {
    const vec4 e = exp(scores(base4, i, t) - m) * inv;
    const uint j = row + 4u * t;
    if (aligned) {
      x4[j >> 2] = e;
    } else {
      [[unroll]] for (uint q = 0u; q < 4u; q++)
        if (4u * t + q < p.N) x4[(j + q) >> 2][(j + q) & 3u] = e[q];
    }
  }
}
