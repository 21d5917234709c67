# The black-box API suite (tests/api/test_*.py, label `api`, named
# api_py_<file>; the C tests beside them are api_test_*): the real
# `whisperd serve` with the real tiny.en on 127.0.0.1, driven by curl, raw
# sockets and the official OpenAI Python and Node SDKs. One CTest test per
# pytest file; each skips (77) while the venv (scripts/install-test-deps.sh),
# the binary or models/ggml-tiny.en.bin is missing. test_device_loss pins
# --device vulkan itself (only the Vulkan engine has a device to lose).
#
# Registered in the plain build trees only: under ASan/TSan the Vulkan engine
# on lavapipe is too slow for the suite's time limits.
if(WD_ASAN OR WD_TSAN OR WD_UBSAN)
  return()
endif()
set(WD_API_VENV "${PROJECT_SOURCE_DIR}/build/venv" CACHE PATH
    "Python venv with the OpenAI SDK and pytest for tests/api")
file(GLOB wd_api_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/api/test_*.py)
foreach(f IN LISTS wd_api_tests)
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME api_py_${n}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/api/run.sh ${WD_API_VENV}
                   $<TARGET_FILE:whisperd> ${f})
  # One daemon-driving file at a time: they measure timeouts and queue depths.
  set_tests_properties(api_py_${n} PROPERTIES LABELS "api" SKIP_RETURN_CODE 77 TIMEOUT 900
                       RESOURCE_LOCK whisperd_api)
endforeach()

# The daemon runs on --device auto, the native CPU engine on a host without
# a GPU. The batching-identity file runs again with WHISPERD_DEVICE=vulkan,
# so the Vulkan engine keeps being served through the real daemon (lavapipe
# here; the Vulkan engine's words and formats are also checked by the
# WHISPERD_DEVICE=vulkan CLI tests and api_test_server_e2e). test_curl and
# the SDK files on lavapipe would add about 5 minutes to CI.
foreach(n test_concurrency)
  add_test(NAME api_py_vulkan_${n}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/api/run.sh ${WD_API_VENV}
                   $<TARGET_FILE:whisperd> ${CMAKE_CURRENT_SOURCE_DIR}/api/${n}.py)
  set_tests_properties(api_py_vulkan_${n} PROPERTIES LABELS "api;gpu" SKIP_RETURN_CODE 77
                       TIMEOUT 900 RESOURCE_LOCK whisperd_api
                       ENVIRONMENT WHISPERD_DEVICE=vulkan)
endforeach()
