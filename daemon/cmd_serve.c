/*
 * cmd_serve.c - `whisperd serve`, the daemon (the default command).
 *
 * Order of start-up, each phase announced with sd_notify STATUS=:
 *   1. block SIGTERM/SIGINT/SIGHUP in every thread (this one takes them with
 *      sigtimedwait), open the log file;
 *   2. start the HTTP server on the socket systemd passed (sd_listen_fds) or
 *      on host:port, so /health answers while the model loads;
 *   3. load each model (--model, then --models), build its engines, start
 *      its workers; attach it;
 *   4. warm up (one second of silence through the worker), mark /ready and
 *      send READY=1.
 * Then, once a second: WATCHDOG=1 when the worker's heartbeat is fresher
 * than half the watchdog interval (a hung GPU call stops it, and systemd
 * restarts the daemon), and STATUS= with the queue. SIGHUP reopens the log
 * file and reloads every model from its file (serve_models.h).
 * SIGTERM/SIGINT: STOPPING=1, stop accepting, refuse queued jobs (503), let
 * running jobs finish within shutdown-grace, answer them, exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "decode_cfg.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "runtime.h"
#include "server.h"
#include "serve_models.h"

/* Points stderr (where every log line goes) at the log file, if any. */
static int open_log(const char *path) {
  if (!path || !path[0])
    return 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    wd_log_error("serve: cannot open log file '%s': %s", path, strerror(errno));
    return WD_EIO;
  }
  int rc = dup2(fd, STDERR_FILENO) < 0 ? WD_EIO : 0;
  close(fd);
  return rc;
}

/* A stop or reopen signal that reached another thread. Our threads block
 * SIGTERM/SIGINT/SIGHUP, but threads a library started before main() (the
 * BLAS thread pool that the CPU engine links) do not: without a handler, a
 * process-directed SIGTERM arriving while this thread is not in
 * sigtimedwait (start-up work, the drain) would kill the daemon there with
 * the default action. The handler records it; this thread looks at it
 * at least once a second. */
static volatile sig_atomic_t g_caught;

static void on_signal(int sig) { g_caught = sig; }

static int install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  return sigaction(SIGTERM, &sa, NULL) == 0 && sigaction(SIGINT, &sa, NULL) == 0 &&
                 sigaction(SIGHUP, &sa, NULL) == 0
             ? 0
             : -1;
}

/* The next signal: one pending for this thread's sigtimedwait (waiting up
 * to *wait), else one a handler caught elsewhere; 0 if none. */
static int next_signal(const sigset_t *sigs, const struct timespec *wait) {
  const int sig = sigtimedwait(sigs, NULL, wait);
  if (sig > 0)
    return sig;
  const int caught = g_caught;
  g_caught = 0;
  return caught;
}

/* STATUS=what: detail (one line for systemctl status). */
/* A stop signal (SIGTERM, SIGINT) already pending: start-up checks between
 * phases, since the main loop's sigtimedwait only runs once the daemon is
 * ready. */
static int stop_pending(const sigset_t *sigs) {
  const struct timespec zero = { 0 };
  int sig;
  while ((sig = next_signal(sigs, &zero)) > 0)
    if (sig == SIGTERM || sig == SIGINT) {
      wd_log_notice("serve: %s during start-up: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      return 1;
    }
  return 0;
}

static void notify_status(const char *what, const char *detail) {
  sd_notifyf(0, "STATUS=%s: %s", what, detail);
}

/* Requests allocate large, short-lived buffers on several threads (bodies
 * up to --max-body-mb, samples, log-mel, results). glibc raises its mmap
 * threshold to the size of each large block freed, up to 32 MiB, after
 * which such buffers come from the threads' arenas and their pages stay
 * resident: RSS crept up by 5-12 % over a soak. A fixed threshold keeps
 * every block over 1 MiB mapped and unmapped on free (a few page faults per
 * request, nothing beside a transcription): RSS then stays flat (+0.8 %
 * over 96 mixed requests, against +4.7 % with the default; see #13). */
static void malloc_tune(void) {
  if (mallopt(M_MMAP_THRESHOLD, 1 << 20) != 1)
    wd_log_warning("serve: mallopt(M_MMAP_THRESHOLD) refused; RSS may creep under load");
}

/* The HTTP server's options from the config; listen_fd is systemd's
 * socket or -1. */
static wd_server_opts_t server_opts(const wd_config_t *cfg, int listen_fd) {
  return (wd_server_opts_t){
    .host = cfg->host, .port = cfg->port, .listen_fd = listen_fd,
    .threads = cfg->http_threads, .max_body = (size_t)cfg->max_body_mb << 20,
    .max_connections = cfg->max_connections, .idle_timeout_s = cfg->idle_timeout_s,
    .api_key = cfg->api_key, .max_audio_s = cfg->max_audio_s,
    .job_timeout_s = cfg->timeout_s, .body_timeout_s = cfg->body_timeout_s,
    .decode_timeout_s = cfg->decode_timeout_s,
    .header_timeout_s = cfg->header_timeout_s,
    .max_connections_per_ip = cfg->max_connections_per_ip,
    .decode_threads = cfg->decode_threads,
    .diarize_threads = cfg->diarize_threads,
    .realtime_sessions = cfg->realtime_sessions,
    .realtime_partial_ms = cfg->realtime_partial_ms,
    .no_web_ui = strcmp(cfg->web_ui, "off") == 0,
  };
}

/* The decoding defaults requests start from, refused (WD_ECONFIG, err)
 * before anything starts when they cannot work. */
static int decode_defaults(const wd_config_t *cfg, wd_decode_opts_t *dopts, char *err,
                           size_t err_len) {
  wd_decode_opts_t longest;
  float no_clips[1];
  wd_decode_opts_default(&longest);
  if (wd_decode_cfg(cfg, dopts, no_clips, 0, err, err_len) < 0 ||
      /* A request's temperature T > 0 walks T, T + inc, ... 1: from a T near
       * 0 the schedule is longest, and it must fit too. */
      (wd_decode_set_temperature(&longest, 0.0f, dopts->temperature_inc) == WD_ERANGE &&
       snprintf(err, err_len,
                "temperature-inc %g: a request's temperature near 0 would walk more than %d "
                "temperatures; at most %d (temperature-inc of at least %.4g)",
                (double)dopts->temperature_inc, WD_DECODE_MAX_TEMPS, WD_DECODE_MAX_TEMPS,
                1.0 / (WD_DECODE_MAX_TEMPS - 1) + 1e-4) > 0) ||
      (cfg->beam_size > cfg->max_batch &&
       snprintf(err, err_len, "beam-size %d is more than max-batch %d sequences",
                cfg->beam_size, cfg->max_batch) > 0) ||
      (cfg->best_of > cfg->max_batch &&
       snprintf(err, err_len, "best-of %d is more than max-batch %d sequences", cfg->best_of,
                cfg->max_batch) > 0))
    return WD_ECONFIG;
  dopts->language = NULL; /* from each request */
  dopts->word_timestamps = 0;
  return 0;
}

/* Ready: once a second, the watchdog while the workers make progress and
 * the status line; SIGHUP reopens the log; SIGTERM or SIGINT returns. */
static void serve_until_stopped(const wd_config_t *cfg, const sigset_t *sigs,
                                wd_serve_models_t *sv) {
  uint64_t wd_usec = 0;
  const int watchdog = sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0;
  const double wd_fresh = watchdog ? (double)wd_usec * 1e-6 / 2 : 0;
  for (;;) {
    const struct timespec tick = { .tv_sec = 1 };
    const int sig = next_signal(sigs, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      wd_log_notice("serve: %s: draining (grace %d s)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                    cfg->shutdown_grace_s);
      return;
    }
    if (sig == SIGHUP) {
      wd_log_info("serve: SIGHUP: reopening the log, reloading the models");
      open_log(cfg->log_file);
      sd_notify(0, "RELOADING=1");
      wd_serve_models_reload(sv);
      sd_notify(0, "READY=1");
    }
    wd_serve_models_tick(sv);
    wd_serve_models_reap(sv);
    wd_worker_stats_t st;
    double oldest;
    wd_serve_models_stats(sv, &st, &oldest);
    const double age = wd_now_s() - oldest;
    if (watchdog && age < wd_fresh)
      sd_notify(0, "WATCHDOG=1");
    else if (watchdog)
      wd_log_warning("serve: the worker has shown no progress for %.0f s", age);
    sd_notifyf(0, "STATUS=Ready: %d queued, %d running, %llu done, %llu failed", st.queued,
               st.running, (unsigned long long)st.jobs_done, (unsigned long long)st.jobs_failed);
  }
}

/* Blocks the signals serve waits for (and SIGPIPE: a client gone mid-answer
 * is an error code, not a death) in every thread to come; *sigs is then the
 * set next_signal waits on. -1 on failure. */
static int block_signals(sigset_t *sigs) {
  sigemptyset(sigs);
  sigaddset(sigs, SIGTERM);
  sigaddset(sigs, SIGINT);
  sigaddset(sigs, SIGHUP);
  sigaddset(sigs, SIGPIPE);
  if (pthread_sigmask(SIG_BLOCK, sigs, NULL) != 0 || install_handlers() < 0)
    return -1;
  sigdelset(sigs, SIGPIPE);
  return 0;
}

/* The socket systemd passed (whisperd.socket) in *fd, or -1 for none; -1
 * when it passed more than one. */
static int systemd_socket(int *fd) {
  const int n_fds = sd_listen_fds(1);
  *fd = n_fds == 1 ? SD_LISTEN_FDS_START : -1;
  if (n_fds > 1) {
    wd_log_error("serve: systemd passed %d sockets; expected one", n_fds);
    return -1;
  }
  return 0;
}

int wd_cmd_serve(const wd_config_t *cfg) {
  malloc_tune();
  sigset_t sigs;
  if (block_signals(&sigs) < 0 || open_log(cfg->log_file) < 0)
    return 1;
  wd_config_dump(cfg);

  /* 2. HTTP first: liveness during the load. */
  int listen_fd = -1;
  if (systemd_socket(&listen_fd) < 0)
    return 1;
  const wd_server_opts_t so = server_opts(cfg, listen_fd);
  char err[1024] = "";
  wd_decode_opts_t dopts;
  if (decode_defaults(cfg, &dopts, err, sizeof err) < 0) {
    wd_log_error("serve: %s", err);
    notify_status("Failed", err);
    return 1;
  }
  wd_server_t *srv = NULL;
  if (wd_server_start(&so, &srv, err, sizeof err) < 0) {
    wd_log_error("serve: %s", err);
    notify_status("Failed", err);
    return 1;
  }
  if (listen_fd >= 0)
    wd_log_info("serve: listening on the socket systemd passed (fd %d)", listen_fd);
  else
    wd_log_info("serve: listening on http://%s:%d", cfg->host, wd_server_port(srv));

  /* 3. The models, each with its engines and workers. */
  const double t0 = wd_now_s();
  wd_serve_models_t *sv = NULL;
  int status = 1;
  if (wd_serve_models_open(cfg, &dopts, srv, &sv, err, sizeof err) < 0) {
    wd_log_error("serve: %s", err);
    notify_status("Failed", err);
    goto out;
  }
  if (stop_pending(&sigs)) {
    status = 0;
    goto out;
  }

  /* 4. Warm-up, then ready. */
  const char *first = wd_serve_models_first(sv);
  notify_status("Warming up", first);
  if (wd_serve_models_warmup(sv, err, sizeof err) < 0) {
    wd_log_error("serve: warm-up failed: %s", err);
    notify_status("Failed: warm-up", err);
    goto out;
  }
  if (stop_pending(&sigs)) {
    status = 0;
    goto out;
  }
  if (wd_runtime_arm_faults(cfg->fault_inject) < 0) {
    wd_log_error("serve: fault-inject: cannot parse '%s'", cfg->fault_inject);
    goto out;
  }
  wd_server_set_ready(srv, 1);
  sd_notifyf(0, "READY=1\nSTATUS=Ready: %s%s, max batch %d", first,
             wd_serve_models_count(sv) > 1 ? " and more" : "", cfg->max_batch);
  wd_log_info("serve: ready in %.0f ms", (wd_now_s() - t0) * 1e3);

  serve_until_stopped(cfg, &sigs, sv);
  sd_notify(0, "STOPPING=1\nSTATUS=Draining");
  status = 0;
out:
  wd_server_set_ready(srv, 0);
  wd_server_quiesce(srv);
  /* One grace for all: the workers' jobs and the diarizations beside them. */
  wd_server_drain_by(srv, cfg->shutdown_grace_s);
  wd_serve_models_drain(sv, cfg->shutdown_grace_s);
  /* Answers still going out get a few seconds. A server that could not stop
   * still runs threads that use the worker and the model: leave them be. */
  if (wd_server_free(srv, 5.0) < 0) {
    wd_log_error("serve: exiting without freeing the engine");
    return 1;
  }
  wd_serve_models_close(sv);
  wd_log_info("serve: stopped");
  return status;
}
