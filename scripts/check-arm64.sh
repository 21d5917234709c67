#!/usr/bin/env bash
# Compiles core/ and cpu/ (the CPU engine and everything it needs below the
# daemon) for arm64 with Debian's cross compiler and the project's warnings
# as errors: the CPU engine must build there (its portable kernels; the
# AVX2 ones are x86-only). Object files only: the cross libraries (OpenBLAS,
# FFTW, libsndfile for arm64) are not installed, so nothing links or runs.
# Usage: scripts/check-arm64.sh   (installs the cross compiler and the arm64
# C library headers if missing: gcc-aarch64-linux-gnu only recommends
# libc6-dev-arm64-cross, and install-deps.sh installs no recommendations)
set -euo pipefail
cd "$(dirname "$0")/.."
cc=aarch64-linux-gnu-gcc
scripts/install-deps.sh gcc-aarch64-linux-gnu libc6-dev-arm64-cross >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The flags of cmake/ (wd_apply_warnings) and the top-level definitions.
flags=(-std=c11 -O2 -Wall -Wextra -Wstrict-prototypes -Wmissing-prototypes -Wshadow
       -Wconversion -Wno-sign-conversion -Wpointer-arith -Wformat=2 -Wundef -Wvla
       -Wcast-qual -Werror -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -DWD_HAVE_FFMPEG=0
       -Icore -Icpu -idirafter /usr/include)
# cblas.h lives in an x86 multiarch directory, but it is plain declarations.
blas=$(dirname "$(find /usr/include -name cblas.h -path '*openblas*' | head -1)")
# So do libswresample's and libavutil's (core/audio.c); only those two
# directories are offered, not the rest of the x86 multiarch tree.
mkdir -p "$out/av"
for d in libavutil libswresample; do
  ln -s "$(dirname "$(find /usr/include -path "*/$d/version.h" | head -1)")" "$out/av/$d"
done
n=0
for f in core/*.c cpu/*.c; do
  "$cc" "${flags[@]}" -idirafter "$blas" -idirafter "$out/av" -c "$f" -o "$out/$(basename "$f").o"
  n=$((n + 1))
done
echo "check-arm64: $n files of core/ and cpu/ compile for aarch64 ($("$cc" -dumpversion)), warnings as errors"
