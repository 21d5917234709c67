#!/usr/bin/env bash
# run.sh (packed by scripts/gpu-bundle.sh) - the GPU checks of issue #22 on
# a host with an NVIDIA or AMD GPU, from the unpacked bundle, with nothing
# installed: every binary loads its libraries from ./lib.
#
# usage: ./run.sh [STEP ...]   steps (default all, in this order):
#   cm     the matrix units (issue #40): the GEMM tests of every family
#          (cm-* included where the device lists cooperative matrices),
#          bench_gemm of cm-128x128, cm-64x64, rb-64x64 and tiled, then the
#          candidates -dl (loads converted when stored) and -pf2 (that, two
#          K-slices ahead)
#   attn   not yet run on a GPU (issue #40): the encoder's fused attention
#          (gpu_test_attn_enc, then the large shape with bench_engine vk:fused
#          beside AUTO) and the KHR kernels (test_gemm's gemm_cm_khr, where
#          the bundle was built with a glslang >= 13: WD_GLSLANG_KHR)
#   tests  the Vulkan engine's tests (build/tests/gpu_test_*), each its exit
#          status and last lines
#   tiny   bench_engine on tiny.en and jfk.wav: encoder ms per window,
#          decoder ms per token, GPU profile, end-to-end real-time factor
#   gemm   bench_gemm: the encoder's GEMM shapes on each GPU kernel family
#          (tiled-64x64, rb-64x64, rb-128x64) and OpenBLAS
#   large  the large-v3-turbo shape (random weights, written here by
#          wd_synth_model): bench_engine beside whisper.cpp's whisper-bench
#          (its Vulkan backend) on the same file, same run
#          ... and with --vk-precision f32 (the f32 kernels) beside AUTO
#   numerics  the tiny model's transcripts of every packed clip with AUTO
#          (matrix units) and --vk-precision f32, diffed
#   peer   tests/bench/hf_peer.py: HF transformers' Whisper (large-v3-turbo
#          shape, random weights) in fp32/fp16/bf16 and cuBLAS's GEMM
#          ceilings on the same GPU, where python3 has torch and transformers
#   load   tests/bench/load.py: requests/s and latency at 1-16 clients, with
#          batching and without (--max-batch 1), the daemon on the GPU
#   load16 issue #40's batching target, short: jfk at 1 and 16 clients,
#          tiny.en, --max-batch 16 against --max-batch 1 (about a minute)
#   ahead  not yet run on a GPU (issue #40): 16 clients of a 120 s file at
#          --max-batch 16 with the next windows' log-mel made ahead (the
#          default on a GPU) and with --mel-ahead off
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
steps=${*:-cm attn tests tiny large numerics peer load ahead}
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
grep -E "^device [0-9]|^  (name|type|driver|memory|matrix units|GEMM):|^    [0-9]+x|^default:" "$res/devices.txt" | tee -a "$sum"

# The engine tests read models/ and tests/data/ under the source tree they
# were built from; where that path is free, it becomes a link to here.
src=$(sed -n 's/^source_dir=//p' MANIFEST)
if [ -n "$src" ] && [ "$src" != "$here" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" 2>/dev/null && ln -s "$here" "$src" 2>/dev/null ||
    say "note: cannot link $src to the bundle: the engine tests will skip what they cannot open"
fi

for step in $steps; do
  case $step in
  cm)
    say "== matrix units: GEMM tests (every family), then bench_gemm"
    for n in gpu_test_gemm gpu_test_wquant; do
      timeout 240 build/tests/$n >"$res/$n.log" 2>&1
      say "$n: exit $?, $(grep -E '^[0-9]+ passed' "$res/$n.log" | tail -1)"
      grep -E "cm-|^(ok|FAIL|SKIP) .*cm|matrix units" "$res/$n.log" | head -120 | tee -a "$sum"
    done
    timeout 300 build/tests/bench/bench_gemm cm-128x128,cm-64x64,rb-64x64,tiled-64x64,cm-128x128-dl,cm-128x128-pf2,cm-64x64-dl,cm-64x64-pf2 "$(nproc)" \
      >"$res/bench_gemm_cm.txt" 2>&1
    tee -a "$sum" <"$res/bench_gemm_cm.txt"
    ;;
  attn)
    say "== fused encoder attention and KHR kernels (not yet run on a GPU)"
    timeout 120 build/tests/gpu_test_attn_enc >"$res/gpu_test_attn_enc.log" 2>&1
    say "gpu_test_attn_enc: exit $?, $(grep -E '^[0-9]+ passed' "$res/gpu_test_attn_enc.log" | tail -1)"
    grep -E "attn n=|worst|nothing|FAIL" "$res/gpu_test_attn_enc.log" | tee -a "$sum"
    # The engine on the matrix units against its f32 kernels (with a q5_0
    # tiny model the jfk transcript check fails whatever the kernels: it
    # holds f16 tiny.en to openai's segments).
    timeout 120 build/tests/gpu_test_engine_matrix >"$res/gpu_test_engine_matrix.log" 2>&1
    say "gpu_test_engine_matrix: exit $?"
    grep -E "matrix|encoder RMS|FAIL" "$res/gpu_test_engine_matrix.log" | tee -a "$sum"
    WD_TEST_ONLY=device_opens,gemm_cm_khr,teardown timeout 60 build/tests/gpu_test_gemm \
      >"$res/gpu_test_gemm_khr.log" 2>&1
    say "gpu_test_gemm (KHR): exit $?"
    grep -E "cm-|nothing|FAIL|matrix units" "$res/gpu_test_gemm_khr.log" | tee -a "$sum"
    f=models/synth/ggml-large-v3-turbo.bin
    mkdir -p models/synth
    [ -s "$f" ] || build/tests/wd_synth_model "$f" 1 large-v3-turbo >"$res/synth.txt" 2>&1
    for v in "" vk:fused; do
      timeout 120 build/tests/bench/bench_engine "$f" tests/data/audio/jfk.wav 2 $v \
        >"$res/bench_large_attn_${v#vk:}.txt" 2>&1
      grep -E "^model|encoder:|^  (gemm|attn|softmax|transpose)" "$res/bench_large_attn_${v#vk:}.txt" | tee -a "$sum"
    done
    ;;
  numerics)
    say "== numerics: tiny model ($(sed -n 's/^tiny=//p' MANIFEST)), AUTO vs --vk-precision f32"
    for a in tests/data/audio/jfk.wav tests/data/audio/cards/*.wav; do
      [ -f "$a" ] || continue
      n=$(basename "$a")
      timeout 120 build/daemon/whisperd transcribe --device 0 --model models/ggml-tiny.en.bin "$a" \
        >"$res/num_auto_$n.txt" 2>"$res/num_auto_$n.log"
      timeout 120 build/daemon/whisperd transcribe --device 0 --vk-precision f32 --model models/ggml-tiny.en.bin "$a" \
        >"$res/num_f32_$n.txt" 2>"$res/num_f32_$n.log"
      if cmp -s "$res/num_auto_$n.txt" "$res/num_f32_$n.txt"; then
        say "$n: identical ($(wc -w <"$res/num_auto_$n.txt") words)"
      else
        say "$n: DIFFERS"
        diff "$res/num_f32_$n.txt" "$res/num_auto_$n.txt" | head -6 | tee -a "$sum"
      fi
    done
    grep -h "GEMM" "$res"/num_auto_*.log | head -1 | tee -a "$sum"
    ;;
  peer)
    say "== same-device peer: HF transformers (tests/bench/hf_peer.py)"
    if python3 -c "import torch, transformers" 2>/dev/null; then
      PYTHONUNBUFFERED=1 timeout 300 python3 tests/bench/hf_peer.py --json "$res/hf_peer.json" \
        --budget-s 240 >"$res/hf_peer.txt" 2>&1
      say "hf_peer: exit $?"
      tee -a "$sum" <"$res/hf_peer.txt"
    else
      say "no torch/transformers here: skipped"
    fi
    ;;
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
    timeout 300 build/tests/bench/bench_engine "$f" tests/data/audio/jfk.wav 3 \
      >"$res/bench_large_vulkan.txt" 2>&1
    grep -E "^model|encoder|decoder|prefill|^  [a-z-]+ " "$res/bench_large_vulkan.txt" | tee -a "$sum"
    say "-- the same with --vk-precision f32 (the f32 kernels)"
    timeout 300 build/tests/bench/bench_engine "$f" tests/data/audio/jfk.wav 3 vk:f32 \
      >"$res/bench_large_vulkan_f32.txt" 2>&1
    grep -E "^model|encoder|decoder|prefill" "$res/bench_large_vulkan_f32.txt" | tee -a "$sum"
    if [ -x whispercpp/bin/whisper-bench ]; then
      timeout 300 whispercpp/bin/whisper-bench -m "$f" -t "$(nproc)" >"$res/wcpp_bench_large.txt" 2>&1
      grep -E "ggml_vulkan: |encode time|decode time|batchd time|prompt time|total time" \
        "$res/wcpp_bench_large.txt" | tee -a "$sum"
    fi
    ;;
  load)
    say "== load.py: tiny.en through serve on the GPU (batching vs --max-batch 1)"
    timeout 580 python3 tests/bench/load.py --ns 1,4,8,16 --long-ns 1,4 --seconds 10 \
      >"$res/load.txt" 2>&1
    tail -40 "$res/load.txt" | tee -a "$sum"
    ;;
  load16)
    say "== load.py: jfk at 1 and 16 clients, tiny.en, --max-batch 16 vs --max-batch 1"
    timeout 240 python3 tests/bench/load.py --ns 1,16 --long-ns "" --long-s 0 --requests 16 \
      --seconds 8 --batch 16 >"$res/load16.txt" 2>&1
    tail -12 "$res/load16.txt" | tee -a "$sum"
    ;;
  ahead)
    say "== --mel-ahead: 16 clients of a 120 s file, tiny.en, max-batch 16, on (GPU default) then off"
    for m in on off; do
      timeout 280 python3 tests/bench/load.py --ns "" --long-ns 16 --long-s 120 --requests 16 \
        --seconds 5 --batch 16 --no-unbatched --extra "--mel-ahead $m" >"$res/ahead-$m.txt" 2>&1
      say "mel-ahead $m:"
      grep -E "long|req/s" "$res/ahead-$m.txt" | tail -3 | tee -a "$sum"
    done
    ;;
  *)
    say "unknown step '$step' (cm, attn, tests, tiny, gemm, large, numerics, peer, load, ahead)"
    ;;
  esac
done
say "== done: $res"
