# `whisperd transcribe --device cpu` end to end on the native CPU engine
# (label cpu: runs on every host): the same words and segment times as the
# Vulkan engine's tests in model_cli.cmake. Skips (77) until the models are
# fetched.
function(wd_cpu_transcribe_test name model audio fmt regex)
  add_test(NAME ${name}
           COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" transcribe --device cpu -m \"$1\" -f \"$3\" \"$2\""
           $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/${model}
           ${PROJECT_SOURCE_DIR}/tests/data/audio/${audio} ${fmt})
  set_tests_properties(${name} PROPERTIES LABELS "cli;cpu;unit" SKIP_RETURN_CODE 77 TIMEOUT 600
    PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
wd_cpu_transcribe_test(cli_cpu_transcribe_jfk_wav_tiny_en ggml-tiny.en.bin jfk.wav txt
  "\\[00:00:00\\.000 --> 00:00:07\\.740\\]  And so my fellow Americans ask not what your country can do for you\n\\[00:00:07\\.740 --> 00:00:10\\.740\\]  ask what you can do for your country\n")
wd_cpu_transcribe_test(cli_cpu_transcribe_jfk_wav_base ggml-base.bin jfk.wav srt
  "1\n00:00:00,000 --> 00:00:07,[0-9]+\nAnd so my fellow Americans,? ask not what your country can do for you,?\n\n2\n00:00:07,[0-9]+ --> 00:00:10,[0-9]+\nask what you can do for your country\\.?\n")

# The engine tests again on the portable kernels (the path arm64 and x86
# without AVX2 take), forced by WHISPERD_CPU_PORTABLE.
add_test(NAME cpu_test_engine_portable COMMAND cpu_test_engine)
set_tests_properties(cpu_test_engine_portable PROPERTIES LABELS "cpu;unit" TIMEOUT 1200
  SKIP_RETURN_CODE 77 ENVIRONMENT "WHISPERD_CPU_PORTABLE=1")

# Word timestamps (engine align) on the CPU engine: the words and times the
# Vulkan engine gives for jfk.wav on tiny.en.
add_test(NAME cli_cpu_transcribe_jfk_words_tiny_en
         COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" transcribe --device cpu -m \"$1\" -f json --word-timestamps \"$2\""
         $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin
         ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
set_tests_properties(cli_cpu_transcribe_jfk_words_tiny_en PROPERTIES LABELS "cli;cpu;unit"
  SKIP_RETURN_CODE 77 TIMEOUT 600
  PASS_REGULAR_EXPRESSION "\"word\":\" Americans\",\"start\":1\\.76,\"end\":2\\.26,.*\"word\":\" ask\",\"start\":8\\.06,\"end\":8\\.66,.*\"word\":\" country\",\"start\":10\\.22,\"end\":10\\.5")

# The default device (auto): a GPU where Vulkan shows one, else the CPU
# engine; the log line says which and why (label gpu: auto enumerates the
# Vulkan devices, whose driver leaks at exit under ASan).
add_test(NAME cli_transcribe_device_auto
         COMMAND sh -c "test -e \"$1\" || exit 77; exec env -u WHISPERD_DEVICE \"$0\" transcribe -m \"$1\" \"$2\""
         $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin
         ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
set_tests_properties(cli_transcribe_device_auto PROPERTIES LABELS "cli;gpu" SKIP_RETURN_CODE 77
  TIMEOUT 600 PASS_REGULAR_EXPRESSION
  "device auto: (Vulkan device [0-9]+, .* GPU\\)|.*so the native CPU engine).*\\]  And so my fellow Americans ask not")

# `whisperd info --device cpu`: the CPU engine's host memory plan, the
# arithmetic tests/cpu/test_engine.c checks against the real allocation.
add_test(NAME cli_info_plan_cpu
         COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" info --device cpu --max-batch 8 \"$1\""
         $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin)
set_tests_properties(cli_info_plan_cpu PROPERTIES LABELS "cli;cpu;unit" SKIP_RETURN_CODE 77
  PASS_REGULAR_EXPRESSION
  "device: +cpu, the native CPU engine.*encoder GEMM: +OpenBLAS .* kernels \\((SSE|AVX|AVX2|AVX-512)\\).*kernel choice: +(one candidate per kernel on this CPU|from the cache |measured at the next load|measured at every load).*host memory: +batch 8 .*weights +70\\.5 MiB.*self-attn KV +[0-9.]+ MiB \\(f32, 4 layers x 10 buffers.*cross-attn KV.*scratch.*total")

# `whisperd transcribe --device cpu EXTRA jfk.wav` on tiny.en, the log and
# the text together (2>&1), against regex.
function(wd_cpu_log_test name extra regex)
  add_test(NAME ${name}
           COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" transcribe --device cpu ${extra} -m \"$1\" \"$2\" 2>&1"
           $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin
           ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
  set_tests_properties(${name} PROPERTIES LABELS "cli;cpu;unit" SKIP_RETURN_CODE 77 TIMEOUT 600
    PASS_REGULAR_EXPRESSION "${regex}")
endfunction()

# The kernels chosen at load (issue #40): the log says where the choice
# came from (one candidate on hosts without AVX-512, else measured at this
# load or read from the cache), with the times where there was one.
wd_cpu_log_test(cli_cpu_transcribe_kernel_choice ""
  "CPU engine: kernels (one candidate: one candidate per kernel|measured: measured at load in [0-9.]+ ms|cache: from the cache [^\n]*measured [0-9T:Z-]+ in [0-9.]+ ms).*ask what you can do for your country")

# --threads sets the CPU engine's compute threads (several daemons on one
# host): one thread, the same words.
wd_cpu_log_test(cli_cpu_transcribe_threads_1 "--threads 1"
  "on cpu \\(1 threads,.*ask what you can do for your country")

# --compute-type int8 (every x86-64 host CI runs on has AVX2 or VNNI): the
# start-up log names the kernels, and jfk.wav gives f32's words (int8 may
# add the final full stop).
wd_cpu_log_test(cli_cpu_transcribe_compute_int8 "--compute-type int8"
  "compute type int8: linear layers on int8, (AVX512-VNNI|AVX2).*And so my fellow Americans,? ask not what your country can do for you,?\n.*ask what you can do for your country\\.?\n")

# A compute type the Vulkan engine has no kernels for is refused at start,
# saying what to do (label gpu: --device vulkan enumerates lavapipe).
add_test(NAME cli_compute_type_vulkan_refused
         COMMAND sh -c "test -e \"$1\" || exit 77; \"$0\" transcribe --device vulkan --compute-type int8 -m \"$1\" \"$2\" 2>&1; echo \"exit status $?\""
         $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin
         ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
set_tests_properties(cli_compute_type_vulkan_refused PROPERTIES LABELS "cli;gpu"
  SKIP_RETURN_CODE 77 TIMEOUT 600
  PASS_REGULAR_EXPRESSION "--compute-type int8 is a CPU engine mode; device '[^']+' runs the Vulkan engine.*--device cpu.*exit status [1-9]")

# --vad without the Silero file: a start failure that says how to get it.
add_test(NAME cli_vad_model_missing
         COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" transcribe --device cpu --vad --vad-model /nonexistent/vad.safetensors -m \"$1\" \"$2\" 2>&1"
         $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin
         ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
set_tests_properties(cli_vad_model_missing PROPERTIES LABELS "cli;cpu;unit" SKIP_RETURN_CODE 77
  WILL_FAIL FALSE PASS_REGULAR_EXPRESSION "--vad: /nonexistent/vad.safetensors: cannot open \\(scripts/fetch-vad.sh fetches it\\)")

# --chunking auto: jfk's speech (one chunk) decoded as its own job; the
# same words on the file's timeline. Skips without the Silero file.
add_test(NAME cli_cpu_transcribe_chunking_auto
         COMMAND sh -c "test -e \"$1\" && test -e \"$3\" || exit 77; exec \"$0\" transcribe --device cpu --chunking auto --vad-model \"$3\" -m \"$1\" \"$2\""
         $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin
         ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav
         ${PROJECT_SOURCE_DIR}/models/silero-vad-v6.safetensors)
set_tests_properties(cli_cpu_transcribe_chunking_auto PROPERTIES LABELS "cli;cpu;unit"
  SKIP_RETURN_CODE 77 TIMEOUT 600 PASS_REGULAR_EXPRESSION
  "\\[00:00:0[0-9]\\.[0-9]+ --> 00:00:[0-9.]+\\]  And so,? my fellow Americans,? ask not what your country can do for you.*ask what you can do for your country")
