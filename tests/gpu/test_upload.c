/*
 * test_upload.c - the staging ring (gpu/vk_upload.h): writes of every size
 * (a few bytes, several segments' worth) to two device buffers, in an order
 * that switches destination often, arrive byte for byte, with one submit
 * per filled segment. Device-local memory is forced unmapped
 * (force_staging) so lavapipe takes the staged path a discrete
 * GPU takes; a mapped destination is written directly, without a submit.
 * Unforced, whether device-local memory is mapped is the device's choice:
 * lavapipe's is, an NVIDIA H200's (no resizable BAR there) is not, so the
 * unforced run checks whichever path the buffer got.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "vk_buffer.h"
#include "vk_device.h"
#include "vk_upload.h"
#include "wd_test.h"

#define BUF_BYTES (3u << 20)
#define RING_BYTES (256u << 10) /* two 128 KiB segments: many fills */

static uint8_t *pattern(uint64_t n, unsigned seed) {
  uint8_t *p = malloc(n);
  uint32_t x = seed * 2654435761u + 1u;
  for (uint64_t i = 0; p && i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (uint8_t)(x >> 24);
  }
  return p;
}

static void upload_and_check(int force_staging) {
  wd_vk_device_t *dev = NULL;
  const wd_vk_device_opts_t opts = { .index = -1, .force_staging = force_staging };
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  const int rc = wd_vk_device_new(&opts, &dev);
  if (rc == WD_ENODEVICE)
    wd_test_skip("no Vulkan device");
  WD_CHECK_EQ_INT(rc, 0);
  if (!dev)
    return;
  wd_vk_buffer_t *b[2] = { NULL, NULL };
  uint8_t *want[2] = { pattern(BUF_BYTES, 1), pattern(BUF_BYTES, 2) };
  WD_CHECK(want[0] && want[1]);
  for (int i = 0; i < 2; i++)
    WD_CHECK_EQ_INT(wd_vk_buffer_new(dev, BUF_BYTES, WD_VK_BUF_STORAGE, WD_VK_MEM_DEVICE, &b[i]),
                    0);
  const int mapped = b[0] && wd_vk_buffer_map(b[0]) != NULL;
  if (force_staging)
    WD_CHECK(!mapped);
  wd_vk_upload_t *u = NULL;
  WD_CHECK_EQ_INT(wd_vk_upload_new(dev, RING_BYTES, &u), 0);
  if (u && b[0] && b[1] && want[0] && want[1]) {
    /* Pieces of growing size, alternating buffers: 1 byte up to 300 KiB
     * (more than a segment), each buffer filled from the start. */
    uint64_t at[2] = { 0, 0 };
    uint64_t len = 1;
    for (int k = 0; at[0] < BUF_BYTES || at[1] < BUF_BYTES; k++) {
      const int i = at[k & 1] < BUF_BYTES ? k & 1 : !(k & 1);
      const uint64_t n = len < BUF_BYTES - at[i] ? len : BUF_BYTES - at[i];
      WD_CHECK_EQ_INT(wd_vk_upload_write(u, b[i], at[i], want[i] + at[i], n), 0);
      at[i] += n;
      len = len * 3 + 7 < (300u << 10) ? len * 3 + 7 : 1;
    }
    WD_CHECK_EQ_INT(wd_vk_upload_finish(u), 0);
    const unsigned submits = wd_vk_upload_submits(u);
    if (!mapped)
      WD_CHECK(submits >= 2 * BUF_BYTES / (RING_BYTES / 2) && submits <= 2 * BUF_BYTES / 1000);
    else
      WD_CHECK_EQ_INT(submits, 0);
    /* Out of range is refused without touching the ring. */
    WD_CHECK_EQ_INT(wd_vk_upload_write(u, b[0], BUF_BYTES - 1, want[0], 2), WD_ERANGE);
    uint8_t *got = malloc(BUF_BYTES);
    WD_CHECK(got != NULL);
    for (int i = 0; got && i < 2; i++) {
      WD_CHECK_EQ_INT(wd_vk_buffer_read(b[i], 0, got, BUF_BYTES), 0);
      WD_CHECK(memcmp(got, want[i], BUF_BYTES) == 0);
    }
    free(got);
  }
  wd_vk_upload_free(u);
  for (int i = 0; i < 2; i++) {
    wd_vk_buffer_free(b[i]);
    free(want[i]);
  }
  wd_vk_device_free(dev);
}

WD_TEST(staged_uploads_arrive_byte_for_byte) { upload_and_check(1); }

WD_TEST(unforced_uploads_take_the_devices_path) { upload_and_check(0); }

int main(void) { return wd_test_main(); }
