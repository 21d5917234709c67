/*
 * ref_engine.h - a wd_engine_t on the plain-C reference (tests only).
 *
 * The encoder is whisper_ref.c's; the decoder runs incrementally with a KV
 * cache per sequence and cross-attention K/V computed once per audio slot,
 * exactly the structure the Vulkan engine has, in f32 with double
 * accumulation for attention. It lets the decoding policy, tokenizer, mel and
 * model loading be tested end to end without a GPU, and gives the Vulkan
 * engine per-step logits to agree with. It has engine.h's optional
 * operations too, in their plainest form: prefill is n steps, seq_copy
 * copies whole slots through a temporary, and align runs a scratch slot
 * (one beyond max_seqs) keeping the asked heads' scores in double.
 */
#ifndef WD_REF_ENGINE_H
#define WD_REF_ENGINE_H

#include "engine.h"
#include "model.h"

typedef struct wd_ref_engine wd_ref_engine_t;

int wd_ref_engine_new(const wd_model_t *m, int max_seqs, int max_audio, wd_ref_engine_t **ret);
void wd_ref_engine_free(wd_ref_engine_t *r);
const wd_engine_t *wd_ref_engine_iface(wd_ref_engine_t *r);
/* The encoder output of audio slot a: (n_audio_ctx, n_audio_state). */
const float *wd_ref_engine_encoded(const wd_ref_engine_t *r, int a);

#endif
