# Black-box checks of `whisperd quantize IN OUT TYPE` (label `cli`): bad
# arguments fail with a message and a non-zero status; a quantized file
# loads and `whisperd info` shows its ftype and type. The tiny.en ones skip
# (exit 77) until scripts/fetch-model.sh tiny.en has run; the rest use a
# synthetic model (tools/synth_model.c, target wd_synth_model in
# model_cli.cmake). Each test writes its own files under the build tree and
# removes them. The byte-for-byte comparison with whisper.cpp's own
# quantize tool is scripts/crosscheck-whispercpp.sh (needs a whisper.cpp build).

# Each runs `whisperd quantize ARGS`, then prints its exit status.
function(wd_quantize_fail_test name regex)
  add_test(NAME ${name}
           COMMAND sh -c "\"$0\" quantize \"$@\"; echo \"exit status $?\""
           $<TARGET_FILE:whisperd> ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "cli;unit" PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
wd_quantize_fail_test(cli_quantize_usage
  "quantize: usage: whisperd quantize IN OUT TYPE \\(TYPE: q8_0 q5_0 q5_1 q4_0 q4_1 f16 f32\\)\n(.*\n)?exit status 2")
wd_quantize_fail_test(cli_quantize_bad_type
  "quantize: unknown type 'q4_k'; usage: whisperd quantize IN OUT TYPE.*\n(.*\n)?exit status 2"
  ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin ${CMAKE_CURRENT_BINARY_DIR}/never.bin q4_k)
wd_quantize_fail_test(cli_quantize_missing_in
  "quantize: '[^']*/no-such-model\\.bin': [^\n]*[Nn]o such file or directory\n(.*\n)?exit status 1"
  ${PROJECT_SOURCE_DIR}/models/no-such-model.bin ${CMAKE_CURRENT_BINARY_DIR}/never.bin q8_0)

# A valid input (synthetic f16) and an output whose directory does not exist
# (the tests may run as root, so a read-only directory would not do).
add_test(NAME cli_quantize_unwritable_out
  COMMAND sh -c "\"$0\" \"$1\" 1 || exit 1; \"$2\" quantize \"$1\" /nonexistent-dir/out.bin q8_0; s=$?; rm -f \"$1\"; echo \"exit status $s\""
  $<TARGET_FILE:wd_synth_model> ${CMAKE_CURRENT_BINARY_DIR}/quantize-unwritable-in.bin
  $<TARGET_FILE:whisperd>)
set_tests_properties(cli_quantize_unwritable_out PROPERTIES LABELS "cli;unit"
  PASS_REGULAR_EXPRESSION "quantize: '/nonexistent-dir/out\\.bin': [^\n]*'/nonexistent-dir/out\\.bin\\.tmp': cannot create: No such file or directory\n(.*\n)?exit status 1")

# quantize, then info on the result (label gpu: info opens Vulkan, see
# wd_info_test in model_cli.cmake); the output and its .tmp are removed.
# $0 whisperd, $1 input, $2 output, $3 type.
set(WD_QUANTIZE_INFO_SH
  "test -e \"$1\" || exit 77; \"$0\" quantize \"$1\" \"$2\" \"$3\" && \"$0\" info \"$2\"; s=$?; test -e \"$2.tmp\" && echo \"left $2.tmp\"; rm -f \"$2\"; echo \"exit status $s\"")
function(wd_quantize_info_test name model type regex)
  add_test(NAME ${name} COMMAND sh -c "${WD_QUANTIZE_INFO_SH}" $<TARGET_FILE:whisperd>
           ${PROJECT_SOURCE_DIR}/models/${model} ${CMAKE_CURRENT_BINARY_DIR}/${name}.bin ${type})
  set_tests_properties(${name} PROPERTIES LABELS "cli;gpu" ENVIRONMENT WHISPERD_DEVICE=vulkan SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "${regex}" FAIL_REGULAR_EXPRESSION "left [^\n]*\\.tmp")
endfunction()
# 65 of tiny.en's 167 tensors are 2-D weights: 4 x 6 encoder, 4 x 10 decoder,
# the token embedding. Sizes are whisper.cpp's quantize tool's, byte for byte.
wd_quantize_info_test(cli_quantize_tiny_en_q8_0 ggml-tiny.en.bin q8_0
  "wrote [^\n]*: tiny\\.en q8_0 \\(ftype 2007\\), 65 of 167 tensors converted, 43550795 bytes\n(.*\n)*name: +tiny\\.en\n(.*\n)*ftype: +2007\n(.*\n)*tensors: [^\n]*65 q8_0(.*\n)*exit status 0")
wd_quantize_info_test(cli_quantize_tiny_en_q4_0 ggml-tiny.en.bin q4_0
  "wrote [^\n]*: tiny\\.en q4_0 \\(ftype 2002\\), 65 of 167 tensors converted, 25335371 bytes\n(.*\n)*name: +tiny\\.en\n(.*\n)*ftype: +2002\n(.*\n)*tensors: [^\n]*65 q4_0(.*\n)*exit status 0")
wd_quantize_info_test(cli_quantize_tiny_en_ct2_q5_1 ct2-tiny.en q5_1
  "wrote [^\n]*: tiny\\.en q5_1 \\(ftype 2009\\), 65 of 167 tensors converted, 32166155 bytes\n(.*\n)*ftype: +2009\n(.*\n)*tensors: [^\n]*65 q5_1(.*\n)*exit status 0")

# Without models: the synthetic f16 model (one layer each: 17 weights) to q4_1.
add_test(NAME cli_quantize_synth_q4_1
  COMMAND sh -c "\"$0\" \"$1\" 1 || exit 1; \"$2\" quantize \"$1\" \"$1.q\" q4_1 && \"$2\" info \"$1.q\"; s=$?; rm -f \"$1\" \"$1.q\"; echo \"exit status $s\""
  $<TARGET_FILE:wd_synth_model> ${CMAKE_CURRENT_BINARY_DIR}/quantize-synth.bin
  $<TARGET_FILE:whisperd>)
set_tests_properties(cli_quantize_synth_q4_1 PROPERTIES LABELS "cli;gpu" ENVIRONMENT WHISPERD_DEVICE=vulkan
  PASS_REGULAR_EXPRESSION "q4_1 \\(ftype 2003\\), 17 of 50 tensors converted(.*\n)*ftype: +2003\n(.*\n)*tensors: [^\n]*17 q4_1(.*\n)*exit status 0")

# --help lists the command.
add_test(NAME cli_quantize_in_help COMMAND whisperd --help)
set_tests_properties(cli_quantize_in_help PROPERTIES LABELS "cli;unit"
  PASS_REGULAR_EXPRESSION "\n  quantize IN OUT TYPE +write a model as a ggml file of TYPE \\(q8_0 q5_0 q5_1 q4_0 q4_1 f16 f32\\)\n")

# The issue's proof on real weights: whisperd's own q8_0 file of tiny.en and
# of base gives the same words on jfk.wav as the f16 file (label gpu: the
# Vulkan engine dequantizes inside its kernels). Segment times may move by a
# timestamp token or two (7.54 s instead of 7.74 s for tiny.en), so only the
# text is compared. Lower types change words (the closing note of #11 lists
# them); they are checked against the reference engine in
# gpu_test_engine_types instead.
function(wd_quantize_transcribe_test name model type regex)
  add_test(NAME ${name}
    COMMAND sh -c "test -e \"$1\" || exit 77; \"$0\" quantize \"$1\" \"$2\" \"$3\" >/dev/null && \"$0\" transcribe -m \"$2\" -f json \"$4\"; s=$?; rm -f \"$2\"; echo \"exit status $s\""
    $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/${model}
    ${CMAKE_CURRENT_BINARY_DIR}/${name}.bin ${type} ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
  set_tests_properties(${name} PROPERTIES LABELS "cli;gpu" ENVIRONMENT WHISPERD_DEVICE=vulkan SKIP_RETURN_CODE 77 TIMEOUT 600
    PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
wd_quantize_transcribe_test(cli_quantize_tiny_en_q8_0_transcribes ggml-tiny.en.bin q8_0
  "\"text\":\"And so my fellow Americans ask not what your country can do for you ask what you can do for your country\"(.*\n)*exit status 0")
wd_quantize_transcribe_test(cli_quantize_base_q8_0_transcribes ggml-base.bin q8_0
  "\"text\":\"And so my fellow Americans,? ask not what your country can do for you,? ask what you can do for your country\\.?\"(.*\n)*exit status 0")
