#!/usr/bin/env bash
# run.sh (packed by scripts/gpu-bundle.sh) - the GPU checks of issue #22 on
# a host with an NVIDIA or AMD GPU, from the unpacked bundle, with nothing
# installed: every binary loads its libraries from ./lib.
#
# usage: ./run.sh [STEP ...]   steps (default all, in this order):
#   tests  the Vulkan engine's tests (build/tests/gpu_test_*), each its exit
#          status and last lines
#   tiny   bench_engine on tiny.en and jfk.wav: encoder ms per window,
#          decoder ms per token, GPU profile, end-to-end real-time factor
#   gemm   bench_gemm: the encoder's GEMM shapes on each GPU kernel family
#          (tiled-64x64, rb-64x64, rb-128x64) and OpenBLAS
#   large  the large-v3-turbo shape (random weights, written here by
#          wd_synth_model): bench_engine beside whisper.cpp's whisper-bench
#          (its Vulkan backend) on the same file, same run
#   load   tests/bench/load.py: requests/s and latency at 1-16 clients, with
#          batching and without (--max-batch 1), the daemon on the GPU
# Figures and logs go to ./results (RESULTS=DIR sets it); summary.txt is
# what to paste into the issue. Each step is bounded (timeout) so one hang
# does not lose the rest.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
res=${RESULTS:-$here/results}
mkdir -p "$res"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NVIDIA's container toolkit puts the Vulkan driver manifest here.
nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -e "$nv" ]; then
  export VK_DRIVER_FILES=$nv
fi
steps=${*:-tests tiny gemm large load}
sum=$res/summary.txt
say() { echo "$*" | tee -a "$sum"; }

say "== whisperd GPU checks, $(date -u +%FT%TZ), bundle $(sed -n 's/^commit=//p' MANIFEST)"
{
  uname -srm
  echo "cpus: $(nproc)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} 2>&1 | tee -a "$sum"
if ! build/daemon/whisperd devices >"$res/devices.txt" 2>&1; then
  say "whisperd devices failed (no Vulkan loader or driver?):"
  tail -5 "$res/devices.txt" | tee -a "$sum"
fi
grep -E "^device [0-9]|^  (name|type|driver|memory):|^default:" "$res/devices.txt" | tee -a "$sum"

# The engine tests read models/ and tests/data/ under the source tree they
# were built from; where that path is free, it becomes a link to here.
src=$(sed -n 's/^source_dir=//p' MANIFEST)
if [ -n "$src" ] && [ "$src" != "$here" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" 2>/dev/null && ln -s "$here" "$src" 2>/dev/null ||
    say "note: cannot link $src to the bundle: the engine tests will skip what they cannot open"
fi

for step in $steps; do
  case $step in
  tests)
    say "== engine tests (build/tests/gpu_test_*)"
    for t in build/tests/gpu_test_*; do
      n=$(basename "$t")
      timeout 300 "$t" >"$res/$n.log" 2>&1
      rc=$?
      say "$n: exit $rc, $(grep -E '^[0-9]+ passed' "$res/$n.log" | tail -1)"
    done
    ;;
  tiny)
    say "== tiny.en, jfk.wav: bench_engine (Vulkan), then the CPU engine beside it"
    timeout 300 build/tests/bench/bench_engine models/ggml-tiny.en.bin tests/data/audio/jfk.wav 5 \
      >"$res/bench_tiny_vulkan.txt" 2>&1
    timeout 300 build/tests/bench/bench_engine models/ggml-tiny.en.bin tests/data/audio/jfk.wav 3 cpu \
      >"$res/bench_tiny_cpu.txt" 2>&1
    grep -hE "^model|encoder|decoder|real-time|RTF" "$res/bench_tiny_vulkan.txt" "$res/bench_tiny_cpu.txt" | tee -a "$sum"
    ;;
  gemm)
    say "== bench_gemm: GPU ms per GEMM shape by kernel family, then OpenBLAS"
    timeout 300 build/tests/bench/bench_gemm tiled-64x64,rb-64x64,rb-128x64 "$(nproc)" \
      >"$res/bench_gemm.txt" 2>&1
    tee -a "$sum" <"$res/bench_gemm.txt"
    ;;
  large)
    f=models/synth/ggml-large-v3-turbo.bin
    mkdir -p models/synth
    [ -s "$f" ] || build/tests/wd_synth_model "$f" 1 large-v3-turbo >"$res/synth.txt" 2>&1
    say "== large-v3-turbo shape (random f16 weights, $(du -m "$f" | cut -f1) MiB): whisperd Vulkan, whisper.cpp Vulkan"
    timeout 540 build/tests/bench/bench_engine "$f" tests/data/audio/jfk.wav 3 \
      >"$res/bench_large_vulkan.txt" 2>&1
    grep -E "^model|encoder|decoder" "$res/bench_large_vulkan.txt" | tee -a "$sum"
    timeout 540 whispercpp/bin/whisper-bench -m "$f" -t "$(nproc)" >"$res/wcpp_bench_large.txt" 2>&1
    grep -E "ggml_vulkan: |encode time|decode time|batchd time|prompt time|total time" \
      "$res/wcpp_bench_large.txt" | tee -a "$sum"
    ;;
  load)
    say "== load.py: tiny.en through serve on the GPU (batching vs --max-batch 1)"
    timeout 580 python3 tests/bench/load.py --ns 1,4,8,16 --long-ns 1,4 --seconds 10 \
      >"$res/load.txt" 2>&1
    tail -40 "$res/load.txt" | tee -a "$sum"
    ;;
  *)
    say "unknown step '$step' (tests, tiny, gemm, large, load)"
    ;;
  esac
done
say "== done: $res"
