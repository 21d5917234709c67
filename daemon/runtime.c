/*
 * runtime.c - model, tokenizer, mel, then one engine (Vulkan, or the CPU
 * engine as --device resolves, daemon/device.h) and one worker per device,
 * grouped (core/workers.h); built once (see runtime.h).
 *
 * Shared by every worker, read-only: the model's weights on the host, the
 * tokenizer, the mel filterbank, the alignment heads. Each engine makes its
 * own device copy of the weights and its own caches and plans.
 */
#include "runtime.h"

#include "timing.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fault.h"
#include "log.h"
#include "decode_cfg.h"
#include "mel.h"
#include "model_vocab.h"
#include "vad.h"
#include "cpu_engine.h"
#include "device.h"
#include "vk_engine.h"
#include "vk_fault.h"
#include "workers.h"

/* The least --queue-audio-s worked out from memory may give: ten minutes. */
#define WD_RUNTIME_AUDIO_BUDGET_MIN_S 600.0

_Static_assert(WD_DEVICES_MAX <= WD_WORKERS_MAX, "a --device list must fit in one group");

/* One device: its engine and the worker that drives it. */
typedef struct {
  wd_device_choice_t dc;
  wd_vk_engine_t *eng;   /* one of eng and cpu */
  wd_cpu_engine_t *cpu;
  char cpu_name[96];
  wd_engine_t iface;     /* the engine as the worker sees it */
  wd_worker_t *worker;
} wd_runtime_dev_t;

struct wd_runtime {
  wd_model_t *m;
  wd_tokenizer_t *tok;
  wd_mel_t *mel;
  wd_runtime_dev_t dev[WD_WORKERS_MAX];
  int n_dev;
  wd_workers_t *workers;
  char device_names[512]; /* "cpu (...) + llvmpipe (...)" */
  int (*heads)[2];       /* alignment heads for word timestamps */
  int n_heads;
  const wd_runtime_vad_t *vad; /* the process's, borrowed */
};

/* Builds device d's engine and worker; err gets a one-line message. */
static int dev_open(wd_runtime_t *rt, wd_runtime_dev_t *d, const wd_config_t *cfg, int max_batch,
                    int queue_max, double audio_budget_s, char *err, size_t err_len) {
  char msg[512] = "";
  int rc;
  wd_cpu_compute_t ct;
  if (wd_cpu_compute_parse(cfg->compute_type, &ct) < 0) {
    snprintf(err, err_len, "--compute-type '%s': not f32, bf16 or int8", cfg->compute_type);
    return WD_EINVAL;
  }
  if (!d->dc.cpu && ct != WD_CPU_COMPUTE_F32) {
    /* The Vulkan engine's shaders run f16 weights with f32 sums: no other
     * arithmetic exists there, and running f32 silently would not be what
     * was asked. */
    snprintf(err, err_len,
             "--compute-type %s is a CPU engine mode; device '%s' runs the Vulkan engine, which "
             "computes in f32: drop --compute-type or pass --device cpu",
             cfg->compute_type, d->dc.label);
    return WD_EINVAL;
  }
  if (d->dc.cpu) {
    const wd_cpu_engine_opts_t co = { .max_seqs = max_batch, .max_audio = max_batch,
                                      .n_threads = cfg->threads, .compute = ct };
    if ((rc = wd_cpu_engine_new(rt->m, &co, &d->cpu, msg, sizeof msg)) < 0) {
      snprintf(err, err_len, "CPU engine: %s", msg[0] ? msg : wd_strerror(rc));
      return rc;
    }
    wd_cpu_engine_stats_t st;
    wd_cpu_engine_stats(d->cpu, &st);
    snprintf(d->cpu_name, sizeof d->cpu_name, "cpu (%d threads, %s)", st.n_threads, st.kernel);
    if (st.compute_path)
      wd_log_info("CPU engine: compute type %s: linear layers on %s (convolutions: %s)",
                  st.compute, st.compute_path, st.gemm);
    else
      wd_log_info("CPU engine: encoder %s; decoder batched GEMV %s", st.gemm, st.kernel);
    wd_log_info("CPU engine: kernels %s: %s", st.pick_source, st.pick_note);
    const char *warn = wd_cpu_engine_gemm_warning();
    if (warn)
      wd_log_warning("CPU engine: %s", warn);
    d->iface = *wd_cpu_engine_iface(d->cpu);
  } else {
    wd_vk_limits_t lim;
    if ((rc = wd_device_vk_limits(cfg->vk_limits, &lim, err, err_len)) < 0)
      return rc;
    const wd_vk_kv_type_t kv = !cfg->vk_kv || strcmp(cfg->vk_kv, "auto") == 0 ? WD_VK_KV_AUTO
                               : strcmp(cfg->vk_kv, "f16") == 0             ? WD_VK_KV_F16
                                                                            : WD_VK_KV_F32;
    wd_vk_engine_opts_t eo = { .device = d->dc.vk_index, .validation = cfg->vk_validation,
                                     .max_seqs = max_batch, .max_audio = max_batch,
                                     .timeout_ms = (unsigned)cfg->gpu_timeout_s * 1000u,
                                     .limits = cfg->vk_limits && cfg->vk_limits[0] ? &lim : NULL,
                                     .kv = kv, .force_staging = cfg->vk_force_staging,
                                     .exact = cfg->vk_precision &&
                                              strcmp(cfg->vk_precision, "f32") == 0,
                                     .matrix = !cfg->vk_matrix || strcmp(cfg->vk_matrix, "auto") == 0
                                                   ? WD_VK_CM_WANT_AUTO
                                               : strcmp(cfg->vk_matrix, "khr") == 0 ? WD_VK_CM_WANT_KHR
                                                                                   : WD_VK_CM_WANT_NONE,
                                     .attn_fused = cfg->vk_attn && strcmp(cfg->vk_attn, "fused") == 0 };
    if (cfg->vk_gemm && wd_vk_gemm_family_parse(cfg->vk_gemm, &eo.gemm) < 0) {
      snprintf(err, err_len, "--vk-gemm %s: unknown kernel", cfg->vk_gemm);
      return WD_EINVAL;
    }
    if ((rc = wd_vk_engine_new(rt->m, &eo, &d->eng, msg, sizeof msg)) < 0) {
      /* Out of memory at start is the device's plan at this batch (or the
       * host's), which a smaller batch shrinks; the engine speaks of
       * max_seqs and max_audio, and the user sets both with one option. */
      snprintf(err, err_len, "engine: %s%s", msg[0] ? msg : wd_strerror(rc),
               rc == WD_ENOMEM ? " (a smaller --max-batch needs less memory)" : "");
      return rc;
    }
    d->iface = *wd_vk_engine_iface(d->eng);
    wd_vk_engine_stats_t st;
    wd_vk_engine_stats(d->eng, &st);
    wd_log_info("Vulkan engine on %s: GEMM %s (Linear layers), %s (attention), %s (prefill)",
                st.device_name, st.gemm, st.gemm_attn, st.gemm_rows);
  }
  if (!cfg->prefill) /* benchmarks: every prompt token a step of its own */
    d->iface.prefill = NULL;
  const char *ma = cfg->mel_ahead ? cfg->mel_ahead : "auto";
  const wd_worker_opts_t wo = { .engine = &d->iface, .tok = rt->tok,
                                .mel = rt->mel, .queue_max = queue_max,
                                .audio_budget_s = audio_budget_s, .max_batch = max_batch,
                                .mel_ahead = strcmp(ma, "on") == 0 ? 1 : strcmp(ma, "off") == 0 ? -1 : 0 };
  if ((rc = wd_worker_new(&wo, &d->worker)) < 0) {
    snprintf(err, err_len, "worker: %s", wd_strerror(rc));
    return rc;
  }
  wd_log_info("worker: next windows' log-mel made %s (--mel-ahead %s%s)",
              wd_worker_mel_ahead(d->worker) ? "ahead on a thread of its own"
                                             : "on the worker's path",
              ma,
              wo.mel_ahead ? "" : d->iface.device_offload ? ": a GPU leaves the host idle"
                                                          : ": the engine computes on the host");
  return 0;
}

static const char *dev_name(const wd_runtime_dev_t *d) {
  if (d->cpu)
    return d->cpu_name;
  wd_vk_engine_stats_t st;
  wd_vk_engine_stats(d->eng, &st);
  return st.device_name ? st.device_name : "?";
}

/* Bytes the daemon may still take: MemAvailable, or less where a cgroup
 * (v2) limit leaves less; 0 when neither can be read. */
static uint64_t memory_available(void) {
  uint64_t avail = 0;
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        avail = (uint64_t)kb * 1024u;
        break;
      }
    fclose(f);
  }
  unsigned long long max = 0, cur = 0;
  f = fopen("/sys/fs/cgroup/memory.max", "r");
  const int have_max = f && fscanf(f, "%llu", &max) == 1; /* "max": no limit */
  if (f)
    fclose(f);
  f = fopen("/sys/fs/cgroup/memory.current", "r");
  if (have_max && f && fscanf(f, "%llu", &cur) == 1 && max > cur &&
      (avail == 0 || max - cur < avail))
    avail = max - cur;
  if (f)
    fclose(f);
  return avail;
}

/* The audio budget of each of n workers: --queue-audio-s, or a quarter of
 * the memory left once the model is loaded, at what a second of queued
 * audio holds (its 16-bit samples). */
static double audio_budget_s(const wd_config_t *cfg, int n) {
  if (cfg->queue_audio_s > 0)
    return cfg->queue_audio_s;
  const uint64_t avail = memory_available();
  const double per_s = WD_WORKER_BYTES_PER_AUDIO_S;
  double b = avail > 0 ? (double)avail / 4.0 / per_s / (n > 0 ? n : 1) : 0.0;
  if (avail > 0 && b < WD_RUNTIME_AUDIO_BUDGET_MIN_S)
    b = WD_RUNTIME_AUDIO_BUDGET_MIN_S;
  wd_log_info("queue: up to %.0f s of audio queued and running per worker (a quarter of the "
              "%.0f MiB available; --queue-audio-s sets it)",
              b, (double)avail / 1048576.0);
  return b;
}

int wd_runtime_vad_load(const wd_config_t *cfg, wd_runtime_vad_t *v, char *err, size_t err_len) {
  char msg[512] = "";
  *v = (wd_runtime_vad_t){ .every_job = cfg->vad };
  int rc = wd_vad_cfg(cfg, &v->params, err, err_len);
  if (rc < 0)
    return rc;
  if ((rc = wd_vad_model_load(cfg->vad_model, &v->model, msg, sizeof msg)) < 0) {
    if (cfg->vad || rc != WD_ENOENT) {
      snprintf(err, err_len, "%s: %s%s", cfg->vad ? "--vad" : "--vad-model",
               msg[0] ? msg : wd_strerror(rc),
               rc == WD_ENOENT ? " (scripts/fetch-vad.sh fetches it)" : "");
      return rc;
    }
    wd_log_debug("vad: no %s: chunking is refused (scripts/fetch-vad.sh fetches it)",
                 cfg->vad_model);
    return 0;
  }
  wd_log(cfg->vad ? WD_LOG_INFO : WD_LOG_DEBUG,
         "vad: Silero VAD v6 from %s, %s: threshold %.2f, silences of %d ms end speech, "
         "%d ms of padding", cfg->vad_model,
         cfg->vad ? "for every job (--vad)" : "for chunking (chunking_strategy, --chunking)",
         (double)v->params.threshold, v->params.min_silence_ms, v->params.speech_pad_ms);
  return 0;
}

int wd_runtime_diar_load(const wd_config_t *cfg, wd_runtime_diar_t *d, char *err,
                         size_t err_len) {
  memset(d, 0, sizeof *d);
  wd_diar_params_default(&d->params);
  char msg[192] = ""; /* with the hint below, it fits d->why */
  const int rc = wd_diar_load(cfg->diar_seg_model, cfg->diar_emb_model, &d->model, msg,
                              sizeof msg);
  if (rc == WD_ENOENT || rc == WD_EUNSUP) {
    snprintf(d->why, sizeof d->why, "%s%s", msg[0] ? msg : wd_strerror(rc),
             rc == WD_ENOENT ? " (scripts/fetch-diarization.sh fetches the models)" : "");
    wd_log_info("diarization: unavailable: %s; requests for it are answered 400", d->why);
    d->model = NULL;
    return 0;
  }
  if (rc < 0) {
    snprintf(err, err_len, "--diar-seg-model/--diar-emb-model: %s",
             msg[0] ? msg : wd_strerror(rc));
    d->model = NULL;
    return rc;
  }
  wd_log_info("diarization: available: pyannote segmentation-3.0 from %s, CAM++ from %s "
              "(response_format diarized_json, model " "gpt-4o-transcribe-diarize)",
              cfg->diar_seg_model, cfg->diar_emb_model);
  return 0;
}

void wd_runtime_diar_free(wd_runtime_diar_t *d) {
  wd_diar_free(d->model);
  d->model = NULL;
}

void wd_runtime_vad_free(wd_runtime_vad_t *v) {
  wd_vad_model_free(v->model);
  v->model = NULL;
}

int wd_runtime_open(const wd_config_t *cfg, int max_batch, int queue_max, int audio_budget,
                    const wd_runtime_vad_t *vad, wd_runtime_t **ret, char *err, size_t err_len) {
  *ret = NULL;
  wd_runtime_t *rt = calloc(1, sizeof *rt);
  if (!rt)
    return WD_ENOMEM;
  char msg[512] = "";
  int rc = wd_model_load(cfg->model, &rt->m, msg, sizeof msg);
  if (rc < 0) {
    snprintf(err, err_len, "cannot load model '%s': %s", cfg->model,
             msg[0] ? msg : wd_strerror(rc));
    goto fail;
  }
  if ((rc = wd_model_tokenizer_new(rt->m, &rt->tok)) < 0) {
    snprintf(err, err_len, "tokenizer: %s", wd_strerror(rc));
    goto fail;
  }
  /* The alignment heads: the model's table, or openai's fallback. */
  if ((rc = wd_timing_heads(rt->m, NULL, 0, &rt->n_heads)) < 0 && rc != WD_ERANGE) {
    snprintf(err, err_len, "alignment heads: %s", wd_strerror(rc));
    goto fail;
  }
  if (!(rt->heads = malloc((size_t)(rt->n_heads > 0 ? rt->n_heads : 1) * sizeof *rt->heads)) ||
      (rc = wd_timing_heads(rt->m, rt->heads, rt->n_heads, &rt->n_heads)) < 0) {
    snprintf(err, err_len, "alignment heads: %s", wd_strerror(rc < 0 ? rc : WD_ENOMEM));
    rc = rc < 0 ? rc : WD_ENOMEM;
    goto fail;
  }
  rt->vad = vad;
  int n_mel = 0, n_fft = 0;
  const float *filters = wd_model_mel_filters(rt->m, &n_mel, &n_fft);
  if ((rc = wd_mel_new(n_mel, filters, &rt->mel)) < 0) {
    snprintf(err, err_len, "mel filterbank: %s", wd_strerror(rc));
    goto fail;
  }
  /* One engine and worker per device; a device that cannot be used fails
   * the start (the user asked for it: running on fewer would hide that). */
  wd_device_choice_t dcs[WD_WORKERS_MAX];
  char summary[256];
  const int n_devices = cfg->n_devices > 0 ? cfg->n_devices : 1;
  const int *devices = cfg->n_devices > 0 ? cfg->devices : &cfg->device;
  rt->n_dev = wd_device_choose_list(devices, n_devices, dcs, WD_WORKERS_MAX, summary,
                                    sizeof summary);
  wd_worker_t *workers[WD_WORKERS_MAX];
  const char *labels[WD_WORKERS_MAX];
  const double budget_s = audio_budget ? audio_budget_s(cfg, rt->n_dev) : 0.0;
  for (int i = 0; i < rt->n_dev; i++) {
    wd_runtime_dev_t *d = &rt->dev[i];
    d->dc = dcs[i];
    wd_log_info("%s", d->dc.why);
    char derr[512] = "";
    if ((rc = dev_open(rt, d, cfg, max_batch, queue_max, budget_s, derr, sizeof derr)) < 0) {
      if (rt->n_dev > 1)
        snprintf(err, err_len, "device %d of %d (%s): %s", i + 1, rt->n_dev, d->dc.label, derr);
      else
        snprintf(err, err_len, "%s", derr);
      goto fail;
    }
    workers[i] = d->worker;
    labels[i] = d->dc.label;
  }
  if (rt->n_dev > 1)
    wd_log_info("%s", summary);
  if ((rc = wd_workers_new(workers, labels, rt->n_dev, &rt->workers)) < 0) {
    snprintf(err, err_len, "workers: %s", wd_strerror(rc));
    goto fail;
  }
  /* "cpu (2 threads, avx2) + llvmpipe (LLVM 15.0.6, 256 bits)" */
  size_t len = 0;
  for (int i = 0; i < rt->n_dev && len < sizeof rt->device_names; i++) {
    const int w = snprintf(rt->device_names + len, sizeof rt->device_names - len, "%s%s",
                           i ? " + " : "", dev_name(&rt->dev[i]));
    len += w > 0 ? (size_t)w : sizeof rt->device_names;
  }
  *ret = rt;
  return 0;
fail:
  wd_runtime_close(rt);
  return rc;
}

void wd_runtime_close(wd_runtime_t *rt) {
  if (!rt)
    return;
  /* Every worker drains before any is freed (a group drain runs them side
   * by side), then each worker before the engine it drives. */
  if (rt->workers)
    wd_workers_drain(rt->workers, 0.0);
  wd_workers_free(rt->workers);
  for (int i = 0; i < rt->n_dev; i++) {
    wd_worker_free(rt->dev[i].worker);
    wd_vk_engine_free(rt->dev[i].eng);
    wd_cpu_engine_free(rt->dev[i].cpu);
  }
  wd_mel_free(rt->mel);
  wd_tokenizer_free(rt->tok);
  wd_model_free(rt->m);
  free(rt->heads);
  free(rt);
}

const wd_vad_model_t *wd_runtime_vad(wd_runtime_t *rt, const wd_vad_params_t **ret_params,
                                     int *ret_default) {
  *ret_params = &rt->vad->params;
  *ret_default = rt->vad->every_job && rt->vad->model;
  return rt->vad->model;
}

const int (*wd_runtime_align_heads(wd_runtime_t *rt, int *ret_n))[2] {
  *ret_n = rt->n_heads;
  return (const int (*)[2])rt->heads;
}

wd_workers_t *wd_runtime_workers(wd_runtime_t *rt) { return rt->workers; }
const wd_tokenizer_t *wd_runtime_tokenizer(wd_runtime_t *rt) { return rt->tok; }
const wd_model_t *wd_runtime_model(wd_runtime_t *rt) { return rt->m; }

const char *wd_runtime_device(wd_runtime_t *rt) { return rt->device_names; }

/* The warm-up job's completion, signalled from the worker thread. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, rc;
} warm_t;

static void warm_done(void *ud, int rc, wd_transcript_t *t) {
  warm_t *w = ud;
  wd_transcript_free(t);
  pthread_mutex_lock(&w->mu);
  w->rc = rc;
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* One second of silence through one worker, waited for. */
static int warmup_one(wd_runtime_t *rt, wd_worker_t *worker) {
  int16_t *silence = calloc(16000, sizeof *silence);
  if (!silence)
    return WD_ENOMEM;
  warm_t w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
  wd_job_params_t p = { .cb = { .ud = &w, .on_done = warm_done } };
  wd_decode_opts_default(&p.decode);
  p.decode.language = wd_tokenizer_is_multilingual(rt->tok) ? "en" : NULL;
  int rc = wd_worker_submit(worker, silence, 16000, &p, NULL);
  if (rc < 0)
    return rc;
  pthread_mutex_lock(&w.mu);
  while (!w.done)
    pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  return w.rc;
}

int wd_runtime_warmup(wd_runtime_t *rt, char *err, size_t err_len) {
  /* Every worker, not the group's choice: each engine's recordings must run. */
  for (int i = 0; i < rt->n_dev; i++) {
    const int rc = warmup_one(rt, rt->dev[i].worker);
    if (rc < 0) {
      snprintf(err, err_len, "%s%s%s", rt->n_dev > 1 ? rt->dev[i].dc.label : "",
               rt->n_dev > 1 ? ": " : "", wd_strerror(rc));
      return rc;
    }
  }
  return 0;
}

int wd_runtime_arm_faults(const char *spec) {
  if (!spec || !spec[0])
    return 0;
  /* Host items (core/fault.h) go to core, the rest to gpu/vk_fault.h. */
  char core_spec[64] = "", vk_spec[256] = "";
  const char *p = spec;
  while (*p) {
    const size_t len = strcspn(p, ",");
    const int core = (len >= 4 && strncmp(p, "oom:", 4) == 0) ||
                     (len >= 13 && strncmp(p, "decode_delay:", 13) == 0) ||
                     (len >= 11 && strncmp(p, "load_delay:", 11) == 0) ||
                     (len >= 9 && strncmp(p, "diar_oom:", 9) == 0) ||
                     (len >= 11 && strncmp(p, "diar_delay:", 11) == 0);
    char *dst = core ? core_spec : vk_spec;
    const size_t cap = dst == core_spec ? sizeof core_spec : sizeof vk_spec;
    const size_t used = strlen(dst);
    if (used + len + 2 > cap)
      return WD_EINVAL;
    snprintf(dst + used, cap - used, "%s%.*s", used ? "," : "", (int)len, p);
    p += len + (p[len] == ',');
  }
  int rc = wd_fault_arm(core_spec);
  if (rc == 0)
    rc = wd_vk_fault_arm(vk_spec);
  if (rc == 0)
    wd_log_warning("fault injection armed: %s (testing only)", spec);
  return rc;
}
