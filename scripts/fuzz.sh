#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz. Usage:
#   scripts/fuzz.sh [SECONDS] [HARNESS...]
# SECONDS per harness (default 30); HARNESS names from tests/fuzz/fuzz_<name>.c
# (default: all). Builds build-fuzz/ (clang, ASan + UBSan; installs clang
# and its libFuzzer runtime through scripts/install-fuzz-deps.sh), fills
# tests/fuzz/corpus/<name>/ (kept between runs, not committed) from the
# committed seeds, the generated model seeds and cuts of the test data, then
# runs each harness under nice for SECONDS and prints, per harness, the
# executions, coverage (libFuzzer's final cov = edges, ft = features), corpus
# size and crashes. Crashing inputs land in tests/fuzz/artifacts/<name>/;
# a fixed crash's input belongs in tests/fuzz/regress/<name>/ (replayed by
# ctest fuzz_regress_<name>). Exits 1 when any harness crashed, timed out
# or leaked. WD_FUZZ_PROCS=N runs N processes per harness (long runs on a
# big machine); WD_FUZZ_JOBS=N runs N harnesses at once (default: the number
# of cores, so a smoke run on two cores takes half the wall time of one
# harness after another); WD_FUZZ_FLAGS adds libFuzzer flags.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=30
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
all=(multipart audio model_ggml model_ct2 tokenizer vocab config render vad realtime diar_model)
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [ -f "tests/fuzz/fuzz_$h.c" ] || { echo "fuzz.sh: no harness '$h' (have: ${all[*]})" >&2; exit 2; }
done

# Always (it is idempotent): a clang found on PATH may lack the libFuzzer
# runtime of libclang-rt-14-dev.
scripts/install-fuzz-deps.sh >/dev/null
nice -n 19 scripts/build.sh fuzz >/dev/null

fz=tests/fuzz
bin=build-fuzz/tests/fuzz
gen=build-fuzz/tests/fuzz/seeds
"$bin/fuzz_make_seeds" "$gen" >/dev/null

# Seeds taken from the test data: the first 16 KB of each audio file (a
# truncated file is a fine start, and keeps executions fast), texts from the
# tokenizer's golden table.
seed_test_data() {
  local h=$1 dir=$2
  case "$h" in
    audio)
      for f in tests/data/audio/formats/* tests/data/audio/jfk.mp3 tests/data/audio/cards/001.wav; do
        [ -f "$f" ] && head -c 16384 "$f" > "$dir/td_$(basename "$f")"
      done ;;
    tokenizer)
      # golden.tsv: kind, hex of the UTF-8 text, ids...; every 7th text, with
      # mode byte 0 (encode) and the three layouts in turn.
      python3 - "$dir" <<'PY'
import sys
rows = [l.split("\t") for l in open("tests/data/tokenizer/golden.tsv", encoding="utf-8")
        if l.startswith("text\t")]
for i, r in enumerate(rows[::7][:40]):
    with open(f"{sys.argv[1]}/td_golden_{i}", "wb") as f:
        f.write(bytes([(i % 3) * 4]) + bytes.fromhex(r[1]))
PY
      ;;
  esac
}

dict_of() {
  case "$1" in
    multipart) echo "$fz/multipart.dict" ;;
    audio) echo "$fz/riff.dict" ;;
    model_ggml) echo "$fz/ggml.dict" ;;
    model_ct2) echo "$fz/ct2.dict" ;;
    config) echo "$fz/config.dict" ;;
    *) echo "" ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
logdir=build-fuzz/fuzz-logs
mkdir -p "$logdir"
# One harness: runs it and writes its summary row to $logdir/$h.row and
# its failure (if any) to $logdir/$h.failed.
run_harness() {
  local h=$1
  local corpus=$fz/corpus/$h
  art=$fz/artifacts/$h
  mkdir -p "$corpus" "$art"
  touch "$art/.run-start" # findings of this run are the files newer than it
  if [ -z "$(ls -A "$corpus")" ]; then
    seed_test_data "$h" "$corpus"
  fi
  dirs=("$corpus")
  for d in "$fz/seeds/$h" "$gen/$h" "$fz/regress/$h"; do
    [ -d "$d" ] && dirs+=("$d")
  done
  dict=$(dict_of "$h")
  flags=(-max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -print_final_stats=1
         -artifact_prefix="$art/")
  [ -n "$dict" ] && flags+=(-dict="$dict")
  # The model seeds in raw form are ~500 KB; other inputs stay small.
  case "$h" in model_*) flags+=(-max_len=600000) ;; audio) flags+=(-max_len=65536) ;; esac
  # WD_FUZZ_PROCS processes share the corpus dir (libFuzzer reloads it every
  # second, so each picks up what the others found); their executions add up
  # and the coverage shown is the best one's.
  procs=${WD_FUZZ_PROCS:-1}
  echo "fuzz.sh: $h for ${secs}s x $procs (logs $logdir/$h.*.log)" >&2
  pids=()
  for i in $(seq 1 "$procs"); do
    # shellcheck disable=SC2086
    nice -n 19 "$bin/fuzz_$h" "${flags[@]}" ${WD_FUZZ_FLAGS:-} "${dirs[@]}" \
      >"$logdir/$h.$i.log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for pid in "${pids[@]}"; do
    wait "$pid" || rc=$?
  done
  execs=0 rate=0 cov=0 ft=0 corp=?
  for i in $(seq 1 "$procs"); do
    log=$logdir/$h.$i.log
    e=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    r=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
    c=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    f=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    execs=$((execs + ${e:-0}))
    rate=$((rate + ${r:-0}))
    if [ "${f:-0}" -ge "$ft" ]; then
      cov=${c:-0} ft=${f:-0}
      corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
    fi
  done
  crashes=$(find "$art" -type f -newer "$art/.run-start" \( -name 'crash-*' -o -name 'timeout-*' \
    -o -name 'leak-*' -o -name 'oom-*' \) | wc -l)
  status=ok
  if [ "$rc" -ne 0 ]; then
    status="FAILED rc=$rc"
    : >"$logdir/$h.failed"
    cat "$logdir/$h".*.log | grep -m3 -E 'ERROR: |runtime error|fuzz invariant|SUMMARY' >&2 || true
  fi
  printf '%-11s %12s %9s %7s %8s %12s %8s  %s\n' "$h" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crashes" "$status" >"$logdir/$h.row"
}

jobs_max=${WD_FUZZ_JOBS:-$(nproc)}
for h in "${harnesses[@]}"; do
  rm -f "$logdir/$h.row" "$logdir/$h.failed"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  run_harness "$h" &
done
wait || true
failed=0
rows=()
for h in "${harnesses[@]}"; do
  [ -f "$logdir/$h.failed" ] && failed=1
  rows+=("$(cat "$logdir/$h.row" 2>/dev/null || printf '%-11s %s' "$h" "NO RESULT")")
  [ -f "$logdir/$h.row" ] || failed=1
done

printf '%-11s %12s %9s %7s %8s %12s %8s  %s\n' harness execs exec/s cov ft corpus crashes status
printf '%s\n' "${rows[@]}"
exit $failed
