/*
 * runtime.c - model, tokenizer, mel, engine (Vulkan, or the CPU engine as
 * --device resolves, daemon/device.h) and worker, built once (see runtime.h).
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
#include "mel.h"
#include "model_vocab.h"
#include "cpu_engine.h"
#include "device.h"
#include "vk_engine.h"
#include "vk_fault.h"

struct wd_runtime {
  wd_model_t *m;
  wd_tokenizer_t *tok;
  wd_mel_t *mel;
  wd_vk_engine_t *eng;   /* one of eng and cpu */
  wd_cpu_engine_t *cpu;
  char cpu_name[96];
  wd_worker_t *worker;
  wd_engine_t iface;     /* the engine as the worker sees it */
  int (*heads)[2];       /* alignment heads for word timestamps */
  int n_heads;
};

int wd_runtime_open(const wd_config_t *cfg, int max_batch, int queue_max, wd_runtime_t **ret,
                    char *err, size_t err_len) {
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
  int n_mel = 0, n_fft = 0;
  const float *filters = wd_model_mel_filters(rt->m, &n_mel, &n_fft);
  if ((rc = wd_mel_new(n_mel, filters, &rt->mel)) < 0) {
    snprintf(err, err_len, "mel filterbank: %s", wd_strerror(rc));
    goto fail;
  }
  wd_device_choice_t dc;
  wd_device_choose(cfg->device, &dc);
  wd_log_info("%s", dc.why);
  if (dc.cpu) {
    const wd_cpu_engine_opts_t co = { .max_seqs = max_batch, .max_audio = max_batch };
    if ((rc = wd_cpu_engine_new(rt->m, &co, &rt->cpu, msg, sizeof msg)) < 0) {
      snprintf(err, err_len, "CPU engine: %s", msg[0] ? msg : wd_strerror(rc));
      goto fail;
    }
    wd_cpu_engine_stats_t st;
    wd_cpu_engine_stats(rt->cpu, &st);
    snprintf(rt->cpu_name, sizeof rt->cpu_name, "cpu (%d threads, %s)", st.n_threads, st.kernel);
    rt->iface = *wd_cpu_engine_iface(rt->cpu);
  } else {
    const wd_vk_engine_opts_t eo = { .device = dc.vk_index, .validation = cfg->vk_validation,
                                     .max_seqs = max_batch, .max_audio = max_batch,
                                     .timeout_ms = (unsigned)cfg->gpu_timeout_s * 1000u };
    if ((rc = wd_vk_engine_new(rt->m, &eo, &rt->eng, msg, sizeof msg)) < 0) {
      /* The engine speaks of max_seqs and max_audio; the user sets both
       * with one option. */
      snprintf(err, err_len, "engine: %s%s", msg[0] ? msg : wd_strerror(rc),
               strstr(msg, "largest batch") ? " (set it with --max-batch)" : "");
      goto fail;
    }
    rt->iface = *wd_vk_engine_iface(rt->eng);
  }
  if (!cfg->prefill) /* benchmarks: every prompt token a step of its own */
    rt->iface.prefill = NULL;
  const wd_worker_opts_t wo = { .engine = &rt->iface, .tok = rt->tok,
                                .mel = rt->mel, .queue_max = queue_max,
                                .max_batch = max_batch };
  if ((rc = wd_worker_new(&wo, &rt->worker)) < 0) {
    snprintf(err, err_len, "worker: %s", wd_strerror(rc));
    goto fail;
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
  wd_worker_free(rt->worker); /* before the engine it drives */
  wd_vk_engine_free(rt->eng);
  wd_cpu_engine_free(rt->cpu);
  wd_mel_free(rt->mel);
  wd_tokenizer_free(rt->tok);
  wd_model_free(rt->m);
  free(rt->heads);
  free(rt);
}

const int (*wd_runtime_align_heads(wd_runtime_t *rt, int *ret_n))[2] {
  *ret_n = rt->n_heads;
  return (const int (*)[2])rt->heads;
}

wd_worker_t *wd_runtime_worker(wd_runtime_t *rt) { return rt->worker; }
const wd_tokenizer_t *wd_runtime_tokenizer(wd_runtime_t *rt) { return rt->tok; }
const wd_model_t *wd_runtime_model(wd_runtime_t *rt) { return rt->m; }

const char *wd_runtime_device(wd_runtime_t *rt) {
  if (rt->cpu)
    return rt->cpu_name;
  wd_vk_engine_stats_t st;
  wd_vk_engine_stats(rt->eng, &st);
  return st.device_name ? st.device_name : "?";
}

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

int wd_runtime_warmup(wd_runtime_t *rt) {
  float *silence = calloc(16000, sizeof *silence);
  if (!silence)
    return WD_ENOMEM;
  warm_t w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
  wd_job_params_t p = { .cb = { .ud = &w, .on_done = warm_done } };
  wd_decode_opts_default(&p.decode);
  p.decode.language = wd_tokenizer_is_multilingual(rt->tok) ? "en" : NULL;
  int rc = wd_worker_submit(rt->worker, silence, 16000, &p, NULL);
  if (rc < 0)
    return rc;
  pthread_mutex_lock(&w.mu);
  while (!w.done)
    pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  return w.rc;
}

int wd_runtime_arm_faults(void) {
  const char *spec = getenv("WHISPERD_FAULT_INJECT");
  if (!spec || !spec[0])
    return 0;
  /* Host items (core/fault.h) go to core, the rest to gpu/vk_fault.h. */
  char core_spec[64] = "", vk_spec[256] = "";
  const char *p = spec;
  while (*p) {
    const size_t len = strcspn(p, ",");
    char *dst = len >= 4 && strncmp(p, "oom:", 4) == 0 ? core_spec : vk_spec;
    const size_t cap = dst == core_spec ? sizeof core_spec : sizeof vk_spec;
    const size_t used = strlen(dst);
    if (dst == core_spec && used > 0)
      return WD_EINVAL; /* one oom: item at most */
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
