#version 450
// layernorm.comp - LayerNorm over rows, f32 in and out (in place allowed).
//
// y[r][i] = (x[r][i] - mean_r) / sqrt(var_r + eps) * gamma[i] + beta[i]
// ref: openai/whisper model.py LayerNorm (torch.nn.LayerNorm, eps 1e-5,
// biased variance, computed in f32). Mean and variance are two passes over
// the row (not E[x^2] - mean^2) so that rows with a large mean keep their
// precision.
//
// Bindings (set 0):
//   0  buffer float  X      (n_rows, ldx) f32, d contiguous     read
//   1  buffer float  Y      (n_rows, ldy) f32                    write (may alias X)
//   2  buffer float  gamma  (d) f32                              read
//   3  buffer float  beta   (d) f32                              read
// Push constants: wd_pc_norm.
//
// Workgroup: 64 invocations, one row; each invocation handles the elements
// i = lid, lid + 64, ... so in-place use is safe (every element is read and
// written by the same invocation, and all reads of the statistics passes end
// at a barrier). Reductions: reduce.glsl (subgroup or shared-memory tree,
// the WD_RED_SUBGROUP define picks the variant).
// Grid: (n_rows, 1, 1).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"
#define WD_RED_N 64u
#include "reduce.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) buffer BufX { float x[]; };
layout(std430, set = 0, binding = 1) buffer BufY { float y[]; };
layout(std430, set = 0, binding = 2) readonly buffer Gamma { float gamma[]; };
layout(std430, set = 0, binding = 3) readonly buffer Beta { float beta[]; };
layout(push_constant) uniform PC { wd_pc_norm p; };

void main() {
  const uint r = gl_WorkGroupID.x, l = gl_LocalInvocationIndex;
  if (r >= p.n_rows) return; // whole workgroup: uniform
  const uint xr = p.x_off + r * p.ldx, yr = p.y_off + r * p.ldy;
  const float inv_d = 1.0 / float(p.d);

  float s = 0.0;
  for (uint i = l; i < p.d; i += 64u) s += x[xr + i];
  const float mean = wd_wg_sum(s) * inv_d;

  float q = 0.0;
  for (uint i = l; i < p.d; i += 64u) {
    const float t = x[xr + i] - mean;
    q = fma(t, t, q);
  }
  const float rstd = inversesqrt(wd_wg_sum(q) * inv_d + p.eps);

  for (uint i = l; i < p.d; i += 64u) y[yr + i] = (x[xr + i] - mean) * rstd * gamma[i] + beta[i];
}
