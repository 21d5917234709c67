/*
 * model.h - the immutable in-memory Whisper model.
 *
 * One wd_model_t is produced by either loader: a whisper.cpp ggml file
 * (mapped read-only, tensor data points into the mapping) or a CTranslate2
 * directory (model.bin + config.json + vocabulary, converted into malloc'd
 * buffers). Both give the same view: OpenAI/ggml tensor names, ggml's shape
 * order (ne[0] fastest-varying) and whisper.cpp's types: 2-D weights and conv
 * kernels f16 (or the file's quantized type), biases, norms and positional
 * embeddings f32, conv biases as ne = {1, n_state}. The key projections have
 * no bias tensor.
 *
 * Ownership: wd_model_load() returns a model the caller frees with
 * wd_model_free(); every pointer obtained from the accessors (tensors, their
 * data, names, tokens, filterbank, alignment heads) stays valid until then.
 * Threading: the model never changes after loading, so any number of threads
 * may read it at once.
 */
#ifndef WD_MODEL_H
#define WD_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* Tensor element types, numbered as ggml numbers them. */
typedef enum {
  WD_DTYPE_F32 = 0,
  WD_DTYPE_F16 = 1,
  WD_DTYPE_Q4_0 = 2,
  WD_DTYPE_Q4_1 = 3,
  WD_DTYPE_Q5_0 = 6,
  WD_DTYPE_Q5_1 = 7,
  WD_DTYPE_Q8_0 = 8,
} wd_dtype_t; /* ggml ids */

/* The 11 hyper-parameters of a ggml file, in file order. ftype is stored as
 * found: quantized files add 1000 * the ggml quantization version. */
typedef struct {
  int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx,
      n_text_state, n_text_head, n_text_layer, n_mels, ftype;
} wd_hparams_t;

typedef struct {
  const char *name; /* OpenAI/ggml naming, e.g. "decoder.blocks.0.attn.query.weight" */
  wd_dtype_t type;
  int n_dims;
  int64_t ne[4]; /* ggml order: ne[0] fastest-varying; unused dims are 1 */
  /* Raw element data, nbytes long. For a ggml file it points into the mapped
   * file and may be unaligned: read it with memcpy, never through a cast. */
  const void *data;
  size_t nbytes;
} wd_tensor_t;

typedef struct wd_model wd_model_t;

/*
 * Loads a ggml file or a CTranslate2 directory (sniffed: a directory is read
 * as CTranslate2, a file must start with the ggml magic). Everything is
 * validated before *ret is set. A bad file gives WD_EMODEL (WD_EUNSUP for a
 * valid but unsupported variant, WD_ENOENT/WD_EIO for file system errors) and
 * one line in err naming the problem, e.g. "tensor 'encoder.conv1.weight':
 * expected shape [3, 80, 384], found [3, 80, 512]". err may be NULL.
 */
int wd_model_load(const char *path, wd_model_t **ret, char *err, size_t err_len);
/* Releases the model and everything it handed out; NULL is allowed. */
void wd_model_free(wd_model_t *m);

const wd_hparams_t *wd_model_hparams(const wd_model_t *m);
/* Name derived from the shapes: "tiny.en", "base", "small", "medium",
 * "large-v2" (also large-v1, which has the same shapes), "large-v3",
 * "large-v3-turbo", ... or "custom" for shapes no OpenAI model has. */
const char *wd_model_name(const wd_model_t *m);
/* 1 when n_vocab >= 51865 (the multilingual layouts), else 0. */
int wd_model_is_multilingual(const wd_model_t *m);
/* 1 when the model was trained to translate into English, decided from its
 * shape alone: a multilingual vocabulary (n_vocab >= 51865; the
 * English-only .en models have 51864 and no task tokens to speak of) and a
 * decoder as deep as its encoder. Every OpenAI multilingual release tiny ..
 * large-v3 has both. A decoder cut down under a full encoder is a model
 * fine-tuned or distilled for transcription only: large-v3-turbo (4
 * decoder layers under 32), distil-whisper's (2 under 32). openai/whisper
 * still runs task=translate on those, and they answer with a transcript in
 * the spoken language; whisperd refuses the task instead (400) rather than
 * call that a translation. */
int wd_model_can_translate(const wd_model_t *m);

/* The tensor with that exact name, or NULL if absent. */
const wd_tensor_t *wd_model_tensor(const wd_model_t *m, const char *name);
/* All tensors in canonical order (encoder first, then decoder, per layer in
 * OpenAI's state-dict order); i < wd_model_n_tensors(m). */
size_t wd_model_n_tensors(const wd_model_t *m);
const wd_tensor_t *wd_model_tensor_at(const wd_model_t *m, size_t i);

/* For an engine done with a tensor's bytes (uploaded to the device, or
 * converted into a copy of its own): drops this process's resident pages of
 * them from the model file's read-only mapping (madvise MADV_DONTNEED on
 * the whole pages inside t->data .. + nbytes; pages shared with a neighbour
 * stay). The page cache keeps the file, so this returns RSS, not I/O. The
 * bytes stay valid: a later read faults them back in from the file (the
 * Vulkan engine's rebuild after a device loss reads them again). A tensor
 * outside the mapping (converted by the loader into memory of its own) is
 * left alone. Returns the bytes released. */
size_t wd_model_release(const wd_model_t *m, const wd_tensor_t *t);

/* The mel filterbank, (n_mel, n_fft = 201) row-major, one row per band. */
const float *wd_model_mel_filters(const wd_model_t *m, int *ret_n_mel, int *ret_n_fft);

/* Text tokens stored: ids 0 .. n-1 (50257 for every OpenAI model; the last
 * is <|endoftext|> in English-only models and an empty token otherwise). The
 * special and timestamp tokens above them are not stored. */
int wd_model_n_tokens(const wd_model_t *m);
/* Raw bytes of token id (its BPE rank), not NUL-terminated; NULL when id is
 * out of range. *ret_len may be NULL. */
const char *wd_model_token(const wd_model_t *m, int id, size_t *ret_len);

/*
 * Alignment heads (text layer, head) for word timestamps: config.json's list
 * for a CTranslate2 directory, otherwise openai/whisper's table for the
 * model's name. Returns 0, or WD_ENOENT (with *ret_n = 0) when none is known.
 */
int wd_model_alignment_heads(const wd_model_t *m, const int (**ret_pairs)[2], int *ret_n);

/* Element and byte counts of a tensor shape of type t; bytes is 0 when ne[0]
 * is not a multiple of a quantized type's block. */
int64_t wd_tensor_n_elements(const wd_tensor_t *t);
size_t wd_dtype_row_bytes(wd_dtype_t type, int64_t n);
/* "f32", "f16", "q4_0", ... or "?" */
const char *wd_dtype_name(wd_dtype_t type);

/*
 * Writes m as a ggml file at path (whisperd convert): header, filterbank,
 * vocabulary, then the tensors in canonical order. The bytes go to
 * "<path>.tmp", which is renamed over path only once complete and synced, so
 * a partial file never sits at path. Returns 0 or WD_EIO with err set.
 */
int wd_model_write_ggml(const wd_model_t *m, const char *path, char *err, size_t err_len);

/*
 * Writes m as a ggml file of weight type `type` at path (whisperd quantize),
 * as whisper.cpp's quantize tool writes it (see model_quantize.c): header
 * ftype = the type's ggml ftype (+ 2000 for the quantized ones), filterbank
 * and vocabulary copied, every linear weight and the token embedding
 * converted to `type`, conv kernels f16 (f32 for type f32), vectors f32.
 * Written atomically like wd_model_write_ggml. *ret_n_converted (may be
 * NULL) gets the number of tensors whose type changed. Returns 0, WD_EINVAL
 * for a bad type, WD_EMODEL for a model that cannot take it (a state that is
 * not a multiple of 32 for a block type), WD_EIO or WD_ENOMEM, with err set.
 */
int wd_model_quantize(const wd_model_t *m, wd_dtype_t type, const char *path,
                      size_t *ret_n_converted, char *err, size_t err_len);
/* The ggml ftype a file of weight type `type` stores: f32 0, f16 1,
 * q4_0 2002, q4_1 2003, q8_0 2007, q5_0 2008, q5_1 2009; 0 or WD_EINVAL. */
int wd_dtype_ftype(wd_dtype_t type, int32_t *ret);

#endif
