#version 450
// transpose.comp - batched 2-D transpose, f32: OUT[z][c][r] = IN[z][r][c].
//
// Used for the encoder's P.V: vk_gemm wants its B operand as rows of K
// (B[n][k], k contiguous), and V of one head is (frames, 64), k = frame; so
// V is transposed to (64, frames) per head first.
//
// Bindings (set 0):
//   0  buffer float  IN   (Z, R, ldi) at in_off, in_bz     read
//   1  buffer float  OUT  (Z, C, ldo) at out_off, out_bz   write
//
// Workgroup: 8 x 8 invocations: x walks r (contiguous output), y walks c.
// Grid: (ceil(R / 8), ceil(C / 8), Z).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 8, local_size_y = 8, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer BufIn { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufOut { float dst[]; };
layout(push_constant) uniform PC { wd_pc_transpose p; };

void main() {
  const uint r = gl_GlobalInvocationID.x, c = gl_GlobalInvocationID.y, z = gl_WorkGroupID.z;
  if (r >= p.R || c >= p.C) return;
  dst[p.out_off + z * p.out_bz + c * p.ldo + r] = src[p.in_off + z * p.in_bz + r * p.ldi + c];
}
