# Black-box checks of `whisperd info` and `whisperd convert` (label `cli`).
# The model-backed ones are registered when scripts/fetch-model.sh has run.
add_test(NAME cli_info_missing COMMAND whisperd info ${PROJECT_SOURCE_DIR}/models/no-such-model.bin)
set_tests_properties(cli_info_missing PROPERTIES LABELS "cli;unit" WILL_FAIL TRUE)
add_test(NAME cli_convert_usage COMMAND whisperd convert)
set_tests_properties(cli_convert_usage PROPERTIES LABELS "cli;unit" WILL_FAIL TRUE)
if(EXISTS ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin)
  add_test(NAME cli_info_tiny_en COMMAND whisperd info ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin)
  set_tests_properties(cli_info_tiny_en PROPERTIES LABELS "cli;unit"
    PASS_REGULAR_EXPRESSION "name: +tiny\\.en.*English-only.*parameters: +37760256")
endif()
