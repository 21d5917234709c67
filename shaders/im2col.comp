#version 450
// im2col.comp - unfolds a kernel-3, padding-1 conv1d input into rows.
//
// OUT[t][c * 3 + k] = IN(c, t * stride + k - 1), zero outside [0, t_in)
// for t < t_out, c < cin, k < 3. With this (cin, k) order, k fastest, the
// ggml conv weight (ne = {3, cin, cout}, i.e. rows of cin*3 per output
// channel) is exactly the B matrix of vk_gemm: conv = gemm(OUT, W) + bias,
// then GELU. ref: openai/whisper model.py AudioEncoder (conv1: n_mels -> d,
// stride 1; conv2: d -> d, stride 2; both padding 1, then gelu).
// IN(c, t) = IN[in_off + c * in_cs + t * in_ts]: the mel is (n_mels, 3000),
// channel-major (in_cs = 3000, in_ts = 1); conv1's output is (3000, d),
// frame-major (in_cs = 1, in_ts = d).
//
// Bindings (set 0):
//   0  buffer float  IN   as above, f32              read
//   1  buffer float  OUT  (t_out, ldo) f32           write
//
// Workgroup: 64 x 1 invocations, one output element each.
// Grid: (ceil(cin * 3 / 64), t_out, 1).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer BufIn { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufOut { float dst[]; };
layout(push_constant) uniform PC { wd_pc_im2col p; };

void main() {
  const uint col = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (col >= p.cin * 3u) return;
  const uint c = col / 3u, k = col - 3u * c;
  const int ts = int(t * p.stride + k) - 1;
  float v = 0.0;
  if (ts >= 0 && ts < int(p.t_in)) v = src[p.in_off + c * p.in_cs + uint(ts) * p.in_ts];
  dst[t * p.ldo + col] = v;
}
