#!/usr/bin/env bash
# gpu-prep.sh - what a session lent a GPU (issue #40) does on its own CPU
# machine before the first device call, in one command. Device time is
# scarce (minutes a session, all tries together), so nothing here runs on
# the device: it builds a bundle that fits the device tool's carry.
#
#   1. the sid chroot whose glslang (>= 13) and spirv-tools compile the
#      KHR cooperative-matrix kernels (scripts/lvp-sid.sh setup: Debian
#      packages, a few minutes the first time, kept in /var/tmp/wd-sid)
#   2. a lean release tree (default build-gpu): no FFmpeg (its codec
#      libraries would double the bundle), the KHR kernels built beside
#      the NV ones, and only what the bundle packs
#   3. tiny.en as q5_0 (26 MB compressed where f16 is 68)
#   4. the bundle (scripts/gpu-bundle.sh), with whisper.cpp's Vulkan
#      build where --whispercpp DIR names one or gpu-bundle.sh finds one
#      (build/whispercpp, /tmp/wcpp), into OUT (default build-gpu/bundle),
#      checked to fit the carry beside the working tree (with whisper.cpp:
#      ~45 MiB and 15 MiB on 2026-11-29)
#
# usage (as root, from anywhere): scripts/gpu-prep.sh [--whispercpp DIR] [OUT]
#   WD_GPU_BUILD=DIR  the build tree (default build-gpu)
# Then, with the device tool (OUT relative to the repository, ignored by git):
#   run  command: cat build-gpu/bundle/whisperd-gpu.tar.xz.* | tar xJ -C /tmp &&
#                 cd /tmp/whisperd-gpu && RESULTS=$OUT ./run.sh attn cm numerics large peer ahead load16
#        carry:   ["build-gpu/bundle"]
# (./run.sh's header in scripts/gpu-bundle-run.sh says what each step
# measures; results/summary.txt is what goes into the issue.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
wcpp=()
if [ "${1:-}" = "--whispercpp" ]; then
  wcpp=(--whispercpp "${2:?--whispercpp DIR}")
  shift 2
fi
b=${WD_GPU_BUILD:-$root/build-gpu}
out=${1:-$b/bundle}
# The device tool carries at most 64 MiB: the working tree (its tracked
# and untracked files, 15.6 MiB on 2026-11-29) and the bundle together;
# 2 MiB are kept spare.
limit_kib=$((62 * 1024))

"$root/scripts/lvp-sid.sh" setup
trap '"$root/scripts/lvp-sid.sh" umount' EXIT
t=$("$root/scripts/lvp-sid.sh" tools "$b")
cmake -S "$root" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWD_FFMPEG=OFF -DWD_BENCH=ON \
  -DWD_GLSLANG_KHR="$t/glslangValidator" -DWD_SPIRV_OPT_KHR="$t/spirv-opt" \
  -DWD_SPIRV_VAL_KHR="$t/spirv-val" >/dev/null
mapfile -t gpu_tests < <(ninja -C "$b" -t targets all | sed -n 's/^\(gpu_test_[a-z0-9_]*\): phony$/\1/p')
cmake --build "$b" -j"$(nproc)" --target whisperd wd_synth_model bench_engine bench_cpu_step \
  bench_gemm "${gpu_tests[@]}"
# The KHR kernels' SPIR-V in the build tree (a search of the binary for
# "_khr" finds vk_coopmat.c's own literal in any build, and `grep -q` on a
# pipe from strings ended this script with SIGPIPE once).
if [ ! -s "$b/shaders/gemm_cm128_khr.spv" ] || [ ! -s "$b/shaders/gemm_cm64_khr8.spv" ]; then
  echo "gpu-prep: the build has no KHR kernels (is the chroot's glslang >= 13?)" >&2
  exit 1
fi

tiny=$root/models/ggml-tiny.en.bin
[ -f "$tiny" ] || "$root/scripts/fetch-model.sh" tiny.en
q=$b/ggml-tiny.en-q5_0.bin
[ -f "$q" ] || "$b/daemon/whisperd" quantize "$tiny" "$q" q5_0

rm -rf "$out"
WD_BUNDLE_BUILD=$b WD_BUNDLE_MODEL=$q "$root/scripts/gpu-bundle.sh" "${wcpp[@]}" "$out"
kib=$(du -sk "$out" | cut -f1)
tree_kib=$(git -C "$root" ls-files -z --cached --others --exclude-standard |
  (cd "$root" && xargs -0 du -ck 2>/dev/null) | tail -1 | cut -f1)
echo "gpu-prep: bundle $out, $((kib / 1024)) MiB, beside a working tree of $((tree_kib / 1024)) MiB" \
  "(${#gpu_tests[@]} GPU tests, KHR kernels in)"
if [ $((kib + tree_kib)) -gt "$limit_kib" ]; then
  echo "gpu-prep: with the working tree, over the device's 64 MiB (less 2 spare)" >&2
  exit 1
fi
