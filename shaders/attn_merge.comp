#version 450
// attn_merge.comp - combines the key chunks of attn_dec_*_split.
//
// For row b and head h (one workgroup; invocation l is output dim l):
//   M = max_z m_z over the chunks with keys (m_z > -inf)
//   O[b][h*64 + l] = sum_z e_z * acc_z[l] / sum_z e_z * sum_z,  e_z = exp(m_z - M)
// the softmax over all keys, since chunk z's acc and sum are relative to m_z.
// A row without keys (no chunk with m_z > -inf) gets zeros, as attn_dec.
// Partials: S[save_off + ((b * n_head + h) * n_split + z) * WD_ATTN_PART]: m, sum, 2
// unused, then 64 floats (attn_dec.comp).
//
// Bindings: the layout of attn_dec.comp (set 0), so both take one set:
// 4 (O) written, 5 (S) read, the others unused.
// Grid: (n_head, nb, 1).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer Step { wd_seq seq[]; };
layout(set = 0, binding = 1) uniform samplerBuffer tQ;
layout(set = 0, binding = 2) uniform samplerBuffer tK;
layout(set = 0, binding = 3) uniform samplerBuffer tV;
layout(std430, set = 0, binding = 4) writeonly buffer BufO { float o[]; };
layout(std430, set = 0, binding = 5) readonly buffer BufS { float sv[]; };
layout(push_constant) uniform PC { wd_pc_attn p; };

const float NEG_INF = -1.0 / 0.0;

void main() {
  const uint h = gl_WorkGroupID.x, b = gl_WorkGroupID.y, l = gl_LocalInvocationIndex;
  const uint base = p.save_off + (b * p.n_head + h) * p.n_split * WD_ATTN_PART;
  float mx = NEG_INF;
  for (uint z = 0u; z < p.n_split; z++) mx = max(mx, sv[base + z * WD_ATTN_PART]);
  float sum = 0.0, acc = 0.0;
  if (mx != NEG_INF) {
    for (uint z = 0u; z < p.n_split; z++) {
      const uint pz = base + z * WD_ATTN_PART;
      const float m = sv[pz];
      if (m == NEG_INF) continue; // a chunk without keys
      const float e = exp(m - mx);
      sum += e * sv[pz + 1u];
      acc += e * sv[pz + 4u + l];
    }
  }
  o[p.o_off + b * p.ldo + h * WD_ATTN_HEAD_DIM + l] = sum > 0.0 ? acc / sum : 0.0;
}
