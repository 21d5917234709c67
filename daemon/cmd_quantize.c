/*
 * cmd_quantize.c - `whisperd quantize IN OUT TYPE`: loads a model (a ggml
 * file or a CTranslate2 directory) with full validation and writes it as a
 * ggml file of weight type TYPE (q8_0, q5_0, q5_1, q4_0, q4_1, f16, f32) in
 * whisper.cpp's layout, as whisper.cpp's quantize tool would (see
 * core/model_quantize.c). OUT appears only once complete (OUT.tmp, renamed).
 */
#include <sys/stat.h>

#include "commands.h"
#include "error.h"
#include "log.h"
#include "model.h"
#include "quant.h"

#define WD_QUANTIZE_USAGE "usage: whisperd quantize IN OUT TYPE (TYPE: q8_0 q5_0 q5_1 q4_0 q4_1 f16 f32)"

static long long wd_file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

int wd_cmd_quantize(const wd_config_t *cfg, FILE *out) {
  if (cfg->n_args != 4) {
    wd_log_error("quantize: %s", WD_QUANTIZE_USAGE);
    return 2;
  }
  const char *src = cfg->args[1], *dst = cfg->args[2], *type_name = cfg->args[3];
  wd_dtype_t type;
  if (wd_dtype_parse(type_name, &type) < 0) {
    wd_log_error("quantize: unknown type '%s'; %s", type_name, WD_QUANTIZE_USAGE);
    return 2;
  }
  wd_model_t *m = NULL;
  char err[512] = "";
  wd_log_info("quantize: loading '%s'", src);
  int rc = wd_model_load(src, &m, err, sizeof err);
  if (rc < 0) {
    wd_log_error("quantize: '%s': %s: %s", src, wd_strerror(rc), err[0] ? err : wd_err_name(rc));
    return 1;
  }
  /* The weight type is that of any linear weight, e.g. the first query. */
  const wd_tensor_t *q = wd_model_tensor(m, "encoder.blocks.0.attn.query.weight");
  if (q && wd_dtype_is_quant(q->type) && q->type != type)
    wd_log_warning("quantize: '%s' is already %s; its weights are dequantized and quantized again "
                "(whisper.cpp's quantize tool refuses this)", src, wd_dtype_name(q->type));
  wd_log_info("quantize: writing '%s' (%s, %s)", dst, wd_model_name(m), wd_dtype_name(type));
  size_t n_converted = 0;
  rc = wd_model_quantize(m, type, dst, &n_converted, err, sizeof err);
  if (rc < 0) {
    wd_log_error("quantize: '%s': %s: %s", dst, wd_strerror(rc), err[0] ? err : wd_err_name(rc));
    wd_model_free(m);
    return 1;
  }
  int32_t ftype = 0;
  (void)wd_dtype_ftype(type, &ftype); /* type parsed above, so it has one */
  fprintf(out, "wrote %s: %s %s (ftype %d), %zu of %zu tensors converted, %lld bytes\n", dst,
          wd_model_name(m), wd_dtype_name(type), (int)ftype, n_converted, wd_model_n_tensors(m),
          wd_file_size(dst));
  wd_model_free(m);
  return 0;
}
