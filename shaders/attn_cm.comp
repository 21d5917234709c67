#version 450
// attn_cm.comp - the encoder's self-attention on the matrix units, 64
// queries of one head per workgroup, the n x n score matrix never written:
//   O[i, h] = softmax_j(scale * Q[i, h] . K[j, h]) . V[j, h]
// Q, K and V are (n, ld) f32 rows, head h their columns h*64 .. h*64+63
// (the encoder's q, k and v buffers); O likewise.
//
// Why: the unfused path writes the scores of every head (20 x 1500 x 1500
// f32 at the large shapes, 180 MB per layer), reads them back for the
// softmax and again for P.V: on an H200 Q.K^T, softmax and P.V took 14.1 of
// the encoder's 41.2 ms per window, mostly memory traffic (2026-11-28).
//
// Two passes over the keys, KB (32) at a time (K and V blocks staged in shared
// memory as f16): the first finds each row's maximum m and sum l of
// exp(s - m); the second recomputes the scores, writes P = exp(s - m) as
// f16 to shared memory and accumulates P . V in f32 matrix accumulators,
// divided by l when stored. Two passes cost one more Q.K^T on the matrix
// units and spare the rescaling of the accumulators an online softmax
// needs (their elements' rows are not addressable).
// Workgroup: 4 subgroups of SG invocations, subgroup g owning queries
// g*16 .. g*16+15 of the block, in CM x CM fragments (coopmat.glsl: 16 and
// 32 on GPUs; 8 and 8 for lavapipe, with KB = 16 to fit its 32 KiB). In
// the softmax, with SG >= 16, LPR = SG / 16 invocations share a row, each
// over KB / LPR keys of the block, combined by shuffles; with SG < 16 an
// invocation takes 16 / SG whole rows.
// Numerics: Q (scaled by `scale` first: 1/8, exact), K, V and P rounded to
// f16, scores, softmax statistics and sums in f32.
// Grid: (ceil(n / 64), n_head). Requirements: ld and the offsets multiples
// of 4, head dimension 64.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#extension GL_KHR_shader_subgroup_shuffle : require
#include "coopmat.glsl"
#include "common.glsl"

#define QB 64u   // queries per workgroup
#ifndef KB
#define KB 32u   // keys per block
#endif
#define DH 64u   // head dimension
#define NT (4u * SG)  // invocations (4 subgroups)
#define RF (16u / CM) // fragments down a subgroup's 16 rows
#define KF (KB / CM)  // ... across a key block
#define DF (DH / CM)  // ... across the head dimension
#define LPR (SG >= 16u ? SG / 16u : 1u) // invocations per softmax row
#define RPL (SG >= 16u ? 1u : 16u / SG) // softmax rows per invocation
#define CPL (KB / LPR)                  // keys per invocation and row
#define LQ (DH + 8u)  // f16 row stride of Q, K, V tiles (144 bytes)
#define LS (KB + 4u)  // f32 row stride of a subgroup's scores
#define LP (KB + 8u)  // f16 row stride of a subgroup's P

layout(local_size_x = NT, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer BufQ { vec4 q4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufK { vec4 k4[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufV { vec4 v4[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufO { float o[]; };
layout(push_constant) uniform PC { wd_pc_attn_enc p; };

shared float16_t sQ[QB * LQ];
shared float16_t sK[KB * LQ];
shared float16_t sV[KB * LQ];
shared float sS[4][16 * LS];
shared float16_t sP[4][16 * LP];
shared float sL[4][16];

// Rows r0 .. r0 + rows - 1 (clamped to n - 1) of columns base .. base + 63
// of a (n, ld) buffer into an f16 tile of stride LQ, times mul.
#define STAGE(dst, src, rows, off, r0, mul)                                      \
  [[unroll]] for (uint i = 0; i < rows * (DH / 4u) / NT; i++) {                \
    const uint idx = tid + NT * i, r = idx / (DH / 4u), c = (idx % (DH / 4u)) * 4u; \
    const uint row = min(r0 + r, p.n - 1u);                                     \
    const f16vec4 v = f16vec4(src[(off + row * p.ld + base + c) / 4u] * mul);   \
    [[unroll]] for (uint j = 0; j < 4u; j++) dst[r * LQ + c + j] = v[j];       \
  }

// This subgroup's 16 x KB scores of the staged key block into sS[sg].
void scores(const uint sg) {
  CM_C acc[RF][KF];
  [[unroll]] for (uint i = 0; i < RF; i++)
    [[unroll]] for (uint j = 0; j < KF; j++) acc[i][j] = CM_C(0.0);
  [[unroll]] for (uint kk = 0; kk < DH; kk += CM) {
    CM_A a[RF];
    [[unroll]] for (uint i = 0; i < RF; i++)
      CM_LOAD_ROWS(a[i], sQ, (sg * 16u + i * CM) * LQ + kk, LQ);
    [[unroll]] for (uint j = 0; j < KF; j++) {
      CM_B b; // K^T: element (dim, key) at key * LQ + dim
      CM_LOAD_COLS(b, sK, j * CM * LQ + kk, LQ);
      [[unroll]] for (uint i = 0; i < RF; i++) acc[i][j] = CM_MAD(a[i], b, acc[i][j]);
    }
  }
  [[unroll]] for (uint i = 0; i < RF; i++)
    [[unroll]] for (uint j = 0; j < KF; j++) CM_STORE_ROWS(acc[i][j], sS[sg], i * CM * LS + j * CM, LS);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

// The combination over the LPR invocations of a row (neighbours).
float row_max(float v) {
  [[unroll]] for (uint o = 1u; o < LPR; o <<= 1) v = max(v, subgroupShuffleXor(v, o));
  return v;
}
float row_sum(float v) {
  [[unroll]] for (uint o = 1u; o < LPR; o <<= 1) v += subgroupShuffleXor(v, o);
  return v;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint q0 = gl_WorkGroupID.x * QB, base = gl_WorkGroupID.y * DH;
  // The softmax's share: rows row0 + q * SG (q < RPL), keys c0 .. c0 + CPL.
  const uint row0 = SG >= 16u ? lane / LPR : lane, c0 = (lane % LPR) * CPL;
  const float NEG = -3.0e38;

  STAGE(sQ, q4, QB, p.q_off, q0, p.scale)

  // Pass 1: each row's maximum and sum of exponentials.
  float m[RPL], l[RPL];
  [[unroll]] for (uint q = 0; q < RPL; q++) m[q] = NEG, l[q] = 0.0;
  for (uint k0 = 0; k0 < p.n; k0 += KB) {
    barrier(); // the previous block's K is read by every subgroup
    STAGE(sK, k4, KB, p.k_off, k0, 1.0)
    barrier();
    scores(sg);
    [[unroll]] for (uint q = 0; q < RPL; q++) {
      const uint row = row0 + q * SG;
      float mx = NEG;
      [[unroll]] for (uint c = 0; c < CPL; c++)
        if (k0 + c0 + c < p.n) mx = max(mx, sS[sg][row * LS + c0 + c]);
      const float mn = max(m[q], row_max(mx));
      float part = 0.0;
      [[unroll]] for (uint c = 0; c < CPL; c++)
        if (k0 + c0 + c < p.n) part += exp(sS[sg][row * LS + c0 + c] - mn);
      l[q] = l[q] * exp(m[q] - mn) + row_sum(part);
      m[q] = mn;
    }
    subgroupBarrier(); // sS[sg] is rewritten by the next block's scores
  }
  [[unroll]] for (uint q = 0; q < RPL; q++)
    if (c0 == 0u) sL[sg][row0 + q * SG] = l[q];

  // Pass 2: P = exp(s - m) and O += P . V.
  CM_C acc[RF][DF];
  [[unroll]] for (uint i = 0; i < RF; i++)
    [[unroll]] for (uint j = 0; j < DF; j++) acc[i][j] = CM_C(0.0);
  for (uint k0 = 0; k0 < p.n; k0 += KB) {
    barrier();
    STAGE(sK, k4, KB, p.k_off, k0, 1.0)
    STAGE(sV, v4, KB, p.v_off, k0, 1.0)
    barrier();
    scores(sg);
    [[unroll]] for (uint q = 0; q < RPL; q++) {
      const uint row = row0 + q * SG;
      [[unroll]] for (uint c = 0; c < CPL; c++) {
        const float s = sS[sg][row * LS + c0 + c];
        sP[sg][row * LP + c0 + c] = float16_t(k0 + c0 + c < p.n ? exp(s - m[q]) : 0.0);
      }
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint kk = 0; kk < KB; kk += CM) {
      CM_A a[RF];
      [[unroll]] for (uint i = 0; i < RF; i++) CM_LOAD_ROWS(a[i], sP[sg], i * CM * LP + kk, LP);
      [[unroll]] for (uint j = 0; j < DF; j++) {
        CM_B b; // V: element (key, dim) at key * LQ + dim
        CM_LOAD_ROWS(b, sV, kk * LQ + j * CM, LQ);
        [[unroll]] for (uint i = 0; i < RF; i++) acc[i][j] = CM_MAD(a[i], b, acc[i][j]);
      }
    }
    subgroupBarrier();
  }

  // Out through this subgroup's scores scratch, one fragment at a time.
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  [[unroll]] for (uint i = 0; i < RF; i++) {
    [[unroll]] for (uint j = 0; j < DF; j++) {
      CM_STORE_ROWS(acc[i][j], sS[sg], 0, LS);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[dont_unroll]] for (uint e = 0; e < CM * CM / SG; e++) {
        const uint idx = lane + SG * e, r = i * CM + idx / CM, c = idx % CM;
        const uint qi = q0 + sg * 16u + r;
        if (qi < p.n) o[p.o_off + qi * p.ld + base + j * CM + c] = sS[sg][(idx / CM) * LS + c] / sL[sg][r];
      }
      subgroupBarrier();
    }
  }
}
