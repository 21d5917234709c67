# `whisperd info` prints the engine's device-memory plan for --max-batch
# (label cli): on the real device, and under a WHISPERD_VK_LIMITS heap too
# small for batch 8, where it names the largest batch that fits.
function(wd_info_plan_test name env regex)
  add_test(NAME ${name} COMMAND sh -c
           "test -e \"$1\" || exit 77; exec env ${env} \"$0\" info --max-batch 8 \"$1\""
           $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin)
  set_tests_properties(${name} PROPERTIES LABELS "cli;gpu" ENVIRONMENT WHISPERD_DEVICE=vulkan SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
wd_info_plan_test(cli_info_plan "WHISPERD_VK_LIMITS=nvidia"
  "not f16/f32: +none.*device memory: +batch 8 .*weights +73\\.5 MiB.*self-attn KV.*cross-attn KV.*scratch.*total")
wd_info_plan_test(cli_info_plan_refused "WHISPERD_VK_LIMITS=heap=200M"
  "does not plan: .*the largest batch that fits is [1-7] ")

# A --device list: one plan per engine serve would build, in list order.
add_test(NAME cli_info_plan_list COMMAND sh -c
         "test -e \"$1\" || exit 77; exec \"$0\" info --device cpu,vulkan --max-batch 4 \"$1\""
         $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin)
set_tests_properties(cli_info_plan_list PROPERTIES LABELS "cli;gpu;cpu" SKIP_RETURN_CODE 77
  PASS_REGULAR_EXPRESSION
  "engine 1 of 2 \\(cpu\\):.device: +cpu, the native CPU engine.*read in place.*engine 2 of 2 \\(vulkan\\):.device: .*device memory: +batch 4 ")
