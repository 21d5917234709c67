# The API end-to-end test runs the real model on the Vulkan engine (lavapipe
# without a GPU): label it gpu like the other engine tests, not unit.
if(TEST api_test_server_e2e)
  set_tests_properties(api_test_server_e2e PROPERTIES LABELS "api;gpu" TIMEOUT 900)
endif()
