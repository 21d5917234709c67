#version 450
// argmax.comp - greedy token choice on the GPU: per logits row b,
//   idx = argmax_v (L[b][v] + mask[v]), max = that value,
//   lse = log(sum_v exp(L[b][v] + mask[v])).
// Greedy decoding reads back 16 bytes per sequence instead of 52k logits;
// log-probabilities (for the average-logprob fallback rule) are
// L[b][idx] + mask[idx] - lse. Ties go to the lowest index (as torch.argmax
// on CPU). ref: openai/whisper decoding.py GreedyDecoder / SuppressTokens
// (suppressed tokens get -inf added to their logits).
//
// Bindings (set 0):
//   0  samplerBuffer  L     RGBA32F, (nb, ld) f32 logits at off       read
//   1  buffer float   mask  (n_vocab) f32 additive (0 or -inf)       read
//   2  buffer wd_argmax_out OUT (nb) {idx, max, lse, pad}             write
// Requirements: off, ld multiples of 4.
//
// Workgroup: 64 invocations, one row; invocation l takes texels l, l+64, ...
// and keeps (max, first index, running sum of exp relative to its max); the
// three meet in a shared-memory tree.
// Grid: (nb, 1, 1).
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(set = 0, binding = 0) uniform samplerBuffer tL;
layout(std430, set = 0, binding = 1) readonly buffer Mask { float mask[]; };
struct wd_argmax_out { uint idx; float vmax; float lse; uint pad; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { wd_argmax_out res[]; };
layout(push_constant) uniform PC { wd_pc_argmax p; };

shared float rm[64], rs[64];
shared uint ri[64];

const float NEG_INF = -1.0 / 0.0;

// Merges (m2, i2, s2) into (m, i, s); s is sum exp(x - m).
void merge(inout float m, inout uint i, inout float s, float m2, uint i2, float s2) {
  if (m2 > m || (m2 == m && i2 < i)) {
    s = s * (m == NEG_INF ? 0.0 : exp(m - m2)) + s2;
    m = m2;
    i = i2;
  } else {
    s += m2 == NEG_INF ? 0.0 : s2 * exp(m2 - m);
  }
}

void main() {
  const uint b = gl_WorkGroupID.x, l = gl_LocalInvocationIndex;
  if (b >= p.nb) return;
  const int base4 = int((p.off + b * p.ld) / 4u);
  const uint n4 = (p.n_vocab + 3u) / 4u;
  const bool use_mask = (p.flags & WD_ARGMAX_MASK) != 0u;

  float m = NEG_INF, s = 0.0;
  uint idx = 0xffffffffu;
  for (uint t = l; t < n4; t += 64u) {
    const vec4 v = texelFetch(tL, base4 + int(t));
    for (uint c = 0u; c < 4u; c++) {
      const uint j = 4u * t + c;
      if (j >= p.n_vocab) break;
      const float x = v[c] + (use_mask ? mask[j] : 0.0);
      merge(m, idx, s, x, j, 1.0);
    }
  }
  rm[l] = m;
  ri[l] = idx;
  rs[l] = s;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (l < w) {
      float m1 = rm[l], s1 = rs[l];
      uint i1 = ri[l];
      merge(m1, i1, s1, rm[l + w], ri[l + w], rs[l + w]);
      rm[l] = m1;
      ri[l] = i1;
      rs[l] = s1;
    }
    barrier();
  }
  if (l == 0u) res[b] = wd_argmax_out(ri[0], rm[0], rm[0] + log(rs[0]), 0u);
}
