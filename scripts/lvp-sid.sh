#!/usr/bin/env bash
# lvp-sid.sh - the matrix-unit kernels (shaders/gemm_cm.comp, attn_cm.comp)
# run and checked on a CPU, without a GPU.
#
# Debian 12's lavapipe (Mesa 22.3) has no cooperative matrices, but Debian
# sid's (Mesa 26.2, checked 2026-11-28) lists VK_KHR_cooperative_matrix at
# 8x8x8 on 8-wide subgroups, and sid's glslang (>= 13) and spirv-tools
# compile the KHR kernels, which the build then embeds as NAME_khr and
# NAME_khr8 (shaders/CMakeLists.txt). This script keeps a sid chroot for
# those tools and that driver, and runs this tree's binaries inside it
# with the host's libraries where sid lacks their sonames. A developer's
# check, not part of the test suite: CI runs Debian 12's lavapipe.
#
# usage (as root):
#   scripts/lvp-sid.sh setup          the chroot in $WD_SID (default
#                                     /var/tmp/wd-sid): debootstrap of Debian
#                                     13, then sid's Mesa, glslang, spirv-tools
#                                     (about 400 MB, a few minutes)
#   scripts/lvp-sid.sh build [DIR]    configures DIR (default build-sid) with
#                                     the chroot's glslang and spirv-tools for
#                                     the KHR kernels; builds whisperd and the
#                                     matrix kernels' tests
#   scripts/lvp-sid.sh check [DIR]    runs them on sid's lavapipe: test_gemm's
#                                     gemm_cm_khr, test_attn_enc,
#                                     test_engine_matrix, and jfk with tiny.en
#                                     through the matrix kernels (cm-64x64
#                                     and the candidates cm-64x64-dl and
#                                     cm-64x64-pf2, fused attention too)
#                                     against the f32 kernels
#   scripts/lvp-sid.sh run CMD ...    any command inside the chroot, in this
#                                     directory, with the host build's libraries
#   scripts/lvp-sid.sh tools DIR      writes DIR/sid-tools/{glslangValidator,
#                                     spirv-opt,spirv-val}, wrappers that run the
#                                     chroot's, and prints that folder (for
#                                     another build tree's WD_GLSLANG_KHR: what
#                                     scripts/gpu-prep.sh does)
#   scripts/lvp-sid.sh umount         unmounts the tree and /proc from the chroot
# The tree is bind-mounted into the chroot while it is used: unmount it
# before deleting the chroot, or the delete reaches the tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sid=${WD_SID:-/var/tmp/wd-sid}
mirror=http://deb.debian.org/debian
# sid's Release file can be past its Valid-Until on a mirror copy.
apt_sid=(apt-get -o Acquire::Check-Valid-Until=false)

umounts() {
  mountpoint -q "$sid$root" && umount "$sid$root"
  mountpoint -q "$sid/proc" && umount "$sid/proc"
  return 0
}

mounts() {
  mkdir -p "$sid$root" "$sid/proc"
  mountpoint -q "$sid$root" || mount --bind "$root" "$sid$root"
  mountpoint -q "$sid/proc" || mount -t proc proc "$sid/proc"
}

setup() {
  if [ ! -x "$sid/usr/bin/vulkaninfo" ]; then
    command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
    [ -x "$sid/usr/bin/apt-get" ] || debootstrap --variant=minbase trixie "$sid" "$mirror"
    echo "deb $mirror sid main" >"$sid/etc/apt/sources.list"
    rm -f "$sid"/etc/apt/sources.list.d/*
    chroot "$sid" "${apt_sid[@]}" update -q
    chroot "$sid" env DEBIAN_FRONTEND=noninteractive "${apt_sid[@]}" install -y -q \
      mesa-vulkan-drivers vulkan-tools libvulkan1 glslang-tools spirv-tools
  fi
  mounts
  chroot "$sid" vulkaninfo 2>/dev/null | grep -E "driverInfo|VK_KHR_cooperative_matrix " | sort -u
}

# A wrapper per tool, so that CMake can name the chroot's as a program.
tools() {
  local dir=$1/sid-tools
  mkdir -p "$dir"
  for t in glslangValidator spirv-opt spirv-val; do
    printf '#!/bin/sh\nexec chroot %s %s "$@"\n' "$sid" "$t" >"$dir/$t"
    chmod +x "$dir/$t"
  done
  echo "$dir"
}

# The host libraries the binaries in $1 need and sid has no soname for
# (sid's own, newer, serve the rest: the C and C++ runtimes, the loader).
libs() {
  local b=$1 out=$1/sid-libs
  rm -rf "$out"
  mkdir -p "$out"
  for bin in "$b/daemon/whisperd" "$b"/tests/gpu_test_gemm "$b"/tests/gpu_test_attn_enc \
    "$b"/tests/gpu_test_engine_matrix; do
    [ -x "$bin" ] && ldd "$bin" | awk '/=> \//{print $1, $3}'
  done | sort -u | while read -r name path; do
    if [ ! -e "$sid/usr/lib/x86_64-linux-gnu/$name" ] && [ ! -e "$sid/lib/x86_64-linux-gnu/$name" ]; then
      cp -L "$path" "$out/"
    fi
  done
  echo "$out"
}

run_in() {
  local b=$1
  shift
  mounts
  chroot "$sid" env LD_LIBRARY_PATH="$b/sid-libs" sh -c 'cd "$0" && exec "$@"' "$PWD" "$@"
}

build() {
  local b=${1:-$root/build-sid}
  [ -x "$sid/usr/bin/glslangValidator" ] || { echo "lvp-sid: run setup first" >&2; exit 2; }
  mounts
  local t
  t=$(tools "$b")
  cmake -S "$root" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWD_FFMPEG=OFF -DWD_BENCH=OFF \
    -DWD_GLSLANG_KHR="$t/glslangValidator" -DWD_SPIRV_OPT_KHR="$t/spirv-opt" \
    -DWD_SPIRV_VAL_KHR="$t/spirv-val" >/dev/null
  cmake --build "$b" -j"$(nproc)" --target whisperd gpu_test_gemm gpu_test_attn_enc \
    gpu_test_engine_matrix
  libs "$b" >/dev/null
}

check() {
  local b=${1:-$root/build-sid} rc=0
  [ -x "$b/tests/gpu_test_attn_enc" ] || build "$b"
  # a tree built elsewhere (gpu-prep.sh's build-gpu) has no sid-libs yet
  [ -d "$b/sid-libs" ] || libs "$b" >/dev/null
  cd "$root"
  run_in "$b" env WD_TEST_ONLY=device_opens,gemm_cm_khr,teardown "$b/tests/gpu_test_gemm" || rc=1
  run_in "$b" "$b/tests/gpu_test_attn_enc" || rc=1
  run_in "$b" "$b/tests/gpu_test_engine_matrix" || rc=1
  local m=models/ggml-tiny.en.bin a=tests/data/audio/jfk.wav
  if [ -f "$m" ]; then
    run_in "$b" "$b/daemon/whisperd" transcribe --device vulkan --vk-precision f32 -m "$m" "$a" >"$b/jfk_f32.txt"
    local fam
    for fam in cm-64x64 cm-64x64-dl cm-64x64-pf2; do
      run_in "$b" "$b/daemon/whisperd" transcribe --device vulkan --vk-matrix khr --vk-gemm $fam \
        --vk-attn fused -m "$m" "$a" >"$b/jfk_$fam.txt"
      if cmp -s "$b/jfk_f32.txt" "$b/jfk_$fam.txt"; then
        echo "lvp-sid: jfk through the matrix kernels ($fam): the f32 kernels' transcript"
      else
        echo "lvp-sid: jfk through the matrix kernels ($fam) DIFFERS:"
        diff "$b/jfk_f32.txt" "$b/jfk_$fam.txt" || true
        rc=1
      fi
    done
  else
    echo "lvp-sid: no $m (scripts/fetch-model.sh tiny.en): transcript check skipped"
  fi
  return $rc
}

case "${1:-}" in
  setup) setup ;;
  build) build "${2:-}" ;;
  check) trap umounts EXIT; check "${2:-}" ;;
  umount) umounts ;;
  run) shift; run_in "${WD_SID_BUILD:-$root/build-sid}" "$@" ;;
  tools) mounts; tools "${2:?tools DIR}" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
