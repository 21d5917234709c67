#!/usr/bin/env bash
# Puts the Silero VAD v6 weights at models/silero-vad-v6.safetensors, the
# file core/vad.c loads. Usage: scripts/fetch-vad.sh
#
# The weights come from the PyPI package silero-vad (MIT): `pip download
# --no-deps` of the pinned wheel, its sha256 checked, silero_vad.onnx taken
# out of it and converted by scripts/vad_convert.py (standard library only)
# into our file, whose sha256 is checked too (the conversion is
# deterministic). Idempotent; written to a temporary name and renamed, so an
# interrupted run leaves nothing half-written.
set -euo pipefail
cd "$(dirname "$0")/.."

SPEC="silero-vad==6.2.3"
WHEEL_SHA256=7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8
ONNX_IN_WHEEL=silero_vad/data/silero_vad.onnx
OUT=models/silero-vad-v6.safetensors
OUT_SHA256=cc111eb79f6c75e838876e2c4ecf29e3d93d7d26b70cb3231b73f21260057779

. scripts/lib/pypi-wheel.sh
log() { echo "fetch-vad: $*"; }
valid() { [ -s "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$OUT_SHA256" ]; }

if valid "$OUT"; then
  log "$OUT is present and valid; nothing to do"
  exit 0
fi
TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-vad.XXXXXX")"
trap 'rm -rf "$TMP"; rm -f "$OUT.part"' EXIT
log "pip download --no-deps $SPEC"
whl="$(pypi_wheel "$SPEC" "$WHEEL_SHA256" "$TMP")"
wheel_member "$whl" "$ONNX_IN_WHEEL" "$TMP/silero_vad.onnx"
mkdir -p models
python3 scripts/vad_convert.py "$TMP/silero_vad.onnx" "$OUT.part"
if ! valid "$OUT.part"; then
  log "converted file's sha256 is $(sha256sum "$OUT.part" | cut -d' ' -f1), expected $OUT_SHA256"
  exit 1
fi
mv -f "$OUT.part" "$OUT"
log "saved $OUT"
