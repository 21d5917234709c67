/*
 * decode_cfg.h - decoding options from the configuration: `whisperd
 * transcribe`'s flags, and the defaults `whisperd serve` gives requests.
 */
#ifndef WD_DECODE_CFG_H
#define WD_DECODE_CFG_H

#include <stddef.h>

#include "config.h"
#include "decode.h"
#include "vad.h"

/*
 * Fills o (from openai's transcribe() defaults) with the language (a code
 * or a name, validated here, before any model loads), the task, beam_size,
 * best_of, the temperature schedule, timestamps, conditioning, word
 * timestamps, the seed and the clip timestamps (parsed into clips[0..max),
 * which o then points at). The prompt is left to the caller: it needs the
 * model's tokenizer. Returns 0, or WD_ECONFIG with a message in err.
 */
int wd_decode_cfg(const wd_config_t *cfg, wd_decode_opts_t *o, float *clips, int max_clips,
                  char *err, size_t err_len);

/* The VAD filter's parameters (--vad-*) into p. 0 or WD_ECONFIG (err). */
int wd_vad_cfg(const wd_config_t *cfg, wd_vad_params_t *p, char *err, size_t err_len);

#endif
