#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs dependencies,
# builds the release and the ASan+UBSan trees, fetches the test models, and
# runs every test in both trees (GPU tests run on lavapipe when no GPU exists).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release asan
# The API suite's Python venv (build/venv) and Node SDK (tests/api/node).
scripts/install-test-deps.sh
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
# GPU tests pin lavapipe in memory (dlopen RTLD_NODELETE) so LeakSanitizer
# can name, and tests/lsan.supp suppress, the driver's own exit-time leaks.
ctest --test-dir build-asan --output-on-failure -j2 -L gpu -E '^cli_' || status=1
# The whisperd binary itself does not pin the driver: leak checks off there
# (address and UB checks stay on).
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -j2 -L gpu -R '^cli_' || status=1
exit $status
