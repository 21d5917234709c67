#version 450
// attn_rows.comp - decoder attention for many rows of one sequence (the
// prefill and align recordings): the rows share one cache, so a workgroup
// takes 16 of them and reads each key and value once for all 16, where
// attn_dec reads the whole cache once per row.
//
// For the tile of rows b0 .. b0+15 (b0 = 16 * gl_WorkGroupID.y) and head h:
//   O[b][h*64 ..] = softmax_j(scale * q_b . K[row0 + j]) . V[row0 + j],
//   j < n_keys(b)
// Cross-attention (WD_ATTN_CROSS): row0 = seq[b0].audio * n_ctx, n_keys =
// p.n_keys for every row. Self-attention: row0 = seq[b0].slot * n_ctx and
// n_keys(b) = seq[b].len, the causal mask of a prefill (kv_append wrote
// every row's key first). A row with n_keys = 0 (prefill padding) gets
// zeros. Every row of a tile must share seq[].audio (cross) or seq[].slot
// (self): true of the rows recordings, whose rows are one sequence.
// ref: openai/whisper model.py MultiHeadAttention.qkv_attention.
//
// Online softmax over blocks of 64 keys (one key per invocation):
//   1. invocation l holds key j = blk + l in registers (16 K texels) and
//      writes s[r][l] for the 16 rows (q from shared memory, broadcast);
//      V row j goes to shared memory beside it;
//   2. invocation l owns row r = l / 4, dims 16 * (l % 4) .. +15: with the
//      row's block max from its 4 lanes, it rescales its accumulators and
//      running sum, and turns its 16 scores into weights in place;
//   3. acc += weights . V over the block's 64 keys (shared memory).
// The 4 lanes of a row keep the same running max; their partial sums are
// added at the end.
//
// Bindings: as attn_dec.comp (set 0; binding 5 unused here).
// Requirements: q_off, ldq, kv_off, ldkv multiples of 4; rows a multiple of 16.
// Grid: (n_head, rows / 16, 1). Shared memory: 24.8 KiB.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

#define ROWS 16u
#define BLK 64u

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer Step { wd_seq seq[]; };
layout(set = 0, binding = 1) uniform samplerBuffer tQ;
layout(set = 0, binding = 2) uniform samplerBuffer tK;
layout(set = 0, binding = 3) uniform samplerBuffer tV;
layout(std430, set = 0, binding = 4) writeonly buffer BufO { float o[]; };
layout(std430, set = 0, binding = 5) writeonly buffer BufS { float sv[]; };
layout(push_constant) uniform PC { wd_pc_attn p; };

shared vec4 qs[ROWS][16];      // the tile's queries, scaled
shared float ss[ROWS][BLK + 1]; // the block's scores, then weights
shared vec4 vs[BLK][17];       // the block's values (one vec4 of padding)
shared float red[64];          // per-lane maxima, then sums
shared uint nk[ROWS];          // keys of each row

const float NEG_INF = -1.0 / 0.0;

void main() {
  const uint h = gl_WorkGroupID.x, b0 = gl_WorkGroupID.y * ROWS, l = gl_LocalInvocationIndex;
  const bool cross = (p.flags & WD_ATTN_CROSS) != 0u;
  const uint row0 = (cross ? seq[b0].audio : seq[b0].slot) * p.n_ctx;
  const int ld4 = int(p.ldkv / 4u);
  const int kv4 = int((p.kv_off + row0 * p.ldkv + h * WD_ATTN_HEAD_DIM) / 4u);
  const uint r = l >> 2, qd = l & 3u; // this lane's row and quarter of dims

  // The queries: lane l loads 4 texels of row r.
  const int q4 = int((p.q_off + (b0 + r) * p.ldq + h * WD_ATTN_HEAD_DIM) / 4u);
  [[unroll]] for (uint i = 0u; i < 4u; i++)
    qs[r][qd * 4u + i] = texelFetch(tQ, q4 + int(qd * 4u + i)) * p.scale;
  if (l < ROWS) nk[l] = min(cross ? p.n_keys : seq[b0 + l].len, p.n_ctx);
  barrier();
  uint kmax = 0u;
  [[unroll]] for (uint i = 0u; i < ROWS; i++) kmax = max(kmax, nk[i]);
  const uint my_nk = nk[r];

  float m = NEG_INF, sum = 0.0;
  vec4 acc[4];
  [[unroll]] for (uint i = 0u; i < 4u; i++) acc[i] = vec4(0.0);

  for (uint blk = 0u; blk < kmax; blk += BLK) {
    // 1. scores of key j for every row; V row j into shared memory.
    const uint j = blk + l;
    if (j < kmax) {
      const int kr = kv4 + int(j) * ld4;
      vec4 k[16];
      [[unroll]] for (uint i = 0u; i < 16u; i++) k[i] = texelFetch(tK, kr + int(i));
      [[unroll]] for (uint i = 0u; i < 16u; i++) vs[l][i] = texelFetch(tV, kr + int(i));
      [[unroll]] for (uint rr = 0u; rr < ROWS; rr++) {
        float s = 0.0;
        [[unroll]] for (uint i = 0u; i < 16u; i++) s += dot(qs[rr][i], k[i]);
        ss[rr][l] = j < nk[rr] ? s : NEG_INF;
      }
    } else {
      [[unroll]] for (uint i = 0u; i < 16u; i++) vs[l][i] = vec4(0.0);
      [[unroll]] for (uint rr = 0u; rr < ROWS; rr++) ss[rr][l] = NEG_INF;
    }
    barrier();
    // 2. the row's block max over its 4 lanes, then weights in place.
    float bm = NEG_INF;
    [[unroll]] for (uint c = 0u; c < 16u; c++) bm = max(bm, ss[r][qd * 16u + c]);
    red[l] = bm;
    barrier();
    bm = max(max(red[r * 4u], red[r * 4u + 1u]), max(red[r * 4u + 2u], red[r * 4u + 3u]));
    const float mn = max(m, bm);
    if (mn != NEG_INF) { // else no key of this row so far: nothing to weigh
      const float f = exp(m - mn); // 0 while m is still -inf
      sum *= f;
      [[unroll]] for (uint i = 0u; i < 4u; i++) acc[i] *= f;
      [[unroll]] for (uint c = 0u; c < 16u; c++) {
        const float w = exp(ss[r][qd * 16u + c] - mn); // masked keys: exp(-inf) = 0
        ss[r][qd * 16u + c] = w;
        sum += w;
      }
      m = mn;
    } else {
      [[unroll]] for (uint c = 0u; c < 16u; c++) ss[r][qd * 16u + c] = 0.0;
    }
    barrier();
    // 3. the weighted values of the block.
    const uint kn = min(BLK, kmax - blk);
    for (uint c = 0u; c < kn; c++) {
      const float w = ss[r][c];
      [[unroll]] for (uint i = 0u; i < 4u; i++) acc[i] = fma(vec4(w), vs[c][qd * 4u + i], acc[i]);
    }
    barrier();
  }

  // The row's sum over its 4 lanes; zeros for a row without keys.
  red[l] = sum;
  barrier();
  const float tot = red[r * 4u] + red[r * 4u + 1u] + red[r * 4u + 2u] + red[r * 4u + 3u];
  const float inv = my_nk > 0u && tot > 0.0 ? 1.0 / tot : 0.0;
  const uint oi = p.o_off + (b0 + r) * p.ldo + h * WD_ATTN_HEAD_DIM + qd * 16u;
  [[unroll]] for (uint i = 0u; i < 4u; i++) {
    const vec4 v = acc[i] * inv;
    o[oi + i * 4u + 0u] = v.x;
    o[oi + i * 4u + 1u] = v.y;
    o[oi + i * 4u + 2u] = v.z;
    o[oi + i * 4u + 3u] = v.w;
  }
}
