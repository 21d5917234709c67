# WD_FUZZ: every target gets libFuzzer's coverage instrumentation
# (-fsanitize=fuzzer-no-link) plus ASan and UBSan, so the fuzzers see the
# branches of the parsers they drive; tests/fuzz links the fuzz_<name>
# harnesses with libFuzzer's main (-fsanitize=fuzzer). clang only: gcc has no
# libFuzzer. A separate build tree (build-fuzz/), so gcc builds are untouched.
if(NOT WD_FUZZ)
  return()
endif()
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "WD_FUZZ needs clang (CMAKE_C_COMPILER=clang-14); found ${CMAKE_C_COMPILER_ID}")
endif()
if(WD_TSAN)
  message(FATAL_ERROR "WD_FUZZ cannot be combined with WD_TSAN")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)
