/*
 * fuzz_vad.c - the voice-activity code that reads what it is given: the
 * Silero file's loader (core/vad.c: a safetensors header, JSON, tensor
 * names, shapes and byte ranges) and the speech-span rules over arbitrary
 * probabilities and parameters (core/vad_speech.c, then the chunk merging
 * of core/chunk_job.c): every span inside the signal, every chunk inside
 * it and at most 30 s long (silero's padding rules may make neighbouring
 * spans touch, so no order is asserted).
 *
 * Input: byte 0 even: the rest is the model file, as written to disk;
 * odd: the parameters (12 bytes), the last chunk's shortfall (2 bytes, mod
 * 512), 2 unused, then one probability per byte (value / 255).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_job.h"
#include "fuzz_common.h"
#include "vad.h"

static void load(const uint8_t *p, size_t n) {
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/input", fuzz_tmp());
  FILE *f = fopen(path, "wb");
  if (!f)
    abort();
  if (n && fwrite(p, 1, n, f) != n)
    abort();
  fclose(f);
  wd_vad_model_t *m = NULL;
  if (wd_vad_model_load(path, &m, err, sizeof err) == 0) {
    /* A file that loads runs: 600 samples, two chunks. */
    float x[600] = { 0 }, probs[2];
    if (wd_vad_probs(m, x, 600, probs) != 0)
      abort();
    wd_vad_model_free(m);
  }
}

static void spans(const uint8_t *p, size_t n) {
  if (n < 16)
    return;
  wd_vad_params_t q;
  wd_vad_params_default(&q);
  q.threshold = (float)p[0] / 255.0f;
  q.neg_threshold = p[1] == 255 ? -1.0f : (float)p[1] / 255.0f;
  q.min_speech_ms = p[2] * 16;
  q.max_speech_s = (float)p[3] / 8.0f;
  q.min_silence_ms = p[4] * 16;
  q.speech_pad_ms = p[5] * 8;
  q.min_silence_at_max_ms = p[6] * 4;
  q.use_max_silence = p[7] & 1;
  const size_t n_probs = n - 16;
  /* The signal's length, as the callers pass it: n_probs chunks, the last
   * one partial (silero itself returns spans outside the signal when the
   * two disagree). */
  const uint32_t len = (uint32_t)p[12] | (uint32_t)p[13] << 8;
  const size_t n_samples = n_probs * WD_VAD_CHUNK - (len % WD_VAD_CHUNK);
  float *probs = malloc((n_probs ? n_probs : 1) * sizeof *probs);
  if (!probs)
    return;
  for (size_t i = 0; i < n_probs; i++)
    probs[i] = (float)p[16 + i] / 255.0f;
  wd_vad_span_t *sp = NULL, *ch = NULL;
  size_t ns = 0, nc = 0;
  if (wd_vad_speech(probs, n_probs, n_samples, &q, &sp, &ns) == 0) {
    for (size_t i = 0; i < ns; i++)
      if (sp[i].start > n_samples || sp[i].end > n_samples)
        abort();
    if (ns && wd_chunks_merge(sp, ns, WD_CHUNK_MAX_S, &ch, &nc) == 0) {
      const size_t max = (size_t)(WD_CHUNK_MAX_S * WD_VAD_SAMPLE_RATE);
      for (size_t i = 0; i < nc; i++)
        if (ch[i].start >= ch[i].end || ch[i].end - ch[i].start > max || ch[i].end > n_samples)
          abort();
    }
  }
  free(ch);
  free(sp);
  free(probs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  if (data[0] & 1)
    spans(data + 1, size - 1);
  else
    load(data + 1, size - 1);
  return 0;
}
