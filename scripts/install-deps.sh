#!/usr/bin/env bash
# Installs what whisperd needs to build and test on Debian 12 (bookworm).
# Idempotent: installs only missing packages, runs apt-get update at most once.
# Extra package names as arguments are installed the same way (the fuzz and
# arm64 scripts pass theirs).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libvulkan-dev mesa-vulkan-drivers vulkan-tools glslang-tools spirv-tools
  libmicrohttpd-dev libjansson-dev libsndfile1-dev libfftw3-dev libsystemd-dev
  libswresample-dev libavformat-dev libavcodec-dev libavutil-dev zlib1g-dev libpcre2-dev
  libopenblas-dev
  libsimde-dev
  curl ca-certificates python3 python3-pip
  "$@"
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#PKGS[@]} packages present"
fi
