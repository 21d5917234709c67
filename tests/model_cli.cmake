# Black-box checks of `whisperd info` and `whisperd convert` (label `cli`).
# The model-backed ones are registered when scripts/fetch-model.sh has run.
add_test(NAME cli_info_missing COMMAND whisperd info ${PROJECT_SOURCE_DIR}/models/no-such-model.bin)
set_tests_properties(cli_info_missing PROPERTIES LABELS "cli;unit" WILL_FAIL TRUE)
add_test(NAME cli_convert_usage COMMAND whisperd convert)
set_tests_properties(cli_convert_usage PROPERTIES LABELS "cli;unit" WILL_FAIL TRUE)
# The model-backed ones skip (exit 77) until scripts/fetch-model.sh has run.
function(wd_info_test name model regex)
  add_test(NAME ${name} COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" info \"$1\""
           $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/${model})
  set_tests_properties(${name} PROPERTIES LABELS "cli;unit" SKIP_RETURN_CODE 77
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
