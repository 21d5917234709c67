#!/usr/bin/env bash
# Prints, one per line, the Debian packages that hold the shared libraries an
# ELF binary links directly (its DT_NEEDED entries), as ldd resolves them on
# this machine. The image's build stage runs it on build/daemon/whisperd so
# that the runtime stage installs exactly what the binary needs, and picks up
# a new library (OpenBLAS was once missed) without anyone editing a list.
#
# Usage: docker/runtime-packages.sh BINARY
# Fails when a library is not found or belongs to no package.
set -euo pipefail

bin=${1:?usage: runtime-packages.sh BINARY}
die() { echo "runtime-packages: $*" >&2; exit 1; }
[ -f "$bin" ] || die "no such file '$bin'"

# ldd's "soname => path (address)" lines, as "soname path".
declare -A where
while read -r soname arrow path _; do
  [ "$arrow" = "=>" ] || continue
  [ "$path" != "not" ] || die "$soname not found"
  where[$soname]=$path
done < <(ldd "$bin")

# dpkg knows a file under the path its package shipped it at; with merged
# /usr (/lib -> usr/lib) ldd may name the other spelling, or the soname link
# rather than the file it points to. Try each until one is owned.
owner() {
  local p=$1 real cand
  real=$(readlink -f "$p")
  for cand in "$p" "${p#/usr}" "/usr${p#/usr}" "$real" "${real#/usr}" "/usr${real#/usr}"; do
    if dpkg-query -S "$cand" >/dev/null 2>&1; then
      dpkg-query -S "$cand" | head -1 | cut -d: -f1
      return 0
    fi
  done
  return 1
}

needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || die "'$bin' has no NEEDED entries (static, or not ELF?)"
for soname in $needed; do
  path=${where[$soname]:-}
  [ -n "$path" ] || die "ldd does not resolve $soname"
  owner "$path" || die "$soname ($path) belongs to no package"
done | sort -u
