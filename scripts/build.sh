#!/usr/bin/env bash
# Builds whisperd. Usage: scripts/build.sh [release|asan|tsan]...
#   release -> build/       (RelWithDebInfo, -Werror)
#   asan    -> build-asan/  (ASan + UBSan, -Werror)
#   tsan    -> build-tsan/  (ThreadSanitizer)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- release
for kind in "$@"; do
  case "$kind" in
    release) dir=build;      flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
    asan)    dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DWD_ASAN=ON -DWD_UBSAN=ON -DWD_BENCH=OFF) ;;
    tsan)    dir=build-tsan; flags=(-DCMAKE_BUILD_TYPE=Debug -DWD_TSAN=ON -DWD_BENCH=OFF) ;;
    *) echo "build.sh: unknown build kind '$kind'" >&2; exit 2 ;;
  esac
  cmake -S . -B "$dir" -G Ninja -DWD_WERROR=ON "${flags[@]}" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
done
