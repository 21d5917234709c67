/*
 * fault.h - fault injection in core/, for tests of the host-side failure
 * paths (gpu/vk_fault.h has the device's).
 *
 *   oom:N   the Nth transcript segment stored from the arming on (1 = the
 *           next) fails as if its allocation had (WD_ENOMEM), once. That
 *           store runs on the worker thread in the middle of a job, beside
 *           the other jobs of its batch: the failure must end that one job
 *           with a 500 and leave the others and the daemon running.
 *
 *   decode_delay:MS  every audio decode (core/audio.c) sleeps MS first: an
 *           upload as slow to decode as hours of audio, to show that
 *           decoding holds no thread that must answer (/health, other
 *           connections).
 *
 *   load_delay:MS  every model load of `serve` after the arming (one on
 *           demand, a SIGHUP reload; daemon/serve_models.c) sleeps MS
 *           first: a model as slow to load as a large one, to show that
 *           requests for the other models are answered meanwhile.
 *
 *   diar_oom:N  the Nth speaker-diarization batch of windows from the
 *           arming on (core/diar.c; 1 = the next) fails as if its
 *           allocation had (WD_ENOMEM), once: a diarization that fails
 *           part-way on a decode thread while its request's transcription
 *           succeeds on the worker.
 *
 *   diar_delay:MS  every speaker-diarization batch of windows waits MS
 *           first (core/diar.c), watching its stop condition meanwhile: a
 *           diarization as long as hours of audio, to show that it holds
 *           up no other upload and still stops when its request ends.
 *
 * A real out-of-memory there is a malloc that returns NULL; this makes one
 * happen at a chosen point without starving the whole process.
 * `whisperd serve` arms it from --fault-inject (WHISPERD_FAULT_INJECT) once it is ready
 * (daemon/runtime.c passes the oom: items here and the rest to gpu/).
 * Disarmed unless armed: one relaxed atomic load per segment.
 *
 * Threading: the state is process-wide and atomic.
 */
#ifndef WD_FAULT_H
#define WD_FAULT_H

/* Arms a comma list of the items above (NULL or "" disarms all; an item
 * not given is disarmed). WD_EINVAL for anything else, leaving the
 * previous state. */
int wd_fault_arm(const char *spec);

/* For core/: 1 when this segment store must fail (consumes it). */
int wd__fault_oom(void);

/* For core/diar.c: 1 when this batch of windows must fail (consumes it). */
int wd__fault_diar_oom(void);

/* For core/diar.c: milliseconds a batch of windows must wait first (0: none). */
long wd__fault_diar_delay_ms(void);

/* For core/: milliseconds an audio decode must sleep first (0: none). */
long wd__fault_decode_delay_ms(void);

/* For daemon/serve_models.c: milliseconds a model load must sleep first. */
long wd__fault_load_delay_ms(void);

#endif
