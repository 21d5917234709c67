#version 450
// kv_append.comp - writes this step's K and V rows into the KV caches.
//
// Kc[cache_off + (slot[b] * n_ctx + pos[b]) * d + i] = IN[in_off   + b * ldi + i]
// Vc[cache_off + (slot[b] * n_ctx + pos[b]) * d + i] = IN[v_in_off + b * ldi + i]
// with slot[b] and pos[b] from the step-parameter buffer: batch row b of the
// input goes to the cache of sequence slot slot[b], whatever row b is. IN is
// normally the fused QKV projection output (nb, 3d): K at in_off = d, V at
// v_in_off = 2d. A position at or past n_ctx is ignored: the engine's
// prefill recordings give their padding rows pos = n_ctx so that they write
// nothing (gpu/vk_engine_rows.c), and the kernel must never write outside
// the cache. The host also guarantees slot[b] < B, and rows that share a
// slot (a prefill's tokens) have distinct positions, so no two rows write
// one cache row.
//
// Bindings (set 0):
//   0  buffer wd_seq  seq  (nb) step parameters                  read
//   1  buffer vec4    IN   (nb, ldi) f32                          read
//   2  buffer vec4    Kc   (B slots, n_ctx, d) f32 at cache_off   write
//   3  buffer vec4    Vc   (B slots, n_ctx, d) f32 at cache_off   write
// Requirements: d, ldi, in_off, v_in_off, cache_off multiples of 4.
// WD_KV_F16 (variant kv_append_f16): the caches hold f16, four to a uvec2
// (packHalf2x16, round to nearest even); offsets stay in elements, so the
// same index addresses one vec4 of input and one uvec2 of cache. No 16-bit
// storage feature is needed; attention reads them through RGBA16F views.
//
// Workgroup: 64 invocations, one vec4 of K and of V each.
// Grid: (ceil(d / 256), nb, 1).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer Step { wd_seq seq[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufIn { vec4 in4[]; };
#ifdef WD_KV_F16
layout(std430, set = 0, binding = 2) writeonly buffer BufK { uvec2 k4[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufV { uvec2 v4[]; };
uvec2 wd_store(vec4 x) { return uvec2(packHalf2x16(x.xy), packHalf2x16(x.zw)); }
#else
layout(std430, set = 0, binding = 2) writeonly buffer BufK { vec4 k4[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufV { vec4 v4[]; };
vec4 wd_store(vec4 x) { return x; }
#endif
layout(push_constant) uniform PC { wd_pc_kv p; };

void main() {
  const uint i = gl_GlobalInvocationID.x, b = gl_WorkGroupID.y;
  const uint pos = seq[b].pos;
  if (4u * i >= p.d || pos >= p.n_ctx) return;
  const uint dst = (p.cache_off + (seq[b].slot * p.n_ctx + pos) * p.d) / 4u + i;
  k4[dst] = wd_store(in4[(p.in_off + b * p.ldi) / 4u + i]);
  v4[dst] = wd_store(in4[(p.v_in_off + b * p.ldi) / 4u + i]);
}
