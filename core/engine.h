/*
 * engine.h - what decoding needs from a Whisper forward-pass implementation.
 *
 * core/decode drives the model through this small table of functions, so
 * the decoding policy knows nothing about Vulkan: gpu/ implements it with
 * recorded command buffers, and tests implement it with the plain-C
 * reference. Sequences (beams, concurrent requests) are numbered slots with
 * their own KV cache; audio slots hold one encoded 30 s window each, and
 * several sequences may attend to the same audio slot.
 *
 * All calls come from one thread (the worker that owns the engine).
 */
#ifndef WD_ENGINE_H
#define WD_ENGINE_H

#include <stdint.h>

typedef struct {
  void *self;
  int n_vocab;
  int n_mels;
  int n_text_ctx;  /* 448: positions per sequence */
  int max_seqs;    /* sequence slots */
  int max_audio;   /* audio slots */

  /* Encodes mel (n_mels, 3000) row-major into audio slot a and computes its
   * cross-attention K/V for every decoder layer. */
  int (*encode)(void *self, int a, const float *mel);

  /* Empties sequence slot s and attaches it to audio slot a. */
  int (*seq_reset)(void *self, int s, int a);

  /* Appends tokens[i] to sequence slot seqs[i] and runs one decoder step for
   * all of them at once. seqs holds n (1 .. max_seqs) distinct slots in any
   * order: batch row i is not tied to slot i, so sequences join and leave
   * the batch without moving their state. *ret_logits points at (n,
   * n_vocab) f32 logits, row i for seqs[i], valid until the next call.
   * WD_EINVAL for a duplicate or out-of-range slot. */
  int (*step)(void *self, int n, const int *seqs, const int32_t *tokens,
              const float **ret_logits);
} wd_engine_t;

#endif
