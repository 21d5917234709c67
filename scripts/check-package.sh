#!/usr/bin/env bash
# Builds the .deb from build/ (scripts/build.sh release) and tests it:
#  1. `cmake --install` with DESTDIR lays out exactly the expected files, and
#     the unit's ExecStart is the installed binary;
#  2. the package's control data: name, shlibs-derived Depends, conffile;
#  3. a fresh Debian 12 (debootstrap --variant=minbase, from Debian's
#     mirror) installs it with apt, which must pull every runtime library
#     from Depends alone; there `whisperd --version`, `whisperd devices`
#     and, when models/ggml-tiny.en.bin exists, a CPU transcription of
#     tests/data/audio/jfk.wav run; then with the recommended
#     mesa-vulkan-drivers, `whisperd devices` must show a usable device;
#  4. `systemd-analyze verify` of the installed units inside that system
#     (its own systemd 252 and man-db: the Documentation= page must exist).
# Needs root (debootstrap, chroot, mount). Anything missing fails loudly.
# The pristine root file system is kept as ~/.cache/whisperd/pkg-root/
# bookworm.tar (WD_PKG_CACHE; remove it to start over); each run unpacks a
# fresh copy of it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT_DIR="$PWD"
BUILD="${WD_BUILD:-build}"
# Outside the tree so that a fresh clone (CI) on the same machine reuses it.
CACHE="${WD_PKG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/whisperd/pkg-root}"
MIRROR="${WD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
die() { echo "check-package: FAIL: $*" >&2; exit 1; }
log() { echo "check-package: $*"; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"
for t in cpack dpkg-deb dpkg-shlibdeps debootstrap chroot; do
  command -v "$t" >/dev/null || die "$t not found (apt-get install cmake dpkg-dev debootstrap)"
done
[ -f "$BUILD/CMakeCache.txt" ] || die "$BUILD is not configured (scripts/build.sh release)"

# --- 1. layout --------------------------------------------------------------------
cmake --build "$BUILD" --target whisperd whisperd_man >/dev/null
stage=$(mktemp -d)
work=""
cleanup() {
  if [ -n "$work" ]; then
    for m in proc dev/pts dev; do umount "$work/$m" 2>/dev/null || true; done
    rm -rf "$work"
  fi
  rm -rf "$stage"
}
trap cleanup EXIT
DESTDIR="$stage" cmake --install "$BUILD" >/dev/null || die "cmake --install failed"
want="etc/whisperd/whisperd.conf
usr/bin/whisperd
usr/lib/systemd/system/whisperd.service
usr/lib/systemd/system/whisperd.socket
usr/share/doc/whisperd/whisperd.conf.example
usr/share/man/man8/whisperd.8"
got=$(cd "$stage" && find . -type f | sed 's#^\./##' | sort)
[ "$got" = "$want" ] || die "install layout differs:
$(diff <(echo "$want") <(echo "$got") || true)"
exec_path=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$stage/usr/lib/systemd/system/whisperd.service")
[ -x "$stage$exec_path" ] || die "ExecStart=$exec_path is not the installed binary"
log "layout ok (ExecStart=$exec_path)"

# --- 2. the .deb ------------------------------------------------------------------
rm -f "$BUILD"/whisperd_*.deb
(cd "$BUILD" && cpack -G DEB >/dev/null) || die "cpack failed"
deb=$(ls "$BUILD"/whisperd_*.deb)
[ "$(dpkg-deb -f "$deb" Package)" = whisperd ] || die "package name is not whisperd"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libmicrohttpd12 libjansson4 libsndfile1 libfftw3-single3 libvulkan1 libsystemd0; do
  [[ "$depends" == *"$lib"* ]] || die "Depends lacks $lib: $depends"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/whisperd/whisperd.conf \
  || die "/etc/whisperd/whisperd.conf is not a conffile"
log "$(basename "$deb"): $(stat -c %s "$deb") bytes, Depends: $depends"

# --- 3. a fresh Debian 12 ---------------------------------------------------------
mkdir -p "$CACHE"
if [ ! -f "$CACHE/bookworm.tar" ]; then
  log "debootstrap bookworm (minbase) from $MIRROR"
  tmp=$(mktemp -d)
  nice -n 19 debootstrap --variant=minbase bookworm "$tmp" "$MIRROR" > "$CACHE/debootstrap.log" 2>&1 \
    || { rm -rf "$tmp"; die "debootstrap failed (see $CACHE/debootstrap.log)"; }
  tar -C "$tmp" -cf "$CACHE/bookworm.tar.part" . && mv "$CACHE/bookworm.tar.part" "$CACHE/bookworm.tar"
  rm -rf "$tmp"
fi
work=$(mktemp -d)
tar -C "$work" -xf "$CACHE/bookworm.tar"
mount -t proc proc "$work/proc"
mount --bind /dev "$work/dev"
mount --bind /dev/pts "$work/dev/pts"
cp /etc/resolv.conf "$work/etc/resolv.conf"
in_root() { chroot "$work" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            DEBIAN_FRONTEND=noninteractive "$@"; }
cp "$deb" "$work/tmp/"
in_root apt-get update -qq || die "apt-get update in the chroot failed"
# No recommends: the package must work from Depends alone (the CPU engine;
# `devices` lists no Vulkan driver without mesa-vulkan-drivers).
in_root apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$deb")" \
  > "$work/tmp/apt.log" 2>&1 || { tail -20 "$work/tmp/apt.log"; die "apt-get install of the .deb failed"; }
in_root dpkg -s whisperd | grep -q '^Status: install ok installed' || die "dpkg says whisperd is not installed"
ver=$(in_root whisperd --version) || die "whisperd --version failed in Debian 12"
[ "$ver" = "whisperd $(dpkg-deb -f "$deb" Version)" ] || die "whisperd --version says '$ver'"
log "in Debian 12: $ver"
# Without a Vulkan driver `devices` lists the CPU engine (which serves) and
# exits 0, as it does with the recommended mesa-vulkan-drivers.
devices=$(in_root whisperd devices 2>&1) || die "whisperd devices failed without a Vulkan driver: $devices"
echo "$devices" | grep -q '^device cpu: ' || die "whisperd devices lists no CPU engine: $devices"
log "in Debian 12, Depends only: whisperd devices lists the CPU engine"
if [ -f models/ggml-tiny.en.bin ]; then
  cp models/ggml-tiny.en.bin tests/data/audio/jfk.wav "$work/tmp/"
  text=$(in_root whisperd transcribe --device cpu -m /tmp/ggml-tiny.en.bin /tmp/jfk.wav 2>/dev/null) \
    || die "whisperd transcribe failed in Debian 12"
  echo "$text" | grep -qi "ask not what your country can do for you" \
    || die "unexpected transcript in Debian 12: $text"
  log "in Debian 12: transcribe (CPU, tiny.en): $(echo "$text" | head -c 80)..."
else
  log "in Debian 12: transcribe skipped: models/ggml-tiny.en.bin is missing"
fi

in_root apt-get install -y -qq --no-install-recommends mesa-vulkan-drivers > "$work/tmp/apt3.log" 2>&1 \
  || { tail -20 "$work/tmp/apt3.log"; die "apt-get install mesa-vulkan-drivers failed"; }
devices=$(in_root whisperd devices 2>&1) || die "whisperd devices failed with Mesa: $devices"
echo "$devices" | grep -q '^ *usable: *yes' || die "no usable Vulkan device with Mesa: $devices"
log "in Debian 12 + mesa-vulkan-drivers (Recommends): whisperd devices: $(echo "$devices" | grep -m1 '^device 0:')"

# --- 4. units ---------------------------------------------------------------------
in_root apt-get install -y -qq --no-install-recommends systemd man-db > "$work/tmp/apt2.log" 2>&1 \
  || { tail -20 "$work/tmp/apt2.log"; die "apt-get install systemd man-db failed"; }
in_root man -w whisperd > /dev/null || die "man whisperd finds no page"
out=$(in_root systemd-analyze verify whisperd.service whisperd.socket 2>&1) \
  || die "systemd-analyze verify: $out"
[ -z "$out" ] || die "systemd-analyze verify warns: $out"
log "in Debian 12: systemd-analyze verify whisperd.service whisperd.socket: clean"
log "ok"
