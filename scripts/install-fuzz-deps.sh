#!/usr/bin/env bash
# Installs what the fuzz build needs on Debian 12 (bookworm), on top of
# scripts/install-deps.sh's packages: clang 14 and its compiler-rt, which
# carries libFuzzer (libclang_rt.fuzzer*.a) and the ASan/UBSan runtimes for
# clang. Idempotent, as install-deps.sh is.
set -euo pipefail
exec "$(dirname "$0")/install-deps.sh" clang-14 libclang-rt-14-dev
