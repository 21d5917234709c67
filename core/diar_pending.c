/*
 * diar_pending.c - TEMPORARY: the functions of diar.h, each answering
 * WD_EUNSUP, so that the API branch (diar-api) links before the
 * diarization pipeline is merged. Removed at the merge, where the
 * pipeline's own diar.c replaces it. Nothing here produces a result.
 */
#include "diar.h"

#include <stdio.h>
#include <string.h>

#include "error.h"

int wd_diar_load(const char *seg_path, const char *emb_path, wd_diar_t **ret, char *err,
                 size_t err_len) {
  (void)seg_path;
  (void)emb_path;
  *ret = NULL;
  if (err && err_len)
    snprintf(err, err_len, "diarization is not built into this binary yet");
  return WD_EUNSUP;
}

void wd_diar_free(wd_diar_t *d) { (void)d; }

void wd_diar_params_default(wd_diar_params_t *p) { memset(p, 0, sizeof *p); }

int wd_diar_run(const wd_diar_t *d, const float *pcm, size_t n, const wd_diar_params_t *p,
                int (*should_stop)(void *), void *stop_arg, wd_diar_result_t *out) {
  (void)d;
  (void)pcm;
  (void)n;
  (void)p;
  (void)should_stop;
  (void)stop_arg;
  memset(out, 0, sizeof *out);
  return WD_EUNSUP;
}

void wd_diar_result_free(wd_diar_result_t *r) { (void)r; }

int wd_diar_embed_clip(const wd_diar_t *d, const float *pcm, size_t n, float *emb) {
  (void)d;
  (void)pcm;
  (void)n;
  (void)emb;
  return WD_EUNSUP;
}
