#!/usr/bin/env bash
# scripts/eval/setup.sh - install what scripts/eval/eval.py needs:
#   * espeak-ng and sox (Debian packages) for the generated speech;
#   * a venv (default build/eval-venv) with openai-whisper, the reference.
# openai-whisper pulls torch from PyPI, whose Linux wheel depends on the CUDA
# runtime packages: about 5.6 GiB installed and under 2 minutes with a warm
# pip cache. It runs on the CPU here (fp16=False); no GPU is needed.
# The reference runs on our own ggml weights (scripts/eval/ggml2pt.py), so
# nothing is downloaded at run time (the tokenizer and mel filters ship in
# the openai-whisper package).
#
# Usage: scripts/eval/setup.sh [VENV_DIR]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$ROOT/build/eval-venv}"
PY="${PYTHON:-python3}"

need_apt=()
command -v espeak-ng >/dev/null || need_apt+=(espeak-ng)
command -v sox >/dev/null || need_apt+=(sox)
if ((${#need_apt[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null; then
    echo "setup: need ${need_apt[*]} and cannot install it (not root, no sudo)" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --upgrade pip
if ! "$VENV/bin/python" -c "import whisper, torch" 2>/dev/null; then
  start=$(date +%s)
  "$VENV/bin/pip" install -q openai-whisper
  echo "setup: openai-whisper installed in $(( $(date +%s) - start )) s"
fi
"$VENV/bin/python" - <<'EOF'
import torch, whisper, importlib.metadata as md
print("setup: openai-whisper %s, torch %s (CPU threads %d)"
      % (md.version("openai-whisper"), torch.__version__, torch.get_num_threads()))
EOF
du -sh "$VENV" | sed 's/^/setup: venv size /'
echo "setup: espeak-ng $(espeak-ng --version | awk '{print $4}'), $(sox --version | awk '{print $2, $3}')"
