/*
 * cpu_engine.h - core/engine.h on the host CPU (issue #12).
 *
 * The same discipline as the Vulkan engine: everything is planned once at
 * load (weights in the layout the kernels read, as the file stores them
 * where it can, KV caches for every sequence slot, cross K/V for every
 * audio slot, scratch for the largest batch), and no call allocates. The
 * encoder's products go through OpenBLAS sgemm on kernels picked from the
 * CPU's features (cpu_blas.h), each weight matrix widened to f32 just
 * before its product (cpu_gemm.h); the decoder step is a batched GEMV over
 * the weights as stored (f16, or quantized blocks dequantized in registers;
 * f32 for f32 files) in which each weight
 * row is read once per step for all rows, and each row's sums run in an
 * order that does not depend on the batch: a sequence gets bit-identical
 * logits alone or batched.
 *
 * Threading: all calls from one thread (the worker), as engine.h says; the
 * engine runs its own thread pool inside a call and sets OpenBLAS to the
 * same number of threads (BLAS runs only while the pool sleeps).
 */
#ifndef WD_CPU_ENGINE_H
#define WD_CPU_ENGINE_H

#include <stddef.h>

#include "engine.h"
#include "model.h"

/* The CPU engine's most sequence slots (the worker uses WD_ENGINE_MAX_SEQS
 * of them at most; benchmarks drive the engine directly with more). */
#define WD_CPU_MAX_SEQS 256

typedef struct wd_cpu_engine wd_cpu_engine_t;

/* The arithmetic of the linear layers (--compute-type, as faster-whisper's
 * compute_type; cpu_rgemm.h): f32 over the weights as stored, or weights
 * converted at load to bf16 or int8 and products in that precision. */
typedef enum { WD_CPU_COMPUTE_F32, WD_CPU_COMPUTE_BF16, WD_CPU_COMPUTE_INT8 } wd_cpu_compute_t;

typedef struct {
  int max_seqs;  /* sequence slots, 1 .. WD_CPU_MAX_SEQS */
  int max_audio; /* audio slots (>= 1) */
  int n_threads; /* 0: the online cores */
  wd_cpu_compute_t compute; /* 0: f32 */
} wd_cpu_engine_opts_t;

typedef struct {
  double encode_ms; /* last encode(): conv + transformer */
  double cross_ms;  /* last encode(): cross K/V of every decoder layer */
  double attn_ms;   /* last encode(): the self-attention of every layer (within encode_ms) */
  double step_ms;   /* mean step() time */
  unsigned long long n_steps;
  int n_threads;
  const char *kernel; /* "avx512f+avx2+fma+f16c", "avx2+fma+f16c" or "portable" */
  const char *kernel_choice; /* where the GEMV's kernels were chosen by measurement at
                              * load (now or, cached, earlier), what ran and won by
                              * batch rows; else NULL */
  const char *attn_choice;   /* the same for the encoder's attention (or what forced it) */
  const char *enc_attn;      /* the encoder attention's kernel: "blocked (AVX-512)" or
                              * "sgemm (OpenBLAS)" */
  const char *pick_source;   /* where the choices came from: "measured", "cache",
                              * "forced" or "one candidate" (cpu_pick.c) */
  const char *pick_note;     /* the whole story, with the times that decided */
  const char *gemm;   /* the encoder's GEMM path, wd_cpu_engine_gemm() (f32) */
  const char *compute;      /* "f32", "bf16" or "int8" */
  const char *compute_path; /* bf16 / int8: their kernels ("int8, AVX512-VNNI"), else NULL */
  double weight_mib;  /* the weight matrices in the kernels' layout */
  double mapped_mib;  /* of those, read in place from the model (no copy, cpu_mat.h) */
  double state_mib;   /* caches and scratch, as planned at load */
} wd_cpu_engine_stats_t;

/* The host memory wd_cpu_engine_new would take for m and o (arithmetic
 * over the tensor table, no weight converted): the weight matrices in the
 * kernels' layout (vectors, a few KiB a layer, are left out), the caches
 * and the scratch. mapped_bytes is the part of weight_bytes read in place
 * from the model's file mapping (page cache, shared between processes);
 * total_bytes counts it too. */
typedef struct {
  double weight_bytes, mapped_bytes, self_bytes, cross_bytes, scratch_bytes, total_bytes;
  int n_self_bufs; /* self-attention KV buffers: max_seqs + 2 (seq_copy's spares) */
} wd_cpu_engine_plan_t;
void wd_cpu_engine_plan(const wd_model_t *m, const wd_cpu_engine_opts_t *o,
                        wd_cpu_engine_plan_t *p);

/* WD_EMODEL for a model whose tensors the engine cannot read, WD_EINVAL for
 * bad options, WD_ENOMEM; err (may be NULL) gets one line. */
int wd_cpu_engine_new(const wd_model_t *m, const wd_cpu_engine_opts_t *o,
                      wd_cpu_engine_t **ret, char *err, size_t err_len);
void wd_cpu_engine_free(wd_cpu_engine_t *e); /* accepts NULL */
const wd_engine_t *wd_cpu_engine_iface(wd_cpu_engine_t *e);
/* The last encoder output, (n_audio_ctx, n_audio_state). */
int wd_cpu_engine_read_encoded(const wd_cpu_engine_t *e, float *out);
void wd_cpu_engine_stats(const wd_cpu_engine_t *e, wd_cpu_engine_stats_t *st);
/* The decoder kernel this host runs: "avx512f+avx2+fma+f16c", "avx2+fma+f16c"
 * or "portable". */
const char *wd_cpu_engine_kernel(void);
/* "f32", "bf16", "int8". */
const char *wd_cpu_compute_name(wd_cpu_compute_t c);
/* The reverse (NULL or "" gives f32); WD_EINVAL for another name. */
int wd_cpu_compute_parse(const char *name, wd_cpu_compute_t *ret);
/* NULL when this CPU runs c, else one line saying why not. */
const char *wd_cpu_compute_refusal(wd_cpu_compute_t c);
/* The kernels c runs on here ("int8, AVX512-VNNI"); NULL for f32. */
const char *wd_cpu_compute_path(wd_cpu_compute_t c);
/* The encoder's GEMM path and the ISA it runs, one line (cpu/cpu_blas.h):
 * "OpenBLAS 0.3.21 sgemm, SkylakeX kernels (AVX-512), picked from CPU
 * features". */
const char *wd_cpu_engine_gemm(void);
/* NULL, or a one-line warning when that path uses less of the CPU than it
 * has, saying what it costs and why. */
const char *wd_cpu_engine_gemm_warning(void);

/* What loading m with o (n_threads 0: the online cores) would do about
 * its measured kernels on this CPU (cpu_pick.c), one line into buf: one
 * candidate each (nothing to measure), forced by the environment, the
 * cached choice and when it was measured, or measured at load and where
 * it will be cached. For `whisperd info`, which loads no engine. */
void wd_cpu_engine_pick_preview(const wd_model_t *m, const wd_cpu_engine_opts_t *o, char *buf,
                                size_t len);
/* The kernel cache's directory (cpu_pick_cache.h) into buf, or a line
 * saying there is none; for `whisperd devices`. */
void wd_cpu_engine_cache_dir(char *buf, size_t len);

#endif
