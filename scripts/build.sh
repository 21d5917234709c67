#!/usr/bin/env bash
# Builds whisperd. Usage: scripts/build.sh [release|asan|tsan|fuzz]...
#   release -> build/       (RelWithDebInfo, -Werror)
#   asan    -> build-asan/  (ASan + UBSan, -Werror)
#   tsan    -> build-tsan/  (ThreadSanitizer: what `ctest -L tsan` runs, target wd_tsan,
#                            tests/tsan.cmake; WD_TSAN_ALL=1 builds the whole tree)
#   fuzz    -> build-fuzz/  (clang: the libFuzzer harnesses of tests/fuzz only,
#                            ASan + UBSan; scripts/install-fuzz-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- release
for kind in "$@"; do
  if [ "$kind" = fuzz ]; then
    # clang's warnings differ from gcc's, so no -Werror here; the gcc builds
    # compile the same harnesses with -Werror (tests/fuzz, fuzz_regress_*).
    cc=${WD_FUZZ_CC:-$(command -v clang-14 || command -v clang || true)}
    [ -n "$cc" ] || { echo "build.sh: fuzz needs clang (scripts/install-fuzz-deps.sh)" >&2; exit 2; }
    cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DWD_FUZZ=ON -DWD_BENCH=OFF >/dev/null
    cmake --build build-fuzz -j"$(nproc)" --target wd_fuzz
    continue
  fi
  case "$kind" in
    release) dir=build;      flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
    asan)    dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DWD_ASAN=ON -DWD_UBSAN=ON -DWD_BENCH=OFF) ;;
    tsan)    dir=build-tsan; flags=(-DCMAKE_BUILD_TYPE=Debug -DWD_TSAN=ON -DWD_BENCH=OFF) ;;
    *) echo "build.sh: unknown build kind '$kind'" >&2; exit 2 ;;
  esac
  cmake -S . -B "$dir" -G Ninja -DWD_WERROR=ON "${flags[@]}" >/dev/null
  if [ "$kind" = tsan ] && [ "${WD_TSAN_ALL:-0}" != 1 ]; then
    cmake --build "$dir" -j"$(nproc)" --target wd_tsan
  else
    cmake --build "$dir" -j"$(nproc)"
  fi
done
