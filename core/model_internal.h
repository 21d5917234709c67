/*
 * model_internal.h - the model struct and the helpers shared by the files of
 * the model module: model.c (accessors, expected tensor list), model_ggml.c
 * (ggml reader), model_ct2.c (CTranslate2 reader), model_ggml_write.c.
 */
#ifndef WD_MODEL_INTERNAL_H
#define WD_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* ggml's vocabulary holds the GPT-2 byte-level ranks plus one more entry. */
#define WD__MODEL_N_TEXT_TOKENS 50257
/* Whisper's STFT: 400-point FFT, so 201 one-sided bins, at 16 kHz. */
#define WD__MODEL_N_FFT 400
#define WD__MODEL_N_BINS 201
#define WD__MODEL_SAMPLE_RATE 16000
#define WD__MODEL_NAME_MAX 64
/* The ggml ftype field carries 1000 * the quantization version. */
#define WD__MODEL_QNT_FACTOR 1000

/* What class a tensor belongs to decides its type (see wd__model_expect_type). */
typedef enum {
  WD__TK_MATRIX = 0, /* 2-D weights and the token embedding: the file's weight type */
  WD__TK_CONV = 1,   /* conv kernels: f16 (f32 in an all-f32 file) */
  WD__TK_VECTOR = 2, /* biases, norms, positional embeddings: f32 */
} wd__tensor_kind_t;

typedef struct {
  char name[WD__MODEL_NAME_MAX];
  int n_dims;
  int64_t ne[4];
  wd__tensor_kind_t kind;
} wd__tensor_spec_t;

struct wd_model {
  wd_hparams_t hp;
  char name[32];
  /* Tensors in the canonical order of wd__model_expect(). */
  wd_tensor_t *tensors;
  char (*tensor_names)[WD__MODEL_NAME_MAX];
  size_t n_tensors;
  /* (n_mel, n_fft) filterbank, owned. */
  float *mel;
  int n_mel, n_fft;
  /* Vocabulary: token i is tok_len[i] bytes at tok[i] (into the mapping or tok_arena). */
  int n_tokens;
  const char **tok;
  uint32_t *tok_len;
  char *tok_arena;
  /* Alignment heads, owned; NULL with n_aheads = 0 to use the table by name. */
  int (*aheads)[2];
  int n_aheads;
  /* The ggml file mapping (NULL for CTranslate2). */
  void *map;
  size_t map_len;
  /* Buffers owned by the model, one per converted tensor (CTranslate2). */
  void **owned;
  size_t n_owned;
};

/* Writes a one-line message into err (if any) and returns code. */
int wd__model_fail(char *err, size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Checks the hyper-parameters' ranges and consistency; WD_EMODEL + err if bad. */
int wd__model_check_hparams(const wd_hparams_t *hp, char *err, size_t err_len);
/* The full list of tensors a model with these hyper-parameters has, in
 * canonical order. *ret is malloc'd; free() it. */
int wd__model_expect(const wd_hparams_t *hp, wd__tensor_spec_t **ret, size_t *ret_n);
/* The type a tensor of that kind has in a file of ftype hp->ftype. */
int wd__model_expect_type(const wd_hparams_t *hp, wd__tensor_kind_t kind, wd_dtype_t *ret);
/* Formats "[3, 80, 384]" into buf. */
void wd__model_shape_str(int n_dims, const int64_t *ne, char *buf, size_t len);

/* Allocates an empty model (tensor table for n tensors) with hp set. */
int wd__model_new(const wd_hparams_t *hp, size_t n_tensors, wd_model_t **ret);
/* Sets name, from the hyper-parameters. */
void wd__model_finish(wd_model_t *m);

/*
 * Supplies tensor i (t, the model's own) as it is to be written: its type
 * and nbytes bytes of data, which must stay valid until the next call.
 * Returns 0, or a negative code with err set to stop the write.
 */
typedef int (*wd__tensor_source_fn)(void *ctx, size_t i, const wd_tensor_t *t,
                                    wd_dtype_t *ret_type, const void **ret_data,
                                    size_t *ret_nbytes, char *err, size_t err_len);
/* wd_model_write_ggml with the header's ftype replaced and, when src is set,
 * every tensor's type and bytes taken from src (model_quantize.c). */
int wd__model_write_ggml_as(const wd_model_t *m, int32_t ftype, wd__tensor_source_fn src,
                            void *ctx, const char *path, char *err, size_t err_len);

int wd__model_load_ggml(const char *path, wd_model_t **ret, char *err, size_t err_len);
/* Parses a whole ggml file held in data[0..len) (the loader's mapping, or a
 * buffer from a fuzzer). The model's tensor data and tokens point into data,
 * which must outlive it; the model does not own or free it. */
int wd__model_parse_ggml(const void *data, size_t len, wd_model_t **ret, char *err,
                         size_t err_len);
int wd__model_load_ct2(const char *dir, wd_model_t **ret, char *err, size_t err_len);

#endif
