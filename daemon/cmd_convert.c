/*
 * cmd_convert.c - `whisperd convert CT2_DIR -o FILE`: loads a model (a
 * CTranslate2 directory, or a ggml file to rewrite) with full validation and
 * writes it as a whisper.cpp ggml file. The output appears at FILE only once
 * complete (written as FILE.tmp, then renamed).
 */
#include <sys/stat.h>

#include "commands.h"
#include "error.h"
#include "log.h"
#include "model.h"

int wd_cmd_convert(const wd_config_t *cfg, FILE *out) {
  if (cfg->n_args < 2 || !cfg->output || !*cfg->output) {
    wd_log_error("convert: usage: whisperd convert CT2_DIR -o FILE");
    return 2;
  }
  const char *src = cfg->args[1], *dst = cfg->output;
  wd_model_t *m = NULL;
  char err[512] = "";
  wd_log_info("convert: loading '%s'", src);
  int rc = wd_model_load(src, &m, err, sizeof err);
  if (rc < 0) {
    wd_log_error("convert: '%s': %s: %s", src, wd_strerror(rc), err[0] ? err : wd_err_name(rc));
    return 1;
  }
  wd_log_info("convert: writing '%s' (%s, %zu tensors)", dst, wd_model_name(m), wd_model_n_tensors(m));
  rc = wd_model_write_ggml(m, dst, err, sizeof err);
  if (rc < 0) {
    wd_log_error("convert: '%s': %s: %s", dst, wd_strerror(rc), err[0] ? err : wd_err_name(rc));
    wd_model_free(m);
    return 1;
  }
  struct stat st;
  const long long size = stat(dst, &st) == 0 ? (long long)st.st_size : -1;
  fprintf(out, "wrote %s: %s, %lld bytes\n", dst, wd_model_name(m), size);
  wd_model_free(m);
  return 0;
}
