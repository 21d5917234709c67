/*
 * runtime.h - what `serve` and `transcribe` both run: the model, its
 * tokenizer and mel front end, and per device of --device an engine and the
 * worker that owns it, grouped (core/workers.h: one device is a group of
 * one).
 *
 * Built once at start-up from the configuration; nothing in it is per job.
 * Threading: open and close from the controlling thread; the group is then
 * used from any thread (core/workers.h).
 */
#ifndef WD_RUNTIME_H
#define WD_RUNTIME_H

#include <stddef.h>

#include "config.h"
#include "diar.h"
#include "model.h"
#include "vad.h"
#include "workers.h"

typedef struct wd_runtime wd_runtime_t;

/* The process's Silero VAD: loaded once (serve, transcribe) and lent to
 * every runtime, so several models and their SIGHUP reloads share one copy.
 * model is NULL when its file is absent and --vad was not asked for. */
typedef struct {
  wd_vad_model_t *model;
  wd_vad_params_t params;  /* --vad-* */
  int every_job;           /* --vad */
} wd_runtime_vad_t;

/* Loads cfg->vad_model (required by --vad, else only when the file is
 * there: requests' chunking_strategy) and the --vad-* parameters. */
int wd_runtime_vad_load(const wd_config_t *cfg, wd_runtime_vad_t *v, char *err, size_t err_len);
void wd_runtime_vad_free(wd_runtime_vad_t *v);

/* The process's speaker diarization (core/diar.h): both networks, loaded
 * once at start when both files are there, shared by every model (read-only
 * after loading). model is NULL when diarization is unavailable: a file
 * absent, or this build without the pipeline (WD_EUNSUP); requests that ask
 * for it are then answered 400. */
typedef struct {
  wd_diar_t *model;
  wd_diar_params_t params;
  char why[256];            /* model NULL: why, for `info` and the log */
} wd_runtime_diar_t;

/* Loads cfg->diar_seg_model and cfg->diar_emb_model when present (logged
 * either way). A present file that is not ours fails (err set), as a bad
 * --vad-model does; an absent one, or a build without the pipeline, leaves
 * model NULL and returns 0. */
int wd_runtime_diar_load(const wd_config_t *cfg, wd_runtime_diar_t *d, char *err,
                         size_t err_len);
void wd_runtime_diar_free(wd_runtime_diar_t *d);

/* Loads cfg->model, builds an engine for max_batch sequences (and as many
 * audio slots) on each device cfg->devices resolves to (logging what it
 * resolved to) and starts a worker with queue_max places on each; with
 * audio_budget set, each worker also admits jobs by their audio seconds
 * (cfg->queue_audio_s, or from the memory available: wd_worker_opts_t's
 * audio_budget_s), as serve does; transcribe passes 0. Any device that
 * fails fails the whole open. vad is borrowed (it must outlive the
 * runtime). err gets a one-line message on failure. */
int wd_runtime_open(const wd_config_t *cfg, int max_batch, int queue_max, int audio_budget,
                    const wd_runtime_vad_t *vad, wd_runtime_t **ret, char *err, size_t err_len);
/* Drains the workers (grace 0) and frees everything; NULL is allowed. */
void wd_runtime_close(wd_runtime_t *rt);

wd_workers_t *wd_runtime_workers(wd_runtime_t *rt);
const wd_tokenizer_t *wd_runtime_tokenizer(wd_runtime_t *rt);
const wd_model_t *wd_runtime_model(wd_runtime_t *rt);
/* The model's alignment heads for word timestamps (valid while rt lives). */
const int (*wd_runtime_align_heads(wd_runtime_t *rt, int *ret_n))[2];
/* The Silero VAD (NULL when its file is absent) and the --vad-*
 * parameters; *ret_default: whether every job goes through it (--vad). */
const wd_vad_model_t *wd_runtime_vad(wd_runtime_t *rt, const wd_vad_params_t **ret_params,
                                     int *ret_default);

/* The engines' devices, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)", or "cpu (2 threads,
 * avx2+fma+f16c)" for the native CPU engine; several are joined by " + ". */
const char *wd_runtime_device(wd_runtime_t *rt);

/* Runs one second of silence through each worker and waits for it: proves
 * every engine's recorded command buffers run before the daemon says it is
 * ready. On failure err names the device (when there are several) and the
 * error. */
int wd_runtime_warmup(wd_runtime_t *rt, char *err, size_t err_len);

/* Arms the fault injection of --fault-inject (WHISPERD_FAULT_INJECT), a
 * comma-separated list: "oom:N", "decode_delay:MS", "load_delay:MS" and
 * "diar_oom:N" go to core/fault.h (the Nth transcript segment stored fails
 * as out of memory; each upload's decode sleeps; each model load of serve
 * sleeps; the Nth diarization batch fails as out of memory),
 * the rest to gpu/vk_fault.h ("submit:N" fails the Nth
 * submit from now as a lost device), for the tests of the failure paths.
 * Called once the daemon is ready, so the warm-up is not counted. 0 for an
 * empty or NULL spec; WD_EINVAL for one it cannot parse. */
int wd_runtime_arm_faults(const char *spec);

#endif
