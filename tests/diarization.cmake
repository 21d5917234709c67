# Speaker diarization (issue #41). So far: scripts/diar_convert.py, the
# converter of the two PyTorch checkpoints into our safetensors files
# (scripts/fetch-diarization.sh), on checkpoints the test makes in
# PyTorch's zip layout: values, strides, kinds, and a pickle that names
# os.system made inert (standard library only; no torch, no network).
find_program(WD_PYTHON3 python3)
if(WD_PYTHON3)
  add_test(NAME tools_test_diar_convert
           COMMAND ${WD_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_diar_convert.py
                   ${PROJECT_SOURCE_DIR}/scripts)
  set_tests_properties(tools_test_diar_convert PROPERTIES LABELS "unit" TIMEOUT 120)
endif()
