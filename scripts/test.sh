#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs dependencies,
# builds the release, ASan+UBSan and TSan trees, fetches the test models, runs
# every test in the release and ASan trees (GPU tests run on lavapipe when no
# GPU exists), the threading subset under TSan (label tsan, tests/tsan.cmake),
# the scale-out run behind HAProxy (tests/bench/scaleout.py, short), the
# static analysis (scripts/analyze.sh), a 30 s smoke run of every fuzz
# harness (scripts/fuzz.sh), an arm64 compile of core/ and cpu/, the
# Kubernetes manifests (scripts/check-deploy.sh), the .deb
# (scripts/check-package.sh) and the container image's end-to-end check
# (scripts/docker-test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time goes to the log (and a summary at the end), so the
# slowest steps are known as checks are added under CI's 90-minute limit.
t0=$SECONDS; tl=$SECONDS; times=()
step() {
  local now=$SECONDS
  [ -n "${cur:-}" ] && times+=("$(printf '%5ds  %s' $((now - tl)) "$cur")")
  tl=$now; cur="$1"
  [ "$1" = end ] || echo "== $1   (t=$((now - t0))s)"
}
step "install, build (release + ASan + TSan), test deps, models"
scripts/install-deps.sh
scripts/build.sh release asan tsan
# The API suite's Python venv (build/venv) and Node SDK (tests/api/node).
scripts/install-test-deps.sh
if [ -x scripts/fetch-model.sh ]; then
  scripts/fetch-model.sh tiny.en || echo "test.sh: tiny.en unavailable; model tests will skip"
  scripts/fetch-model.sh base || echo "test.sh: base unavailable; model tests will skip"
fi
scripts/fetch-vad.sh || echo "test.sh: Silero VAD unavailable; VAD tests will skip"
scripts/fetch-diarization.sh || echo "test.sh: diarization models unavailable; diarization tests will skip"
# Mesa's JIT keeps allocations alive until exit; those are not our leaks.
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
step "release build"
# The API files that also run against the ASan daemon (label api_asan_twin,
# tests/api_blackbox.cmake) run here only where the release daemon's
# --device auto is not the CPU engine that the ASan run uses: on a host
# without a GPU both would test the same paths, and the ASan run checks
# memory too.
twins=()
if build/daemon/whisperd devices 2>/dev/null | grep -q '^default: .*native CPU engine'; then
  twins=(-LE api_asan_twin)
fi
ctest --test-dir build --output-on-failure -j2 "${twins[@]}" || status=1
step "ASan+UBSan build"
# One run of the whole tree. GPU tests pin lavapipe in memory (dlopen
# RTLD_NODELETE) so LeakSanitizer can name, and tests/lsan.supp suppress,
# the driver's own exit-time leaks; the whisperd binary itself does not pin
# it, so its CLI runs on Vulkan carry ASAN_OPTIONS=detect_leaks=0 (address
# and UB checks stay on; tests/CMakeLists.txt). The API suite against the
# real daemon (label sanitize_api) runs on --device cpu, leak checks on.
ctest --test-dir build-asan --output-on-failure -j2 || status=1
step "TSan build (queue, worker, pool, HTTP server)"
TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp:halt_on_error=1:second_deadlock_stack=1" \
  ctest --test-dir build-tsan --output-on-failure -j2 -L tsan || status=1
step "scale-out: 3 daemons behind HAProxy, one SIGKILLed mid-load (tests/bench/scaleout.py, ~2 min)"
# Short phases: the checks (answers, retryable errors only around the kill,
# DOWN, nothing sent to the dead daemon, rejoin), not the throughput figures.
scripts/install-deps.sh haproxy
if [ -f models/ggml-tiny.en.bin ]; then
  python3 tests/bench/scaleout.py --seconds 8 --rounds 1 --clients 4 --kill-after 4 --dead-s 4 \
    || status=1
else
  echo "test.sh: scaleout.py NOT RUN: models/ggml-tiny.en.bin is missing"
fi
step "static analysis (gcc -fanalyzer)"
scripts/analyze.sh || status=1
step "fuzz smoke (every libFuzzer harness of tests/fuzz, 30 s each)"
scripts/install-fuzz-deps.sh
scripts/fuzz.sh 30 || status=1
step "arm64 compile check (core/ and cpu/)"
scripts/check-arm64.sh || status=1
step "Kubernetes manifests (kustomize, kubeconform on offline schemas, source-tied rules)"
scripts/install-deps.sh python3-yaml
scripts/check-deploy.sh || status=1
scripts/check-deploy.sh --inject || status=1
step "Debian package (layout, .deb into a fresh Debian 12 chroot, systemd-analyze verify)"
scripts/install-deps.sh debootstrap dpkg-dev
scripts/check-package.sh || status=1
step "container image (scripts/docker-test.sh: build, ready, transcription, health, drain on stop)"
scripts/install-deps.sh docker.io debootstrap && scripts/docker-test.sh || status=1
step end
echo "== step times (wall)"; printf '%s\n' "${times[@]}"
echo "== total $((SECONDS - t0))s"
exit $status
