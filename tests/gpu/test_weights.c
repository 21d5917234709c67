/*
 * test_weights.c - the real tiny.en model uploads into device memory and
 * every tensor reads back bit for bit from its bound range.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "error.h"
#include "model.h"
#include "vk_buffer.h"
#include "vk_device.h"
#include "vk_weights.h"
#include "wd_test.h"

WD_TEST(upload_tiny_en_and_read_back) {
  const char *path = WD_SOURCE_DIR "/models/ggml-tiny.en.bin";
  wd_model_t *m = NULL;
  char err[256] = "";
  if (wd_model_load(path, &m, err, sizeof err) < 0)
    wd_test_skip("models/ggml-tiny.en.bin not present (scripts/fetch-model.sh tiny.en)");
  wd_vk_device_t *dev = NULL;
  const wd_vk_device_opts_t opts = { .index = -1 };
  /* Keep lavapipe mapped after vkDestroyInstance so LeakSanitizer can name
   * (and tests/lsan.supp suppress) the driver's own exit-time leaks. */
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  if (wd_vk_device_new(&opts, &dev) == WD_ENODEVICE) {
    wd_model_free(m);
    wd_test_skip("no Vulkan device");
  }
  wd_vk_weights_t *w = NULL;
  WD_CHECK_EQ_INT(wd_vk_weights_upload(dev, m, &w, err, sizeof err), 0);
  if (w) {
    fprintf(stderr, "  %zu tensors, %.1f MiB on the device\n", wd_model_n_tensors(m),
            (double)wd_vk_weights_bytes(w) / 1048576.0);
    int bad = 0;
    for (size_t i = 0; i < wd_model_n_tensors(m); i++) {
      const wd_tensor_t *t = wd_model_tensor_at(m, i);
      wd_vk_arg_t a;
      WD_CHECK_EQ_INT(wd_vk_weights_arg(w, t->name, &a), 0);
      WD_CHECK(a.offset % 256 == 0);
      WD_CHECK_EQ_INT(a.range, t->nbytes);
      void *back = malloc(t->nbytes);
      if (back && wd_vk_buffer_read(a.buf, a.offset, back, t->nbytes) == 0)
        bad += memcmp(back, t->data, t->nbytes) != 0;
      else
        bad++;
      free(back);
    }
    WD_CHECK_EQ_INT(bad, 0);
    wd_vk_arg_t a;
    WD_CHECK_EQ_INT(wd_vk_weights_arg(w, "no.such.tensor", &a), WD_ENOENT);
  }
  wd_vk_weights_free(w);
  wd_vk_device_free(dev);
  wd_model_free(m);
}

int main(void) { return wd_test_main(); }
