# `whisperd diarize` end to end (issue #41): pyannote's two-speaker
# sample.wav gives RTTM lines of speakers A and B, and no third; with
# --max-speakers 1 only A. Skipped (77) without the model files
# (scripts/fetch-diarization.sh).
  set(WD_DIAR_CLI_CHECK [=[
seg="$1/models/diar-segmentation-3.0.safetensors"; emb="$1/models/diar-campplus-zh-en.safetensors"
[ -f "$seg" ] && [ -f "$emb" ] || exit 77
out=$("$0" diarize --diar-seg-model "$seg" --diar-emb-model "$emb" --rttm $2 "$1/tests/data/audio/diar/sample.wav") || exit 1
printf '%s\n' "$out"
echo "$out" | grep -q '^SPEAKER sample 1 [0-9.]* [0-9.]* <NA> <NA> A <NA> <NA>$' || exit 1
if [ -z "$2" ]; then echo "$out" | grep -q ' B <NA>' || exit 1; fi
if [ -n "$2" ]; then echo "$out" | grep -q ' B <NA>' && exit 1; fi
echo "$out" | grep -q ' C <NA>' && exit 1
exit 0
]=])
  add_test(NAME cli_diarize_sample
           COMMAND sh -c "${WD_DIAR_CLI_CHECK}" $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR} "")
  add_test(NAME cli_diarize_max_speakers
           COMMAND sh -c "${WD_DIAR_CLI_CHECK}" $<TARGET_FILE:whisperd> ${PROJECT_SOURCE_DIR}
                   "--max-speakers=1")
  set_tests_properties(cli_diarize_sample cli_diarize_max_speakers PROPERTIES
    LABELS "cli;unit" TIMEOUT 300 SKIP_RETURN_CODE 77)
