#!/usr/bin/env bash
# Installs what the fuzz build needs on Debian 12 (bookworm), on top of
# scripts/install-deps.sh: clang 14 and its compiler-rt, which carries
# libFuzzer (libclang_rt.fuzzer*.a) and the ASan/UBSan runtimes for clang.
# Idempotent: installs only missing packages.
set -euo pipefail

PKGS=(clang-14 libclang-rt-14-dev)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-fuzz-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-fuzz-deps: all ${#PKGS[@]} packages present"
fi
