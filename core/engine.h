/*
 * engine.h - what decoding needs from a Whisper forward-pass implementation.
 *
 * The decoder (core/decoder.c, driven by core/worker.c) runs the model
 * through this small table of functions, so the decoding policy knows
 * nothing of the hardware: gpu/ implements it on Vulkan with recorded
 * command buffers, cpu/ natively on the CPU (BLAS for the encoder, its own
 * batched GEMV kernels for the decoder), and the tests with the plain-C
 * reference (tests/ref). Nothing above the engines knows which runs.
 * Sequences (beams, concurrent requests) are numbered slots with
 * their own KV cache; audio slots hold one encoded 30 s window each, and
 * several sequences may attend to the same audio slot.
 *
 * All calls come from one thread (the worker that owns the engine).
 */
#ifndef WD_ENGINE_H
#define WD_ENGINE_H

#include <stdint.h>

/* The most sequence slots (and so rows per step) the worker uses: the
 * ceiling of --max-batch, the size of the worker's per-step tables and of
 * the occupancy histogram. The Vulkan engine has exactly this many slots at
 * most (its slot bitmasks are 16 bits); the CPU engine takes more
 * (WD_CPU_MAX_SEQS), for benchmarks that drive it directly. */
#define WD_ENGINE_MAX_SEQS 16

typedef struct {
  void *self;
  int n_vocab;
  int n_mels;
  int n_text_ctx;  /* 448: positions per sequence */
  int max_seqs;    /* sequence slots, <= WD_ENGINE_MAX_SEQS where a worker drives it */
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

  /* ---- optional (NULL / 0 when an engine lacks them; decoding falls back
   * to what step() can do) ---- */

  /* Most tokens one prefill() or align() takes (>= 256 when non-zero: a
   * prompt is at most <|startofprev|> + 223 tokens + SOT sequence, an
   * alignment at most SOT sequence + <|notimestamps|> + 224 + EOT). */
  int max_prefill;

  /* Appends tokens[0..n) (1 <= n <= max_prefill) to slot s in one submit,
   * as n step() calls would (each token attends causally to everything
   * before it), and sets *ret_logits to the n_vocab logits after the last
   * token, valid until the next call. Used for the prompt and SOT sequence
   * of each window: one submit instead of up to 227 steps. The logits may
   * differ from n step() calls in the last bits (other kernels), but equal
   * inputs always give equal outputs. */
  int (*prefill)(void *self, int s, int n, const int32_t *tokens, const float **ret_logits);

  /* For i in 0..n: slot dst[i] becomes a copy of what slot src[i] held
   * before the call (its cached keys and values, its length, its audio
   * slot). dst[] are distinct; a slot may be both a source and a
   * destination (a beam reorder: dst {0,1} src {1,0} swaps two beams);
   * dst[i] == src[i] leaves slot dst[i] as it is. No host round trip of the
   * caches. A copy then continues exactly as its source would have. */
  int (*seq_copy)(void *self, int n, const int *dst, const int *src);

  /* Word alignment (openai timing.py find_alignment): runs tokens[0..n)
   * (n <= max_prefill) as a fresh sequence over audio slot a, without
   * touching any sequence slot, and writes
   *   qk[h][i][t]  (n_heads, n, n_audio_ctx): the cross-attention scores
   *                q.k / sqrt(d_head), before softmax, of alignment head h
   *                (layer heads[h][0], head heads[h][1]) for token i and
   *                audio position t;
   *   probs[i]     (n - 1): softmax over ids [0, n_text) of the logits
   *                after token i, taken at tokens[i + 1] (0 when
   *                tokens[i + 1] >= n_text); n_text is the EOT id, as
   *                openai's logits[:, :eot].softmax().
   * WD_EINVAL for a head out of range or n too large. */
  int (*align)(void *self, int a, int n, const int32_t *tokens, int n_text, int n_heads,
               const int (*heads)[2], float *qk, float *probs);
  int n_audio_ctx; /* 1500 */

  /* After any operation returned WD_EDEVLOST (the device was lost or hung:
   * every slot's state is gone), rebuilds whatever the engine runs on (the
   * Vulkan engine: a new device, the weights uploaded again, pipelines and
   * recordings made again) in place: self stays valid, every sequence and
   * audio slot is empty. Until it succeeds, every operation returns
   * WD_EDEVLOST; it may be called again after a failure. Optional: an engine
   * that cannot lose its device leaves it NULL. */
  int (*reset)(void *self);

  /* 1 when the engine's calls run on a device and leave the host's cores
   * idle while the worker waits for them (a GPU): the worker then makes
   * each job's next log-mel window on a thread of its own meanwhile
   * (win_ahead.h). 0 when they run on the host's cores (the CPU engine, a
   * CPU driver such as lavapipe), which that thread would only slow. */
  int device_offload;
} wd_engine_t;

#endif
