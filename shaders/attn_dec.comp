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
// Self-attention (flags without WD_ATTN_CROSS): row0 = b * n_ctx and
// n_keys = seq[b].len, the cache length after this step's append, read from
// the step-parameter buffer so one recording serves every step. The new
// token's own key is row pos = len - 1, so no causal mask is needed.
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
//   3  samplerBuffer  V    RGBA32F, same layout as K                          read
//   4  buffer float   O    (nb, ldo) f32 at o_off                              write
//   5  buffer float   S    (nb, n_head, save_ld) f32 at save_off              write
// Requirements: q_off, ldq, kv_off, ldkv multiples of 4; n_keys <= 1536.
//
// Workgroup: 64 invocations. Scores: invocation l takes keys l, l+64, ...
// (16 texel fetches of K per key against q held in registers) into shared
// memory. Weighted sum: invocation l owns the vec4 (l % 16) of the head and
// the keys j = l / 16 (mod 4); the 4 partial vectors meet in shared memory.
// Reductions: reduce.glsl (subgroup or shared-memory tree variant).
// Grid: (n_head, nb, 1).
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

shared float sc[MAX_KEYS]; // scores, then unnormalised weights
shared vec4 part[4][16];   // partial outputs of the 4 key groups

void main() {
  const uint h = gl_WorkGroupID.x, b = gl_WorkGroupID.y, l = gl_LocalInvocationIndex;
  const bool cross = (p.flags & WD_ATTN_CROSS) != 0u;
  const uint n_keys = min(cross ? p.n_keys : seq[b].len, min(p.n_ctx, MAX_KEYS));
  const uint row0 = (cross ? seq[b].audio : b) * p.n_ctx;
  const int ld4 = int(p.ldkv / 4u);
  const int kv4 = int((p.kv_off + row0 * p.ldkv + h * WD_ATTN_HEAD_DIM) / 4u);
  const bool save = (p.flags & (WD_ATTN_SAVE_QK | WD_ATTN_SAVE_P)) != 0u &&
                    h < 32u && ((p.save_heads >> h) & 1u) != 0u;
  const uint srow = p.save_off + (b * p.n_head + h) * p.save_ld;

  vec4 q[16];
  const int q4 = int((p.q_off + b * p.ldq + h * WD_ATTN_HEAD_DIM) / 4u);
  [[unroll]] for (int i = 0; i < 16; i++) q[i] = texelFetch(tQ, q4 + i);

  // Scores and their maximum.
  float m = -1.0 / 0.0;
  for (uint j = l; j < n_keys; j += 64u) {
    const int kr = kv4 + int(j) * ld4;
    float s = 0.0;
    [[unroll]] for (int i = 0; i < 16; i++) s += dot(q[i], texelFetch(tK, kr + i));
    s *= p.scale;
    sc[j] = s;
    if (save && (p.flags & WD_ATTN_SAVE_QK) != 0u) sv[srow + j] = s;
    m = max(m, s);
  }
  m = wd_wg_max(m);

  // exp and the normaliser; each invocation rewrites only its own keys.
  float sum = 0.0;
  for (uint j = l; j < n_keys; j += 64u) {
    const float e = exp(sc[j] - m);
    sc[j] = e;
    sum += e;
  }
  sum = wd_wg_sum(sum); // ends with a barrier: all of sc[] is visible
  const float inv = n_keys > 0u ? 1.0 / sum : 0.0;
  if (save && (p.flags & WD_ATTN_SAVE_P) != 0u)
    for (uint j = l; j < n_keys; j += 64u) sv[srow + j] = sc[j] * inv;

  // Weighted sum of V: 16 vec4 columns x 4 key groups.
  const uint dv = l & 15u, g = l >> 4;
  vec4 acc = vec4(0.0);
  for (uint j = g; j < n_keys; j += 4u) acc = fma(vec4(sc[j]), texelFetch(tV, kv4 + int(j) * ld4 + int(dv)), acc);
  part[g][dv] = acc;
  barrier();
  if (l < 16u) {
    const vec4 r = (part[0][l] + part[1][l] + part[2][l] + part[3][l]) * inv;
    const uint oi = p.o_off + b * p.ldo + h * WD_ATTN_HEAD_DIM + l * 4u;
    o[oi + 0u] = r.x;
    o[oi + 1u] = r.y;
    o[oi + 2u] = r.z;
    o[oi + 3u] = r.w;
  }
}
