// common.glsl - push-constant blocks and helpers shared by the kernels.
//
// Every push-constant struct here is mirrored by a C struct in gpu/vk_push.h
// with _Static_assert checks on size and offsets; change both together.
#ifndef WD_COMMON_GLSL
#define WD_COMMON_GLSL

// GEMM / batched GEMM: C[z][m][n] = alpha * sum_k A[z][m][k] * B[z][n][k]
//                                  (+ bias[z][n]) (then GELU) (+ C_old)
// All matrices are row-major with K contiguous (the ggml / PyTorch Linear
// layout: B is the weight, one output feature per row). Offsets and leading
// dimensions are in elements; texel kernels need them to be multiples of 4.
struct wd_pc_gemm {
  uint M, N, K;
  uint lda, ldb, ldc;
  uint a_off, b_off, c_off, bias_off;
  uint a_bz, b_bz, c_bz, bias_bz; // strides between batch entries (z)
  uint flags;                     // WD_GEMM_* below; selects the pipeline variant (EPI)
  float alpha;
};
#define WD_GEMM_BIAS 1u        // add bias[n]
#define WD_GEMM_GELU 2u        // apply GELU after the bias
#define WD_GEMM_ACCUMULATE 4u  // add the old value of C (residual connection)

// The encoder's fused self-attention (attn_cm.comp): Q, K, V and O are
// (n, ld) rows from their offsets, one head's 64 columns per workgroup.
struct wd_pc_attn_enc {
  uint n, ld;
  uint q_off, k_off, v_off, o_off;
  float scale;
  uint pad;
};

// erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7); GLSL has no erf().
float wd_erf(float x) {
  float s = sign(x);
  x = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * x);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t
                    - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return s * y;
}

// Exact (erf) GELU, as torch.nn.GELU() in Whisper's MLP blocks.
float wd_gelu(float x) { return 0.5 * x * (1.0 + wd_erf(x * 0.70710678118654752)); }


// ---------------------------------------------------------------------------
// Decoder-step kernels. Values that change between replays of one recorded
// step (token, position, cache length, audio index, KV slot, beam source) are
// NOT push constants: they are read from the step-parameter buffer, a
// host-visible storage buffer of one wd_seq record per batch row b (mirrored
// by wd_seq_t in gpu/vk_push.h). The host rewrites it before each submit.
// Batch row b (its activations, its logits row) and its KV cache are separate:
// row b reads and writes the cache of sequence slot seq[b].slot, so a
// sequence keeps its slot while others join and leave the batch around it.
struct wd_seq {
  uint token; // token id fed at this step
  uint pos;   // position of that token (row of the KV cache it is written to)
  uint len;   // number of valid KV-cache rows after this step's append (pos + 1)
  uint audio; // index of this sequence's encoder output (cross-attention K/V)
  uint src;   // beam gather: the slot whose cache rows slot `slot` inherits
  uint slot;  // the sequence slot whose self-attention KV cache row b uses
  uint pad1, pad2;
};

// LayerNorm over rows: y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta.
struct wd_pc_norm {
  uint n_rows, d;
  uint x_off, ldx; // x[r][i] = x[x_off + r * ldx + i]
  uint y_off, ldy;
  float eps;
  uint pad;
};

// Batched GEMV (skinny GEMM): Y[b][n] = alpha * W[n] . X[b] (+bias[n]) (GELU)
// (+ Y_old[b][n]), b < nb. W f16 (N, K) texels, X f32 (nb, ldx) texels.
struct wd_pc_gemv {
  uint N, K, nb;
  uint x_off, ldx;        // elements; multiples of 4
  uint w_off;             // elements; multiple of 4 (row n starts at w_off + n * K)
  uint y_off, ldy;
  uint bias_off, flags;   // WD_GEMM_* flags (BIAS, GELU, ACCUMULATE)
  float alpha;
  uint pad;
};

// Decoder attention for one step, one workgroup per (sequence b, head h).
struct wd_pc_attn {
  uint n_head;
  uint n_ctx;    // rows per slot (self) or per audio (cross) in K/V
  uint n_keys;   // cross: keys per audio (1500); self: ignored (len[b] is used)
  uint flags;    // WD_ATTN_* below
  uint q_off, ldq;   // q[b][h*64 + i] = Q[q_off + b * ldq + h * 64 + i]
  uint kv_off, ldkv; // K[r][i] = K[kv_off + r * ldkv + i], same for V
  uint o_off, ldo;
  uint save_heads;   // bit h set: save QK or P of head h (WD_ATTN_SAVE_*)
  uint save_off, save_ld; // S[save_off + (b * n_head + h) * save_ld + j]
  float scale;       // 1/sqrt(64): openai scales q and k by 64^-0.25 each
  uint n_split;      // attn_dec_*_split: key chunks per (b, h) (grid z), partials in S
  uint pad1;
};
#define WD_ATTN_CROSS 1u   // keys of audio a[b], n_keys of them; else self: len[b] keys of slot[b]
#define WD_ATTN_SAVE_QK 2u // save scaled pre-softmax scores of the heads in save_heads
#define WD_ATTN_SAVE_P 4u  // save the softmax weights instead
#define WD_ATTN_PART 68u   // floats of one split chunk's partial: m, sum, 2 unused, 64 sums
#define WD_ATTN_HEAD_DIM 64u

// KV-cache append and beam gather.
struct wd_pc_kv {
  uint d;          // row length (d_model)
  uint n_ctx;      // cache rows per sequence
  uint in_off, ldi;        // append: new rows come from IN[in_off + b * ldi + i]
  uint cache_off;          // element offset of this layer's (slots, n_ctx, d) cache
  uint layer_stride;       // gather: elements between layers (grid z = layer)
  uint v_in_off;           // append: V rows come from IN[v_in_off + b * ldi + i]
  uint pad;
};

// Token + positional embedding: X[b] = tok[token[b]] + pos[pos[b]].
struct wd_pc_embed {
  uint d, ldx, x_off, n_vocab;
  uint n_pos, pad0, pad1, pad2;
};

// im2col for conv1d with kernel 3, padding 1: OUT[t][c*3 + k] = IN(c, t*stride + k - 1).
struct wd_pc_im2col {
  uint cin, t_in, t_out, stride;
  uint in_off, in_cs, in_ts; // IN(c, t) = IN[in_off + c * in_cs + t * in_ts]
  uint ldo;                  // output row stride (>= cin * 3)
};

// Row softmax in place over (Z, M, N): x = softmax(scale * x (masked)).
struct wd_pc_softmax {
  uint M, N, ld, off, z_stride;
  uint flags;       // WD_SOFTMAX_CAUSAL: column j > row i + causal_off is masked
  uint causal_off;
  float scale;
};
#define WD_SOFTMAX_CAUSAL 1u

// Batched transpose: OUT[z][c][r] = IN[z][r][c] for r < R, c < C.
struct wd_pc_transpose {
  uint R, C;
  uint in_off, ldi, in_bz;
  uint out_off, ldo, out_bz;
};

// Argmax over logits rows with an additive mask.
struct wd_pc_argmax {
  uint n_vocab, nb;
  uint off, ld;     // logits[b][v] = L[off + b * ld + v]
  uint flags;       // WD_ARGMAX_MASK: add mask[v]
  uint pad0, pad1, pad2;
};
#define WD_ARGMAX_MASK 1u

#endif
