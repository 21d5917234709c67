#!/usr/bin/env bash
# crosscheck-whispercpp.sh - `whisperd quantize` against whisper.cpp itself.
# A manual check, not a CI test: it needs a whisper.cpp build.
#
# usage: scripts/crosscheck-whispercpp.sh [MODEL]     (default models/ggml-tiny.en.bin)
#
# For each TYPE in $TYPES (default: q8_0 q5_0 q5_1 q4_0 q4_1):
#  (a) quantizes MODEL with whisper.cpp's whisper-quantize and with
#      `whisperd quantize` and compares the two files byte for byte; where
#      they differ, names the tensor that holds the first differing byte.
#      When MODEL is models/ggml-NAME.bin and models/ct2-NAME exists, the
#      CTranslate2 directory is quantized too and compared with the same file;
#  (b) transcribes jfk.wav with whisper.cpp's whisper-cli (-t $THREADS -nt)
#      on whisperd's file: it must load there and say the famous sentence;
#  (c) transcribes it with `whisperd transcribe -m FILE` (Vulkan; lavapipe
#      will do). An engine that refuses quantized weights ("not supported")
#      is reported as a skip, not a failure;
#  (d) optionally reads whisperd's file with pywhispercpp (a second,
#      independently built whisper.cpp from PyPI) when $PYWHISPERCPP_PYTHON
#      (default python3) can import it: e.g. `python3 -m venv /tmp/pv &&
#      /tmp/pv/bin/pip install pywhispercpp`, then PYWHISPERCPP_PYTHON=/tmp/pv/bin/python.
# Then prints one summary line per type. Exit status: 0 when every (a)
# comparison is identical and every run that took place heard the sentence.
#
# Environment:
#   WHISPERCPP_BIN   directory with whisper-quantize and whisper-cli
#                    (default /tmp/wcpp/build-cpu/bin)
#   WHISPERCPP_SRC   if WHISPERCPP_BIN lacks them: a clone of ggml-org/whisper.cpp,
#                    built at the pinned commit with $WHISPERCPP_BUILD_TOOL
#                    (default /work/shared/tools/build-whispercpp.sh) into
#                    $WHISPERCPP_DIR (default /tmp/wcpp): takes long on 2 cores
#   WHISPERD         the whisperd binary (default build/daemon/whisperd)
#   WHISPERD_TRANSCRIBE  the whisperd that runs (c) (default $WHISPERD), e.g.
#                    a build of a branch with quantized kernels
#   WORK             scratch directory (default: a new one under /tmp, removed
#                    at the end unless KEEP=1)
#   TYPES, THREADS   see above (THREADS default 2)
set -uo pipefail
cd "$(dirname "$0")/.."

MODEL=${1:-models/ggml-tiny.en.bin}
TYPES=${TYPES:-q8_0 q5_0 q5_1 q4_0 q4_1}
THREADS=${THREADS:-2}
WHISPERD=${WHISPERD:-build/daemon/whisperd}
WHISPERD_TRANSCRIBE=${WHISPERD_TRANSCRIBE:-$WHISPERD}
WHISPERCPP_DIR=${WHISPERCPP_DIR:-/tmp/wcpp}
WHISPERCPP_BIN=${WHISPERCPP_BIN:-$WHISPERCPP_DIR/build-cpu/bin}
WHISPERCPP_BUILD_TOOL=${WHISPERCPP_BUILD_TOOL:-/work/shared/tools/build-whispercpp.sh}
PYWHISPERCPP_PYTHON=${PYWHISPERCPP_PYTHON:-python3}
AUDIO=tests/data/audio/jfk.wav
# What every transcript of jfk.wav must contain, compared lower-case with
# punctuation removed (whisper.cpp's quantized runs add commas here and there).
SENTENCE="ask not what your country can do for you ask what you can do for your country"

die() { echo "crosscheck: $*" >&2; exit 2; }

[ -e "$MODEL" ] || die "no model at '$MODEL' (scripts/fetch-model.sh tiny.en)"
[ -x "$WHISPERD" ] || die "no whisperd at '$WHISPERD' (scripts/build.sh)"
[ -e "$AUDIO" ] || die "no $AUDIO"
if [ ! -x "$WHISPERCPP_BIN/whisper-quantize" ] || [ ! -x "$WHISPERCPP_BIN/whisper-cli" ]; then
  [ -n "${WHISPERCPP_SRC:-}" ] ||
    die "no whisper-quantize/whisper-cli in '$WHISPERCPP_BIN': set WHISPERCPP_BIN, or WHISPERCPP_SRC to build one"
  [ -x "$WHISPERCPP_BUILD_TOOL" ] || die "cannot build whisper.cpp: no '$WHISPERCPP_BUILD_TOOL'"
  echo "crosscheck: building whisper.cpp from $WHISPERCPP_SRC into $WHISPERCPP_DIR (long)"
  nice "$WHISPERCPP_BUILD_TOOL" "$WHISPERCPP_SRC" "$WHISPERCPP_DIR" || die "whisper.cpp build failed"
  WHISPERCPP_BIN=$WHISPERCPP_DIR/build-cpu/bin
fi

if [ -z "${WORK:-}" ]; then
  WORK=$(mktemp -d /tmp/wd-crosscheck.XXXXXX) || die "mktemp failed"
  [ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK" || die "cannot create $WORK"

CT2=""
case "$(basename "$MODEL")" in
  ggml-*.bin)
    n=$(basename "$MODEL" .bin)
    [ -d "$(dirname "$MODEL")/ct2-${n#ggml-}" ] && CT2="$(dirname "$MODEL")/ct2-${n#ggml-}"
    ;;
esac

# Lower-case, letters and spaces only, one line.
normalize() { tr 'A-Z' 'a-z' | tr -c 'a-z' ' ' | tr -s ' ' | sed 's/^ //; s/ $//'; }
heard() { normalize <<<"$1" | grep -q "$SENTENCE"; }

# The tensor record holding byte OFFSET of a ggml Whisper file (or the
# section: header, filterbank, vocabulary).
locate() {
  python3 - "$1" "$2" <<'PY'
import struct, sys
path, off = sys.argv[1], int(sys.argv[2])
f = open(path, "rb"); b = f.read(); f.close()
p = 4 + 11 * 4
if off < p: print("header (hyper-parameters)"); sys.exit()
n_mel, n_fft = struct.unpack_from("<ii", b, p); p += 8 + 4 * n_mel * n_fft
if off < p: print("mel filterbank"); sys.exit()
n_tok, = struct.unpack_from("<i", b, p); p += 4
for _ in range(n_tok):
    l, = struct.unpack_from("<I", b, p); p += 4 + l
if off < p: print("vocabulary"); sys.exit()
size = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34)}
while p < len(b):
    start = p
    nd, ln, t = struct.unpack_from("<iii", b, p); p += 12
    ne = struct.unpack_from("<%di" % nd, b, p); p += 4 * nd
    name = b[p:p + ln].decode(); p += ln
    n = 1
    for d in ne: n *= d
    be, bb = size[t]; p += n // be * bb
    if off < p:
        print("tensor %s %s type %d (record at %d, byte %d of it)" % (name, list(ne), t, start, off - start))
        sys.exit()
print("past the end")
PY
}

status=0
declare -A SUMMARY
echo "crosscheck: model $MODEL${CT2:+ (and $CT2)}, types: $TYPES"
echo "crosscheck: whisper.cpp $WHISPERCPP_BIN, whisperd $WHISPERD (transcribe: $WHISPERD_TRANSCRIBE), work $WORK"

# whisper.cpp's own transcript of the unquantized model, for reference.
ref=$("$WHISPERCPP_BIN/whisper-cli" -m "$MODEL" -f "$AUDIO" -t "$THREADS" -nt 2>"$WORK/ref.err")
echo "reference  whisper-cli on $(basename "$MODEL"):$(tr '\n' ' ' <<<"$ref")"

have_py=0
if "$PYWHISPERCPP_PYTHON" -c 'import pywhispercpp.model' 2>/dev/null; then have_py=1; fi

for t in $TYPES; do
  wc="$WORK/whispercpp-$t.bin" wd="$WORK/whisperd-$t.bin"
  line="$t:"
  echo "== $t"
  # (a) byte identity
  if ! "$WHISPERCPP_BIN/whisper-quantize" "$MODEL" "$wc" "$t" >"$WORK/wq-$t.log" 2>&1; then
    echo "  (a) whisper-quantize failed (see $WORK/wq-$t.log)"; status=1; line+=" whisper-quantize FAILED"
  elif ! "$WHISPERD" quantize "$MODEL" "$wd" "$t" >"$WORK/wd-$t.log" 2>&1; then
    echo "  (a) whisperd quantize failed: $(tail -1 "$WORK/wd-$t.log")"; status=1; line+=" whisperd quantize FAILED"
  else
    diff_at=$(cmp "$wc" "$wd" 2>&1 | sed -n 's/.* differ: byte \([0-9]*\),.*/\1/p')
    size_wc=$(stat -c %s "$wc") size_wd=$(stat -c %s "$wd")
    if [ -z "$diff_at" ] && [ "$size_wc" = "$size_wd" ]; then
      echo "  (a) identical: $size_wd bytes, sha256 $(sha256sum "$wd" | cut -c1-16)"
      line+=" identical ($size_wd B)"
    else
      status=1
      if [ -n "$diff_at" ]; then
        where=$(locate "$wc" $((diff_at - 1)))
        echo "  (a) DIFFERENT: first at byte $diff_at, in $where (whisper.cpp $size_wc B, whisperd $size_wd B)"
      else
        echo "  (a) DIFFERENT: sizes $size_wc (whisper.cpp) and $size_wd (whisperd), one a prefix of the other"
      fi
      line+=" DIFFERENT"
    fi
    if [ -n "$CT2" ]; then
      if "$WHISPERD" quantize "$CT2" "$WORK/whisperd-ct2-$t.bin" "$t" >/dev/null 2>&1 &&
         cmp -s "$wc" "$WORK/whisperd-ct2-$t.bin"; then
        echo "  (a) from $CT2: identical to whisper.cpp's file too"; line+=", from ct2 identical"
      else
        echo "  (a) from $CT2: DIFFERENT from whisper.cpp's file"; line+=", from ct2 DIFFERENT"; status=1
      fi
    fi
  fi
  [ -e "$wd" ] || { SUMMARY[$t]=$line; continue; }

  # (b) whisper.cpp runs whisperd's file
  if out=$("$WHISPERCPP_BIN/whisper-cli" -m "$wd" -f "$AUDIO" -t "$THREADS" -nt 2>"$WORK/cli-$t.err"); then
    out=$(tr '\n' ' ' <<<"$out" | sed 's/^ *//')
    if heard "$out"; then echo "  (b) whisper-cli: $out"; line+="; whisper-cli ok"
    else echo "  (b) whisper-cli WRONG: $out"; line+="; whisper-cli WRONG"; status=1; fi
  else
    echo "  (b) whisper-cli FAILED: $(grep -i error "$WORK/cli-$t.err" | head -2)"; line+="; whisper-cli FAILED"; status=1
  fi

  # (c) whisperd runs its own file (needs quantized kernels in the engine)
  out=$("$WHISPERD_TRANSCRIBE" transcribe -m "$wd" "$AUDIO" 2>"$WORK/wdt-$t.err"); rc=$?
  if [ $rc -eq 0 ]; then
    out=$(sed 's/^\[[^]]*\] *//' <<<"$out" | tr '\n' ' ' | sed 's/^ *//')
    if heard "$out"; then echo "  (c) whisperd transcribe: $out"; line+="; whisperd ok"
    else echo "  (c) whisperd transcribe WRONG: $out"; line+="; whisperd WRONG"; status=1; fi
  elif grep -q "not supported" "$WORK/wdt-$t.err"; then
    echo "  (c) whisperd transcribe: skipped, $(grep -o "tensor .*" "$WORK/wdt-$t.err" | head -1)"
    line+="; whisperd skipped (no $t kernels)"
  else
    echo "  (c) whisperd transcribe FAILED ($rc): $(tail -2 "$WORK/wdt-$t.err" | tr '\n' ' ')"
    line+="; whisperd FAILED"; status=1
  fi

  # (d) pywhispercpp, when installed
  if [ $have_py = 1 ]; then
    if out=$("$PYWHISPERCPP_PYTHON" - "$wd" "$AUDIO" "$THREADS" 2>"$WORK/py-$t.err" <<'PY'
import sys
from pywhispercpp.model import Model
m = Model(sys.argv[1], n_threads=int(sys.argv[3]), print_progress=False, print_realtime=False)
print(" ".join(s.text.strip() for s in m.transcribe(sys.argv[2])))
PY
    ); then
      if heard "$out"; then echo "  (d) pywhispercpp: $out"; line+="; pywhispercpp ok"
      else echo "  (d) pywhispercpp WRONG: $out"; line+="; pywhispercpp WRONG"; status=1; fi
    else
      echo "  (d) pywhispercpp FAILED: $(tail -2 "$WORK/py-$t.err" | tr '\n' ' ')"; line+="; pywhispercpp FAILED"; status=1
    fi
  fi
  SUMMARY[$t]=$line
done

echo "== summary"
[ $have_py = 1 ] || echo "(d) pywhispercpp: not installed for $PYWHISPERCPP_PYTHON, skipped"
for t in $TYPES; do echo "  ${SUMMARY[$t]}"; done
exit $status
