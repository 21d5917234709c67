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

# `whisperd transcribe --diarize` (the API side is tests/api/test_diarization.py):
# on pyannote's two-speaker sample.wav, the vtt carries both voices, A first.
# Skips (77) without tiny.en, or when `whisperd info` reports diarization
# unavailable (the models not fetched: scripts/fetch-diarization.sh).
set(wd_diar_flags --diar-seg-model ${PROJECT_SOURCE_DIR}/models/diar-segmentation-3.0.safetensors
    --diar-emb-model ${PROJECT_SOURCE_DIR}/models/diar-campplus-zh-en.safetensors)
add_test(NAME cli_transcribe_diarize
         COMMAND sh -c "m=$1; shift; test -e \"$m\" || exit 77; \"$0\" info --device cpu \"$@\" \"$m\" | grep -q '^diarization: *available' || exit 77; exec \"$0\" transcribe --device cpu --diarize -f vtt \"$@\" -m \"$m\" ${PROJECT_SOURCE_DIR}/tests/data/audio/diar/sample.wav"
                 $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin ${wd_diar_flags})
set_tests_properties(cli_transcribe_diarize PROPERTIES LABELS "cli;cpu" SKIP_RETURN_CODE 77
  TIMEOUT 600 PASS_REGULAR_EXPRESSION "\nWEBVTT\n\n[0-9:.]+ --> [0-9:.]+\n<v A>.*\n<v B>")
# Without the models: refused, naming why, before any file is decoded.
add_test(NAME cli_transcribe_diarize_no_model
         COMMAND sh -c "test -e \"$1\" || exit 77; exec \"$0\" transcribe --device cpu --diarize --diar-seg-model /nonexistent/seg.safetensors -m \"$1\" \"$2\""
                 $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}/models/ggml-tiny.en.bin
                 ${PROJECT_SOURCE_DIR}/tests/data/audio/jfk.wav)
set_tests_properties(cli_transcribe_diarize_no_model PROPERTIES LABELS "cli;cpu" SKIP_RETURN_CODE 77
  TIMEOUT 120 PASS_REGULAR_EXPRESSION "transcribe: --diarize: ")
