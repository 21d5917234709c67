/*
 * config.c - the configuration table and its three parsers (file, env, CLI).
 *
 * Each row of wd_options[] names a key, its type, default, range and help,
 * and where it lands in wd_config_t. The key `port` is `port = 8080` in the
 * file, WHISPERD_PORT in the environment and --port on the command line
 * (dashes become underscores in the environment). Adding an option is one
 * row; --help and the dump follow automatically.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine.h"
#include "error.h"

#include <unistd.h>

/* WD_OPT_DEVICE: an int in [min, max] or auto, all, cpu, vulkan (WD_DEVICE_*),
 * or a comma list of cpu, vulkan and ints (the one option of this type also
 * fills devices[] and n_devices). */
typedef enum {
  WD_OPT_STR, WD_OPT_INT, WD_OPT_BOOL, WD_OPT_LOGLEVEL, WD_OPT_ENUM, WD_OPT_DEVICE
} wd_opt_type_t;

typedef struct {
  const char *key;      /* file key and --long flag */
  char short_flag;      /* -x, or 0 */
  wd_opt_type_t type;
  size_t offset;        /* into wd_config_t */
  const char *def;      /* default, as text (parsed like any other value) */
  long min, max;        /* WD_OPT_INT range */
  const char *choices;  /* WD_OPT_ENUM: "a|b|c" */
  const char *meta;     /* value name in --help */
  const char *help;
  unsigned flags;       /* WD_OPT_SECRET, WD_OPT_ONCE */
} wd_option_t;

/* flags: SECRET is hidden in the dump. ONCE may be given once per source
 * (the command line, or one config file): a second value would silently
 * replace the first, which for --model loses a model without a word, so it
 * is an error naming both (the same value again is allowed). Sources still
 * override each other by precedence. */
#define WD_OPT_SECRET 1u
#define WD_OPT_ONCE 2u

#define OFF(f) offsetof(wd_config_t, f)

static const wd_option_t wd_options[] = {
  { "model", 'm', WD_OPT_STR, OFF(model), "models/ggml-tiny.en.bin", 0, 0, NULL, "PATH",
    "Whisper model: a ggml .bin file or a CTranslate2 directory; given once (serve's other models: --models)", WD_OPT_ONCE },
  { "device", 0, WD_OPT_DEVICE, OFF(device), "auto", -1, 63, NULL, "auto|all|cpu|vulkan|N[,...]",
    "auto: a GPU (discrete > integrated > virtual) if Vulkan shows one, else the native CPU engine; cpu: the CPU engine; vulkan: the best Vulkan device, lavapipe included; N: Vulkan device N from `whisperd devices` (-1 = auto); all: one worker per GPU Vulkan shows, and no CPU worker beside them (the CPU engine alone when there is no GPU; the log says what it resolved to); a comma list of cpu, vulkan and N (cpu,0 or 0,1 or cpu,vulkan) runs one worker per entry, each with its own engine, and every job goes to the least-loaded worker (queue-max and max-batch apply to each)", 0 },
  { "vk-validation", 0, WD_OPT_BOOL, OFF(vk_validation), "false", 0, 0, NULL, NULL,
    "Enable the Khronos validation layer when installed (debugging)", 0 },
  { "vk-kv", 0, WD_OPT_ENUM, OFF(vk_kv), "auto", 0, 0, "auto|f32|f16", "TYPE",
    "Vulkan KV caches: auto (f32, or f16 only when that is what makes --max-batch fit the device), f32 or f16 (tests, comparisons)", 0 },
  { "vk-limits", 0, WD_OPT_STR, OFF(vk_limits), "", 0, 0, NULL, "LIMITS",
    "Plan as if the Vulkan device were this small, e.g. heap=512M,texels=1M or a preset such as nvidia (tests; see gpu/vk_limits.h)", 0 },
  { "vk-gemm", 0, WD_OPT_ENUM, OFF(vk_gemm), "auto", 0, 0,
    "auto|cm-128x128|cm-64x64|cm-128x128-dl|cm-64x64-dl|cm-128x128-pf2|cm-64x64-pf2|tiled-64x64|rb-64x64|rb-128x64|texel-16x16|texel-8x8", "KERNEL",
    "The Vulkan encoder's GEMM kernel: auto (by device: on GPUs with matrix units cm-128x128 for the encoder's Linear layers and cm-64x64 for attention and the prefill; on other GPUs rb-64x64, tiled-64x64 and tiled-64x64; texel-8x8 on CPU drivers) or one by name everywhere (comparisons, tests; a cm kernel needs matrix units)", 0 },
  { "vk-precision", 0, WD_OPT_ENUM, OFF(vk_precision), "auto", 0, 0, "auto|f32", "PRECISION",
    "Inputs of the Vulkan engine's matrix products: auto (rounded to f16 on GPUs with matrix units, f32 sums; f32 elsewhere) or f32 (the f32 kernels everywhere: exact f32 arithmetic, slower on such GPUs)", 0 },
  { "vk-matrix", 0, WD_OPT_ENUM, OFF(vk_matrix), "auto", 0, 0, "auto|none|khr", "EXT",
    "The Vulkan engine's matrix units: auto (VK_NV_cooperative_matrix where the device lists it), none (the f32 kernels) or khr (VK_KHR_cooperative_matrix kernels where built and listed, lavapipe's 8x8x8 included; tests until they have run on a GPU)", 0 },
  { "vk-attn", 0, WD_OPT_ENUM, OFF(vk_attn), "auto", 0, 0, "auto|fused", "KIND",
    "The Vulkan encoder's self-attention: auto (matrix products and a softmax) or fused (one kernel on the matrix units, scores never written; tests until measured on a GPU)", 0 },
  { "vk-force-staging", 0, WD_OPT_BOOL, OFF(vk_force_staging), "false", 0, 0, NULL, NULL,
    "Upload weights and read results through the staging ring even where device memory is mapped (tests: the path a discrete GPU takes)", 0 },
  { "fault-inject", 0, WD_OPT_STR, OFF(fault_inject), "", 0, 0, NULL, "SPEC",
    "Testing only: inject faults, a comma list of oom:N, decode_delay:MS, load_delay:MS, diar_oom:N, diar_delay:MS, submit:N, ... (daemon/runtime.h)", 0 },
  { "gpu-timeout", 0, WD_OPT_INT, OFF(gpu_timeout_s), "0", 0, 3600, NULL, "SECONDS",
    "Longest wait for one GPU submit; past it the device is taken for hung and rebuilt (0: 20 s on a GPU, 300 s on a CPU driver such as lavapipe)", 0 },
  { "threads", 0, WD_OPT_INT, OFF(threads), "0", 0, 256, NULL, "N",
    "Compute threads of the native CPU engine, OpenBLAS's included (0: one per online CPU; set it when several daemons share a host)", 0 },
  { "compute-type", 0, WD_OPT_ENUM, OFF(compute_type), "f32", 0, 0, "f32|bf16|int8", "TYPE",
    "Arithmetic of the native CPU engine's linear layers, as faster-whisper's compute_type: f32 (the weights as stored, f32 sums: openai's results); bf16 (weights and activations rounded to bfloat16; needs AVX512-BF16); int8 (weights and activations in int8 with a scale per row; AVX512-VNNI, else AVX2). Refused at start where the CPU lacks them or the device is Vulkan", 0 },
  { "max-batch", 0, WD_OPT_INT, OFF(max_batch), "8", 1, WD_ENGINE_MAX_SEQS, NULL, "N",
    "Sequences (beams and requests) decoded together in one GPU step; 1 turns batching off", 0 },
  { "mel-ahead", 0, WD_OPT_ENUM, OFF(mel_ahead), "auto", 0, 0, "auto|on|off", "WHEN",
    "Make each running job's next 30 s log-mel window on a thread of its own while the device decodes the current one: auto (on GPUs, whose calls leave the host's cores idle; off for the CPU engine and lavapipe), on or off (comparisons, tests)", 0 },
  { "model-alias", 0, WD_OPT_STR, OFF(model_alias), "", 0, 0, NULL, "NAMES",
    "Comma-separated extra names the API accepts in `model` (whisper-1 and the model's own name always work)", 0 },
  { "models", 0, WD_OPT_STR, OFF(models), "", 0, 0, NULL, "PATH[,PATH...]",
    "More models `serve` loads beside --model, up to 3, each with its own engine and worker on --device; a request's `model` (a model's name, e.g. base or tiny.en) picks one, and whisper-1 and --model-alias stay --model's; two models with one name (copies or quantized files of one model) are refused; given once, comma-separated", WD_OPT_ONCE },
  { "models-memory", 0, WD_OPT_INT, OFF(models_memory_mb), "0", 0, 1048576, NULL, "MIB",
    "Memory the loaded models may take together, in MiB (a model counts its file's size plus a quarter); with it, --models load on their first request (which waits for the load, at most 60 s), and idle ones make room least recently used first; a model that does not fit while the others are in use is answered 503 with Retry-After. 0: every model loaded at start", 0 },
  { "models-idle-s", 0, WD_OPT_INT, OFF(models_idle_s), "0", 0, 86400000, NULL, "SECONDS",
    "A model of --models unused this long is unloaded (loaded again on its next request); --model never is. 0: never", 0 },
  { "host", 0, WD_OPT_STR, OFF(host), "127.0.0.1", 0, 0, NULL, "ADDR",
    "Address to listen on (ignored under socket activation)", 0 },
  { "port", 'p', WD_OPT_INT, OFF(port), "8080", 1, 65535, NULL, "PORT",
    "TCP port to listen on (ignored under socket activation)", 0 },
  { "http-threads", 0, WD_OPT_INT, OFF(http_threads), "4", 1, 256, NULL, "N",
    "HTTP connection threads (they never decode audio or run the model)", 0 },
  { "decode-threads", 0, WD_OPT_INT, OFF(decode_threads), "2", 1, 256, NULL, "N",
    "Threads that decode and resample uploads (FFmpeg, libsndfile), off the HTTP threads; uploads waiting for one count as queued jobs", 0 },
  { "realtime-sessions", 0, WD_OPT_INT, OFF(realtime_sessions), "32", 1, 10000, NULL, "N",
    "Realtime transcription sessions (GET /v1/realtime, WebSocket) open at once; more get 503 before the upgrade", 0 },
  { "realtime-partials-ms", 0, WD_OPT_INT, OFF(realtime_partial_ms), "0", 0, 30000, NULL, "MS",
    "With server_vad, transcribe a turn still being spoken every MS of new speech, while the model's workers have nothing else to do, and send it as a conversation.item.input_audio_transcription.partial event (whisperd's own; the committed turn's completed event is the transcript); 0: never", 0 },
  { "max-body-mb", 0, WD_OPT_INT, OFF(max_body_mb), "25", 1, 4096, NULL, "MIB",
    "Largest accepted upload in MiB (OpenAI's limit is 25)", 0 },
  { "queue-max", 0, WD_OPT_INT, OFF(queue_max), "64", 1, 100000, NULL, "N",
    "Jobs waiting for the GPU before new requests get 429", 0 },
  { "queue-audio-s", 0, WD_OPT_INT, OFF(queue_audio_s), "0", 0, 100000000, NULL, "SECONDS",
    "Audio seconds queued plus running per worker before new requests get 429 (each second holds its 16-bit samples, 32 KB; a worker holding none takes any request); 0: a quarter of the memory available at start", 0 },
  { "timeout", 0, WD_OPT_INT, OFF(timeout_s), "600", 1, 86400, NULL, "SECONDS",
    "Longest a request may wait and run before it is cancelled", 0 },
  { "decode-timeout", 0, WD_OPT_INT, OFF(decode_timeout_s), "60", 0, 86400, NULL, "SECONDS",
    "Longest one upload's audio may take to decode (FFmpeg, libsndfile; hours of audio take seconds): past it the decode is stopped, its thread freed and the request answered 400 (a damaged or hostile file); 0: no bound", 0 },
  { "idle-timeout", 0, WD_OPT_INT, OFF(idle_timeout_s), "30", 1, 3600, NULL, "SECONDS",
    "A client silent this long while sending its request is disconnected", 0 },
  { "body-timeout", 0, WD_OPT_INT, OFF(body_timeout_s), "300", 1, 86400, NULL, "SECONDS",
    "Longest a client may take to send one request body (slow uploads are cut off)", 0 },
  { "max-connections", 0, WD_OPT_INT, OFF(max_connections), "256", 1, 100000, NULL, "N",
    "Open HTTP connections at most; more are refused", 0 },
  { "header-timeout", 0, WD_OPT_INT, OFF(header_timeout_s), "15", 1, 3600, NULL, "SECONDS",
    "Longest a client may take to send its request headers, however slowly it trickles them (slow-loris clients are cut off)", 0 },
  { "max-connections-per-ip", 0, WD_OPT_INT, OFF(max_connections_per_ip), "0", 0, 100000, NULL, "N",
    "Open HTTP connections from one client address at most (0: three quarters of --max-connections, so no one address can take them all; behind a load balancer, raise it to --max-connections)", 0 },
  { "max-audio-s", 0, WD_OPT_INT, OFF(max_audio_s), "10800", 1, 43200, NULL, "SECONDS",
    "Longest audio one request may carry (longer gets 400)", 0 },
  { "shutdown-grace", 0, WD_OPT_INT, OFF(shutdown_grace_s), "30", 0, 3600, NULL, "SECONDS",
    "On SIGTERM, how long running jobs may finish before they are cancelled", 0 },
  { "api-key", 0, WD_OPT_STR, OFF(api_key), "", 0, 0, NULL, "KEY",
    "Require 'Authorization: Bearer KEY' on /v1 (empty: no authentication)", WD_OPT_SECRET },
  { "web-ui", 0, WD_OPT_ENUM, OFF(web_ui), "on", 0, 0, "on|off", "on|off",
    "serve: the daemon's own page at / (uploads, the microphone, models and queue; public, its API calls send the key); off: / is 404", 0 },
  { "log-file", 0, WD_OPT_STR, OFF(log_file), "", 0, 0, NULL, "PATH",
    "serve: append log lines to this file instead of stderr; SIGHUP reopens it", 0 },
  { "log-level", 0, WD_OPT_LOGLEVEL, OFF(log_level), "info", 0, 0, NULL, "LEVEL",
    "err, warning, notice, info or debug", 0 },
  { "output", 'o', WD_OPT_STR, OFF(output), "", 0, 0, NULL, "PATH",
    "convert: the ggml file to write; transcribe: write here instead of stdout", 0 },
  { "output-format", 'f', WD_OPT_ENUM, OFF(output_format), "txt", 0, 0, "txt|srt|vtt|json",
    "FORMAT", "transcribe: txt, srt, vtt or json (verbose_json shape)", 0 },
  { "language", 'l', WD_OPT_STR, OFF(language), "auto", 0, 0, NULL, "LANG",
    "transcribe: ISO-639-1 language code, or auto to detect", 0 },
  { "task", 0, WD_OPT_ENUM, OFF(task), "transcribe", 0, 0, "transcribe|translate", "TASK",
    "transcribe: transcribe, or translate into English (multilingual models)", 0 },
  { "beam-size", 0, WD_OPT_INT, OFF(beam_size), "0", 0, 8, NULL, "N",
    "decoding at temperature 0: beam search of N beams (0 or 1: greedy); serve: the default", 0 },
  { "patience", 0, WD_OPT_STR, OFF(patience), "", 0, 0, NULL, "P",
    "beam search: stop after round(beam-size * P) finished candidates (empty: 1.0)", 0 },
  { "length-penalty", 0, WD_OPT_STR, OFF(length_penalty), "", 0, 0, NULL, "A",
    "ranking: divide by ((5 + length) / 6)^A, 0..1 (empty: by the length)", 0 },
  { "best-of", 0, WD_OPT_INT, OFF(best_of), "0", 0, 8, NULL, "N",
    "decoding above temperature 0: keep the likeliest of N samples; serve: the default", 0 },
  { "temperature", 0, WD_OPT_STR, OFF(temperature), "0", 0, 0, NULL, "T",
    "transcribe: the first temperature (0..1); a failing window is decoded again hotter", 0 },
  { "temperature-inc", 0, WD_OPT_STR, OFF(temperature_inc), "0.2", 0, 0, NULL, "T",
    "the temperature step on fallback, up to 1.0 (0: no fallback); serve: the default", 0 },
  { "prompt", 0, WD_OPT_STR, OFF(prompt), "", 0, 0, NULL, "TEXT",
    "transcribe: initial prompt (spelling, names, style of the first window)", 0 },
  { "carry-prompt", 0, WD_OPT_BOOL, OFF(carry_prompt), "false", 0, 0, NULL, NULL,
    "transcribe: keep --prompt in front of every window's context (carry_initial_prompt)", 0 },
  { "prefix", 0, WD_OPT_STR, OFF(prefix), "", 0, 0, NULL, "TEXT",
    "transcribe: text every window's decoding continues from (openai's prefix)", 0 },
  { "word-timestamps", 0, WD_OPT_BOOL, OFF(word_timestamps), "false", 0, 0, NULL, NULL,
    "transcribe: time every word (json output carries them)", 0 },
  { "timestamps", 0, WD_OPT_BOOL, OFF(timestamps), "true", 0, 0, NULL, NULL,
    "transcribe: --no-timestamps decodes without timestamp tokens (a segment per window)", 0 },
  { "condition", 0, WD_OPT_BOOL, OFF(condition), "true", 0, 0, NULL, NULL,
    "transcribe: --no-condition does not prompt each window with the text before it", 0 },
  { "hallucination-silence", 0, WD_OPT_STR, OFF(hallucination_silence), "", 0, 0, NULL,
    "SECONDS",
    "transcribe, with --word-timestamps: skip silences longer than this around segments "
    "that look hallucinated (empty: off)", 0 },
  { "clip-timestamps", 0, WD_OPT_STR, OFF(clip_timestamps), "", 0, 0, NULL, "S,E,...",
    "transcribe: decode only these stretches (start,end,... in seconds; an odd count runs "
    "to the end)", 0 },
  { "vad", 0, WD_OPT_BOOL, OFF(vad), "false", 0, 0, NULL, NULL,
    "decode only the speech that voice activity detection (Silero VAD) finds, times mapped back to the file (faster-whisper's vad_filter); serve: for every request", 0 },
  { "chunking", 0, WD_OPT_ENUM, OFF(chunking), "none", 0, 0, "none|auto", "STRATEGY",
    "transcribe: auto decodes the speech VAD finds in chunks of up to 30 s side by side, as rows of one batch (OpenAI's chunking_strategy \"auto\"; no text carried between chunks); none: openai's sequential decoding", 0 },
  { "vad-model", 0, WD_OPT_STR, OFF(vad_model), "models/silero-vad-v6.safetensors", 0, 0, NULL,
    "PATH", "Silero VAD weights for --vad (scripts/fetch-vad.sh makes them)", 0 },
  { "vad-threshold", 0, WD_OPT_STR, OFF(vad_threshold), "0.5", 0, 0, NULL, "P",
    "--vad: speech probability from which a 32 ms chunk is speech (silence below P - 0.15); the --vad-* defaults are faster-whisper's VadOptions", 0 },
  { "vad-min-speech-ms", 0, WD_OPT_INT, OFF(vad_min_speech_ms), "0", 0, 60000, NULL, "MS",
    "--vad: shorter speech is dropped", 0 },
  { "vad-min-silence-ms", 0, WD_OPT_INT, OFF(vad_min_silence_ms), "2000", 0, 60000, NULL, "MS",
    "--vad: silence that ends a stretch of speech", 0 },
  { "vad-speech-pad-ms", 0, WD_OPT_INT, OFF(vad_speech_pad_ms), "400", 0, 10000, NULL, "MS",
    "--vad: kept on each side of speech", 0 },
  { "vad-max-speech-s", 0, WD_OPT_STR, OFF(vad_max_speech_s), "0", 0, 0, NULL, "SECONDS",
    "--vad: longer speech is cut at its longest pause (0: no limit)", 0 },
  { "diarize", 0, WD_OPT_BOOL, OFF(diarize), "false", 0, 0, NULL, NULL,
    "transcribe: who spoke when: speaker labels in every format (A, B, ... in order of first appearance; text and srt \"A: \" prefixes, vtt <v A> voice spans, json OpenAI's diarized_json); needs the two diarization models", 0 },
  { "diar-seg-model", 0, WD_OPT_STR, OFF(diar_seg_model), "models/diar-segmentation-3.0.safetensors", 0, 0, NULL,
    "PATH", "speaker diarization: pyannote segmentation-3.0 weights (scripts/fetch-diarization.sh makes them); loaded at start when present with --diar-emb-model, for requests' response_format diarized_json", 0 },
  { "diar-emb-model", 0, WD_OPT_STR, OFF(diar_emb_model), "models/diar-campplus-zh-en.safetensors", 0, 0, NULL,
    "PATH", "speaker diarization: CAM++ speaker-embedding weights (scripts/fetch-diarization.sh makes them)", 0 },
  { "diarize-threads", 0, WD_OPT_INT, OFF(diarize_threads), "1", 1, 256, NULL, "N",
    "serve: threads that run requests' speaker diarizations, each one at a time, off the decode threads (so a long diarization never holds up other uploads); more diarized requests wait for one", 0 },
  { "threshold", 0, WD_OPT_STR, OFF(diar_threshold), "", 0, 0, NULL, "X",
    "diarize: clustering threshold, the cosine distance below which speakers' centroids merge "
    "(empty: the pipeline's default, core/diar_pipeline.c)", 0 },
  { "min-cluster-size", 0, WD_OPT_INT, OFF(diar_min_cluster_size), "0", 0, 1000, NULL, "N",
    "diarize: smaller clusters of embeddings are merged into the nearest larger one (0: the "
    "pipeline's default)", 0 },
  { "min-speakers", 0, WD_OPT_INT, OFF(min_speakers), "0", 0, 1000, NULL, "N",
    "diarize: at least N speakers (0: no bound)", 0 },
  { "max-speakers", 0, WD_OPT_INT, OFF(max_speakers), "0", 0, 1000, NULL, "N",
    "diarize: at most N speakers (0: no bound)", 0 },
  { "rttm", 0, WD_OPT_BOOL, OFF(rttm), "false", 0, 0, NULL, NULL,
    "diarize: print RTTM lines (SPEAKER file 1 start duration <NA> <NA> label <NA> <NA>) "
    "instead of start, end and label", 0 },
  { "prefill", 0, WD_OPT_BOOL, OFF(prefill), "true", 0, 0, NULL, NULL,
    "feed each window's prompt in one submit (--no-prefill: a step per token, to compare)",
    0 },
  { "seed", 0, WD_OPT_INT, OFF(seed), "0", 0, 2147483647, NULL, "N",
    "sampling seed: the same seed gives the same samples", 0 },
};

#define N_OPTIONS (sizeof wd_options / sizeof wd_options[0])

static const struct {
  const char *name, *args, *help;
} wd_commands[] = {
  { "serve", "", "run the HTTP daemon (the default command)" },
  { "devices", "", "list the Vulkan devices whisperd can use" },
  { "info", "MODEL", "print a model's hyper-parameters, type and size" },
  { "transcribe", "FILE...", "transcribe audio files with the same engine as serve" },
  { "diarize", "FILE...", "who spoke when: speaker turns of audio files (pyannote 3.1 with CAM++)" },
  { "convert", "CT2_DIR -o FILE", "write a ggml model file from a CTranslate2 directory" },
  { "quantize", "IN OUT TYPE", "write a model as a ggml file of TYPE (q8_0 q5_0 q5_1 q4_0 q4_1 f16 f32)" },
};

static int wd_config_error(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int wd_config_error(char *err, size_t len, const char *fmt, ...) {
  if (err && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
  }
  return WD_ECONFIG;
}

static const wd_option_t *wd_option_find(const char *key, size_t key_len) {
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (strlen(wd_options[i].key) == key_len && strncmp(wd_options[i].key, key, key_len) == 0)
      return &wd_options[i];
  return NULL;
}

static int wd_parse_bool(const char *v, bool *ret) {
  static const char *const yes[] = { "1", "true", "yes", "on" };
  static const char *const no[] = { "0", "false", "no", "off" };
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(v, yes[i]) == 0) {
      *ret = true;
      return 0;
    }
    if (strcasecmp(v, no[i]) == 0) {
      *ret = false;
      return 0;
    }
  }
  return -1;
}

static int wd_choice_ok(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (const char *c = choices; *c;) {
    const char *bar = strchr(c, '|');
    size_t len = bar ? (size_t)(bar - c) : strlen(c);
    if (len == n && strncmp(c, v, n) == 0)
      return 1;
    c += len + (bar ? 1 : 0);
  }
  return 0;
}

/* The words --device takes besides an index. */
static const struct {
  const char *word;
  int device;
} wd_device_words[] = { { "auto", WD_DEVICE_AUTO }, { "all", WD_DEVICE_ALL },
                        { "cpu", WD_DEVICE_CPU }, { "vulkan", WD_DEVICE_VULKAN } };

/* The word for a --device value, or NULL for an index. */
static const char *wd_device_word(int device) {
  for (size_t i = 0; i < sizeof wd_device_words / sizeof wd_device_words[0]; i++)
    if (wd_device_words[i].device == device)
      return wd_device_words[i].word;
  return NULL;
}

/* One --device entry (len bytes at v): a word or an index in [min, max]. */
static int wd_device_entry(const wd_option_t *o, const char *v, size_t len, const char *where,
                           int *ret, char *err, size_t err_len) {
  for (size_t i = 0; i < sizeof wd_device_words / sizeof wd_device_words[0]; i++)
    if (strlen(wd_device_words[i].word) == len && strncmp(wd_device_words[i].word, v, len) == 0) {
      *ret = wd_device_words[i].device;
      return 0;
    }
  char num[24];
  if (len >= sizeof num)
    len = sizeof num - 1; /* too long for an index: strtol reports it */
  memcpy(num, v, len);
  num[len] = '\0';
  errno = 0;
  char *end = NULL;
  const long d = strtol(num, &end, 10);
  if (errno || end == num || *end != '\0')
    return wd_config_error(err, err_len, "%s: %s: '%s' is not an integer", where, o->key, num);
  if (d < o->min || d > o->max)
    return wd_config_error(err, err_len, "%s: %s: %ld is out of range [%ld, %ld]", where, o->key,
                           d, o->min, o->max);
  *ret = (int)d;
  return 0;
}

/* --device: one value (auto, all, cpu, vulkan or an index), or a comma list
 * of cpu, vulkan and indexes, one worker each. auto and all choose the
 * devices themselves, so they stand alone. A repeated entry is allowed (two
 * engines on one device: two lavapipe instances in the tests). */
static int wd_device_option_set(wd_config_t *cfg, const wd_option_t *o, const char *value,
                                const char *where, char *err, size_t err_len) {
  int devices[WD_DEVICES_MAX];
  int n = 0;
  for (const char *p = value;; p++) {
    const char *comma = strchr(p, ',');
    const size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (n == WD_DEVICES_MAX)
      return wd_config_error(err, err_len, "%s: %s: more than %d devices in '%s'", where, o->key,
                             WD_DEVICES_MAX, value);
    if (len == 0 && (comma || n > 0))
      return wd_config_error(err, err_len, "%s: %s: empty entry in '%s'", where, o->key, value);
    const int rc = wd_device_entry(o, p, len, where, &devices[n], err, err_len);
    if (rc < 0)
      return rc;
    n++;
    if (!comma)
      break;
    p = comma;
  }
  for (int i = 0; n > 1 && i < n; i++)
    if (devices[i] == WD_DEVICE_AUTO || devices[i] == WD_DEVICE_ALL)
      return wd_config_error(err, err_len, "%s: %s: '%s' cannot be part of a list ('%s')", where,
                             o->key, devices[i] == WD_DEVICE_ALL ? "all" : "auto", value);
  memcpy(cfg->devices, devices, (size_t)n * sizeof *devices);
  cfg->n_devices = n;
  *(int *)((char *)cfg + o->offset) = devices[0];
  return 0;
}

/* Parses value into the option's field. On failure writes "key: message"
 * after `where` into err. */
static int wd_option_set(wd_config_t *cfg, const wd_option_t *o, const char *value,
                         const char *where, char *err, size_t err_len) {
  void *field = (char *)cfg + o->offset;
  switch (o->type) {
  case WD_OPT_STR:
  case WD_OPT_ENUM: {
    if (o->type == WD_OPT_ENUM && !wd_choice_ok(o->choices, value))
      return wd_config_error(err, err_len, "%s: %s: '%s' is not one of %s", where, o->key, value,
                             o->choices);
    char *copy = strdup(value);
    if (!copy)
      return WD_ENOMEM;
    free(*(char **)field);
    *(char **)field = copy;
    return 0;
  }
  case WD_OPT_DEVICE:
    return wd_device_option_set(cfg, o, value, where, err, err_len);
  case WD_OPT_INT: {
    errno = 0;
    char *end = NULL;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end != '\0')
      return wd_config_error(err, err_len, "%s: %s: '%s' is not an integer", where, o->key,
                             value);
    if (v < o->min || v > o->max)
      return wd_config_error(err, err_len, "%s: %s: %ld is out of range [%ld, %ld]", where,
                             o->key, v, o->min, o->max);
    *(int *)field = (int)v;
    return 0;
  }
  case WD_OPT_BOOL:
    if (wd_parse_bool(value, (bool *)field) < 0)
      return wd_config_error(err, err_len, "%s: %s: '%s' is not a boolean (true/false)", where,
                             o->key, value);
    return 0;
  case WD_OPT_LOGLEVEL:
    if (wd_log_level_parse(value, (wd_log_level_t *)field) < 0)
      return wd_config_error(err, err_len,
                             "%s: %s: '%s' is not a log level (err, warning, notice, info, debug)",
                             where, o->key, value);
    return 0;
  }
  return WD_EINTERNAL;
}

/* seen[i]: option i was given already in this source. A second, different
 * value of a WD_OPT_ONCE option is an error naming both and what to write
 * instead. */
static int wd_option_once(const wd_config_t *cfg, const wd_option_t *o, unsigned char *seen,
                          const char *value, const char *where, char *err, size_t err_len) {
  const size_t i = (size_t)(o - wd_options);
  if (!(o->flags & WD_OPT_ONCE))
    return 0;
  if (!seen[i]) {
    seen[i] = 1;
    return 0;
  }
  const char *old = *(char *const *)((const char *)cfg + o->offset);
  if (old && strcmp(old, value) == 0)
    return 0;
  if (strcmp(o->key, "model") == 0)
    return wd_config_error(err, err_len,
                           "%s: %s: given twice ('%s', then '%s'); serve runs one --model, give "
                           "the others with --models %s",
                           where, o->key, old ? old : "", value, value);
  return wd_config_error(err, err_len,
                         "%s: %s: given twice ('%s', then '%s'); give the list once, "
                         "comma-separated: --%s %s,%s",
                         where, o->key, old ? old : "", value, o->key, old ? old : "", value);
}

static char *wd_trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
    *--e = '\0';
  return s;
}

/* Reads "key = value" lines; '#' starts a comment line; values may be quoted. */
static int wd_config_read_file(wd_config_t *cfg, const char *path, int must_exist, char *err,
                               size_t err_len) {
  FILE *f = fopen(path, "r");
  if (!f) {
    if (!must_exist && errno == ENOENT)
      return 0;
    return wd_config_error(err, err_len, "%s: cannot open: %s", path, strerror(errno));
  }
  char line[4096];
  int lineno = 0, rc = 0;
  unsigned char seen[N_OPTIONS] = { 0 };
  while (rc == 0 && fgets(line, sizeof line, f)) {
    lineno++;
    char where[512];
    snprintf(where, sizeof where, "%s:%d", path, lineno);
    if (!strchr(line, '\n') && !feof(f)) {
      rc = wd_config_error(err, err_len, "%s: line too long", where);
      break;
    }
    char *s = wd_trim(line);
    if (*s == '\0' || *s == '#' || *s == ';')
      continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      rc = wd_config_error(err, err_len, "%s: expected 'key = value'", where);
      break;
    }
    *eq = '\0';
    char *key = wd_trim(s), *value = wd_trim(eq + 1);
    size_t vl = strlen(value);
    if (vl >= 2 && ((value[0] == '"' && value[vl - 1] == '"') ||
                    (value[0] == '\'' && value[vl - 1] == '\''))) {
      value[vl - 1] = '\0';
      value++;
    }
    const wd_option_t *o = wd_option_find(key, strlen(key));
    if (!o) {
      rc = wd_config_error(err, err_len, "%s: %s: unknown key", where, key);
      break;
    }
    rc = wd_option_once(cfg, o, seen, value, where, err, err_len);
    if (rc == 0)
      rc = wd_option_set(cfg, o, value, where, err, err_len);
  }
  if (rc == 0 && ferror(f))
    rc = wd_config_error(err, err_len, "%s: read error", path);
  fclose(f);
  return rc;
}

/* WHISPERD_<KEY> with dashes as underscores, upper case. */
static void wd_env_name(const char *key, char *out, size_t len) {
  size_t n = (size_t)snprintf(out, len, "WHISPERD_");
  for (const char *k = key; *k && n + 1 < len; k++)
    out[n++] = *k == '-' ? '_' : (char)(*k >= 'a' && *k <= 'z' ? *k - 32 : *k);
  out[n] = '\0';
}

static const char *wd_env_get(char *const envp[], const char *name) {
  size_t n = strlen(name);
  for (char *const *e = envp; e && *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

void wd_config_free(wd_config_t *cfg) {
  if (!cfg)
    return;
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (wd_options[i].type == WD_OPT_STR || wd_options[i].type == WD_OPT_ENUM) {
      char **p = (char **)((char *)cfg + wd_options[i].offset);
      free(*p);
      *p = NULL;
    }
  free(cfg->config_file);
  cfg->config_file = NULL;
}

/* Finds --config/-c on the command line or WHISPERD_CONFIG before anything
 * else is parsed, since the file is the lowest-precedence source. */
static const char *wd_config_path(int argc, char *const argv[], char *const envp[],
                                  int *ret_explicit) {
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0)
      break;
    if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) && i + 1 < argc)
      path = argv[i + 1];
    else if (strncmp(argv[i], "--config=", 9) == 0)
      path = argv[i] + 9;
  }
  if (!path)
    path = wd_env_get(envp, "WHISPERD_CONFIG");
  *ret_explicit = path != NULL;
  return path ? path : WD_CONFIG_DEFAULT_FILE;
}

int wd_config_load(wd_config_t *cfg, int argc, char *const argv[], char *const envp[],
                   char *err, size_t err_len) {
  int rc = 0;
  memset(cfg, 0, sizeof *cfg);
  for (size_t i = 0; i < N_OPTIONS && rc == 0; i++)
    rc = wd_option_set(cfg, &wd_options[i], wd_options[i].def, "default", err, err_len);
  if (rc < 0)
    goto fail;

  int explicit_file = 0;
  const char *path = wd_config_path(argc, argv, envp, &explicit_file);
  if (explicit_file || access(path, F_OK) == 0) {
    rc = wd_config_read_file(cfg, path, explicit_file, err, err_len);
    if (rc < 0)
      goto fail;
    cfg->config_file = strdup(path);
  }

  for (size_t i = 0; i < N_OPTIONS; i++) {
    char name[128];
    wd_env_name(wd_options[i].key, name, sizeof name);
    const char *v = wd_env_get(envp, name);
    if (v && (rc = wd_option_set(cfg, &wd_options[i], v, name, err, err_len)) < 0)
      goto fail;
  }

  int only_args = 0;
  unsigned char seen[N_OPTIONS] = { 0 };
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_args || a[0] != '-' || a[1] == '\0') {
      if (cfg->n_args >= WD_CONFIG_MAX_ARGS) {
        rc = wd_config_error(err, err_len, "too many arguments (at most %d)", WD_CONFIG_MAX_ARGS);
        goto fail;
      }
      cfg->args[cfg->n_args++] = argv[i];
      continue;
    }
    if (strcmp(a, "--") == 0) {
      only_args = 1;
      continue;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      cfg->want_help = true;
      continue;
    }
    if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
      cfg->want_version = true;
      continue;
    }
    if (strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) {
      i++; /* already read */
      continue;
    }
    if (strncmp(a, "--config=", 9) == 0)
      continue;

    const wd_option_t *o = NULL;
    const char *value = NULL;
    int negated = 0;
    if (a[1] == '-') {
      const char *name = a + 2, *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      o = wd_option_find(name, len);
      if (!o && strncmp(name, "no-", 3) == 0 && !eq) {
        o = wd_option_find(name + 3, len - 3);
        negated = o && o->type == WD_OPT_BOOL;
        if (!negated)
          o = NULL;
      }
      if (eq)
        value = eq + 1;
    } else if (a[2] == '\0') {
      for (size_t k = 0; k < N_OPTIONS; k++)
        if (wd_options[k].short_flag == a[1])
          o = &wd_options[k];
    }
    if (!o) {
      rc = wd_config_error(err, err_len, "%s: unknown option (see --help)", a);
      goto fail;
    }
    if (o->type == WD_OPT_BOOL && !value)
      value = negated ? "false" : "true";
    if (!value) {
      if (i + 1 >= argc) {
        rc = wd_config_error(err, err_len, "%s: %s: missing value", a, o->key);
        goto fail;
      }
      value = argv[++i];
    }
    if ((rc = wd_option_once(cfg, o, seen, value, a, err, err_len)) < 0 ||
        (rc = wd_option_set(cfg, o, value, a, err, err_len)) < 0)
      goto fail;
  }
  return 0;
fail:
  wd_config_free(cfg);
  return rc;
}

void wd_config_usage(FILE *out, const char *prog) {
  fprintf(out,
          "Usage: %s [OPTIONS] [COMMAND [ARGS...]]\n\n"
          "whisperd: Whisper speech-to-text on Vulkan, with an OpenAI-compatible API.\n\n"
          "Commands:\n",
          prog);
  for (size_t i = 0; i < sizeof wd_commands / sizeof wd_commands[0]; i++) {
    char left[64];
    snprintf(left, sizeof left, "%s %s", wd_commands[i].name, wd_commands[i].args);
    fprintf(out, "  %-28s %s\n", left, wd_commands[i].help);
  }
  fprintf(out, "\nOptions (file key `name = value`, environment WHISPERD_NAME):\n");
  fprintf(out, "  %-28s %s\n", "-c, --config FILE",
          "configuration file (default " WD_CONFIG_DEFAULT_FILE ", if present)");
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const wd_option_t *o = &wd_options[i];
    char left[96];
    char sf[8] = "    ";
    if (o->short_flag)
      snprintf(sf, sizeof sf, "-%c, ", o->short_flag);
    if (o->type == WD_OPT_BOOL)
      snprintf(left, sizeof left, "%s--[no-]%s", sf, o->key);
    else
      snprintf(left, sizeof left, "%s--%s %s", sf, o->key, o->meta ? o->meta : "VALUE");
    char range[64] = "";
    if (o->type == WD_OPT_INT)
      snprintf(range, sizeof range, ", %ld..%ld", o->min, o->max);
    fprintf(out, "  %-28s %s (default: %s%s%s%s)\n", left, o->help,
            o->def[0] ? "" : "\"", o->def, o->def[0] ? "" : "\"", range);
  }
  fprintf(out, "  %-28s %s\n", "-h, --help", "show this help and exit");
  fprintf(out, "  %-28s %s\n", "-V, --version", "show the version and exit");
  fprintf(out, "\nPrecedence: defaults < config file < environment < command line.\n");
}

void wd_config_dump(const wd_config_t *cfg) {
  wd_log_info("configuration (file: %s):", cfg->config_file ? cfg->config_file : "none");
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const wd_option_t *o = &wd_options[i];
    const void *field = (const char *)cfg + o->offset;
    switch (o->type) {
    case WD_OPT_STR:
    case WD_OPT_ENUM: {
      const char *v = *(char *const *)field;
      if (o->flags & WD_OPT_SECRET)
        wd_log_info("  %s = %s", o->key, v && *v ? "(set)" : "(unset)");
      else
        wd_log_info("  %s = '%s'", o->key, v ? v : "");
      break;
    }
    case WD_OPT_INT:
      wd_log_info("  %s = %d", o->key, *(const int *)field);
      break;
    case WD_OPT_DEVICE: {
      char list[WD_DEVICES_MAX * 8] = "";
      size_t len = 0;
      for (int d = 0; d < cfg->n_devices && len < sizeof list; d++) {
        const char *word = wd_device_word(cfg->devices[d]);
        const int w = word ? snprintf(list + len, sizeof list - len, "%s%s", d ? "," : "", word)
                           : snprintf(list + len, sizeof list - len, "%s%d", d ? "," : "",
                                      cfg->devices[d]);
        len += w > 0 ? (size_t)w : 0;
      }
      wd_log_info("  %s = %s", o->key, list);
      break;
    }
    case WD_OPT_BOOL:
      wd_log_info("  %s = %s", o->key, *(const bool *)field ? "true" : "false");
      break;
    case WD_OPT_LOGLEVEL:
      wd_log_info("  %s = %s", o->key, wd_log_level_name(*(const wd_log_level_t *)field));
      break;
    }
  }
}

/* The table as --help renders it (same meta and range rules as
 * wd_config_usage), for the man page generator. */
int wd_config_option_doc(size_t i, wd_config_doc_t *ret) {
  if (i >= N_OPTIONS)
    return -1;
  const wd_option_t *o = &wd_options[i];
  *ret = (wd_config_doc_t){
    .key = o->key,
    .short_flag = o->short_flag,
    .is_bool = o->type == WD_OPT_BOOL,
    .meta = o->type == WD_OPT_BOOL ? NULL : o->meta ? o->meta : "VALUE",
    .def = o->def,
    .has_range = o->type == WD_OPT_INT,
    .min = o->min,
    .max = o->max,
    .help = o->help,
  };
  return 0;
}

int wd_config_command_doc(size_t i, const char **ret_name, const char **ret_args,
                          const char **ret_help) {
  if (i >= sizeof wd_commands / sizeof wd_commands[0])
    return -1;
  *ret_name = wd_commands[i].name;
  *ret_args = wd_commands[i].args;
  *ret_help = wd_commands[i].help;
  return 0;
}
