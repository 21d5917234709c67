#version 450
// kv_to_f16.comp - one window's cross-attention K and V, f32 -> f16.
//
// The cross K/V GEMMs write f32 (their C operand); with f16 caches they
// write into two (n_audio_ctx, d) f32 scratch rows and this converts both
// into the window's block of the layer's f16 caches:
//   Kd[i] = f16(Ks[i]), Vd[i] = f16(Vs[i])   for the first n4 vec4s
// four elements to a uvec2 (packHalf2x16, round to nearest even), the
// layout kv_append_f16 writes and attention reads through RGBA16F views.
//
// Bindings (set 0):
//   0  buffer vec4   Ks  (n4) f32    read
//   1  buffer vec4   Vs  (n4) f32    read
//   2  buffer uvec2  Kd  (n4) f16x4  write
//   3  buffer uvec2  Vd  (n4) f16x4  write
// Push constants: n4, then padding (C mirror: wd_pc_cvt_t in gpu/vk_kv.h).
// Workgroup: 64 invocations, one vec4 of K and of V each.
// Grid: (min(ceil(n4 / 64), 65535), ceil(...) / 65535 rows, 1): x-major.

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer BufKs { vec4 ks[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufVs { vec4 vs[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BufKd { uvec2 kd[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufVd { uvec2 vd[]; };
layout(push_constant) uniform PC { uint n4, pad0, pad1, pad2; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (i >= p.n4) return;
  const vec4 k = ks[i], v = vs[i];
  kd[i] = uvec2(packHalf2x16(k.xy), packHalf2x16(k.zw));
  vd[i] = uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
}
