/*
 * vk_engine_reset.c - rebuilding the engine after a lost device
 * (engine.h's reset()).
 *
 * Nothing on a lost VkDevice can be trusted, so everything that came from
 * it goes: the old contents are freed first (the device last; a large model
 * must not need its memory twice), then a fresh engine is built from the
 * same model and options, as at start-up (device, weights, pipelines, sets,
 * recordings), and moved into the same struct: the wd_engine_t the worker
 * holds points at it and stays valid. If the build fails, the engine stays
 * lost (every operation WD_EDEVLOST) and a later reset() tries again.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "vk_engine_internal.h"

int wd__eng_reset(void *self) {
  wd_vk_engine_t *e = self;
  const wd_model_t *m = e->model;
  const wd_vk_engine_opts_t opts = e->opts;
  const wd_engine_t iface = e->iface;
  const unsigned long long n_resets = e->n_resets;

  /* The old contents, freed through a heap copy of the struct. */
  wd_vk_engine_t *old = malloc(sizeof *old);
  if (!old)
    return WD_ENOMEM;
  memcpy(old, e, sizeof *old);
  wd_vk_engine_free(old);
  memset(e, 0, sizeof *e);
  e->model = m;
  e->opts = opts;
  e->hp = *wd_model_hparams(m);
  e->max_seqs = opts.max_seqs;
  e->max_audio = opts.max_audio;
  e->iface = iface;
  e->lost = 1; /* until the new one is in place */
  e->n_resets = n_resets;

  char err[512] = "";
  wd_vk_engine_t *fresh = NULL;
  const int rc = wd_vk_engine_new(m, &opts, &fresh, err, sizeof err);
  if (rc < 0) {
    wd_log_error("vk_engine: rebuild after device loss failed: %s", err[0] ? err : wd_strerror(rc));
    return rc;
  }
  memcpy(e, fresh, sizeof *e);
  free(fresh); /* the struct only: its contents now live in e */
  e->iface.self = e;
  e->n_resets = n_resets + 1;
  return 0;
}
