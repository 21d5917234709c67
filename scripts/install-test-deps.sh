#!/usr/bin/env bash
# Installs what the black-box API suite (tests/api, label `api`) needs on
# Debian 12: Debian's python3-venv, curl, systemd (systemd-socket-activate),
# ffmpeg (the reference of tests/core/test_audio_ffmpeg.c) and Node.js; the
# official OpenAI Python SDK and pytest into a venv at build/venv
# (tests/api/requirements.txt); the official OpenAI Node SDK into
# tests/api/node/node_modules (package-lock.json); the official OpenAI Go
# SDK into Go's module cache (tests/api/go/go.mod), where a Go of at least
# 1.26 is installed (the machine image's: Debian 12's golang-go is 1.19,
# too old for openai-go v3, so none is installed here; test_sdk_go skips).
#
# Idempotent and quick when everything is there: apt only for missing
# packages, pip only when requirements.txt changed since the last install,
# npm only when the lock file changed or node_modules is missing.
# Environment: VENV (default build/venv), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-build/venv}"
PYTHON="${PYTHON:-python3}"
REQ=tests/api/requirements.txt
NODE_DIR=tests/api/node
NODE_MIN_MAJOR=20   # openai 6.x (the newest line that still runs on Node 20)

log() { echo "install-test-deps: $*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then $SUDO apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@"
}
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# --- Debian packages ---------------------------------------------------------
missing=()
# ffmpeg: the command openai/whisper decodes with, the reference that
# tests/core/test_audio_ffmpeg.c compares our samples with bit for bit.
# openssl: test_realtime.py's self-signed certificate for the TLS front the
# Node SDK's realtime client needs (it only opens wss://).
# chromium: the browser test_web_ui.py drives (through Playwright, pointed at
# /usr/bin/chromium; Playwright's own browser download is never used).
for p in python3 python3-venv curl systemd ffmpeg openssl chromium; do
  have_pkg "$p" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  apt_install "${missing[@]}"
fi

node_major() { node -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  # Debian's own nodejs (18 on bookworm) and npm; a machine image may bring a
  # newer Node.js with its npm, which is then used as it is.
  log "installing nodejs npm"
  apt_install nodejs npm
fi
if [ "$(node_major)" -lt "$NODE_MIN_MAJOR" ]; then
  log "warning: node $(node --version) is older than $NODE_MIN_MAJOR; the Node SDK tests will skip"
fi

# --- Python venv -------------------------------------------------------------
stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$VENV/bin/python" -c 'import openai, pytest' 2>/dev/null; then
  log "venv $VENV up to date"
else
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating venv $VENV"
    mkdir -p "$(dirname "$VENV")"
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
      # A python3 without ensurepip: Debian's own with python3-venv.
      rm -rf "$VENV"
      /usr/bin/python3 -m venv "$VENV"
    fi
  fi
  log "pip install -r $REQ"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"
  echo "$want" > "$stamp"
fi

# --- Node SDK ----------------------------------------------------------------
nstamp="$NODE_DIR/node_modules/.package-lock.sha256"
nwant="$(sha256sum "$NODE_DIR/package-lock.json" | cut -d' ' -f1)"
if [ -f "$nstamp" ] && [ "$(cat "$nstamp")" = "$nwant" ] \
   && [ -f "$NODE_DIR/node_modules/openai/package.json" ]; then
  log "node_modules up to date"
else
  log "npm ci in $NODE_DIR"
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$nwant" > "$nstamp"
fi
# --- Go SDK (where a new enough Go is) ---------------------------------------
GO="$(command -v go || { [ -x /usr/local/go/bin/go ] && echo /usr/local/go/bin/go; } || true)"
go_minor() { "$GO" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'; }
if [ -n "$GO" ] && [ "$(go_minor || echo 0)" -ge 26 ] 2>/dev/null; then
  log "go mod download in tests/api/go"
  (cd tests/api/go && GOFLAGS=-mod=readonly "$GO" mod download) ||
    log "warning: the Go module proxy did not serve openai-go (test_sdk_go will skip)"
else
  log "no Go 1.26 or newer: test_sdk_go will skip"
fi
log "ok: $("$VENV/bin/python" -c 'import openai; print("openai (python)", openai.__version__)'),"\
" openai (node) $(node -p 'require("./'"$NODE_DIR"'/node_modules/openai/package.json").version'), node $(node --version)"
