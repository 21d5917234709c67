/*
 * vk_engine.h - the Whisper forward pass on Vulkan, planned once.
 *
 * wd_vk_engine_new() does all the work that does not depend on a job: it
 * uploads the weights, builds every pipeline, allocates every activation
 * buffer for the configured maxima (max_seqs sequences, max_audio encoded
 * windows), creates the descriptor sets and records the command buffers:
 * one for the encoder, one per audio slot for the cross-attention K/V of all
 * decoder layers, one decoder step per batch size. A job then only writes
 * inputs into host-visible buffers and submits recordings: it allocates
 * nothing on the device.
 *
 * It also implements engine.h's optional operations (vk_engine_rows.c):
 * prefill (max_prefill = 256 tokens into one slot in one submit: the step
 * recordings up to max_seqs tokens, GEMM recordings of 16 .. 256 rows
 * above), seq_copy (any permutation of slots, through a one-layer scratch)
 * and align (alignment-head scores and token probabilities of a scratch
 * sequence). They add, beyond the step's buffers: decoder rows for 256
 * tokens, the cross-attention queries of one prefill (n_text_layer, 256, d),
 * two scratch caches of max((max_seqs, n_text_ctx, d), (n_text_layer, 256,
 * d)) cache elements, 6 MiB of align readback and a 32-row logits chunk.
 *
 * Memory is planned before anything is allocated (vk_plan.h), against the
 * device's limits: the caches are bound per decoder layer, split over
 * allocations where needed, and a batch that does not fit the heap is
 * refused (WD_ENOMEM) with the largest one that would in err. A binding
 * over a limit is WD_ERANGE.
 *
 * The engine implements core/engine.h for the decoding policy. Decoder batch
 * rows map to sequence slots indirectly: step(n, seqs, ...) takes any n
 * distinct slots in any order, and row i (its activations and its logits)
 * uses the self-attention KV cache of slot seqs[i] (wd_seq_t.slot in the
 * step-parameter buffer). Jobs join and leave the batch without moving any
 * cache; beams reorder theirs with the KV gather kernel. A row's logits do
 * not depend on n or on its row index (tests/gpu/test_engine.c checks this
 * bit for bit), so a job decodes the same alone or batched.
 *
 * Threading: one thread (the GPU worker) owns the engine and every object in
 * it.
 */
#ifndef WD_VK_ENGINE_H
#define WD_VK_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"
#include "model.h"
#include "vk_gemm.h"
#include "vk_limits.h"

typedef struct wd_vk_engine wd_vk_engine_t;

/* KV caches and cross K/V: f16 halves their memory (large-v3 at 16
 * sequences and 16 windows: 4.9 GiB instead of 9.5) and the bandwidth the
 * attention reads; written with round-to-nearest-even, read through RGBA16F
 * texel views (which every device that runs the f16 weights has). But it
 * moves the logits: against the f32 reference, tiny.en's step logits
 * differ by 2e-4 of the largest (f32 caches: 1e-5), base's by up to 1.2e-3,
 * and base's translation of a German clip changes its first token. So AUTO
 * keeps f32 caches whenever they fit the device's heap at the configured
 * batch and takes f16 only when that is what makes the batch fit (logged).
 * F32 or F16 decide (tests, comparisons; the daemon's --vk-kv). */
typedef enum {
  WD_VK_KV_AUTO = 0,
  WD_VK_KV_F32 = 1,
  WD_VK_KV_F16 = 2,
} wd_vk_kv_type_t;

typedef struct {
  int device;        /* Vulkan device index, -1 for the best */
  bool validation;
  int max_seqs;      /* decoder batch rows (>= 1, <= 16) */
  int max_audio;     /* encoded windows held at once (>= 1) */
  bool profile;      /* timestamp every operation (benchmarks; costs a little; nothing
                      * is reported on a queue without timestamps) */
  unsigned timeout_ms; /* longest GPU wait before the device is taken for lost (a
                        * hang); 0 = WD_VK_TIMEOUT_DEFAULT_NS */
  /* Plan as if the device were this small (tests, --vk-limits; see
   * gpu/vk_limits.h). NULL for the device's own. */
  const wd_vk_limits_t *limits;
  bool force_staging; /* wd_vk_device_opts_t's (tests) */
  wd_vk_kv_type_t kv; /* element type of the KV caches and cross K/V */
  wd_vk_gemm_family_t gemm; /* the encoder's GEMM kernel; AUTO picks by device
                             * class (vk_gemm.h); others: tests, comparisons */
  bool exact;               /* AUTO keeps f32 GEMM inputs even where the device has
                             * matrix units (--vk-precision f32) */
  wd_vk_cm_want_t matrix;   /* wd_vk_device_opts_t's (tests: the KHR kernels, or
                             * lavapipe's 8x8x8 ones, with --vk-matrix khr) */
  bool attn_fused;          /* the encoder's attention fused on the matrix units
                             * (vk_attn_enc.h) where the attention products run on
                             * them; off by default until it has run on a GPU
                             * (bench_engine vk:fused, the bundle's attn step) */
} wd_vk_engine_opts_t;

/* Builds the engine for model m. m must outlive the engine: after a lost
 * device, reset() (core/engine.h) uploads its weights again. err gets a
 * message on failure.
 * WD_EUNSUP for a model the kernels cannot run: a shape other than heads of
 * 64 over 1500 audio positions, or weights that are not f16 (an all-f32 or
 * quantized ggml file), with err naming the first offending tensor and its
 * type; this is checked before any device is opened. */
int wd_vk_engine_new(const wd_model_t *m, const wd_vk_engine_opts_t *opts,
                     wd_vk_engine_t **ret_engine, char *err, size_t err_len);
void wd_vk_engine_free(wd_vk_engine_t *e); /* accepts NULL */

/* The decoding-policy view of the engine (valid while e lives). */
const wd_engine_t *wd_vk_engine_iface(wd_vk_engine_t *e);

typedef struct {
  double encode_ms;        /* last encoder submit, GPU time */
  double cross_ms;         /* last cross-K/V submit */
  double step_ms;          /* last decoder step */
  double prefill_ms;       /* last prefill */
  double align_ms;         /* last align, both submits */
  double copy_ms;          /* last seq_copy that copied anything */
  unsigned step_dispatches;
  unsigned encode_dispatches;
  unsigned long long n_steps;
  double device_mib;       /* weights + activations */
  const char *device_name;
  const char *gemm;        /* the GEMM kernel family of the Linear layers (wd_vk_gemm_family_name) */
  const char *gemm_attn;   /* ... of the encoder's attention products */
  const char *gemm_rows;   /* ... of the prefill's Linear layers */
  unsigned desc_pools;     /* descriptor pools chained so far (1 unless one filled) */
} wd_vk_engine_stats_t;

void wd_vk_engine_stats(const wd_vk_engine_t *e, wd_vk_engine_stats_t *ret);

/* Per-operation GPU time of the last encoder run (which = 0), the last
 * decoder step of batch size 1 (which = 1) or the last prefill of the
 * largest bucket (which = 2, 129..256 tokens), summed by kind ("gemm-qk",
 * "gemv", "attn-cross", ...), when the engine was built with profile. */
typedef struct {
  const char *kind;
  double ms;
  unsigned count;
} wd_vk_prof_row_t;

int wd_vk_engine_profile(wd_vk_engine_t *e, int which, wd_vk_prof_row_t *rows, int max_rows,
                         int *ret_n);

/* The encoder output of audio slot a after encode(): (n_audio_ctx, d), copied to out. */
int wd_vk_engine_read_encoded(wd_vk_engine_t *e, float *out);

#endif
