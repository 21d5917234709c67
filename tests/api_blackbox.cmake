# The black-box API suite (tests/api/test_*.py, label `api`, named
# api_py_<file>; the C tests beside them are api_test_*): the real
# `whisperd serve` with the real tiny.en on 127.0.0.1, driven by curl, raw
# sockets and the official OpenAI Python and Node SDKs. One CTest test per
# pytest file; each skips (77) while the venv (scripts/install-test-deps.sh),
# the binary or models/ggml-tiny.en.bin is missing. test_device_loss pins
# --device vulkan itself (only the Vulkan engine has a device to lose).
#
# In the sanitizer trees (ASan+UBSan, TSan) the daemon runs on the native
# CPU engine (WHISPERD_DEVICE=cpu): the Vulkan engine on lavapipe is too slow
# there for the suite's time limits, and the Mesa driver's exit-time leaks
# would force leak checks off. With --device cpu no Vulkan instance is made,
# so ASan's leak check stays on: a leak in the daemon makes it exit non-zero
# after SIGTERM, which the suite's stop_daemon() fails on. Those tests carry
# the label `sanitize_api`; test_device_loss.py is left out (it injects
# Vulkan faults and needs the Vulkan engine). In the TSan tree a jfk
# transcription on the CPU engine takes one to three minutes, so only
# test_auth.py (three transcriptions beside many refused requests) runs
# there, label `tsan`, with longer timeouts (tests/tsan.cmake).
set(WD_API_VENV "${PROJECT_SOURCE_DIR}/build/venv" CACHE PATH
    "Python venv with the OpenAI SDK and pytest for tests/api")
file(GLOB wd_api_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/api/test_*.py)
set(wd_api_sanitized OFF)
if(WD_ASAN OR WD_UBSAN OR WD_TSAN)
  set(wd_api_sanitized ON)
endif()
# Under ASan the files that reach the most daemon code with the fewest
# transcriptions: every error path, the limits, batching and cancels, the
# drain and socket activation, and several models with a SIGHUP reload
# (references to a model shared by requests and threads: 36 s), and the
# realtime sessions (their threads, queues and turns' callbacks, and the
# WebSocket rules and session bounds of test_realtime_ws).
# test_chunked_jobs stays in the release tree: its long uploads took 190 s
# under ASan on two loaded cores, and the chunks' submits from the worker's
# callbacks are under ASan in core_test_chunk_job and core_test_worker.
# test_curl
# and the SDK files (the answers' formats, the same code paths again) stay
# in the release tree: under ASan they would add about ten minutes to CI.
# Under TSan: test_auth (three transcriptions beside many refused requests)
# and test_realtime_ws (session threads, their queues, the close handshake
# and the handshake cap, few transcriptions).
set(wd_api_tsan test_auth test_realtime_ws)
set(wd_api_asan test_auth test_errors test_limits test_concurrency test_systemd test_faults
    test_models test_realtime test_realtime_ws)
foreach(f IN LISTS wd_api_tests)
  get_filename_component(n ${f} NAME_WE)
  if((wd_api_sanitized AND NOT WD_TSAN AND NOT n IN_LIST wd_api_asan) OR
     (WD_TSAN AND NOT n IN_LIST wd_api_tsan))
    continue()
  endif()
  add_test(NAME api_py_${n}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/api/run.sh ${WD_API_VENV}
                   $<TARGET_FILE:whisperd> ${f})
  # One daemon-driving file at a time: they measure timeouts and queue depths.
  set_tests_properties(api_py_${n} PROPERTIES LABELS "api" SKIP_RETURN_CODE 77 TIMEOUT 900
                       RESOURCE_LOCK whisperd_api)
  if(WD_TSAN)
    set_tests_properties(api_py_${n} PROPERTIES LABELS "api;tsan" ENVIRONMENT
      "WHISPERD_DEVICE=cpu;WD_API_READY_TIMEOUT=600;WD_API_REQUEST_TIMEOUT=600")
  elseif(wd_api_sanitized)
    set_tests_properties(api_py_${n} PROPERTIES LABELS "api;sanitize_api"
                         ENVIRONMENT "WHISPERD_DEVICE=cpu")
  elseif(n IN_LIST wd_api_asan)
    # The same file runs against the ASan daemon: scripts/test.sh leaves
    # this release copy out (-LE api_asan_twin) where both trees run on the
    # CPU engine, so CI pays for each file once; `ctest --test-dir build`
    # alone still runs it.
    set_tests_properties(api_py_${n} PROPERTIES LABELS "api;api_asan_twin")
  endif()
endforeach()

# Diarization under both sanitizers: 4 s of two voices whole, streamed and
# left by its client, and a client leaving the diarization of audio without
# speech (the diarization task beside the worker's job, their meeting, and
# the watcher stopping a diarization). ASan adds the no-model 400s and
# diarizations queued on their own thread while an upload goes through
# (host code with no thread of its own to race: under TSan they took 100 of
# the test's 190 s, mostly daemon start-ups). The rest of the file (30 s
# files, every parameter) stays in the release tree.
if(wd_api_sanitized)
  if(WD_TSAN)
    set(wd_diar_k "short or without_speech")
  else()
    set(wd_diar_k "short or no_model or without_speech or hold_up")
  endif()
  add_test(NAME api_py_test_diarization_short
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/api/run.sh ${WD_API_VENV}
                   $<TARGET_FILE:whisperd> ${CMAKE_CURRENT_SOURCE_DIR}/api/test_diarization.py
                   -k "${wd_diar_k}")
  set_tests_properties(api_py_test_diarization_short PROPERTIES SKIP_RETURN_CODE 77
    TIMEOUT 900 RESOURCE_LOCK whisperd_api)
  if(WD_TSAN)
    set_tests_properties(api_py_test_diarization_short PROPERTIES LABELS "api;tsan" ENVIRONMENT
      "WHISPERD_DEVICE=cpu;WD_API_READY_TIMEOUT=600;WD_API_REQUEST_TIMEOUT=600")
  else()
    set_tests_properties(api_py_test_diarization_short PROPERTIES LABELS "api;sanitize_api"
      ENVIRONMENT "WHISPERD_DEVICE=cpu")
  endif()
endif()

# Under TSan also the realtime session parked in the server while its model
# loads and woken by the load's failure (the server's callback from the
# loading thread, the session's references): no transcription, seconds.
if(WD_TSAN)
  add_test(NAME api_py_test_realtime_park
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/api/run.sh ${WD_API_VENV}
                   $<TARGET_FILE:whisperd> ${CMAKE_CURRENT_SOURCE_DIR}/api/test_realtime.py
                   -k fails_to_load)
  set_tests_properties(api_py_test_realtime_park PROPERTIES LABELS "api;tsan"
    SKIP_RETURN_CODE 77 TIMEOUT 900 RESOURCE_LOCK whisperd_api ENVIRONMENT
    "WHISPERD_DEVICE=cpu;WD_API_READY_TIMEOUT=600;WD_API_REQUEST_TIMEOUT=600")
endif()

# The daemon runs on --device auto, the native CPU engine on a host without
# a GPU. The batching-identity file runs again with WHISPERD_DEVICE=vulkan,
# so the Vulkan engine keeps being served through the real daemon (lavapipe
# here; the Vulkan engine's words and formats are also checked by the
# WHISPERD_DEVICE=vulkan CLI tests and api_test_server_e2e). test_curl and
# the SDK files on lavapipe would add about 5 minutes to CI. Release tree
# only: lavapipe under a sanitizer is too slow, and its exit-time leaks.
if(wd_api_sanitized)
  return()
endif()
foreach(n test_concurrency)
  add_test(NAME api_py_vulkan_${n}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/api/run.sh ${WD_API_VENV}
                   $<TARGET_FILE:whisperd> ${CMAKE_CURRENT_SOURCE_DIR}/api/${n}.py)
  set_tests_properties(api_py_vulkan_${n} PROPERTIES LABELS "api;gpu" SKIP_RETURN_CODE 77
                       TIMEOUT 900 RESOURCE_LOCK whisperd_api
                       ENVIRONMENT WHISPERD_DEVICE=vulkan)
endforeach()
