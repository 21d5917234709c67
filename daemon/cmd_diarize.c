/*
 * cmd_diarize.c - `whisperd diarize FILE...`: who spoke when, per file.
 *
 * Each file is decoded as uploads are (core/audio.h: any format, 16 kHz
 * mono) and diarized on this thread (core/diar.h) with the models of
 * --diar-seg-model and --diar-emb-model and the bounds of --threshold, --min-cluster-size,
 * --min-speakers and --max-speakers. Speakers are labelled A, B, ... (Z,
 * then AA, AB, ...) in order of first appearance. The output is one line per
 * turn, in time order:
 *   default  "start end label" in seconds, e.g. "0.48 3.21 A";
 *   --rttm   "SPEAKER <uri> 1 <start> <duration> <NA> <NA> <label> <NA> <NA>",
 *            the uri being the file's name without directory and extension
 *            (the diarization evaluation reads these).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "clock.h"
#include "commands.h"
#include "diar.h"
#include "error.h"
#include "log.h"

/* "A".."Z", then "AA", "AB", ... (spreadsheet columns) into buf[8]. */
static void speaker_label(int s, char *buf) {
  char tmp[8];
  int n = 0;
  for (unsigned v = (unsigned)s + 1; v > 0 && n < 7; v = (v - 1) / 26)
    tmp[n++] = (char)('A' + (v - 1) % 26);
  for (int i = 0; i < n; i++)
    buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
}

/* The file's name without directory and extension, into uri. */
static void file_uri(const char *path, char *uri, size_t len) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  snprintf(uri, len, "%s", base);
  char *dot = strrchr(uri, '.');
  if (dot && dot != uri)
    *dot = '\0';
}

/* The pipeline's parameters from the flags; -1 with a message on a bad one. */
static int diarize_params(const wd_config_t *cfg, wd_diar_params_t *p) {
  wd_diar_params_default(p);
  if (cfg->diar_threshold && cfg->diar_threshold[0]) {
    char *end = NULL;
    errno = 0;
    const double t = strtod(cfg->diar_threshold, &end);
    if (errno || end == cfg->diar_threshold || *end || !(t >= 0 && t <= 2)) {
      wd_log_error("diarize: --threshold '%s' is not a number in [0, 2]", cfg->diar_threshold);
      return -1;
    }
    p->threshold = (float)t;
  }
  if (cfg->diar_min_cluster_size > 0)
    p->min_cluster_size = cfg->diar_min_cluster_size;
  p->min_speakers = cfg->min_speakers;
  p->max_speakers = cfg->max_speakers;
  if (p->min_speakers > 0 && p->max_speakers > 0 && p->min_speakers > p->max_speakers) {
    wd_log_error("diarize: --min-speakers %d is above --max-speakers %d", p->min_speakers,
                 p->max_speakers);
    return -1;
  }
  return 0;
}

/* Decodes, diarizes and prints one file. 0 or a WD_E* code (logged). */
static int diarize_file(const wd_diar_t *d, const wd_config_t *cfg, const wd_diar_params_t *p,
                        const char *path, FILE *out) {
  char err[512] = "";
  int16_t *s16 = NULL;
  size_t n = 0;
  const wd_audio_opts_t ao = { .max_seconds = (uint32_t)cfg->max_audio_s };
  int rc = wd_audio_decode_file(path, &ao, &s16, &n, err, sizeof err);
  if (rc < 0) {
    wd_log_error("diarize: '%s': %s", path, err[0] ? err : wd_strerror(rc));
    return rc;
  }
  float *pcm = malloc(n * sizeof *pcm);
  if (!pcm) {
    free(s16);
    return WD_ENOMEM;
  }
  for (size_t i = 0; i < n; i++)
    pcm[i] = (float)s16[i] / 32768.0f;
  free(s16);
  wd_diar_result_t r = { 0 };
  const double t0 = wd_now_s();
  rc = wd_diar_run(d, pcm, n, p, NULL, NULL, &r);
  const double dt = wd_now_s() - t0;
  free(pcm);
  if (rc < 0) {
    wd_log_error("diarize: '%s': %s", path, wd_strerror(rc));
    return rc;
  }
  char uri[256], label[8];
  file_uri(path, uri, sizeof uri);
  for (size_t i = 0; i < r.n_turns; i++) {
    const wd_diar_turn_t *t = &r.turns[i];
    speaker_label(t->speaker, label);
    if (cfg->rttm)
      fprintf(out, "SPEAKER %s 1 %.3f %.3f <NA> <NA> %s <NA> <NA>\n", uri, t->start,
              t->end - t->start, label);
    else
      fprintf(out, "%.2f %.2f %s\n", t->start, t->end, label);
  }
  wd_log_info("diarize: '%s': %.2f s of audio, %d speakers, %zu turns in %.2f s", path,
              (double)n / WD_DIAR_SAMPLE_RATE, r.n_speakers, r.n_turns, dt);
  wd_diar_result_free(&r);
  return 0;
}

int wd_cmd_diarize(const wd_config_t *cfg, FILE *out) {
  if (cfg->n_args < 2) {
    wd_log_error("diarize: no audio files given (whisperd diarize FILE...)");
    return 2;
  }
  wd_diar_params_t p;
  if (diarize_params(cfg, &p) < 0)
    return 2;
  char err[512] = "";
  wd_diar_t *d = NULL;
  const int rc = wd_diar_load(cfg->diar_seg_model, cfg->diar_emb_model, &d, err, sizeof err);
  if (rc < 0) {
    wd_log_error("diarize: %s%s", err[0] ? err : wd_strerror(rc),
                 rc == WD_ENOENT ? " (scripts/fetch-diarization.sh fetches the models)" : "");
    return 1;
  }
  int status = 0;
  for (int i = 1; i < cfg->n_args; i++)
    if (diarize_file(d, cfg, &p, cfg->args[i], out) < 0)
      status = 1;
  wd_diar_free(d);
  return status;
}
