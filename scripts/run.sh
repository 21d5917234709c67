#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and starts whisperd: installs the
# dependencies, builds, fetches the tiny.en test model and runs the daemon
# in the foreground. Extra arguments go to whisperd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
if [ -x scripts/fetch-model.sh ]; then scripts/fetch-model.sh tiny.en; fi
./build/daemon/whisperd devices
exec ./build/daemon/whisperd --model models/ggml-tiny.en.bin "$@"
