#version 450
// kv_gather.comp - beam-search reorder of the KV caches.
//
// Caches are indexed by sequence slot, never by batch row. For every layer
// z and every record b of the step-parameter buffer, rows r < len[b]:
//   Kd[z][slot[b]][r][:] = Ks[z][src[b]][r][:]   and the same for V,
// i.e. record b makes slot slot[b] of the destination set inherit the cache
// of slot src[b] of the source set (both are slot numbers; b only picks the
// record). Destination slots not named by any record, and rows at or past
// len[b], are left untouched, so after a swap of cache sets the host must
// name every live slot of the set (a beam that keeps its own history has
// src = slot). The host guarantees distinct slot[b] (two records writing
// one slot would race) and slot[b], src[b] < B. Source and destination must
// be different buffers (a gather in place would read rows another
// workgroup has already overwritten); the engine alternates between two
// cache sets, or gathers into scratch and copies back.
//
// Bindings (set 0):
//   0  buffer wd_seq  seq  (nb) step parameters                                        read
//   1  buffer vec4    Ks   (n_layer, B slots, n_ctx, d) f32 at cache_off, layer_stride  read
//   2  buffer vec4    Vs   same layout                                                  read
//   3  buffer vec4    Kd   same layout                                                  write
//   4  buffer vec4    Vd   same layout                                                  write
// Requirements: d, cache_off, layer_stride multiples of 4.
// WD_KV_F16 (variant kv_gather_f16): f16 caches, four elements to a uvec2;
// the copy moves bits, so only the element size changes.
//
// Workgroup: 64 invocations, one vec4 of a (row, d) plane each.
// Grid: (ceil(n_ctx * d / 256), nb, n_layer).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer Step { wd_seq seq[]; };
#ifdef WD_KV_F16
#define ELEM4 uvec2
#else
#define ELEM4 vec4
#endif
layout(std430, set = 0, binding = 1) readonly buffer BufKs { ELEM4 ks[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufVs { ELEM4 vs[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufKd { ELEM4 kd[]; };
layout(std430, set = 0, binding = 4) writeonly buffer BufVd { ELEM4 vd[]; };
layout(push_constant) uniform PC { wd_pc_kv p; };

void main() {
  const uint i = gl_GlobalInvocationID.x, b = gl_WorkGroupID.y, z = gl_WorkGroupID.z;
  const uint d4 = p.d / 4u;
  const uint len = min(seq[b].len, p.n_ctx);
  if (i >= len * d4) return;
  const uint lay = (p.cache_off + z * p.layer_stride) / 4u;
  const uint s = lay + seq[b].src * p.n_ctx * d4 + i;
  const uint t = lay + seq[b].slot * p.n_ctx * d4 + i;
  kd[t] = ks[s];
  vd[t] = vs[s];
}
