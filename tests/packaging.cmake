# Packaging and deployment checks (label `package`).
# man_options: whisperd(8) lists exactly the flags and commands of --help.
add_test(NAME package_man_options
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/packaging/man_options.sh $<TARGET_FILE:whisperd>
          ${PROJECT_BINARY_DIR}/whisperd.8)
set_tests_properties(package_man_options PROPERTIES LABELS "package;unit" TIMEOUT 60)
