#version 450
// layernorm_row.comp - LayerNorm with one invocation per row (CPU-driver family).
//
// The same operation, bindings and push constants as layernorm.comp
// (wd_pc_norm), but without cross-invocation reductions: on lavapipe every
// barrier is a coroutine switch and every shared-memory access a scalar
// per-lane loop (reference/lavapipe.md), which made the workgroup-per-row
// kernel cost about 23 ms for the encoder's 1500 x 384 rows. Here each
// invocation walks its own row three times (mean, variance, output), and the
// 8 SIMD lanes of a lavapipe "subgroup" are 8 different rows.
//
// Bindings (set 0):
//   0  buffer float  X      (n_rows, ldx) f32, d contiguous     read
//   1  buffer float  Y      (n_rows, ldy) f32                    write (may alias X)
//   2  buffer float  gamma  (d) f32                              read
//   3  buffer float  beta   (d) f32                              read
// In place is safe: a row is read and written by one invocation only.
//
// Workgroup: 64 invocations, one row each. Grid: (ceil(n_rows / 64), 1, 1).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) buffer BufX { float x[]; };
layout(std430, set = 0, binding = 1) buffer BufY { float y[]; };
layout(std430, set = 0, binding = 2) readonly buffer Gamma { float gamma[]; };
layout(std430, set = 0, binding = 3) readonly buffer Beta { float beta[]; };
layout(push_constant) uniform PC { wd_pc_norm p; };

void main() {
  const uint r = gl_GlobalInvocationID.x;
  if (r >= p.n_rows) return;
  const uint xr = p.x_off + r * p.ldx, yr = p.y_off + r * p.ldy;
  const float inv_d = 1.0 / float(p.d);
  // ref: openai/whisper LayerNorm: two passes (mean, then biased variance).
  float s = 0.0;
  for (uint i = 0; i < p.d; i++) s += x[xr + i];
  const float mean = s * inv_d;
  float q = 0.0;
  for (uint i = 0; i < p.d; i++) {
    const float t = x[xr + i] - mean;
    q = fma(t, t, q);
  }
  const float rstd = inversesqrt(q * inv_d + p.eps);
  for (uint i = 0; i < p.d; i++) y[yr + i] = (x[xr + i] - mean) * rstd * gamma[i] + beta[i];
}
