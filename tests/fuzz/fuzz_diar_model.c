/*
 * fuzz_diar_model.c - the diarization model loaders, which read files a
 * user installs, both through core/safetensors.c (the header length,
 * JSON, the __metadata__ format, version and model, every tensor's name,
 * dtype, shape and byte range): wd_diar_seg_load (core/diar_seg.c:
 * pyannote segmentation-3.0, then the sinc filters computed from the
 * file's parameters) and wd_campp_load (core/diar_campp.c: CAM++'s 815
 * tensors, then the batch norms folded and the weights packed). A file
 * that loads is freed again; the forward passes read only the loaded
 * weights' values, never the file's structure, and are left to
 * test_diar_seg and test_diar_campp (tens of ms a window would slow the
 * fuzzer a hundredfold).
 *
 * Input: byte 0's bit 1 picks the loader (0: segmentation, 1: CAM++).
 * Bit 0 clear: the rest is the file as written to disk. Bit 0 set: the
 * rest is the safetensors JSON header alone; the harness writes its
 * length, the header padded with spaces to 4-byte alignment, then zeros
 * (a hole) as large as the loader's largest tensor: a header whose tensors
 * all point into that range (they may overlap) loads, so the fuzzer
 * reaches every tensor's checks with inputs of a few KB
 * (seeds/diar_model/seg_compact and campp_compact are such headers). With
 * WD_FUZZ_SEED_CHECK set, such a compact input must load.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diar_campp.h"
#include "diar_seg.h"
#include "fuzz_common.h"

/* The largest tensor's bytes: segmentation's lstm.weight_ih_l1 (512 x 256
 * floats), CAM++'s xvector.transit2.linear.weight (512 x 1024). */
static const size_t k_zero_data[2] = { 512u << 10, 2u << 20 };

/* Writes the input to <tmp>/input as the loader will read it. */
static void write_input(const char *path, const uint8_t *p, size_t n, int compact,
                        size_t zero_data) {
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
        ftruncate(fileno(f), (off_t)(8 + hlen + zero_data)) != 0)
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
  const int compact = data[0] & 1, campp = data[0] >> 1 & 1;
  write_input(path, data + 1, size - 1, compact, k_zero_data[campp]);
  int rc, loaded;
  if (campp) {
    wd_campp_t *m = NULL;
    rc = wd_campp_load(path, &m, err, sizeof err);
    loaded = m != NULL;
    wd_campp_free(m);
  } else {
    wd_diar_seg_t *m = NULL;
    rc = wd_diar_seg_load(path, &m, err, sizeof err);
    loaded = m != NULL;
    wd_diar_seg_free(m);
  }
  FUZZ_CHECK((rc == 0) == loaded);
  FUZZ_CHECK(rc == 0 || err[0] != '\0');
  if (compact)
    fuzz_seed_check(rc, err);
  return 0;
}
