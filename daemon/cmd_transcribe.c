/*
 * cmd_transcribe.c - `whisperd transcribe FILE...`: the serve engine, once,
 * from the command line. Loads the model, builds the Vulkan engine, then for
 * each file decodes the audio, computes the log-mel, runs the decoding policy
 * and prints the transcript in the chosen format.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio.h"
#include "commands.h"
#include "decode.h"
#include "error.h"
#include "log.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "render.h"
#include "tokenizer.h"
#include "vk_engine.h"

static double wd_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int wd_transcribe_one(const wd_config_t *cfg, const char *path, wd_vk_engine_t *eng,
                             const wd_tokenizer_t *tok, const wd_mel_t *mel, wd_format_t fmt,
                             FILE *out) {
  char err[512] = "";
  float *pcm = NULL, *spec = NULL;
  size_t n = 0;
  int n_frames = 0;
  char *text = NULL;
  wd_transcript_t tr = { 0 };
  const wd_audio_opts_t aopts = { 0 };
  const double t0 = wd_now_s();
  int rc = wd_audio_decode_file(path, &aopts, &pcm, &n, err, sizeof err);
  if (rc < 0) {
    wd_log_error("transcribe: '%s': %s", path, err[0] ? err : wd_strerror(rc));
    return rc;
  }
  const double t1 = wd_now_s();
  if ((rc = wd_mel_compute(mel, pcm, n, 2, &spec, &n_frames)) < 0) {
    wd_log_error("transcribe: '%s': log-mel failed: %s", path, wd_strerror(rc));
    goto out;
  }
  const double t2 = wd_now_s();
  wd_decode_opts_t dopts;
  wd_decode_opts_default(&dopts);
  dopts.language = cfg->language;
  rc = wd_decode_transcribe(wd_vk_engine_iface(eng), tok, spec, n_frames, &dopts, &tr);
  if (rc < 0) {
    wd_log_error("transcribe: '%s': decoding failed: %s", path, wd_strerror(rc));
    goto out;
  }
  const double t3 = wd_now_s();
  if ((rc = wd_render(&tr, fmt, "transcribe", &text)) < 0) {
    wd_log_error("transcribe: '%s': rendering failed: %s", path, wd_strerror(rc));
    goto out;
  }
  fputs(text, out);
  if (fmt == WD_FMT_JSON || fmt == WD_FMT_VERBOSE_JSON)
    fputc('\n', out);
  wd_log_info("transcribe: '%s': %.2f s of audio: decode %.0f ms, mel %.0f ms, model %.0f ms "
              "(real-time factor %.3f)",
              path, tr.duration, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3,
              tr.duration > 0 ? (t3 - t0) / tr.duration : 0.0);
out:
  free(text);
  wd_transcript_free(&tr);
  free(spec);
  free(pcm);
  return rc;
}

int wd_cmd_transcribe(const wd_config_t *cfg, FILE *out) {
  if (cfg->n_args < 2) {
    wd_log_error("transcribe: no audio files given (whisperd transcribe --model MODEL FILE...)");
    return 2;
  }
  wd_format_t fmt;
  const char *f = cfg->output_format;
  if (strcmp(f, "json") == 0)
    f = "verbose_json"; /* the CLI's json is OpenAI's verbose_json shape */
  if (wd_format_parse(f, &fmt) < 0) {
    wd_log_error("transcribe: unknown output format '%s'", cfg->output_format);
    return 2;
  }
  char err[512] = "";
  wd_model_t *m = NULL;
  wd_tokenizer_t *tok = NULL;
  wd_mel_t *mel = NULL;
  wd_vk_engine_t *eng = NULL;
  int status = 1;
  const double t0 = wd_now_s();
  int rc = wd_model_load(cfg->model, &m, err, sizeof err);
  if (rc < 0) {
    wd_log_error("transcribe: cannot load model '%s': %s", cfg->model,
                 err[0] ? err : wd_strerror(rc));
    goto out;
  }
  if ((rc = wd_model_tokenizer_new(m, &tok)) < 0) {
    wd_log_error("transcribe: tokenizer: %s", wd_strerror(rc));
    goto out;
  }
  int n_mel = 0, n_fft = 0;
  const float *filters = wd_model_mel_filters(m, &n_mel, &n_fft);
  if ((rc = wd_mel_new(n_mel, filters, &mel)) < 0) {
    wd_log_error("transcribe: mel: %s", wd_strerror(rc));
    goto out;
  }
  const wd_vk_engine_opts_t eopts = { .device = cfg->device, .validation = cfg->vk_validation,
                                      .max_seqs = 1, .max_audio = 1 };
  if ((rc = wd_vk_engine_new(m, &eopts, &eng, err, sizeof err)) < 0) {
    wd_log_error("transcribe: engine: %s", err[0] ? err : wd_strerror(rc));
    goto out;
  }
  wd_log_info("transcribe: model '%s' (%s) ready in %.0f ms", cfg->model, wd_model_name(m),
              (wd_now_s() - t0) * 1e3);
  FILE *dst = out;
  if (cfg->output && cfg->output[0] && !(dst = fopen(cfg->output, "w"))) {
    wd_log_error("transcribe: cannot write '%s'", cfg->output);
    goto out;
  }
  status = 0;
  for (int i = 1; i < cfg->n_args; i++)
    if (wd_transcribe_one(cfg, cfg->args[i], eng, tok, mel, fmt, dst) < 0)
      status = 1;
  if (dst != out && fclose(dst) != 0)
    status = 1;
out:
  wd_vk_engine_free(eng);
  wd_mel_free(mel);
  wd_tokenizer_free(tok);
  wd_model_free(m);
  return status;
}
