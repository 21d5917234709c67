/*
 * fuzz_diar_model.c - the diarization model loaders, which read files a
 * user installs: wd_diar_seg_load (core/diar_seg.c: pyannote
 * segmentation-3.0 through core/safetensors.c: the header length, JSON,
 * the __metadata__ format, version and model, every tensor's name, dtype,
 * shape and byte range; then the sinc filters computed from the file's
 * parameters). A file that loads is freed again; the forward pass reads
 * only the loaded weights' values, never the file's structure, and is left
 * to test_diar_seg (100 ms a window would slow the fuzzer a hundredfold).
 *
 * Input: byte 0 even: the rest is the file as written to disk. Byte 0 odd:
 * the rest is the safetensors JSON header alone; the harness writes its
 * length, the header padded with spaces to 4-byte alignment, then 512 KiB
 * of zeros (a hole), as large as the largest tensor: a header whose
 * tensors all point into that range (they may overlap) loads, so the
 * fuzzer reaches every tensor's checks with inputs of a few KB
 * (seeds/diar_model/seg_compact is such a header). With
 * WD_FUZZ_SEED_CHECK set, such a compact input must load.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diar_seg.h"
#include "fuzz_common.h"

#define ZERO_DATA (512u << 10) /* lstm.weight_ih_l1: 512 x 256 floats */

/* Writes the input to <tmp>/input as the loader will read it. */
static void write_input(const char *path, const uint8_t *p, size_t n, int compact) {
  FILE *f = fopen(path, "wb");
  if (!f)
    abort();
  if (compact) {
    const size_t hlen = (n + 3) & ~(size_t)3;
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
      len[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    static const char spaces[4] = "   ";
    if (fwrite(len, 1, 8, f) != 8 || (n && fwrite(p, 1, n, f) != n) ||
        fwrite(spaces, 1, hlen - n, f) != hlen - n || fflush(f) != 0 ||
        ftruncate(fileno(f), (off_t)(8 + hlen + ZERO_DATA)) != 0)
      abort();
  } else if (n && fwrite(p, 1, n, f) != n) {
    abort();
  }
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  char path[512], err[256] = "";
  snprintf(path, sizeof path, "%s/input", fuzz_tmp());
  const int compact = data[0] & 1;
  write_input(path, data + 1, size - 1, compact);
  wd_diar_seg_t *m = NULL;
  const int rc = wd_diar_seg_load(path, &m, err, sizeof err);
  FUZZ_CHECK((rc == 0) == (m != NULL));
  FUZZ_CHECK(rc == 0 || err[0] != '\0');
  if (compact)
    fuzz_seed_check(rc, err);
  wd_diar_seg_free(m);
  return 0;
}
