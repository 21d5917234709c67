/*
 * cmd_info.c - `whisperd info MODEL`: what a model file or CTranslate2
 * directory holds, after the same validation the daemon applies at start-up:
 * hyper-parameters, derived name, language support, vocabulary, tensor types,
 * parameter count and the memory its weights need.
 */
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "error.h"
#include "log.h"
#include "model.h"

/* Languages by vocabulary layout (ref: openai/whisper tokenizer.py LANGUAGES;
 * large-v3 added Cantonese). */
static const char *wd_info_languages(int32_t n_vocab) {
  switch (n_vocab) {
  case 51864: return "English only";
  case 51865: return "multilingual, 99 languages";
  default: return "multilingual, 100 languages";
  }
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
  fprintf(out, "parameters:      %lld (%.1f M)\n", (long long)params, (double)params / 1e6);
  fprintf(out, "memory needed:   %.1f MiB of weights (%zu bytes)\n", (double)bytes / (1024.0 * 1024.0),
          bytes);
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
  wd_model_free(m);
  return 0;
}
