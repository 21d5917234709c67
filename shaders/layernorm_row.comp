#version 450
// layernorm_row.comp - LayerNorm with one invocation per row (CPU-driver family).
//
// The same operation and push constants as layernorm.comp
// (wd_pc_norm), but without cross-invocation reductions: on lavapipe every
// barrier is a coroutine switch and every shared-memory access a scalar
// per-lane loop (reference/lavapipe.md), which made the workgroup-per-row
// kernel cost about 23 ms for the encoder's 1500 x 384 rows. Here each
// invocation walks its own row three times (mean, variance, output), and the
// 8 SIMD lanes of a lavapipe "subgroup" are 8 different rows.
//
// Bindings (set 0):
//   0  samplerBuffer X      RGBA32F texels over (n_rows, ldx) f32, d contiguous   read
//   1  buffer vec4   Y      (n_rows, ldy) f32                  write (may alias X)
//   2  buffer vec4   gamma  (d) f32                            read
//   3  buffer vec4   beta   (d) f32                            read
// Requirements: d, x_off, ldx, y_off, ldy multiples of 4 (gpu/vk_norm.c checks).
// Why texels and vec4s: on lavapipe every storage-buffer access is a per-lane
// scalar loop whatever its width, while texelFetch is vectorised, so X is
// read four floats per fetch and Y written four per store (3x fewer memory
// instructions than float accesses).
// In place is safe: a row is read and written by one invocation only, and
// each texel is read before the store that overwrites it, never after.
//
// Workgroup: 64 invocations, one row each. Grid: (ceil(n_rows / 64), 1, 1).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(set = 0, binding = 0) uniform samplerBuffer tX;
layout(std430, set = 0, binding = 1) buffer BufY { vec4 y4[]; };
layout(std430, set = 0, binding = 2) readonly buffer Gamma { vec4 gamma4[]; };
layout(std430, set = 0, binding = 3) readonly buffer Beta { vec4 beta4[]; };
layout(push_constant) uniform PC { wd_pc_norm p; };

void main() {
  const uint r = gl_GlobalInvocationID.x;
  if (r >= p.n_rows) return;
  const int xr = int((p.x_off + r * p.ldx) / 4u);
  const uint yr = (p.y_off + r * p.ldy) / 4u;
  const int d4 = int(p.d / 4u);
  const float inv_d = 1.0 / float(p.d);
  // ref: openai/whisper LayerNorm: two passes (mean, then biased variance).
  vec4 s = vec4(0.0);
  for (int i = 0; i < d4; i++) s += texelFetch(tX, xr + i);
  const float mean = dot(s, vec4(1.0)) * inv_d;
  vec4 q = vec4(0.0);
  for (int i = 0; i < d4; i++) {
    const vec4 t = texelFetch(tX, xr + i) - mean;
    q = fma(t, t, q);
  }
  const float rstd = inversesqrt(dot(q, vec4(1.0)) * inv_d + p.eps);
  for (int i = 0; i < d4; i++)
    y4[yr + uint(i)] = (texelFetch(tX, xr + i) - mean) * rstd * gamma4[i] + beta4[i];
}
