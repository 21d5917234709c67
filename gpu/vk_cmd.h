/*
 * vk_cmd.h - recording, submitting and timing command buffers.
 *
 * A wd_vk_cmd_t is one primary command buffer with its own fence and an
 * optional timestamp query pool. The engine records a sequence once (the
 * encoder, cross-K/V, one decoder step per batch size) and replays it with
 * wd_vk_cmd_submit() as often as it likes; values that change between
 * replays live in host-visible buffers, not in the recording.
 *
 * Recording calls do not return errors one by one: the first failure is kept
 * and returned by wd_vk_cmd_end(), so a recording reads as a plain sequence.
 * Misuse caught while recording (wrong push size, a set of another pipeline,
 * too many workgroups) is such a failure, never an abort.
 */
#ifndef WD_VK_CMD_H
#define WD_VK_CMD_H

#include <stdint.h>

#include "vk_device.h"
#include "vk_pipeline.h"

typedef struct wd_vk_cmd wd_vk_cmd_t;

/* n_timestamps: query slots for wd_vk_cmd_timestamp (0 for none). On a
 * queue without timestamps (timestampValidBits = 0) the slots are accepted
 * and recorded as nothing; wd_vk_cmd_elapsed_ns then says WD_EUNSUP. */
int wd_vk_cmd_new(wd_vk_device_t *dev, uint32_t n_timestamps, wd_vk_cmd_t **ret_cmd);
void wd_vk_cmd_free(wd_vk_cmd_t *cmd); /* accepts NULL; waits for pending work */

/* Starts (re-)recording; the previous recording must have completed. */
int wd_vk_cmd_begin(wd_vk_cmd_t *cmd);
/* Records one dispatch of groups[0..2] workgroups. push may be NULL when the
 * pipeline has no push constants; push_size must equal the pipeline's. */
void wd_vk_cmd_dispatch(wd_vk_cmd_t *cmd, const wd_vk_dset_t *set, const void *push,
                        uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz);
/* The same with pipe, a variant of the set's pipeline (or that pipeline). */
void wd_vk_cmd_dispatch_pipe(wd_vk_cmd_t *cmd, const wd_vk_pipeline_t *pipe,
                             const wd_vk_dset_t *set, const void *push, uint32_t push_size,
                             uint32_t gx, uint32_t gy, uint32_t gz);
/* Makes every earlier shader write visible to every later shader read:
 * placed between dispatches that depend on each other. */
void wd_vk_cmd_barrier(wd_vk_cmd_t *cmd);
/* Copies n bytes from src's range start to dst's range start and makes the
 * result visible to later shaders (transfer -> compute barrier). */
int wd_vk_cmd_copy(wd_vk_cmd_t *cmd, const wd_vk_arg_t *src, const wd_vk_arg_t *dst, uint64_t n);
/* Copies n regions (byte offsets and sizes) from src to dst in one
 * command, with the same barriers as wd_vk_cmd_copy: earlier shader work is
 * done before it, later shaders see its result (and may overwrite src). The
 * destination ranges must not overlap each other. */
typedef struct {
  uint64_t src, dst, n;
} wd_vk_copy_region_t;
int wd_vk_cmd_copy_regions(wd_vk_cmd_t *cmd, const wd_vk_buffer_t *src, const wd_vk_buffer_t *dst,
                           uint32_t n, const wd_vk_copy_region_t *regions);
/* Copies n regions of shader results from src (device-local) into dst (a
 * WD_VK_MEM_READBACK buffer the host reads after the submit): waits for the
 * earlier shader writes; wd_vk_cmd_end's device -> host barrier then makes
 * dst visible to the host. Usually the last thing a recording does. */
int wd_vk_cmd_readback(wd_vk_cmd_t *cmd, const wd_vk_buffer_t *src, const wd_vk_buffer_t *dst,
                       uint32_t n, const wd_vk_copy_region_t *regions);
/* Writes the GPU clock into query slot i once all earlier work is done. */
void wd_vk_cmd_timestamp(wd_vk_cmd_t *cmd, uint32_t i);
/* Ends the recording with a device -> host memory barrier (everything the
 * recording wrote is visible to host reads after its fence), and returns
 * the first recording error. */
int wd_vk_cmd_end(wd_vk_cmd_t *cmd);

/* Submits the recording and waits up to timeout_ns for it to complete
 * (the engine passes wd_vk_device_timeout_ns, never an infinite wait).
 * WD_ETIMEDOUT leaves the work pending (the next call waits for it again);
 * WD_EDEVLOST means the device is gone and must be re-created (also what a
 * submit armed by vk_fault.h returns). */
int wd_vk_cmd_submit(wd_vk_cmd_t *cmd, uint64_t timeout_ns);

/* 1 when the recording really writes timestamps (see wd_vk_cmd_new). */
int wd_vk_cmd_has_timestamps(const wd_vk_cmd_t *cmd);
/* Nanoseconds between query slots a and b of the last completed submit;
 * WD_EUNSUP when the queue writes no timestamps. */
int wd_vk_cmd_elapsed_ns(wd_vk_cmd_t *cmd, uint32_t a, uint32_t b, double *ret_ns);

/* Number of dispatches in the current recording (for benchmarks). */
uint32_t wd_vk_cmd_n_dispatches(const wd_vk_cmd_t *cmd);

#endif
