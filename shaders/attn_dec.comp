#version 450
// attn_dec.comp - decoder attention for one step (one query per sequence).
//
// For sequence b and head h (one workgroup each):
//   q      = Q[b][h*64 .. h*64+63]
//   s_j    = scale * q . K[row0 + j][h*64 ..]          for j < n_keys
//   p      = softmax(s)                                (f32)
//   O[b][h*64 ..] = sum_j p_j * V[row0 + j][h*64 ..]
// ref: openai/whisper model.py MultiHeadAttention.qkv_attention: q and k are
// each scaled by d_head^-0.25, the product is the same as scale = 1/8 here.
// Self-attention (flags without WD_ATTN_CROSS): row0 = seq[b].slot * n_ctx
// (batch row b attends over the KV cache of its sequence slot, which need not
// be slot b) and n_keys = seq[b].len, the cache length after this step's
// append, read from the step-parameter buffer so one recording serves every
// step. The new token's own key is row pos = len - 1, so no causal mask is
// needed: when several rows of one slot run at once (a prefill), row b sees
// exactly the keys before and at its own position. len = 0 (a prefill's
// padding row) gives an output of zeros.
// Cross-attention (WD_ATTN_CROSS): row0 = seq[b].audio * n_ctx, n_keys from
// the push constants (1500): beams of one request share one encoder output.
// WD_ATTN_SAVE_QK / _P write the scaled scores / the softmax weights of the
// heads whose bit is set in save_heads to S (word timestamps need the
// cross-attention QK of the alignment heads).
//
// Bindings (set 0):
//   0  buffer wd_seq  seq  (nb) step parameters                              read
//   1  samplerBuffer  Q    RGBA32F, (nb, ldq) f32 at q_off                    read
//   2  samplerBuffer  K    RGBA32F, (rows, ldkv) f32 at kv_off, d contiguous  read
//                          (self: rows = slots * n_ctx; cross: audios * n_ctx)
//   3  samplerBuffer  V    RGBA32F, same layout as K                          read
//   4  buffer float   O    (nb, ldo) f32 at o_off                              write
//   5  buffer float   S    (nb, n_head, save_ld) f32 at save_off              write
// Requirements: q_off, ldq, kv_off, ldkv multiples of 4; n_keys <= 1536.
//
// Workgroup: 64 invocations; invocation l takes keys l, l+64, ... in both
// passes, so no score ever goes through shared memory (on lavapipe every
// shared-memory access is a scalar per-lane loop, texel fetches are
// vectorised: reference/lavapipe.md). Pass 1: scores (16 K texels per key
// against q in registers) with a running max and rescaled sum per
// invocation, merged across the workgroup. Pass 2: the scores again (16 K
// texels, cheaper than storing them), p_j, and 16 vec4 accumulators of
// p_j * V[j] per invocation, summed across the workgroup at the end
// (subgroupAdd, then one shared slot per subgroup; or a shared tree).
// Grid: (n_head, nb, 1).
//
// WD_ATTN_SPLIT (flash-decoding): workgroup z of p.n_split takes the keys
// [z * c, min((z + 1) * c, n_keys)), c = ceil(n_keys / n_split), and writes
// its partial result to S instead of O: at S[save_off + ((b * n_head + h) *
// n_split + z) * WD_ATTN_PART]: the chunk's max score m, its sum of exp(s - m), two
// unused floats, then the 64 sums of exp(s_j - m) * V[j] (unnormalised).
// attn_merge.comp combines the chunks. One row's cross-attention is 20
// workgroups of a large model's heads otherwise, too few to fill a GPU.
// Grid: (n_head, nb, n_split); saving scores is not supported.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"
#define WD_RED_N 64u
#include "reduce.glsl"

#define MAX_KEYS 1536u

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer Step { wd_seq seq[]; };
layout(set = 0, binding = 1) uniform samplerBuffer tQ;
layout(set = 0, binding = 2) uniform samplerBuffer tK;
layout(set = 0, binding = 3) uniform samplerBuffer tV;
layout(std430, set = 0, binding = 4) writeonly buffer BufO { float o[]; };
layout(std430, set = 0, binding = 5) writeonly buffer BufS { float sv[]; };
layout(push_constant) uniform PC { wd_pc_attn p; };

// Partial outputs: one row per subgroup (subgroup variant) or per
// invocation (tree variant): 16 KiB plus the reductions' 256 B, so the
// device needs more than the 16 KiB minimum (lavapipe 32 KiB, GPUs 48+).
shared vec4 part[64][16];

const float NEG_INF = -1.0 / 0.0;

void main() {
  const uint h = gl_WorkGroupID.x, b = gl_WorkGroupID.y, l = gl_LocalInvocationIndex;
  const bool cross = (p.flags & WD_ATTN_CROSS) != 0u;
  const uint n_keys = min(cross ? p.n_keys : seq[b].len, min(p.n_ctx, MAX_KEYS));
#ifdef WD_ATTN_SPLIT
  const uint chunk = (n_keys + p.n_split - 1u) / p.n_split;
  const uint k0 = min(gl_WorkGroupID.z * chunk, n_keys), k1 = min(k0 + chunk, n_keys);
#else
  const uint k0 = 0u, k1 = n_keys;
#endif
  const uint row0 = (cross ? seq[b].audio : seq[b].slot) * p.n_ctx;
  const int ld4 = int(p.ldkv / 4u);
  const int kv4 = int((p.kv_off + row0 * p.ldkv + h * WD_ATTN_HEAD_DIM) / 4u);
  const bool save = (p.flags & (WD_ATTN_SAVE_QK | WD_ATTN_SAVE_P)) != 0u &&
                    h < 32u && ((p.save_heads >> h) & 1u) != 0u;
  const uint srow = p.save_off + (b * p.n_head + h) * p.save_ld;

  vec4 q[16];
  const int q4 = int((p.q_off + b * p.ldq + h * WD_ATTN_HEAD_DIM) / 4u);
  [[unroll]] for (int i = 0; i < 16; i++) q[i] = texelFetch(tQ, q4 + i) * p.scale;

  // Pass 1: this invocation's max and sum of exp(s - max), merged.
  float m = NEG_INF, sum = 0.0;
  for (uint j = k0 + l; j < k1; j += 64u) {
    const int kr = kv4 + int(j) * ld4;
    float s = 0.0;
    [[unroll]] for (int i = 0; i < 16; i++) s += dot(q[i], texelFetch(tK, kr + i));
    if (save && (p.flags & WD_ATTN_SAVE_QK) != 0u) sv[srow + j] = s;
    const float mn = max(m, s);
    sum = sum * exp(m - mn) + exp(s - mn);
    m = mn;
  }
  const float gm = wd_wg_max(m);
  const float gsum = wd_wg_sum(m == NEG_INF ? 0.0 : sum * exp(m - gm));
#ifdef WD_ATTN_SPLIT
  const float inv = 1.0; // the chunk's weights stay unnormalised
#else
  const float inv = n_keys > 0u ? 1.0 / gsum : 0.0;
#endif

  // Pass 2: weights and the weighted sum of V.
  vec4 acc[16];
  [[unroll]] for (int i = 0; i < 16; i++) acc[i] = vec4(0.0);
  for (uint j = k0 + l; j < k1; j += 64u) {
    const int kr = kv4 + int(j) * ld4;
    float s = 0.0;
    [[unroll]] for (int i = 0; i < 16; i++) s += dot(q[i], texelFetch(tK, kr + i));
    const float pj = exp(s - gm) * inv;
    if (save && (p.flags & WD_ATTN_SAVE_P) != 0u) sv[srow + j] = pj;
    [[unroll]] for (int i = 0; i < 16; i++) acc[i] = fma(vec4(pj), texelFetch(tV, kr + i), acc[i]);
  }

  // Sum the 64 partial outputs.
#ifdef WD_RED_SUBGROUP
  [[unroll]] for (int i = 0; i < 16; i++) acc[i] = subgroupAdd(acc[i]);
  if (subgroupElect()) [[unroll]] for (int i = 0; i < 16; i++) part[gl_SubgroupID][i] = acc[i];
  barrier();
  if (l < 16u) {
    vec4 r = vec4(0.0);
    for (uint g = 0; g < gl_NumSubgroups; g++) r += part[g][l];
#else
  [[unroll]] for (int i = 0; i < 16; i++) part[l][i] = acc[i];
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (l < w) [[unroll]] for (int i = 0; i < 16; i++) part[l][i] += part[l + w][i];
    barrier();
  }
  if (l < 16u) {
    const vec4 r = part[0][l];
#endif
#ifdef WD_ATTN_SPLIT
    const uint pi = p.save_off + ((b * p.n_head + h) * p.n_split + gl_WorkGroupID.z) * WD_ATTN_PART;
    if (l == 0u) {
      sv[pi] = gm;
      sv[pi + 1u] = gsum;
    }
    const uint oi = pi + 4u + l * 4u;
    sv[oi + 0u] = r.x;
    sv[oi + 1u] = r.y;
    sv[oi + 2u] = r.z;
    sv[oi + 3u] = r.w;
#else
    const uint oi = p.o_off + b * p.ldo + h * WD_ATTN_HEAD_DIM + l * 4u;
    o[oi + 0u] = r.x;
    o[oi + 1u] = r.y;
    o[oi + 2u] = r.z;
    o[oi + 3u] = r.w;
#endif
  }
}
