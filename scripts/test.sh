#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs dependencies,
# builds the release and the ASan+UBSan trees, fetches the test models, and
# runs every test in both trees (GPU tests run on lavapipe when no GPU exists).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release asan
if [ -x scripts/fetch-model.sh ]; then
  scripts/fetch-model.sh tiny.en || echo "test.sh: tiny.en unavailable; model tests will skip"
  scripts/fetch-model.sh base || echo "test.sh: base unavailable; model tests will skip"
fi
# Mesa's JIT keeps allocations alive until exit; those are not our leaks.
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
echo "== release build"
ctest --test-dir build --output-on-failure -j2 || status=1
echo "== ASan+UBSan build"
ctest --test-dir build-asan --output-on-failure -j2 -LE gpu || status=1
# The Vulkan ICD is dlclose'd at vkDestroyInstance, so LeakSanitizer cannot
# even name the module of Mesa's allocations: leak checking is off for the
# GPU tests (address and UB checks stay on).
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -j2 -L gpu || status=1
exit $status
