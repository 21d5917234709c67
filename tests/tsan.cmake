# The ThreadSanitizer pass (scripts/test.sh runs `ctest -L tsan` in
# build-tsan/): the tests whose threads share the job queue, the worker, the
# thread pool and the HTTP server, labelled `tsan`. TSan slows plain C 5-15x,
# so the binaries that decode whole files run only their threading tests
# (WD_TEST_ONLY, tests/wd_test.h):
#   core_test_worker  queue full / cancel / timeout / drain, the audio budget, a job shorter
#                     than a frame, refusals at submit; left out: the identity
#                     decodes (whole files alone and batched, minutes each on
#                     the reference engine) and the device-loss rebuild (its
#                     1 s retry backoffs dominate).
#   core_test_taskq   the decode threads' queue: bound, FIFO, free (ms).
#   core_test_win_ahead  the next window's log-mel made on a queue's thread
#                     and taken by the decoder's, a free while it runs (ms).
#   core_test_chunk_job  a chunked job's chunks ended, cancelled and started
#                     from other threads: a cancel meeting a submit under way,
#                     the later chunks started by the first one's language
#                     (7 s; the other cases are the same code single-threaded).
#   core_test_workers the group over several workers: submits in flight
#                     counted from two threads, drains side by side (fake
#                     workers, well under a second).
#   cpu_test_cpu_features  threads racing to make the first query of the
#                     CPU's features (pthread_once; milliseconds).
#   cpu_test_engine   the encoder and one batched decoder step, both split
#                     over the pool's threads; left out: the whole jfk
#                     transcription (~270 steps of seconds each).
#   api_py_test_auth  the real daemon (TSan build, --device cpu) under real
#                     HTTP clients: tests/api_blackbox.cmake registers only
#                     this file of the Python API suite here, since each jfk
#                     transcription takes minutes under TSan; the whole suite
#                     runs in the ASan tree, leak-checked.
#   api_py_test_realtime_ws, api_py_test_realtime_park  the realtime sessions'
#                     threads, queues, close deadlines and handshake cap, and
#                     a session parked in the server while its model loads
#                     (tests/api_blackbox.cmake; 77 s and 11 s here).
# Not here: the Vulkan tests (lavapipe's JIT and threads under TSan are too
# slow, and its races would be Mesa's).
if(NOT WD_TSAN)
  return()
endif()
set(wd_tsan_tests core_test_pool core_test_taskq core_test_win_ahead core_test_worker core_test_workers core_test_chunk_job
    api_test_server
    api_test_watcher api_test_conn_guard cpu_test_cpu_features cpu_test_engine)
# What the pass needs and nothing else (scripts/build.sh tsan builds this
# target): the whole tree under TSan costs CI minutes for tests never run.
add_custom_target(wd_tsan DEPENDS ${wd_tsan_tests} whisperd)
foreach(t IN LISTS wd_tsan_tests)
  if(TEST ${t})
    get_test_property(${t} LABELS labels)
    set_tests_properties(${t} PROPERTIES LABELS "${labels};tsan")
  endif()
endforeach()
if(TEST core_test_worker)
  set_tests_properties(core_test_worker PROPERTIES ENVIRONMENT
    "WD_TEST_ONLY=queue_full_cancel_timeout_drain,audio_budget_refuses_past_it_and_frees_at_the_end,audio_shorter_than_a_frame_ends_empty,bad_options_refused_at_submit")
endif()
if(TEST core_test_chunk_job)
  set_tests_properties(core_test_chunk_job PROPERTIES ENVIRONMENT
    "WD_TEST_ONLY=setup,cancel_reaches_a_chunk_being_submitted,later_chunks_wait_for_the_first_ones_language,teardown")
endif()
if(TEST cpu_test_engine)
  set_tests_properties(cpu_test_engine PROPERTIES ENVIRONMENT
    "WD_TEST_ONLY=setup,encoder_matches_reference,batched_step_with_permuted_slots_matches_reference,teardown")
endif()
