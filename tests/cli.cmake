# Black-box checks of the whisperd binary itself (label `cli`).
set(WD_BIN $<TARGET_FILE:whisperd>)
add_test(NAME cli_version COMMAND ${WD_BIN} --version)
set_tests_properties(cli_version PROPERTIES LABELS "cli;unit" PASS_REGULAR_EXPRESSION "^whisperd [0-9]+\\.[0-9]+\\.[0-9]+")
add_test(NAME cli_help COMMAND ${WD_BIN} --help)
set_tests_properties(cli_help PROPERTIES LABELS "cli;unit"
  PASS_REGULAR_EXPRESSION "--max-body-mb MIB")
# The CPU driver must show up where no GPU exists (CI); a GPU machine lists it too.
add_test(NAME cli_devices COMMAND ${WD_BIN} devices)
set_tests_properties(cli_devices PROPERTIES LABELS "cli;gpu"
  PASS_REGULAR_EXPRESSION "device 0: .*usable: +yes")
# The native CPU engine is listed on every host. Label gpu too: devices
# also enumerates Vulkan, whose driver leaks at exit (see scripts/test.sh).
add_test(NAME cli_devices_cpu COMMAND ${WD_BIN} devices)
set_tests_properties(cli_devices_cpu PROPERTIES LABELS "cli;gpu;cpu"
  PASS_REGULAR_EXPRESSION "device cpu: .*kernel choice: .*kernel cache: ")
add_test(NAME cli_bad_option COMMAND ${WD_BIN} --port 0)
set_tests_properties(cli_bad_option PROPERTIES LABELS "cli;unit"
  PASS_REGULAR_EXPRESSION "--port: port: 0 is out of range")
add_test(NAME cli_unknown_command COMMAND ${WD_BIN} frobnicate)
set_tests_properties(cli_unknown_command PROPERTIES LABELS "cli;unit" WILL_FAIL TRUE)

# Log prefixes (issue #27): "<3>" only when stderr is the stream
# JOURNAL_STREAM names (journald's), "err: " in a file otherwise.
add_test(NAME cli_log_prefix_journal
         COMMAND sh -c "f=$(mktemp); JOURNAL_STREAM=$(stat -c %d:%i \"$f\") \"$0\" info /nonexistent/model.bin 2>\"$f\"; cat \"$f\"; rm -f \"$f\""
         $<TARGET_FILE:whisperd>)
set_tests_properties(cli_log_prefix_journal PROPERTIES LABELS "cli;unit"
  PASS_REGULAR_EXPRESSION "^<3>[^\n]*nonexistent")
add_test(NAME cli_log_prefix_plain
         COMMAND sh -c "f=$(mktemp); JOURNAL_STREAM=1:2 \"$0\" info /nonexistent/model.bin 2>\"$f\"; cat \"$f\"; rm -f \"$f\""
         $<TARGET_FILE:whisperd>)
set_tests_properties(cli_log_prefix_plain PROPERTIES LABELS "cli;unit"
  PASS_REGULAR_EXPRESSION "^err: [^\n]*nonexistent")
