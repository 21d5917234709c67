#!/bin/sh
# CTest's entry to one file of the API suite (tests/api_blackbox.cmake):
#   run.sh VENV WHISPERD_BIN TEST_FILE [pytest args...]
# Exit 77 (skip) when the venv, the daemon binary or the model is missing;
# pytest's "no tests collected" (5) is a failure, not a silent pass.
venv=$1 bin=$2 file=$3
shift 3
if [ ! -x "$venv/bin/python" ]; then
  echo "SKIP: no Python venv at $venv (run scripts/install-test-deps.sh)"
  exit 77
fi
venv=$(cd "$venv" && pwd)
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
export WHISPERD_BIN="$bin" PYTHONDONTWRITEBYTECODE=1
cd "$(dirname "$file")" || exit 1
"$venv/bin/python" -m pytest -x -q -rs -p no:cacheprovider "$(basename "$file")" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "FAIL: pytest collected no tests from $file"
  exit 1
fi
exit "$rc"
