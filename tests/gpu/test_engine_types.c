/*
 * test_engine_types.c - the Vulkan engine on every weight type a ggml file
 * can hold, against the plain-C reference engine reading the same file.
 *
 * Synthetic models in the engine's smallest shape (tests/wd_synth_model.h:
 * d = 64, one layer each side, the real vocabulary size), written as all-f32
 * (ftype 0: conv kernels f32 too), q8_0, q4_0, q5_1 and q4_1, q5_0
 * (quantized blocks of pseudo-random values, ggml's rounding; conv kernels
 * f16). The engine reads the quantized matrices, the token embedding both
 * as the embedding table and as the logits projection, dequantizing inside
 * its kernels; the reference dequantizes on the host with
 * wd_dequantize_row. Both see the same numbers, so what differs is f32
 * summation order only: the encoder output and every step's logits must
 * agree to 1e-3 relative (the f16 test's bound), and the argmax exactly.
 * Two sequences step together, so the batched GEMV variants run too; then
 * a 3-token prefill (the GEMM path over the decoder) is checked the same way.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "error.h"
#include "model.h"
#include "ref_engine.h"
#include "vk_engine.h"
#include "wd_engine_types_check.h"
#include "wd_synth_model.h"
#include "wd_test.h"

/* wd_engine_types_check.h reads the encoder output back through this. */
static int read_encoded(void *eng, float *out) {
  return wd_vk_engine_read_encoded(eng, out);
}

static void run_ftype(int32_t ftype, const char *name) {
  char dir[] = "/tmp/wd_test_engine_types.XXXXXX", path[80], err[256] = "";
  WD_CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/synth.bin", dir);
  const wd_hparams_t hp = wd_synth_engine_hparams(ftype);
  WD_CHECK_EQ_INT(wd_synth_write(path, &hp), 0);
  wd_model_t *m = NULL;
  wd_vk_engine_t *e = NULL;
  wd_ref_engine_t *r = NULL;
  int rc = wd_model_load(path, &m, err, sizeof err);
  if (rc < 0)
    fprintf(stderr, "  load: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  if (rc < 0)
    goto out;
  const wd_vk_engine_opts_t o = { .device = -1, .max_seqs = 2, .max_audio = 1,
                                  /* the f32 kernels, held to the f32 reference; the
                                   * matrix units against them: test_engine_matrix.c */
                                  .exact = true };
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  rc = wd_vk_engine_new(m, &o, &e, err, sizeof err);
  if (rc == WD_ENODEVICE) {
    wd_model_free(m);
    unlink(path);
    rmdir(dir);
    wd_test_skip("no Vulkan device");
  }
  if (rc < 0)
    fprintf(stderr, "  engine: %s\n", err);
  WD_CHECK_EQ_INT(rc, 0);
  WD_CHECK_EQ_INT(wd_ref_engine_new(m, 2, 1, &r), 0);
  if (!e || !r)
    goto out;
  et_check_vs_reference(wd_vk_engine_iface(e), read_encoded, e, r, &hp, name);
out:
  wd_vk_engine_free(e);
  wd_ref_engine_free(r);
  wd_model_free(m);
  unlink(path);
  rmdir(dir);
}

WD_TEST(engine_f32) { run_ftype(0, "f32"); }
WD_TEST(engine_q8_0) { run_ftype(2007, "q8_0"); }
WD_TEST(engine_q4_0) { run_ftype(2002, "q4_0"); }
WD_TEST(engine_q5_1) { run_ftype(2009, "q5_1"); }
WD_TEST(engine_q4_1) { run_ftype(2003, "q4_1"); }
WD_TEST(engine_q5_0) { run_ftype(2008, "q5_0"); }

int main(void) { return wd_test_main(); }
