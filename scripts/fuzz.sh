#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz. Usage:
#   scripts/fuzz.sh [SECONDS] [HARNESS...]
# SECONDS per harness (default 30); HARNESS names from tests/fuzz/fuzz_<name>.c
# (default: all). Builds build-fuzz/ (clang, ASan + UBSan; installs clang
# through scripts/install-fuzz-deps.sh when it is missing), fills
# tests/fuzz/corpus/<name>/ (kept between runs, not committed) from the
# committed seeds, the generated model seeds and cuts of the test data, then
# runs each harness under nice for SECONDS and prints, per harness, the
# executions, coverage (libFuzzer's final cov = edges, ft = features), corpus
# size and crashes. Crashing inputs land in tests/fuzz/artifacts/<name>/;
# a fixed crash's input belongs in tests/fuzz/regress/<name>/ (replayed by
# ctest fuzz_regress_<name>). Exits 1 when any harness crashed, timed out
# or leaked. Extra libFuzzer flags: WD_FUZZ_FLAGS="-jobs=2 -workers=2".
set -euo pipefail
cd "$(dirname "$0")/.."

secs=30
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
all=(multipart audio model_ggml model_ct2 tokenizer config render)
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [ -f "tests/fuzz/fuzz_$h.c" ] || { echo "fuzz.sh: no harness '$h' (have: ${all[*]})" >&2; exit 2; }
done

if ! command -v clang-14 >/dev/null && ! command -v clang >/dev/null; then
  scripts/install-fuzz-deps.sh
fi
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
failed=0
rows=()
for h in "${harnesses[@]}"; do
  corpus=$fz/corpus/$h
  art=$fz/artifacts/$h
  mkdir -p "$corpus" "$art"
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
  log=$logdir/$h.log
  echo "fuzz.sh: $h for ${secs}s (log $log)" >&2
  rc=0
  # shellcheck disable=SC2086
  nice -n 19 "$bin/fuzz_$h" "${flags[@]}" ${WD_FUZZ_FLAGS:-} "${dirs[@]}" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  crashes=$(find "$art" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'leak-*' -o -name 'oom-*' \) | wc -l)
  status=ok
  if [ "$rc" -ne 0 ]; then
    status="FAILED rc=$rc"
    failed=1
    grep -m3 -E 'ERROR: |runtime error|fuzz invariant|SUMMARY' "$log" >&2 || true
  fi
  rows+=("$(printf '%-11s %12s %9s %7s %8s %12s %8s  %s' "$h" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crashes" "$status")")
done

printf '%-11s %12s %9s %7s %8s %12s %8s  %s\n' harness execs exec/s cov ft corpus crashes status
printf '%s\n' "${rows[@]}"
exit $failed
