/*
 * cmd_transcribe.c - `whisperd transcribe FILE...`: the serve runtime from
 * the command line. The files are decoded here and submitted together to
 * the same worker the daemon runs, so they are decoded side by side (up to
 * --max-batch at once); each transcript is printed in the order the files
 * were given, under a "==> FILE <==" label when there are several. On a
 * terminal, stderr shows the audio seconds done of the total while they run.
 *
 * --diarize: while the worker transcribes, this thread diarizes the files
 * one after the other (core/diar.h), then each transcript is attributed to
 * its speakers (core/diar_assign.h) and printed with their labels: "A: "
 * in txt and srt, <v A> in vtt, OpenAI's diarized_json for json.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audio.h"
#include "commands.h"
#include "decode.h"
#include "decode_cfg.h"
#include "diar.h"
#include "diar_assign.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "render.h"
#include "runtime.h"
#include "chunk_job.h"
#include "vad_job.h"

/* One file's job; the callbacks fill it on the worker thread. */
typedef struct {
  const char *path;
  int submitted, done, rc;
  double done_s, total_s;
  wd_transcript_t t;
  float *pcm;           /* --diarize: the samples, until diarized (main thread) */
  size_t n;
  int diar_rc;
  wd_diar_result_t diar;
} wd_file_job_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static void on_segment(void *ud, const wd_segment_t *s, double done_s, double total_s) {
  wd_file_job_t *f = ud;
  (void)s;
  pthread_mutex_lock(&g_mu);
  f->done_s = done_s;
  f->total_s = total_s;
  pthread_mutex_unlock(&g_mu);
}

static void on_done(void *ud, int rc, wd_transcript_t *t) {
  wd_file_job_t *f = ud;
  pthread_mutex_lock(&g_mu);
  f->rc = rc;
  if (t)
    f->t = *t;
  f->done = 1;
  f->done_s = f->total_s;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

/* Decodes the file and submits it; returns 0 or the error (logged). */
static int submit_file(wd_runtime_t *rt, const wd_config_t *cfg, const wd_decode_opts_t *opts,
                       wd_file_job_t *f) {
  char err[512] = "";
  int16_t *pcm = NULL;
  size_t n = 0;
  const wd_audio_opts_t ao = { .max_seconds = (uint32_t)cfg->max_audio_s };
  int rc = wd_audio_decode_file(f->path, &ao, &pcm, &n, err, sizeof err);
  if (rc < 0) {
    wd_log_error("transcribe: '%s': %s", f->path, err[0] ? err : wd_strerror(rc));
    return rc;
  }
  f->total_s = (double)n / WD_AUDIO_SAMPLE_RATE;
  if (cfg->diarize) {
    if (!(f->pcm = malloc((n ? n : 1) * sizeof *f->pcm))) {
      free(pcm);
      return WD_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
      f->pcm[i] = (float)pcm[i] / 32768.0f;
    f->n = n;
  }
  wd_job_params_t p = { .cb = { .ud = f, .on_segment = on_segment, .on_done = on_done } };
  p.decode = *opts;
  const wd_vad_params_t *vp = NULL;
  int vad_on = 0;
  const wd_vad_model_t *vad = wd_runtime_vad(rt, &vp, &vad_on);
  const int chunked = cfg->chunking && strcmp(cfg->chunking, "auto") == 0;
  if (chunked && !vad) {
    wd_log_error("transcribe: --chunking auto needs the Silero VAD file %s (scripts/fetch-vad.sh "
                 "fetches it)", cfg->vad_model);
    free(pcm);
    return WD_ENOENT;
  }
  if ((rc = chunked ? wd_chunk_submit(wd_runtime_workers(rt), vad, vp, pcm, n, &p, NULL)
                    : wd_vad_submit(wd_runtime_workers(rt), vad_on ? vad : NULL, vp, pcm, n, &p,
                                    NULL)) < 0)
    wd_log_error("transcribe: '%s': %s", f->path,
                 rc == WD_ERANGE   ? "--beam-size or --best-of is larger than --max-batch"
                 : rc == WD_EINVAL ? "the model cannot decode with these options"
                                   : wd_strerror(rc));
  return rc;
}

/* f's transcript attributed to its diarization's speakers, labelled A, B,
 * ... in order of first appearance, rendered as fmt. */
static int render_diarized(const wd_file_job_t *f, wd_format_t fmt, const char *task,
                           char **ret) {
  wd_diar_segs_t d;
  int rc = wd_diar_assign(&f->t, &f->diar, &d);
  if (rc < 0)
    return rc;
  char **labels = calloc((size_t)d.n_speakers + 1, sizeof *labels);
  rc = labels ? wd_diar_labels(&d, NULL, NULL, labels) : WD_ENOMEM;
  if (rc == 0)
    rc = wd_render_diarized(&f->t, &d, (const char *const *)labels, fmt, task, ret);
  if (labels)
    wd_diar_labels_free(labels, d.n_speakers);
  free(labels);
  wd_diar_segs_free(&d);
  return rc;
}

/* Waits for job f; on a terminal, redraws the progress of all jobs. */
static void wait_file(wd_file_job_t *jobs, int n, wd_file_job_t *f, int tty) {
  pthread_mutex_lock(&g_mu);
  while (!f->done) {
    if (tty) {
      double done = 0, total = 0;
      for (int i = 0; i < n; i++)
        if (jobs[i].submitted) {
          done += jobs[i].done_s;
          total += jobs[i].total_s;
        }
      fprintf(stderr, "\rtranscribe: %.1f of %.1f s of audio (%.0f%%) ", done, total,
              total > 0 ? 100.0 * done / total : 0.0);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 250000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&g_cv, &g_mu, &ts);
  }
  pthread_mutex_unlock(&g_mu);
  if (tty)
    fprintf(stderr, "\r\033[K");
}

int wd_cmd_transcribe(const wd_config_t *cfg, FILE *out) {
  const int n_files = cfg->n_args - 1;
  if (n_files < 1) {
    wd_log_error("transcribe: no audio files given (whisperd transcribe --model MODEL FILE...)");
    return 2;
  }
  wd_format_t fmt;
  const char *fs = cfg->output_format;
  if (strcmp(fs, "json") == 0) /* the CLI's json is OpenAI's verbose_json shape, or */
    fs = cfg->diarize ? "diarized_json" : "verbose_json"; /* diarized_json's */
  if (wd_format_parse(fs, &fmt) < 0) {
    wd_log_error("transcribe: unknown output format '%s'", cfg->output_format);
    return 2;
  }
  char err[512] = "";
  wd_decode_opts_t opts;
  float clips[128];
  if (wd_decode_cfg(cfg, &opts, clips, 128, err, sizeof err) < 0) {
    wd_log_error("transcribe: %s", err);
    return 2;
  }
  wd_file_job_t *jobs = calloc((size_t)n_files, sizeof *jobs);
  if (!jobs)
    return 1;
  int32_t *prompt = NULL, *prefix = NULL;
  wd_runtime_t *rt = NULL;
  wd_runtime_vad_t vad = { 0 };
  wd_runtime_diar_t diar = { 0 };
  FILE *dst = out;
  int status = 1;
  const double t0 = wd_now_s();
  if (wd_runtime_vad_load(cfg, &vad, err, sizeof err) < 0 ||
      wd_runtime_open(cfg, cfg->max_batch, n_files, 0, &vad, &rt, err, sizeof err) < 0) {
    wd_log_error("transcribe: %s", err);
    goto out;
  }
  if (cfg->diarize) {
    if (wd_runtime_diar_load(cfg, &diar, err, sizeof err) < 0) {
      wd_log_error("transcribe: %s", err);
      goto out;
    }
    if (!diar.model) {
      wd_log_error("transcribe: --diarize: %s", diar.why);
      goto out;
    }
    opts.word_timestamps = 1; /* they decide where a segment changes speaker */
  }
  wd_log_info("transcribe: model '%s' (%s) on %s ready in %.0f ms", cfg->model,
              wd_model_name(wd_runtime_model(rt)), wd_runtime_device(rt),
              (wd_now_s() - t0) * 1e3);
  /* What the model cannot do is said once, before any file is decoded. */
  const int multi = wd_tokenizer_is_multilingual(wd_runtime_tokenizer(rt));
  if (!multi && (opts.translate || (opts.language && strcmp(opts.language, "en") != 0))) {
    wd_log_error("transcribe: '%s' is an English-only model: it cannot %s", cfg->model,
                 opts.translate ? "translate" : "transcribe other languages");
    goto out;
  }
  if (opts.translate && !wd_model_can_translate(wd_runtime_model(rt))) {
    wd_log_error("transcribe: '%s' is %s, which was not trained to translate", cfg->model,
                 wd_model_name(wd_runtime_model(rt)));
    goto out;
  }
  if (!multi)
    opts.language = NULL;
  opts.align_heads = wd_runtime_align_heads(rt, &opts.n_align_heads);
  if (cfg->prompt && cfg->prompt[0]) {
    if (wd_decode_encode_text(wd_runtime_tokenizer(rt), cfg->prompt, &prompt,
                              &opts.n_prompt) < 0) {
      wd_log_error("transcribe: the prompt could not be tokenized");
      goto out;
    }
    opts.prompt = prompt;
  }
  if (cfg->prefix && cfg->prefix[0]) {
    if (wd_decode_encode_text(wd_runtime_tokenizer(rt), cfg->prefix, &prefix,
                              &opts.n_prefix) < 0) {
      wd_log_error("transcribe: the prefix could not be tokenized");
      goto out;
    }
    opts.prefix = prefix;
  }
  if (cfg->output && cfg->output[0] && !(dst = fopen(cfg->output, "w"))) {
    wd_log_error("transcribe: cannot write '%s'", cfg->output);
    dst = out;
    goto out;
  }
  status = 0;
  const double t1 = wd_now_s();
  for (int i = 0; i < n_files; i++) {
    jobs[i].path = cfg->args[i + 1];
    if (submit_file(rt, cfg, &opts, &jobs[i]) < 0)
      status = 1;
    else
      jobs[i].submitted = 1;
  }
  /* --diarize: each file here, beside the worker's transcriptions. */
  for (int i = 0; i < n_files && cfg->diarize; i++) {
    wd_file_job_t *f = &jobs[i];
    if (!f->submitted)
      continue;
    f->diar_rc = wd_diar_run(diar.model, f->pcm, f->n, &diar.params, NULL, NULL, &f->diar);
    free(f->pcm);
    f->pcm = NULL;
  }
  const int tty = isatty(STDERR_FILENO);
  double audio_s = 0;
  for (int i = 0; i < n_files; i++) {
    wd_file_job_t *f = &jobs[i];
    if (!f->submitted)
      continue;
    wait_file(jobs, n_files, f, tty);
    if (f->rc < 0) {
      wd_log_error("transcribe: '%s': decoding failed: %s", f->path, wd_strerror(f->rc));
      status = 1;
      continue;
    }
    char *text = NULL;
    const char *task = opts.translate ? "translate" : "transcribe";
    if (cfg->diarize && f->diar_rc < 0) {
      wd_log_error("transcribe: '%s': diarization failed: %s", f->path, wd_strerror(f->diar_rc));
      status = 1;
      continue;
    }
    if (cfg->diarize ? render_diarized(f, fmt, task, &text) < 0
                     : wd_render(&f->t, fmt, task, &text) < 0) {
      wd_log_error("transcribe: '%s': rendering failed", f->path);
      status = 1;
      continue;
    }
    if (n_files > 1)
      fprintf(dst, "%s==> %s <==\n", i > 0 ? "\n" : "", f->path);
    fputs(text, dst);
    if (fmt == WD_FMT_JSON || fmt == WD_FMT_VERBOSE_JSON || fmt == WD_FMT_DIARIZED_JSON)
      fputc('\n', dst);
    fflush(dst);
    free(text);
    audio_s += f->t.duration;
    wd_log_info("transcribe: '%s': %.2f s of audio, %d segments", f->path, f->t.duration,
                f->t.n_segments);
  }
  const double dt = wd_now_s() - t1;
  wd_log_info("transcribe: %d file(s), %.2f s of audio in %.2f s (real-time factor %.3f)",
              n_files, audio_s, dt, audio_s > 0 ? dt / audio_s : 0.0);
out:
  if (dst != out && fclose(dst) != 0)
    status = 1;
  wd_runtime_close(rt);
  wd_runtime_vad_free(&vad);
  wd_runtime_diar_free(&diar);
  for (int i = 0; i < n_files; i++) {
    wd_transcript_free(&jobs[i].t);
    wd_diar_result_free(&jobs[i].diar);
    free(jobs[i].pcm);
  }
  free(jobs);
  free(prompt);
  free(prefix);
  return status;
}
