# cpu_test_gemv512 compiles the AVX-512 kernels' source against SIMDe
# (libsimde-dev), whose 512-bit operations run as pairs of native 256-bit
# ones under -mavx2 -mfma -mf16c. Only that file (gemv512_simde.c) gets
# the flags, so the test's own code runs anywhere and skips itself on a
# host without AVX2 (and elsewhere than x86-64) instead of faulting.
if(TARGET cpu_test_gemv512)
  set(simde_src ${CMAKE_CURRENT_SOURCE_DIR}/cpu/gemv512_simde.c)
  target_sources(cpu_test_gemv512 PRIVATE ${simde_src})
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$")
    set_source_files_properties(${simde_src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  endif()
endif()

# The same for the blocked encoder attention's kernels (enc_attn_simde.c):
# cpu_test_enc_attn checks their numerics with them on hosts without
# AVX-512, cpu_test_pick the engine's measured choice between them and sgemm.
set(ea_simde_src ${CMAKE_CURRENT_SOURCE_DIR}/cpu/enc_attn_simde.c)
foreach(t cpu_test_enc_attn cpu_test_pick)
  if(TARGET ${t})
    target_sources(${t} PRIVATE ${ea_simde_src})
  endif()
endforeach()
# -O2 in every tree, as cpu_enc_attn.c: at the sanitizer trees' -O0 SIMDe's
# 512-bit emulation would take minutes a measurement.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$")
  set_source_files_properties(${ea_simde_src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-O2")
else()
  set_source_files_properties(${ea_simde_src} PROPERTIES COMPILE_OPTIONS "-O2")
endif()
