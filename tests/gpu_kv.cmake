# gpu_test_engine_ops again on the f16 KV caches the engine takes where f32
# ones do not fit the heap
# (the registration from the glob runs it on f32 caches, within 1e-4 of the
# reference; this one within 1e-3).
if(TARGET gpu_test_engine_ops)
  add_test(NAME gpu_test_engine_ops_f16 COMMAND gpu_test_engine_ops)
  set_tests_properties(gpu_test_engine_ops_f16 PROPERTIES LABELS "gpu" TIMEOUT 600
    SKIP_RETURN_CODE 77 ENVIRONMENT "WD_TEST_KV_F16=1")
endif()

# The quantized-weight kernels of every GEMM family on lavapipe: 460 s in
# release on a 2-core AMD EPYC under CI's load (2026-11-28), too near the
# 600 s every test gets.
set_tests_properties(gpu_test_wquant PROPERTIES TIMEOUT 1200)
