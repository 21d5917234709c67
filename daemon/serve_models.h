/*
 * serve_models.h - the models `serve` runs: --model, then each of --models
 * (at most WD_SERVER_MAX_MODELS), each a runtime of its own (model,
 * engines, workers: runtime.h) attached to the HTTP server.
 *
 * SIGHUP reload: every model whose file changed (another inode, size or
 * modification time; a directory always) is loaded again into a new runtime,
 * warmed up and swapped in (wd_server_replace); requests that picked the
 * old one finish on it, and once its last one has ended it retires: the
 * server's callback queues it, and wd_serve_models_reap (the controlling
 * thread, once a second) drains and closes it. A file that no longer loads
 * (or whose model has a name another model has) keeps the old model
 * serving.
 *
 * On demand (--models-memory, --models-idle-s): a --models slot may be
 * offered instead of loaded (its header read for its names and abilities);
 * its first request asks for it (and is parked by the server until the
 * slot changes) and wd_serve_models_tick loads it, unloading idle ones
 * least recently used first while the estimated total would pass the
 * budget; an unloaded slot is offered again. A load that fails leaves an
 * offered slot that keeps its error: its requests get 503 with it at once,
 * and it is not loaded again until its file changes (another inode, size
 * or mtime; a CTranslate2 directory's model.bin). A load refused over the
 * budget tells the server too (wd_server_model_changed), so no request
 * waits on it. --model (slot 0) is always loaded.
 *
 * Names: the first model answers to whisper-1, its own name (tiny.en,
 * base, ...) and --model-alias; each other model to its own name. No two
 * models share one: open fails where two would, and a reload or a load
 * on demand that would make a model another's namesake fails as a file
 * that does not load does.
 *
 * Threading: everything here from the controlling thread, but the retire
 * callback (any thread; it only queues, under the set's mutex).
 */
#ifndef WD_SERVE_MODELS_H
#define WD_SERVE_MODELS_H

#include <stddef.h>

#include "config.h"
#include "decode.h"
#include "server.h"
#include "worker.h"

typedef struct wd_serve_models wd_serve_models_t;

/* Loads and attaches every model; dopts: the decoding defaults (each model
 * gets a copy with its own alignment heads). On failure err says which
 * model and why; *ret is then still set when some loaded (close it). */
int wd_serve_models_open(const wd_config_t *cfg, const wd_decode_opts_t *dopts, wd_server_t *srv,
                         wd_serve_models_t **ret, char *err, size_t err_len);
/* One second of silence through each model's workers (runtime.h). */
int wd_serve_models_warmup(wd_serve_models_t *sv, char *err, size_t err_len);
/* The first model's name, for status lines. */
const char *wd_serve_models_first(const wd_serve_models_t *sv);
int wd_serve_models_count(const wd_serve_models_t *sv);

/* SIGHUP: every model whose file changed again from its file; logs what it
 * did. Returns how many were replaced. */
int wd_serve_models_reload(wd_serve_models_t *sv);
/* Drains and closes the models that have retired since the last call. */
void wd_serve_models_reap(wd_serve_models_t *sv);

/* Once a second (controlling thread): loads the offered models requests
 * asked for, making room under --models-memory by unloading idle ones
 * least recently used first; unloads --models idle for --models-idle-s.
 * A load blocks the caller for its duration, as a SIGHUP reload does. */
void wd_serve_models_tick(wd_serve_models_t *sv);

/* Every current model's workers: figures summed, and the oldest heartbeat. */
void wd_serve_models_stats(wd_serve_models_t *sv, wd_worker_stats_t *ret, double *ret_heartbeat);

/* Shutdown: drain every current model's workers side by side (one grace
 * in all), then, after wd_server_free, close everything (retired ones
 * included); NULL allowed. */
void wd_serve_models_drain(wd_serve_models_t *sv, int grace_s);
void wd_serve_models_close(wd_serve_models_t *sv);

#endif
