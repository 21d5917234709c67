#version 450
// gemm_cm.comp - the GEMM of gemm_rb.comp (same operation, push constants,
// bindings and epilogue) on the GPU's matrix units through cooperative
// matrices: f16 inputs, f32 accumulation.
//
// Why: an H200 runs fp32 FMA at ~67 TFLOP/s and f16 matrix products at
// ~990; gemm_rb reached 29 TFLOP/s on the encoder's Linear layers. Here A
// (f32 activations) is rounded to f16 as it is staged in shared memory, B
// (f16 weights as stored; quantized blocks and f32 are converted the same
// way) is staged as is, and every 16 x 16 x 16 product runs on the matrix
// units with f32 accumulators. The rounding of A is the only numerical
// difference from the f32 families (--vk-precision f32 keeps those).
//
// Extensions: GL_NV_cooperative_matrix (Debian 12's glslang compiles it;
// NVIDIA drivers from Turing on) by default; WD_CM_KHR=1 selects
// GL_KHR_cooperative_matrix (needs glslang >= 13; NVIDIA, AMD RDNA3, Intel
// Arc); coopmat.glsl holds the types and calls of both.
//
// Tile: BM x BN outputs per workgroup, BK = 32 per K-slice, SGM x SGN
// subgroups of SG invocations, each owning a (BM / SGM) x (BN / SGN) block
// of CM x CM accumulators (TM x TN of them; coopmat.glsl: CM 16, SG 32). Shared tiles are row-major
// with K contiguous (sA[m][k], sB[n][k]: B is then read column-major as the
// K x N operand), padded by 8 halves per row against bank conflicts, and
// double-buffered: the next slice's global loads are in flight while the
// current slice is multiplied, one barrier per slice (as gemm_rb).
// Candidates, not yet timed on a GPU, that test whether the kernel waits
// on global memory (between barriers each of a 128 x 128 tile's 8
// subgroups issues 16 products of 16 x 16 x 16, by my estimate a few
// hundred cycles on an H200, less than a load from L2 or memory may take):
// DEFER=1 (families cm-*-dl) keeps the loaded words unconverted until they
// are stored, so the products of the current slice run while the loads
// are in flight; PF=2 (cm-*-pf2, DEFER too) also issues them two slices
// ahead, in a second register set.
// Measured on an H200 (bench_gemm, 2026-11-28): ~90-100 TFLOP/s on the
// large-v3-turbo encoder's shapes in 128 x 128 tiles, against rb-64x64's
// 14-30 and cuBLAS's 590-665 in fp16 on the same GPU. Storing the staged
// quads as packed words (one 64-bit store, loads reinterpreting uvec2) made
// 64 x 64 tiles up to 30 % faster and 128 x 128 ones no faster.
// Epilogue: each subgroup stores one accumulator at a time to its own
// CM x CM f32 scratch in shared memory, then its SG invocations apply
// alpha, bias, GELU and the residual and write C, bounds-checked.
// Grid: (ceil(N / BN), ceil(M / BM), Z). Requirements: as gemm_rb (K, lda,
// ldb and the offsets multiples of 4; with WTYPE, multiples of 32).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#include "coopmat.glsl"
#include "common.glsl"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef SGM
#define SGM 2
#endif
#ifndef SGN
#define SGN 4
#endif
#define BK 32
#ifndef PF
#define PF 1
#endif
#define NT (SGM * SGN * SG)
#define TM (BM / SGM / CM)        // accumulators per subgroup, down
#define TN (BN / SGN / CM)        // and across
#define LDS (BK + 8)              // shared row stride in halves (80 bytes)
// vec4 loads per invocation per K-slice: A is BM x BK, B is BN x BK.
#define LA (BM * BK / 4 / NT)
#define LB (BN * BK / 4 / NT)

layout(local_size_x = NT, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer BufA { vec4 a4[]; };
#if defined(WTYPE) && WTYPE != 0
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint bq[]; };
#define WD_WLOAD(i) bq[i]
#include "wquant.glsl"
#elif defined(B_F32)
layout(std430, set = 0, binding = 1) readonly buffer BufB { vec4 b4[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer BufB { uvec2 b4[]; };
#endif
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, set = 0, binding = 3) buffer BufC { float c[]; };
layout(push_constant) uniform PC { wd_pc_gemm p; };
layout(constant_id = 0) const uint EPI = 0u;

shared float16_t sA[2][BM * LDS];
shared float16_t sB[2][BN * LDS];
shared float sC[SGM * SGN][CM * CM];

// Register sets for the slices in flight: set 0 is ra, rb; with PF=2 set 1
// is ra2, rb2. The set is a constant at every call, so the choice folds.
// With DEFER=1 the sets hold the words as loaded (A's f32 quads, B's f16
// pairs or f32 quads), converted and bounds-masked only when stored: a
// conversion next to its load makes the invocation wait for that load
// before the products of the current slice, which no prefetch depth hides.
// DEFER=0 converts at the load (the measured baseline; every B type).
#ifndef DEFER
#define DEFER 0
#endif
#if DEFER != 0
#if defined(WTYPE) && WTYPE != 0
#error "gemm_cm.comp: DEFER=1 is built for f16 and f32 B only"
#endif
#define RA_T vec4
#if defined(B_F32)
#define RB_T vec4
#else
#define RB_T uvec2
#endif
#else
#define RA_T f16vec4
#define RB_T f16vec4
#endif
RA_T ra[LA];
RB_T rb[LB];
#if PF == 2
RA_T ra2[LA];
RB_T rb2[LB];
#define SET_A(set, i) ((set) != 0u ? ra2[i] : ra[i])
#define SET_B(set, i) ((set) != 0u ? rb2[i] : rb[i])
#define PUT_A(set, i, v) if ((set) != 0u) ra2[i] = (v); else ra[i] = (v)
#define PUT_B(set, i, v) if ((set) != 0u) rb2[i] = (v); else rb[i] = (v)
#else
#define SET_A(set, i) ra[i]
#define SET_B(set, i) rb[i]
#define PUT_A(set, i, v) ra[i] = (v)
#define PUT_B(set, i, v) rb[i] = (v)
#endif

// Global -> registers, as gemm_rb: vec4 number i of the slice is k-quad
// (idx % (BK / 4)) of row (idx / (BK / 4)) with idx = tid + NT * i, so
// eight neighbouring invocations read one row's 128 contiguous bytes; rows
// past M (N) repeat the last row (their outputs are never stored), k past
// K reads zeros (with DEFER: reads the row's last quad, zeroed when
// stored; K >= 4 and a multiple of 4, vk_gemm.c).
void load_slice(const uint tid, const uint z, const uint mt, const uint nt, const uint k0,
                const uint set) {
  [[unroll]] for (uint i = 0; i < LA; i++) {
    const uint idx = tid + NT * i, r = idx / (BK / 4), k = k0 + (idx % (BK / 4)) * 4u;
    const uint am = min(mt + r, p.M - 1);
#if DEFER != 0
    PUT_A(set, i, a4[(p.a_off + z * p.a_bz + am * p.lda + min(k, p.K - 4u)) / 4u]);
#else
    PUT_A(set, i, f16vec4(k < p.K ? a4[(p.a_off + z * p.a_bz + am * p.lda + k) / 4u] : vec4(0.0)));
#endif
  }
  [[unroll]] for (uint i = 0; i < LB; i++) {
    const uint idx = tid + NT * i, r = idx / (BK / 4), k = k0 + (idx % (BK / 4)) * 4u;
    const uint bn = min(nt + r, p.N - 1);
    const uint bbase = p.b_off + z * p.b_bz + bn * p.ldb;
#if DEFER != 0
    PUT_B(set, i, b4[(bbase + min(k, p.K - 4u)) / 4u]);
#else
    RB_T v = f16vec4(0.0);
    if (k < p.K) {
#if defined(WD_WQUANT)
      v = f16vec4(wd_wfetch(int(bbase / 32u), int(k / 4u)));
#elif defined(B_F32)
      v = f16vec4(b4[(bbase + k) / 4u]);
#else
      const uvec2 h = b4[(bbase + k) / 4u];
      v = f16vec4(unpackFloat2x16(h.x), unpackFloat2x16(h.y));
#endif
    }
    PUT_B(set, i, v);
#endif
  }
}

// Registers -> shared buffer s (row-major, K contiguous); k0 is the
// slice's first k (DEFER masks the quads past K with it).
void store_slice(const uint tid, const uint s, const uint set, const uint k0) {
  [[unroll]] for (uint i = 0; i < LA; i++) {
    const uint idx = tid + NT * i, o = (idx / (BK / 4)) * LDS + (idx % (BK / 4)) * 4u;
#if DEFER != 0
    const bool in_k = k0 + (idx % (BK / 4)) * 4u < p.K;
    const f16vec4 h = in_k ? f16vec4(SET_A(set, i)) : f16vec4(0.0);
    [[unroll]] for (uint j = 0; j < 4; j++) sA[s][o + j] = h[j];
#else
    [[unroll]] for (uint j = 0; j < 4; j++) sA[s][o + j] = SET_A(set, i)[j];
#endif
  }
  [[unroll]] for (uint i = 0; i < LB; i++) {
    const uint idx = tid + NT * i, o = (idx / (BK / 4)) * LDS + (idx % (BK / 4)) * 4u;
#if DEFER != 0
    const bool in_k = k0 + (idx % (BK / 4)) * 4u < p.K;
#if defined(B_F32)
    const f16vec4 w = f16vec4(SET_B(set, i));
#else
    const RB_T q = SET_B(set, i);
    const f16vec4 w = f16vec4(unpackFloat2x16(q.x), unpackFloat2x16(q.y));
#endif
    const f16vec4 h = in_k ? w : f16vec4(0.0);
    [[unroll]] for (uint j = 0; j < 4; j++) sB[s][o + j] = h[j];
#else
    [[unroll]] for (uint j = 0; j < 4; j++) sB[s][o + j] = SET_B(set, i)[j];
#endif
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint sgm = sg / SGN, sgn = sg % SGN;
  const uint z = gl_WorkGroupID.z;
  const uint mt = gl_WorkGroupID.y * BM, nt = gl_WorkGroupID.x * BN;
  // This subgroup's block of the tile: rows wm .. wm + TM*16, columns wn ...
  const uint wm = sgm * (TM * CM), wn = sgn * (TN * CM);

  CM_C acc[TM][TN];
  [[unroll]] for (uint i = 0; i < TM; i++)
    [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] = CM_C(0.0);

  // The products of the slice in shared buffer s (a macro, so that the
  // accumulators and fragments stay main's own variables).
#define MUL_SLICE(s)                                                                    \
  [[unroll]] for (uint kk = 0; kk < BK; kk += CM) {                                     \
    CM_A fa[TM];                                                                        \
    CM_B fb[TN];                                                                        \
    [[unroll]] for (uint i = 0; i < TM; i++)                                            \
      CM_LOAD_ROWS(fa[i], sA[s], (wm + i * CM) * LDS + kk, LDS);                        \
    [[unroll]] for (uint j = 0; j < TN; j++)                                            \
      CM_LOAD_COLS(fb[j], sB[s], (wn + j * CM) * LDS + kk, LDS);                        \
    [[unroll]] for (uint i = 0; i < TM; i++)                                            \
      [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] = CM_MAD(fa[i], fb[j], acc[i][j]); \
  }

  load_slice(tid, z, mt, nt, 0u, 0u);
  store_slice(tid, 0u, 0u, 0u);
  barrier();
  uint s = 0u;
#if PF == 2
  // Two slices a trip: slice k0 is in shared buffer s while ra/rb hold
  // k0 + BK and ra2/rb2 receive k0 + 2 BK; then the roles swap. Every
  // condition is uniform across the workgroup.
  if (BK < p.K)
    load_slice(tid, z, mt, nt, BK, 0u);
  for (uint k0 = 0; k0 < p.K; k0 += 2u * BK) {
    if (k0 + 2u * BK < p.K)
      load_slice(tid, z, mt, nt, k0 + 2u * BK, 1u);
    MUL_SLICE(s);
    if (k0 + BK < p.K)
      store_slice(tid, s ^ 1u, 0u, k0 + BK);
    barrier();
    s ^= 1u;
    if (k0 + BK >= p.K)
      break;
    if (k0 + 3u * BK < p.K)
      load_slice(tid, z, mt, nt, k0 + 3u * BK, 0u);
    MUL_SLICE(s);
    if (k0 + 2u * BK < p.K)
      store_slice(tid, s ^ 1u, 1u, k0 + 2u * BK);
    barrier();
    s ^= 1u;
  }
#else
  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    const bool more = k0 + BK < p.K; // uniform across the workgroup
    if (more)
      load_slice(tid, z, mt, nt, k0 + BK, 0u);
    MUL_SLICE(s);
    if (more)
      store_slice(tid, s ^ 1u, 0u, k0 + BK);
    barrier();
    s ^= 1u;
  }
#endif
#undef MUL_SLICE

  // Epilogue through this subgroup's scratch, one accumulator at a time:
  // invocation `lane` takes elements lane, lane + SG, ... of the CM x CM.
  [[unroll]] for (uint i = 0; i < TM; i++) {
    [[unroll]] for (uint j = 0; j < TN; j++) {
      CM_STORE_ROWS(acc[i][j], sC[sg], 0, CM);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[dont_unroll]] for (uint e = 0; e < CM * CM / SG; e++) {
        const uint idx = lane + SG * e;
        const uint m = mt + wm + i * CM + idx / CM, n = nt + wn + j * CM + idx % CM;
        if (m < p.M && n < p.N) {
          float v = p.alpha * sC[sg][idx];
          if ((EPI & WD_GEMM_BIAS) != 0u) v += bias[p.bias_off + z * p.bias_bz + n];
          if ((EPI & WD_GEMM_GELU) != 0u) v = wd_gelu(v);
          const uint ci = p.c_off + z * p.c_bz + m * p.ldc + n;
          if ((EPI & WD_GEMM_ACCUMULATE) != 0u) v += c[ci];
          c[ci] = v;
        }
      }
      subgroupBarrier();
    }
  }
}
