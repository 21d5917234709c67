/*
 * cmd_info.c - `whisperd info MODEL`: what a model file or CTranslate2
 * directory holds, after the same validation the daemon applies at start-up:
 * hyper-parameters, derived name, language support, vocabulary, tensor types
 * (naming the tensors that are neither f16 nor f32), parameter count, and
 * the memory each engine --device names would plan for the configured
 * batch (--max-batch): the Vulkan engine's device memory (weights,
 * self-attention KV, cross-attention KV and scratch, checked against the
 * device's limits and --vk-limits), the CPU engine's host memory.
 * Nothing heavy runs: the plans are arithmetic (gpu/vk_plan.c,
 * cpu/cpu_plan.c) over the device list, no device is opened.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "cpu_engine.h"
#include "device.h"
#include "diar.h"
#include "error.h"
#include "log.h"
#include "model.h"
#include "vk_device.h"
#include "vk_plan.h"

#define MIB(b) ((double)(b) / (1024.0 * 1024.0))

/* Languages by vocabulary layout (ref: openai/whisper tokenizer.py LANGUAGES;
 * large-v3 added Cantonese). */
static const char *wd_info_languages(int32_t n_vocab) {
  switch (n_vocab) {
  case 51864: return "English only";
  case 51865: return "multilingual, 99 languages";
  default: return "multilingual, 100 languages";
  }
}

void wd_cmd_print_diarization(const wd_config_t *cfg, FILE *out) {
  wd_diar_t *d = NULL;
  char msg[512] = "";
  const int rc = wd_diar_load(cfg->diar_seg_model, cfg->diar_emb_model, &d, msg, sizeof msg);
  if (rc == 0)
    fprintf(out, "diarization:     available (%s, %s)\n", cfg->diar_seg_model,
            cfg->diar_emb_model);
  else
    fprintf(out, "diarization:     unavailable: %s%s\n", msg[0] ? msg : wd_strerror(rc),
            rc == WD_ENOENT ? " (scripts/fetch-diarization.sh fetches the models)" : "");
  wd_diar_free(d);
}

static void wd_info_print(const char *path, bool is_dir, const wd_model_t *m, FILE *out) {
  const wd_hparams_t *hp = wd_model_hparams(m);
  fprintf(out, "model:           %s\n", path);
  fprintf(out, "format:          %s\n", is_dir ? "CTranslate2 directory" : "ggml file");
  fprintf(out, "name:            %s\n", wd_model_name(m));
  fprintf(out, "languages:       %s (%s)\n", wd_info_languages(hp->n_vocab),
          wd_model_is_multilingual(m) ? "multilingual" : "English-only");
  fprintf(out, "n_vocab:         %d (%d text tokens stored)\n", (int)hp->n_vocab, wd_model_n_tokens(m));
  fprintf(out, "encoder:         %d layers, %d state, %d heads, %d positions\n",
          (int)hp->n_audio_layer, (int)hp->n_audio_state, (int)hp->n_audio_head,
          (int)hp->n_audio_ctx);
  fprintf(out, "decoder:         %d layers, %d state, %d heads, %d positions\n",
          (int)hp->n_text_layer, (int)hp->n_text_state, (int)hp->n_text_head, (int)hp->n_text_ctx);
  int n_mel = 0, n_fft = 0;
  wd_model_mel_filters(m, &n_mel, &n_fft);
  fprintf(out, "mel filterbank:  %d bands x %d bins (n_mels %d)\n", n_mel, n_fft, (int)hp->n_mels);
  fprintf(out, "ftype:           %d\n", (int)hp->ftype);

  const int (*heads)[2] = NULL;
  int n_heads = 0;
  fprintf(out, "alignment heads:");
  if (wd_model_alignment_heads(m, &heads, &n_heads) == 0) {
    fprintf(out, " %d (layer:head)", n_heads);
    for (int i = 0; i < n_heads; i++)
      fprintf(out, " %d:%d", heads[i][0], heads[i][1]);
    fprintf(out, "\n");
  } else {
    fprintf(out, " unknown (no table for this model)\n");
  }

  /* Counts and sizes per type, in ggml id order. */
  size_t count[16] = { 0 }, bytes_by[16] = { 0 }, bytes = 0;
  int64_t params = 0;
  const size_t n = wd_model_n_tensors(m);
  for (size_t i = 0; i < n; i++) {
    const wd_tensor_t *t = wd_model_tensor_at(m, i);
    count[t->type & 15]++;
    bytes_by[t->type & 15] += t->nbytes;
    bytes += t->nbytes;
    params += wd_tensor_n_elements(t);
  }
  fprintf(out, "tensors:         %zu (", n);
  const char *sep = "";
  for (int k = 0; k < 16; k++) {
    if (count[k]) {
      fprintf(out, "%s%zu %s, %.1f MiB", sep, count[k], wd_dtype_name((wd_dtype_t)k),
              (double)bytes_by[k] / (1024.0 * 1024.0));
      sep = "; ";
    }
  }
  fprintf(out, ")\n");
  /* Anything the f16/f32 kernels do not read as such, by name (at most 6). */
  size_t n_other = 0;
  for (size_t i = 0; i < n; i++) {
    const wd_tensor_t *t = wd_model_tensor_at(m, i);
    if (t->type == WD_DTYPE_F16 || t->type == WD_DTYPE_F32)
      continue;
    if (n_other < 6)
      fprintf(out, "%s%s (%s)", n_other ? ", " : "not f16/f32:     ", t->name,
              wd_dtype_name(t->type));
    n_other++;
  }
  if (n_other > 6)
    fprintf(out, " and %zu more", n_other - 6);
  fprintf(out, "%s\n", n_other ? "" : "not f16/f32:     none");
  fprintf(out, "parameters:      %lld (%.1f M)\n", (long long)params, (double)params / 1e6);
  fprintf(out, "memory needed:   %.1f MiB of weights (%zu bytes)\n", (double)bytes / (1024.0 * 1024.0),
          bytes);
}

/* --device resolves to the native CPU engine: its host memory plan. */
static void wd_info_cpu_plan(const wd_config_t *cfg, const wd_model_t *m,
                             const wd_device_choice_t *dc, FILE *out) {
  const int b = cfg->max_batch > 0 ? cfg->max_batch : 1;
  wd_cpu_engine_plan_t p;
  wd_cpu_compute_t ct = WD_CPU_COMPUTE_F32;
  (void)wd_cpu_compute_parse(cfg->compute_type, &ct); /* the table allows only the three */
  wd_cpu_engine_plan(m, &(wd_cpu_engine_opts_t){ .max_seqs = b, .max_audio = b, .compute = ct },
                     &p);
  fprintf(out, "device:          cpu, the native CPU engine (%s; %s)\n",
          wd_cpu_engine_kernel(), dc->why);
  fprintf(out, "encoder GEMM:    %s\n", wd_cpu_engine_gemm());
  char pick[1536];
  wd_cpu_engine_pick_preview(
      m, &(wd_cpu_engine_opts_t){ .max_seqs = b, .max_audio = b, .n_threads = cfg->threads > 0 ? cfg->threads : 0,
                                  .compute = ct },
      pick, sizeof pick);
  fprintf(out, "kernel choice:   %s\n", pick);
  if (ct != WD_CPU_COMPUTE_F32) {
    const char *no = wd_cpu_compute_refusal(ct);
    fprintf(out, "compute type:    %s: %s\n", wd_cpu_compute_name(ct),
            no ? no : wd_cpu_compute_path(ct));
  }
  const char *warn = wd_cpu_engine_gemm_warning();
  if (warn)
    fprintf(out, "warning:         %s\n", warn);
  fprintf(out, "host memory:     batch %d (max_seqs %d, max_audio %d)\n", b, b, b);
  fprintf(out, "  weights        %9.1f MiB (%s)\n", MIB(p.weight_bytes),
          ct == WD_CPU_COMPUTE_F32 ? "as stored; sgemm widens one at a time"
                                   : "linear layers converted at load, convolutions as stored");
  fprintf(out, "    of which     %9.1f MiB read in place from the model file (shared page cache)\n",
          MIB(p.mapped_bytes));
  fprintf(out, "  self-attn KV   %9.1f MiB (f32, %d layers x %d buffers x %d positions)\n",
          MIB(p.self_bytes), wd_model_hparams(m)->n_text_layer, p.n_self_bufs,
          wd_model_hparams(m)->n_text_ctx);
  fprintf(out, "  cross-attn KV  %9.1f MiB (f16, %d layers x %d windows x %d positions)\n",
          MIB(p.cross_bytes), wd_model_hparams(m)->n_text_layer, b,
          wd_model_hparams(m)->n_audio_ctx);
  fprintf(out, "  scratch        %9.1f MiB (encoder and decoder activations)\n",
          MIB(p.scratch_bytes));
  fprintf(out, "  total          %9.1f MiB\n", MIB(p.total_bytes));
}

/* The device plan at the configured batch, as the engine would make it. */
static void wd_info_plan_one(const wd_config_t *cfg, const wd_model_t *m,
                             const wd_device_choice_t *choice, FILE *out) {
  const wd_device_choice_t dc = *choice;
  if (dc.cpu) {
    wd_info_cpu_plan(cfg, m, &dc, out);
    return;
  }
  wd_vk_device_info_t *infos = NULL, *dev = NULL;
  uint32_t n = 0;
  wd_vk_limits_t over;
  char lerr[256];
  if (wd_device_vk_limits(cfg->vk_limits, &over, lerr, sizeof lerr) < 0) {
    fprintf(out, "device:          %s\n", lerr);
    return;
  }
  if (wd_vk_device_list(&over, &infos, &n) == 0)
    for (uint32_t i = 0; i < n; i++)
      if (infos[i].usable && (dc.vk_index >= 0 ? (int)i == dc.vk_index
                                               : !dev || wd_vk_class_rank(infos[i].device_class) >
                                                             wd_vk_class_rank(dev->device_class)))
        dev = &infos[i];
  wd_vk_limits_t none = { 0 };
  const wd_vk_limits_t *lim = dev ? &dev->limits : &none;
  const int b = cfg->max_batch > 0 ? cfg->max_batch : 1;
  const uint64_t wb = wd_vk_plan_weight_bytes(m);
  /* As the engine decides (vk_engine.h): f32 caches where they fit, f16
   * where that is what fits. */
  wd_vk_plan_t p, p32;
  char err[512] = "";
  int rc = wd_vk_plan_make(wd_model_hparams(m), wb, lim, b, b, false, &p32, err, sizeof err);
  p = p32;
  if (rc == WD_ENOMEM)
    rc = wd_vk_plan_make(wd_model_hparams(m), wb, lim, b, b, true, &p, err, sizeof err);
  char heap[48] = "host memory, unchecked"; /* a CPU driver's heap is no limit */
  if (lim->heap_bytes)
    snprintf(heap, sizeof heap, "%.0f MiB heap", MIB(lim->heap_bytes));
  if (dev)
    fprintf(out, "device:          %s (%s, %llu M texels, %llu MiB storage range, "
                 "%llu/%llu B texel/storage alignment)\n",
            dev->name, heap, (unsigned long long)(lim->max_texel_elements >> 20),
            (unsigned long long)(lim->max_storage_range >> 20),
            (unsigned long long)lim->texel_align, (unsigned long long)lim->storage_align);
  else
    fprintf(out, "device:          none usable (sizes below are not checked against limits)\n");
  fprintf(out, "device memory:   batch %d (max_seqs %d, max_audio %d), %s KV caches\n", b, b, b,
          p.kv_f16 ? "f16" : "f32");
  fprintf(out, "  weights        %9.1f MiB\n", MIB(p.weights));
  fprintf(out, "  self-attn KV   %9.1f MiB (%d layers x %d sequences x %d positions)\n",
          MIB(p.self_bytes), (int)p.self.n_layers, b, wd_model_hparams(m)->n_text_ctx);
  fprintf(out, "  cross-attn KV  %9.1f MiB (%d layers x %d windows x %d positions)\n",
          MIB(p.cross_bytes), (int)p.cross.n_layers, b, wd_model_hparams(m)->n_audio_ctx);
  fprintf(out, "  scratch        %9.1f MiB (activations, align and seq_copy caches)\n",
          MIB(p.act_bytes));
  if (p.kv_f16)
    fprintf(out, "  total          %9.1f MiB (%.1f MiB with f32 caches, over the heap)\n",
            MIB(p.total), MIB(p32.total));
  else
    fprintf(out, "  total          %9.1f MiB\n", MIB(p.total));
  if (rc < 0)
    fprintf(out, "  does not plan: %s\n", err);
  free(infos);
}

/* The plan of every engine --device builds (a list, or all: one per
 * device), as serve would build them. */
static void wd_info_plan(const wd_config_t *cfg, const wd_model_t *m, FILE *out) {
  wd_device_choice_t dc[WD_DEVICES_MAX];
  char summary[512];
  const int n = wd_device_choose_list(cfg->devices, cfg->n_devices, dc, WD_DEVICES_MAX,
                                      summary, sizeof summary);
  for (int i = 0; i < n; i++) {
    if (n > 1)
      fprintf(out, "%sengine %d of %d (%s):\n", i ? "\n" : "", i + 1, n, dc[i].label);
    wd_info_plan_one(cfg, m, &dc[i], out);
  }
}

int wd_cmd_info(const wd_config_t *cfg, FILE *out) {
  const char *path = cfg->n_args > 1 ? cfg->args[1] : cfg->model;
  if (!path || !*path) {
    wd_log_error("info: which model? usage: whisperd info MODEL");
    return 2;
  }
  struct stat st;
  const bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  wd_model_t *m = NULL;
  char err[512] = "";
  int rc = wd_model_load(path, &m, err, sizeof err);
  if (rc < 0) {
    wd_log_error("info: '%s': %s: %s", path, wd_strerror(rc), err[0] ? err : wd_err_name(rc));
    return 1;
  }
  wd_info_print(path, is_dir, m, out);
  wd_cmd_print_diarization(cfg, out);
  wd_info_plan(cfg, m, out);
  wd_model_free(m);
  return 0;
}
