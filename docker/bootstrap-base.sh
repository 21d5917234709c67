#!/usr/bin/env bash
# Makes the base images docker/Dockerfile starts from, debian:bookworm-slim
# and debian:bookworm, on a host that reaches Debian's apt mirror but no image
# registry: debootstrap a minbase root, trim it the way the official slim
# image is trimmed, and `docker import` it under both tags. About a minute.
#
# Usage: docker/bootstrap-base.sh [--force]
#   Leaves tags that already exist alone (a pulled official image is better
#   than this one) unless --force. WD_DEBIAN_MIRROR overrides the mirror.
set -euo pipefail

suite=bookworm
mirror=${WD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
force=0
[ "${1:-}" = --force ] && force=1

die() { echo "bootstrap-base: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker CLI not found"
docker info >/dev/null 2>&1 || die "no Docker daemon answers (start dockerd first)"

tags=()
for t in "debian:$suite-slim" "debian:$suite"; do
  if [ "$force" = 1 ] || ! docker image inspect "$t" >/dev/null 2>&1; then tags+=("$t"); fi
done
if [ "${#tags[@]}" -eq 0 ]; then
  echo "bootstrap-base: debian:$suite-slim and debian:$suite exist (--force to rebuild)"
  exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"

root=$(mktemp -d /tmp/wd-debootstrap.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "bootstrap-base: debootstrap $suite from $mirror"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -20 "$root.log" >&2; rm -f "$root.log"; die "debootstrap failed"; }
rm -f "$root.log"

# The official image's sources: the release, its updates and its security
# fixes, so that the build and runtime stages get the same library versions
# a pulled image would.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

# Slim: dpkg skips documentation, manuals and translations from now on (the
# copyright files stay), and what debootstrap already unpacked goes.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
find "$root/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root/usr/share/man/"* "$root/usr/share/info/"*
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin "$root/var/cache/apt/archives/"*.deb

tar -C "$root" --numeric-owner -c . | docker import \
  -c 'CMD ["bash"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  - "${tags[0]}" >/dev/null
for t in "${tags[@]:1}"; do docker tag "${tags[0]}" "$t"; done
echo "bootstrap-base: made ${tags[*]} ($(docker image inspect -f '{{.Size}}' "${tags[0]}") bytes)"
