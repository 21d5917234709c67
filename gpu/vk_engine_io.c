/*
 * vk_engine_io.c - the engine's host boundary: submits with a deadline,
 * device loss, and the results the host reads.
 *
 * Readback: shaders write their results (logits, align's argmax records,
 * target logits and attention scores) into device-local buffers; the
 * recording then copies the rows the host will read into a READBACK buffer
 * (host-cached memory where the device has it: the decoding policy scans a
 * row of 52k logits several times, which over BAR memory would be uncached
 * PCIe reads) and ends with the device -> host barrier (wd_vk_cmd_end).
 * After the fence the host invalidates the range when the memory is not
 * coherent and reads it through the mapping. On lavapipe every buffer is
 * host memory, but the path is the same copy.
 *
 * Loss: every submit waits at most the device's timeout. A timeout is a
 * hang, which a driver reports as a lost device sooner or later; either way
 * the engine is marked lost, every later operation fails with WD_EDEVLOST
 * without touching the device, and the worker calls reset()
 * (vk_engine_reset.c).
 */
#include "error.h"
#include "log.h"
#include "vk_engine_internal.h"

int wd__eng_io_new(wd_vk_engine_t *e) {
  const uint64_t S = (uint64_t)e->max_seqs, nv = (uint64_t)e->hp.n_vocab;
  const uint64_t na = (uint64_t)e->hp.n_audio_ctx, P = WD_ENG_MAX_PREFILL;
  const wd_vk_mem_t R = WD_VK_MEM_READBACK;
  /* Host memory: not part of the device-memory plan (vk_plan.c), so not
   * counted in act_bytes, which load checks against that plan. */
  const uint64_t device_bytes = e->act_bytes;
  int rc;
  if ((rc = wd__eng_buf(e, S * nv, R, &e->lg_rb)) ||
      (rc = wd__eng_buf(e, P * sizeof(wd_argmax_out_t) / 4, R, &e->stats_rb)) ||
      (rc = wd__eng_buf(e, P, R, &e->tgt_rb)) ||
      (rc = wd__eng_buf(e, WD_ENG_QK_ROWS * na, R, &e->qk_rb)))
    return rc;
  e->act_bytes = device_bytes;
  /* Readback memory is host-visible by construction; anything else is a
   * bug here, better found at load than at the first step. */
  if (!wd_vk_buffer_map(e->lg_rb) || !wd_vk_buffer_map(e->stats_rb) ||
      !wd_vk_buffer_map(e->tgt_rb) || !wd_vk_buffer_map(e->qk_rb))
    return WD_EINTERNAL;
  return 0;
}

void wd__eng_io_free(wd_vk_engine_t *e) {
  wd_vk_buffer_free(e->lg_rb);
  wd_vk_buffer_free(e->stats_rb);
  wd_vk_buffer_free(e->tgt_rb);
  wd_vk_buffer_free(e->qk_rb);
}

int wd__eng_submit(wd_vk_engine_t *e, wd_vk_cmd_t *cmd) {
  if (e->lost)
    return WD_EDEVLOST;
  const uint64_t timeout = wd_vk_device_timeout_ns(e->dev);
  int rc = wd_vk_cmd_submit(cmd, timeout);
  if (rc == WD_ETIMEDOUT) {
    wd_log_error("vk_engine: the GPU did not finish a submit in %.1f s: taken for a lost device",
                 (double)timeout * 1e-9);
    rc = WD_EDEVLOST;
  } else if (rc == WD_EDEVLOST) {
    wd_log_error("vk_engine: the Vulkan device was lost");
  }
  if (rc == WD_EDEVLOST)
    e->lost = 1;
  return rc;
}

int wd__eng_rec_readback(wd_vk_cmd_t *cmd, wd_vk_buffer_t *src, wd_vk_buffer_t *rb,
                         uint64_t bytes) {
  const wd_vk_copy_region_t r = { .src = 0, .dst = 0, .n = bytes };
  return wd_vk_cmd_readback(cmd, src, rb, 1, &r);
}

const void *wd__eng_host(wd_vk_buffer_t *rb, uint64_t bytes) {
  if (wd_vk_buffer_invalidate(rb, 0, bytes) < 0)
    return NULL;
  return wd_vk_buffer_map(rb);
}
