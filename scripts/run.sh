#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and starts whisperd: installs the
# dependencies, builds, fetches the multilingual base model (OpenAI's
# whisper-1 is multilingual: translations and every language work; the
# tests use tiny.en) and Silero VAD (chunking_strategy), lists the Vulkan
# devices, then runs `whisperd serve` in the foreground on 127.0.0.1:8080
# (Ctrl-C or SIGTERM drains and stops it). Extra arguments go to serve,
# e.g. `scripts/run.sh --port 9000 --max-batch 16`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
scripts/fetch-model.sh base
scripts/fetch-vad.sh || echo "run.sh: Silero VAD unavailable; chunking_strategy will be refused"
scripts/fetch-diarization.sh || echo "run.sh: diarization models unavailable; diarized_json will be refused"
./build/daemon/whisperd devices
echo "run.sh: try: curl http://127.0.0.1:8080/v1/audio/transcriptions -F file=@tests/data/audio/jfk.wav -F model=whisper-1"
exec ./build/daemon/whisperd serve --model models/ggml-base.bin --host 127.0.0.1 --port 8080 "$@"
