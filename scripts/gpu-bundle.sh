#!/usr/bin/env bash
# gpu-bundle.sh - packs the GPU checks (issue #22) for a host with an NVIDIA
# or AMD GPU and no package access: our release binaries and the Vulkan
# engine's tests, whisper.cpp's Vulkan build, every shared library they load
# (but the C library itself, which the host has), tiny.en, jfk.wav and the
# benchmark scripts, in the repository's own layout, so the scripts run
# unchanged. The random large-v3-turbo file (1.6 GB) is not packed: the
# runner writes it there with the packed wd_synth_model.
#
# usage: scripts/gpu-bundle.sh [--whispercpp DIR] [OUT]
#   DIR  a whisper.cpp work tree with build-vulkan/ (default: build/whispercpp,
#        else /tmp/wcpp; ../shared/tools/build-whispercpp.sh SOURCE DIR makes
#        one from a clone or mirror of ggml-org/whisper.cpp); without one the
#        bundle has no whisper.cpp and run.sh skips its figures
#   WD_BUNDLE_MODEL=FILE packs FILE as the tiny model instead of f16 tiny.en
#        (a q5_0 tiny.en made by `whisperd quantize` is 26 MB compressed
#        where f16 is 68: the device tool carries at most 64 MiB)
#   OUT  where the pieces go (default build/gpu-bundle):
#          whisperd-gpu.tar.xz.00, .01, ...  at most 45 MiB each (small
#          enough for a transfer of 64 MiB with the source tree beside it)
#          SHA256SUMS, README.txt
# On the GPU host:
#   cat whisperd-gpu.tar.xz.* | tar xJ && cd whisperd-gpu && ./run.sh [steps]
# (scripts/gpu-bundle-run.sh is that run.sh: it says what it measures).
# Needs the release build (scripts/build.sh release) and tiny.en
# (scripts/fetch-model.sh tiny.en).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
wcpp=""
if [ "${1:-}" = "--whispercpp" ]; then
  wcpp=${2:?--whispercpp DIR}
  shift 2
fi
out=${1:-$root/build/gpu-bundle}
if [ -z "$wcpp" ]; then
  for d in "$root/build/whispercpp" /tmp/wcpp; do
    [ -x "$d/build-vulkan/bin/whisper-bench" ] && wcpp=$d && break
  done
fi
# WD_BUNDLE_BUILD=DIR packs another build tree (a lean one: cmake -B build-gpu
# -DCMAKE_BUILD_TYPE=Release -DWD_FFMPEG=OFF leaves out FFmpeg and its 150 MB
# of codec libraries).
b=${WD_BUNDLE_BUILD:-$root/build}
tiny=${WD_BUNDLE_MODEL:-$root/models/ggml-tiny.en.bin}
need=("$b/daemon/whisperd" "$b/tests/wd_synth_model" "$b/tests/bench/bench_engine"
      "$b/tests/bench/bench_cpu_step" "$tiny")
for f in "${need[@]}"; do
  [ -e "$f" ] || { echo "gpu-bundle: missing $f (scripts/build.sh release; scripts/fetch-model.sh tiny.en)" >&2; exit 1; }
done
if [ -z "$wcpp" ]; then
  echo "gpu-bundle: no whisper.cpp Vulkan build (build-vulkan/bin/whisper-bench): packing without it; make one with" >&2
  echo "  ../shared/tools/build-whispercpp.sh /work/.mirror/ggml-org+whisper.cpp build/whispercpp" >&2
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
top=$stage/whisperd-gpu
mkdir -p "$top"/{build/daemon,build/tests/bench,lib,models,whispercpp/bin,tests/bench,tests/api,tests/data}

# Binaries, in the build tree's layout (the scripts and tests find them there).
cp "$b/daemon/whisperd" "$top/build/daemon/"
cp "$b/tests/wd_synth_model" "$b"/tests/gpu_test_* "$top/build/tests/"
cp "$b/tests/bench/bench_engine" "$b/tests/bench/bench_cpu_step" "$b/tests/bench/bench_gemm" "$top/build/tests/bench/"
if [ -n "$wcpp" ]; then
  cp "$wcpp"/build-vulkan/bin/whisper-{bench,cli,server} "$top/whispercpp/bin/"
  # whisper.cpp's own libraries (libwhisper, libggml*) sit beside its build.
  find "$wcpp/build-vulkan" -name 'lib*.so*' -exec cp -P {} "$top/lib/" \;
fi

# Every shared library the binaries load, resolved here, but the C
# library's own (the host's must match its kernel and loader).
libs() {
  LD_LIBRARY_PATH="$top/lib" ldd "$1" 2>/dev/null | awk '/=> \//{print $3}'
}
skip='/(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux[^/]*)\.so[.0-9]*$'
for bin in "$top"/build/daemon/* "$top"/build/tests/* "$top"/build/tests/bench/* "$top"/whispercpp/bin/*; do
  [ -f "$bin" ] || continue
  libs "$bin"
done | sort -u | grep -Ev "$skip" | while read -r l; do
  [ -e "$top/lib/$(basename "$l")" ] || cp -L "$l" "$top/lib/"
done

# NVIDIA's Vulkan driver (libGLX_nvidia.so.0, named by the container's ICD
# manifest) loads glvnd's dispatch libraries, which a bare CUDA image lacks:
# on an H200 without them the loader found no device (2026-11-25).
for l in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libGL.so.1 libOpenGL.so.0; do
  p=$(ldconfig -p | awk -v n="$l" '$1 == n && /x86-64/ {print $NF; exit}')
  [ -n "$p" ] && [ ! -e "$top/lib/$l" ] && cp -L "$p" "$top/lib/"
done

# Debug sections are most of the bytes and no use there.
find "$top/build" "$top/whispercpp" "$top/lib" -type f -exec strip --strip-debug {} + 2>/dev/null || true

# Data and scripts.
cp "$tiny" "$top/models/ggml-tiny.en.bin"
# The audio the GPU tests and run.sh read (jfk, cards, synth): formats/ and
# diar/ (5 MB, ~3 MB compressed) are the CPU side's and would push the
# bundle past the carry.
mkdir -p "$top/tests/data/audio"
(cd "$root/tests/data/audio" && cp -r README.md jfk.wav cards synth "$top/tests/data/audio/")
cp "$root"/tests/bench/*.py "$top/tests/bench/"
cp "$root/tests/api/wd_api.py" "$top/tests/api/"
cp "$root/scripts/gpu-bundle-run.sh" "$top/run.sh"
chmod +x "$top/run.sh"
# The engine tests open models and audio under the source tree they were
# built from: run.sh links that path to the bundle where it is free.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$b/CMakeCache.txt")
{
  echo "source_dir=$src"
  echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "whispercpp=$([ -n "$wcpp" ] && git -C "$wcpp" rev-parse --short HEAD 2>/dev/null || echo none)"
  echo "tiny=$(basename "$tiny")"
  echo "packed=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
} >"$top/MANIFEST"

rm -rf "$out"
mkdir -p "$out"
# xz, not gzip: the libraries shrink to a third (gzip: a half), one piece
# fewer. -9, not -6: its 64 MiB window holds several of the 5 MB test
# binaries, which share most of their bytes (engine and SPIR-V), and its
# 192 MiB blocks keep them in one block with -T0: 48.3 MB where -6 gave
# 52.1 (2026-11-29, with whisper.cpp packed); ~40 s more, 0.7 GB a thread.
tar -C "$stage" -cf - whisperd-gpu | xz -T0 -9 | split -b 45M -d - "$out/whisperd-gpu.tar.xz."
(cd "$out" && sha256sum whisperd-gpu.tar.xz.* >SHA256SUMS)
cat >"$out/README.txt" <<EOF
whisperd GPU checks ($(sed -n 's/^commit=//p' "$top/MANIFEST")): on the GPU host,
  sha256sum -c SHA256SUMS && cat whisperd-gpu.tar.xz.* | tar xJ && cd whisperd-gpu && ./run.sh
(./run.sh tests|tiny|large|load runs one step; results land in ./results).
EOF
echo "gpu-bundle: $(du -sh "$top" | cut -f1) unpacked, $(ls "$out"/whisperd-gpu.tar.xz.* | wc -l) piece(s) in $out:"
ls -l "$out"
