/*
 * win_ahead.h - the log-mel of a file's next window, computed on another
 * thread while the device works on the current one (issue #40: "the host
 * keeps up").
 *
 * Why: a decoder makes each 30 s window's log-mel (wd_mel_pcm_window,
 * ~2.7 ms on one core for 3000 frames) when its previous window ends,
 * inside the worker's turn, so every running job's steps wait for it. On a
 * GPU that is a stall the device sits through, once per window per job;
 * with 16 long files decoding side by side a window ends every few steps.
 *
 * Shape: the next window starts somewhere in (seek, seek + size] of the
 * current one [seek, seek + size) (openai's seek moves to the last
 * timestamp, or past the window), so it lies within the current window's
 * frames plus the 3000 frames after them. Those 3000 frames are computed
 * ahead, as soon as the current window is made, on a worker-owned task
 * queue; the next window is then copied from the two, bit for bit what
 * wd_mel_pcm_window gives (every frame's column depends on that frame's
 * samples and the file's maximum only). A window the two do not cover (the
 * next VAD clip, a file's first window after language detection read past
 * a short file's end) is computed as before.
 *
 * Memory: one (n_mels, 3000) block per running job (0.96 MB at 80 bins,
 * 1.5 MB at 128), only where the worker computes ahead: engines whose calls
 * leave the host's cores idle (wd_engine_t.device_offload), or when asked.
 *
 * Threads: a decoder's thread (the worker's, or its sampling pool's) calls
 * note/take/free; the block is written only by the queue's task, and read
 * only after the decoder has waited for it.
 */
#ifndef WD_WIN_AHEAD_H
#define WD_WIN_AHEAD_H

#include "mel.h"
#include "taskq.h"

typedef struct wd_win_ahead wd_win_ahead_t;

/* For audio's windows (not owned: it outlives the result), its tasks on q.
 * WD_EINVAL or WD_ENOMEM. */
int wd_win_ahead_new(const wd_mel_pcm_t *audio, wd_taskq_t *q, wd_win_ahead_t **ret);

/* Waits for a task still running, frees a. Accepts NULL. */
void wd_win_ahead_free(wd_win_ahead_t *a);

/* win (n_mels rows of 3000) now holds the window [seek, seek + size):
 * remember it, and start computing the frames [seek + size, limit), at
 * most 3000 of them, on the queue (nothing when none are left below limit
 * or the queue is full: take then finds them missing). limit is the end of
 * what the next window may read (the content's end, or its VAD clip's). */
void wd_win_ahead_note(wd_win_ahead_t *a, int seek, int size, int limit);

/* The window [seek, seek + size) into win, which holds the window last
 * noted: 1 when it came from that window and the frames computed ahead
 * (columns from size on zeroed, as wd_mel_pcm_window pads); 0 when they
 * do not cover it (win unchanged: compute it directly). Waits for the task
 * when it is still running. */
int wd_win_ahead_take(wd_win_ahead_t *a, int seek, int size, float *win);

/* Windows served by take, and blocks whose making was started: for tests
 * and logs. */
void wd_win_ahead_counts(const wd_win_ahead_t *a, int *served, int *computed);

#endif
