# cpu_test_gemv512 compiles the AVX-512 kernels' source against SIMDe
# (libsimde-dev), whose 512-bit operations run as pairs of native 256-bit
# ones under -mavx2 -mfma -mf16c: on x86-64 only (the test skips itself
# elsewhere, and on a host without AVX2).
if(TARGET cpu_test_gemv512 AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$")
  target_compile_options(cpu_test_gemv512 PRIVATE -mavx2 -mfma -mf16c)
endif()
