#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs whisperd: installs the
# dependencies, builds, fetches the tiny.en test model, lists the Vulkan
# devices, then transcribes the sample recording with the same engine the
# daemon will serve (the HTTP daemon, `whisperd serve`, comes with the API
# issue; then this script starts it instead). Extra arguments are audio files
# to transcribe instead of the sample.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
scripts/fetch-model.sh tiny.en
./build/daemon/whisperd devices
if [ $# -eq 0 ]; then set -- tests/data/audio/jfk.wav; fi
exec ./build/daemon/whisperd transcribe --model models/ggml-tiny.en.bin "$@"
