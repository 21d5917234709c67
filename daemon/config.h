/*
 * config.h - whisperd's configuration: one declarative table (config.c)
 * drives the config file, WHISPERD_* environment variables, command-line
 * flags, --help and the start-up dump.
 *
 * Precedence, lowest first: built-in defaults, the config file
 * (/etc/whisperd/whisperd.conf or --config FILE), the environment, the
 * command line. The result is built once at start-up and then passed around
 * as `const wd_config_t *`; nothing reads the environment elsewhere.
 */
#ifndef WD_CONFIG_H
#define WD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "log.h"

#define WD_CONFIG_DEFAULT_FILE "/etc/whisperd/whisperd.conf"
#define WD_CONFIG_MAX_ARGS 64
/* --device values besides a Vulkan index (daemon/device.h resolves them). */
#define WD_DEVICE_AUTO (-1)   /* a GPU if there is one, else the CPU engine */
#define WD_DEVICE_CPU (-2)    /* the native CPU engine (cpu/) */
#define WD_DEVICE_VULKAN (-3) /* the best Vulkan device, lavapipe included */
#define WD_DEVICE_ALL (-4)    /* every GPU; the CPU engine when there is none */
#define WD_DEVICES_MAX 16     /* entries of a --device list (one worker each) */

typedef struct {
  /* model and engine */
  char *model;            /* ggml file or CTranslate2 directory */
  int device;             /* Vulkan device index or WD_DEVICE_AUTO/CPU/VULKAN/ALL;
                           * a list's first entry */
  int devices[WD_DEVICES_MAX]; /* every entry of --device (cpu,0: CPU, 0) */
  int n_devices;          /* 1 for a single value; a list holds no AUTO or ALL */
  bool vk_validation;
  char *vk_gemm;          /* auto or a wd_vk_gemm_family_name: the encoder's GEMM kernel */
  char *vk_kv;            /* auto, f32 or f16: the Vulkan engine's KV caches */
  char *vk_precision;     /* auto or f32: GEMM inputs on the matrix units (f16) or f32 */
  char *vk_matrix;        /* auto, none or khr: the matrix units' extension (tests) */
  char *vk_attn;          /* auto or fused: the encoder's attention (tests until measured) */
  char *vk_limits;        /* "" or a wd_vk_limits_parse string (tests) */
  bool vk_force_staging;  /* uploads through the staging ring (tests) */
  char *fault_inject;     /* "" or a fault list (tests; runtime.h) */
  int gpu_timeout_s;      /* longest GPU wait before the device is taken for lost */
  int max_batch;          /* sequences decoded together per step */
  char *mel_ahead;        /* auto, on or off: next windows' log-mel made ahead */
  int threads;            /* CPU engine threads; 0 = the online CPUs */
  char *compute_type;     /* CPU engine arithmetic: f32, bf16 or int8 */
  char *model_alias;      /* comma-separated extra accepted `model` names */
  char *models;           /* comma-separated more model paths for serve */
  int models_memory_mb;   /* loaded models' budget; 0: all loaded at start */
  int models_idle_s;      /* --models unloaded after this idle time; 0: never */
  /* HTTP server */
  char *host;
  int port;
  int http_threads;
  int decode_threads;
  int realtime_sessions;  /* /v1/realtime sessions at once */
  int realtime_partial_ms; /* partial transcripts of an open turn; 0 = off */
  int max_body_mb;
  int queue_max;
  int queue_audio_s;
  int timeout_s;          /* a job's whole life (queued + running) */
  int decode_timeout_s;   /* one upload's audio decode; 0: no bound */
  int idle_timeout_s;     /* client silence while sending a request */
  int body_timeout_s;     /* whole time to receive one request body */
  int max_connections;
  int header_timeout_s;   /* whole time to receive one request's headers */
  int max_connections_per_ip; /* 0: 3/4 of max_connections */
  int max_audio_s;        /* per-request audio length cap */
  int shutdown_grace_s;   /* SIGTERM: time running jobs get to finish */
  char *api_key;          /* empty: no authentication */
  char *web_ui;           /* on or off: the page at / (api/web.h) */
  /* logging */
  wd_log_level_t log_level;
  char *log_file;         /* serve: log here instead of stderr ("" = stderr) */
  /* subcommand options */
  char *output;           /* -o for convert / transcribe */
  char *output_format;    /* txt, srt, vtt, json */
  char *language;         /* ISO-639-1 code or "auto" */
  char *task;             /* transcribe or translate */
  /* decoding (transcribe's flags; beam_size, best_of, temperature_inc are
   * serve's defaults too) */
  int beam_size, best_of;
  char *temperature;      /* first temperature, as text */
  char *temperature_inc;  /* fallback step, as text */
  char *prompt;
  bool carry_prompt;
  char *prefix;
  bool word_timestamps, timestamps, condition;
  char *hallucination_silence; /* seconds as text, "" = off */
  char *patience, *length_penalty; /* as text, "" = openai's None */
  bool vad;               /* keep only speech (core/vad_job.h) */
  char *chunking;         /* none or auto (core/chunk_job.h) */
  char *vad_model;        /* Silero VAD weights */
  char *vad_threshold;    /* a float */
  int vad_min_speech_ms, vad_min_silence_ms, vad_speech_pad_ms;
  char *vad_max_speech_s; /* a float; 0 = no limit */
  bool diarize;           /* transcribe: speaker labels (core/diar.h) */
  char *diar_seg_model;   /* pyannote segmentation-3.0, converted */
  char *diar_emb_model;   /* CAM++ zh_en, converted */
  int diarize_threads;    /* serve: threads running diarizations */
  char *clip_timestamps;  /* "start,end,..." seconds, "" = the whole file */
  /* diarize (core/diar.h; the models are diar_seg_model and diar_emb_model) */
  char *diar_threshold;   /* a float; "" = the pipeline's default */
  int diar_min_cluster_size; /* 0 = the pipeline's default */
  int min_speakers, max_speakers; /* 0 = no bound */
  bool rttm;              /* diarize: RTTM lines */
  int seed;
  bool prefill;           /* engine prefill of prompts (benchmarks turn it off) */
  /* where each value came from is kept for the dump */
  char *config_file;      /* the file read, or NULL */

  /* positional arguments after the options: command and its operands */
  int n_args;
  char *args[WD_CONFIG_MAX_ARGS];
  bool want_help;
  bool want_version;
} wd_config_t;

/*
 * Builds cfg from defaults, the config file, envp (NULL-terminated
 * "NAME=value" strings) and argv. On a bad value returns WD_ECONFIG and writes
 * "where: key: message" into err (where = file:line, environment variable or
 * command-line flag). cfg owns its strings; release with wd_config_free().
 */
int wd_config_load(wd_config_t *cfg, int argc, char *const argv[], char *const envp[],
                   char *err, size_t err_len);
void wd_config_free(wd_config_t *cfg);

/* Prints --help: usage, commands and every option from the table. */
void wd_config_usage(FILE *out, const char *prog);
/* Logs the effective configuration at INFO, one "key = value" line each
 * (the API key is shown as "(set)"). */
void wd_config_dump(const wd_config_t *cfg);

/* One row of the option table as --help shows it, for other renderings of
 * the same table (the man page, daemon/config_man.c). Strings point into
 * the static table. */
typedef struct {
  const char *key;   /* file key, --key flag, WHISPERD_KEY */
  char short_flag;   /* -x, or 0 */
  bool is_bool;      /* --[no-]key, takes no value */
  const char *meta;  /* value name ("PORT"); NULL for booleans */
  const char *def;   /* default, as text */
  bool has_range;    /* min..max are shown */
  long min, max;
  const char *help;
} wd_config_doc_t;
/* Fills ret with option i; returns 0, or -1 when i is past the last one. */
int wd_config_option_doc(size_t i, wd_config_doc_t *ret);
/* Command i's name, operands and help; returns 0, or -1 past the last. */
int wd_config_command_doc(size_t i, const char **ret_name, const char **ret_args,
                          const char **ret_help);

#endif
