/*
 * safetensors.h - a reader for the safetensors files whisperd makes for its
 * small auxiliary networks (scripts/vad_convert.py, scripts/diar_convert.py): 8 bytes of little-endian
 * header length, a JSON header naming each tensor's dtype, shape and byte
 * range, then the tensors' bytes. The whole file is read into memory (these
 * files are a few MB); tensors are looked up by name and checked against the
 * shape the caller expects, so a loader states its model's shapes once and
 * every mismatch becomes one error naming the tensor.
 *
 * Only F32 tensors are read. The header's __metadata__ must carry the
 * caller's "format" and "version" strings.
 */
#ifndef WD_SAFETENSORS_H
#define WD_SAFETENSORS_H

#include <stddef.h>

typedef struct wd_st wd_st_t;

/* Reads path (at most max_bytes) and parses its header. WD_ENOENT when it
 * cannot be opened, WD_EMODEL (err says why) when it is not a safetensors
 * file of the given format and version ("hint" is appended to that error:
 * the script that makes such a file), WD_ENOMEM. */
int wd_st_open(const char *path, size_t max_bytes, const char *format, const char *version,
               const char *hint, wd_st_t **ret, char *err, size_t err_len);
void wd_st_close(wd_st_t *st); /* accepts NULL */

/* The __metadata__ string value of key, or NULL. */
const char *wd_st_meta(const wd_st_t *st, const char *key);

/* The data of F32 tensor name, whose shape must be exactly shape[0..n_dims)
 * (4-byte aligned, valid until wd_st_close). WD_EMODEL with err naming the
 * tensor and the expected shape when it is missing, of another type or
 * shape, or out of the file. */
int wd_st_f32(const wd_st_t *st, const char *name, size_t n_dims, const size_t *shape,
              const float **ret, char *err, size_t err_len);

#endif
