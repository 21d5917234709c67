# Black-box checks of `whisperd info` and `whisperd convert` (label `cli`).
# The model-backed ones are registered when scripts/fetch-model.sh has run.
add_test(NAME cli_info_missing COMMAND whisperd info ${PROJECT_SOURCE_DIR}/models/no-such-model.bin)
set_tests_properties(cli_info_missing PROPERTIES LABELS "cli;unit" WILL_FAIL TRUE)
add_test(NAME cli_convert_usage COMMAND whisperd convert)
set_tests_properties(cli_convert_usage PROPERTIES LABELS "cli;unit" WILL_FAIL TRUE)
# The model-backed ones skip (exit 77) until scripts/fetch-model.sh has run.
# Label gpu: info lists the Vulkan device it would plan for, and the driver's
# own exit-time leaks keep whisperd's cli tests out of the leak-checked pass
# (scripts/test.sh).
function(wd_info_test name model regex)
  add_test(NAME ${name} COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" info \"$1\""
           $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/${model})
  set_tests_properties(${name} PROPERTIES LABELS "cli;gpu" ENVIRONMENT WHISPERD_DEVICE=vulkan SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
wd_info_test(cli_info_tiny_en ggml-tiny.en.bin
  "name: +tiny\\.en.*English-only.*n_vocab: +51864.*parameters: +37760256")
wd_info_test(cli_info_tiny_en_ct2 ct2-tiny.en
  "name: +tiny\\.en.*English-only.*n_vocab: +51864.*parameters: +37760256")
wd_info_test(cli_info_base ggml-base.bin
  "name: +base\n.*multilingual.*n_vocab: +51865")
wd_info_test(cli_info_base_ct2 ct2-base
  "name: +base\n.*multilingual.*n_vocab: +51865")

# `whisperd transcribe` end to end on the Vulkan engine (label gpu;
# WHISPERD_DEVICE=vulkan: lavapipe where there is no GPU, where auto would
# pick the CPU engine, whose own CLI tests are in cpu_cli.cmake): the
# words and segment times of jfk.wav as faster-whisper and whisper.cpp print
# them on the same weights. Skips (77) until the models are fetched.
function(wd_transcribe_test name model audio fmt regex)
  add_test(NAME ${name}
           COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" transcribe -m \"$1\" -f \"$3\" \"$2\""
           $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/${model}
           ${PROJECT_SOURCE_DIR}/tests/data/audio/${audio} ${fmt})
  set_tests_properties(${name} PROPERTIES LABELS "cli;gpu" ENVIRONMENT WHISPERD_DEVICE=vulkan SKIP_RETURN_CODE 77 TIMEOUT 600
    PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
wd_transcribe_test(cli_transcribe_jfk_wav_tiny_en ggml-tiny.en.bin jfk.wav txt
  "\\[00:00:00\\.000 --> 00:00:07\\.740\\]  And so my fellow Americans ask not what your country can do for you\n\\[00:00:07\\.740 --> 00:00:10\\.740\\]  ask what you can do for your country\n")
wd_transcribe_test(cli_transcribe_jfk_mp3_tiny_en ggml-tiny.en.bin jfk.mp3 json
  "\"language\":\"english\",\"duration\":11\\.0,\"text\":\"And so my fellow Americans ask not what your country can do for you ask what you can do for your country\",\"segments\":\\[{\"id\":0,\"seek\":0,\"start\":0\\.0,\"end\":7\\.74")
wd_transcribe_test(cli_transcribe_jfk_wav_base ggml-base.bin jfk.wav srt
  "1\n00:00:00,000 --> 00:00:07,[0-9]+\nAnd so my fellow Americans,? ask not what your country can do for you,?\n\n2\n00:00:07,[0-9]+ --> 00:00:10,[0-9]+\nask what you can do for your country\\.?\n")

# Model files no one publishes, written by tests/tools/synth_model.c in the
# smallest shape the Vulkan engine accepts (see tests/wd_synth_model.h).
add_executable(wd_synth_model ${CMAKE_CURRENT_SOURCE_DIR}/tools/synth_model.c)
target_include_directories(wd_synth_model PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR}/core)
target_link_libraries(wd_synth_model PRIVATE wd_core)
wd_apply_warnings(wd_synth_model)

# `whisperd transcribe` runs weights of every type the engine reads: a
# synthetic all-f32 file (ftype 0) and a q5_1 one (ftype 2009; type 9 at
# quantization version 2). The words are noise; the run must finish and
# exit 0.
foreach(ft 0 2009)
  add_test(NAME cli_transcribe_runs_ftype_${ft}
    COMMAND sh -c "\"$0\" \"$1\" ${ft} && \"$2\" transcribe -m \"$1\" \"$3\"; s=$?; rm -f \"$1\"; echo \"exit status $s\""
    $<TARGET_FILE:wd_synth_model> ${CMAKE_CURRENT_BINARY_DIR}/synth-ftype-${ft}.bin
    $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
  set_tests_properties(cli_transcribe_runs_ftype_${ft} PROPERTIES LABELS "cli;gpu" ENVIRONMENT WHISPERD_DEVICE=vulkan TIMEOUT 600
    PASS_REGULAR_EXPRESSION "transcribe: 1 file\\(s\\), 11\\.00 s of audio in [^\n]*\n(.*\n)?exit status 0\n")
endforeach()

# The GPUs' GEMM kernel (rb-64x64, which auto picks on discrete and
# integrated GPUs) through the whole Vulkan engine on lavapipe, where auto
# would take the texel kernels: the same words and times, and the log names
# the kernel.
add_test(NAME cli_transcribe_vk_gemm_rb
         COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" transcribe --vk-gemm rb-64x64 -m \"$1\" \"$2\" 2>&1"
         $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin
         ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
set_tests_properties(cli_transcribe_vk_gemm_rb PROPERTIES LABELS "cli;gpu" ENVIRONMENT WHISPERD_DEVICE=vulkan
  SKIP_RETURN_CODE 77 TIMEOUT 600 PASS_REGULAR_EXPRESSION
  "GEMM rb-64x64 \\(Linear layers\\), rb-64x64 \\(attention\\).*\\[00:00:00\\.000 --> 00:00:07\\.740\\]  And so my fellow Americans ask not what your country can do for you\n\\[00:00:07\\.740 --> 00:00:10\\.740\\]  ask what you can do for your country\n")
