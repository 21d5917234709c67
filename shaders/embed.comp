#version 450
// embed.comp - token + positional embedding for one decoder step.
//
// X[b][i] = tok_emb[token[b]][i] + pos_emb[pos[b]][i]
// ref: openai/whisper model.py TextDecoder.forward (token_embedding(x) +
// positional_embedding[offset : offset + n]). token[b], pos[b] come from the
// step-parameter buffer; out-of-range values are clamped (the host validates
// them; the kernel only guarantees it never reads outside the tables).
//
// Bindings (set 0):
//   0  buffer wd_seq  seq  (nb) step parameters                        read
//   1  samplerBuffer  TOK  RGBA16F texels, (n_vocab, d) f16             read
//                          (RGBA32F for f32; with WTYPE, R32UI words of quantized
//                          blocks, see wquant.glsl; then d is a multiple of 32)
//   2  samplerBuffer  POS  RGBA32F texels, (n_pos, d) f32               read
//   3  buffer vec4    X    (nb, ldx) f32 at x_off                        write
// Requirements: d, ldx, x_off multiples of 4.
//
// Workgroup: 64 invocations, one vec4 each.
// Grid: (ceil(d / 256), nb, 1).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer Step { wd_seq seq[]; };
#if defined(WTYPE) && WTYPE != 0
layout(set = 0, binding = 1) uniform usamplerBuffer tTok;
#define WD_WLOAD(i) texelFetch(tTok, (i)).x
#include "wquant.glsl"
#define TOK(t, i) wd_wfetch(int((t) * (p.d / 32u)), int(i))
#else
layout(set = 0, binding = 1) uniform samplerBuffer tTok;
#define TOK(t, i) texelFetch(tTok, int((t) * d4 + (i)))
#endif
layout(set = 0, binding = 2) uniform samplerBuffer tPos;
layout(std430, set = 0, binding = 3) writeonly buffer BufX { vec4 x4[]; };
layout(push_constant) uniform PC { wd_pc_embed p; };

void main() {
  const uint i = gl_GlobalInvocationID.x, b = gl_WorkGroupID.y;
  const uint d4 = p.d / 4u;
  if (i >= d4) return;
  const uint tok = min(seq[b].token, p.n_vocab - 1u), pos = min(seq[b].pos, p.n_pos - 1u);
  x4[(p.x_off + b * p.ldx) / 4u + i] =
      TOK(tok, i) + texelFetch(tPos, int(pos * d4 + i));
}
