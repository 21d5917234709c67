// wquant.glsl - reading block-quantized weights inside the kernels.
//
// A kernel compiled with WTYPE = a ggml type id (2 q4_0, 3 q4_1, 6 q5_0,
// 7 q5_1, 8 q8_0) reads its weight operand as 32-bit words through
// WD_WLOAD(i) (word index i), which the including shader defines before
// including this file (an R32UI texel fetch in gemm_tex and embed, a
// component of an RGBA32UI texel in gemv, whose ROW mode also fetches 4
// blocks as whole texels; a uint SSBO load in gemm_tiled). Without WTYPE (or WTYPE 0) nothing is defined and
// the kernel reads f16 / f32 vec4 texels as before.
//
// Device layout (gpu/vk_wquant.c repacks ggml's blocks at upload): every
// block of 32 elements is WD_WBS consecutive words, blocks of a row back to
// back, rows back to back; a row of K elements is K / 32 blocks. ggml's 18,
// 22 and 34-byte blocks are not word-aligned, so the types without a minimum
// get 2 zero bytes after their f16 scale; q4_1 and q5_1 (20 and 24 bytes)
// are copied unchanged:
//   word 0                 f16 d (bits 0..15) | f16 m (bits 16..31; 0 for q4_0, q5_0, q8_0)
//   q5_0, q5_1: word 1     qh: bit i = fifth bit of element i
//   the quants             q4/q5: 4 words = 16 bytes, byte j = element j (low
//                          nibble) | element j + 16 (high nibble);
//                          q8_0: 8 words = 32 int8, element j in byte j
// Element values: q4_0 (q - 8) d, q4_1 q d + m, q5_0 (q - 16) d,
// q5_1 q d + m, q8_0 q d (ref: ggml dequantize_row_q*; core/quant.c).
#ifndef WD_WQUANT_GLSL
#define WD_WQUANT_GLSL

#if defined(WTYPE) && WTYPE != 0
#define WD_WQUANT 1
#if WTYPE == 2 || WTYPE == 3
#define WD_WBS 5
#define WD_WQS 1
#elif WTYPE == 6 || WTYPE == 7
#define WD_WBS 6
#define WD_WQS 2
#elif WTYPE == 8
#define WD_WBS 9
#define WD_WQS 1
#else
#error "unknown WTYPE"
#endif

// The 4 weights at elements 4k .. 4k + 3 of the row whose first block is
// blk (block index into the operand, i.e. word blk * WD_WBS).
vec4 wd_wfetch(int blk, int k) {
  const int base = (blk + (k >> 3)) * WD_WBS;
  const uint j = uint(k & 7) << 2; // element within the block, multiple of 4
  const vec2 dm = unpackHalf2x16(WD_WLOAD(base));
#if WTYPE == 8
  const int q = int(WD_WLOAD(base + WD_WQS + int(j >> 2)));
  return vec4(ivec4(q << 24, q << 16, q << 8, q) >> 24) * dm.x;
#else
  // Elements j..j+3 are the low nibbles (j < 16) or high nibbles (j >= 16)
  // of quant bytes (j % 16) .. (j % 16) + 3: one word.
  const uint w = WD_WLOAD(base + WD_WQS + int((j & 15u) >> 2)) >> ((j >> 4) << 2);
  uvec4 q = uvec4(w, w >> 8, w >> 16, w >> 24) & 0xFu;
#if WTYPE == 6 || WTYPE == 7
  const uint h = WD_WLOAD(base + 1) >> j;
  q |= (uvec4(h, h >> 1, h >> 2, h >> 3) & 1u) << 4;
#endif
#if WTYPE == 2
  return (vec4(q) - 8.0) * dm.x;
#elif WTYPE == 6
  return (vec4(q) - 16.0) * dm.x;
#else
  return vec4(q) * dm.x + dm.y;
#endif
#endif
}

// One whole block in registers: for loops that walk a row block by block
// (gemv's ROW mode), so that the scale and each quant word are loaded once
// per block instead of once per vec4: q8_0 9 loads per 32 weights, q4 5,
// q5 6 (f16 texels: 8).
#if WTYPE == 8
#define WD_WQW 8
#else
#define WD_WQW 4
#endif
struct wd_wblk {
  vec2 dm;
  uint qh;
  uint q[WD_WQW];
};

wd_wblk wd_wblk_load(int blk) {
  const int base = blk * WD_WBS;
  wd_wblk b;
  b.dm = unpackHalf2x16(WD_WLOAD(base));
#if WTYPE == 6 || WTYPE == 7
  b.qh = WD_WLOAD(base + 1);
#else
  b.qh = 0u;
#endif
  [[unroll]] for (int i = 0; i < WD_WQW; i++) b.q[i] = WD_WLOAD(base + WD_WQS + i);
  return b;
}

// Weights 4kk .. 4kk + 3 of the block (kk < 8; a constant once unrolled),
// the same values wd_wfetch gives.
vec4 wd_wblk_vec4(const wd_wblk b, const uint kk) {
#if WTYPE == 8
  const int q = int(b.q[kk]);
  return vec4(ivec4(q << 24, q << 16, q << 8, q) >> 24) * b.dm.x;
#else
  const uint w = b.q[kk & 3u] >> ((kk >> 2) << 2);
  uvec4 q = uvec4(w, w >> 8, w >> 16, w >> 24) & 0xFu;
#if WTYPE == 6 || WTYPE == 7
  const uint h = b.qh >> (kk << 2);
  q |= (uvec4(h, h >> 1, h >> 2, h >> 3) & 1u) << 4;
#endif
#if WTYPE == 2
  return (vec4(q) - 8.0) * b.dm.x;
#elif WTYPE == 6
  return (vec4(q) - 16.0) * b.dm.x;
#else
  return vec4(q) * b.dm.x + b.dm.y;
#endif
#endif
}
#endif

#endif
