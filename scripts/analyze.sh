#!/usr/bin/env bash
# Static analysis: gcc's -fanalyzer (GCC 12) over the project's own C sources
# in core/ api/ daemon/ gpu/ cpu/, each file compiled with the flags CMake
# gives it (compile_commands.json of a configure-only tree, build-analyze/).
# Left out: the generated SPIR-V arrays (shaders/, written into the build
# tree: data, not code) and tests/ (test code; its findings are not the
# daemon's). Nothing third-party is vendored.
#
# Usage: scripts/analyze.sh [-j N] [file.c ...]   (default: every file)
# Exits 1 when the analyzer reports anything not in tests/analyzer.supp, 0
# when clean. Findings are printed with the analyzer's path notes.
#
# One check is off for the whole run: -Wanalyzer-use-of-uninitialized-value.
# It is new in GCC 12 and does not follow array stores made in loops (every
# one of its 30 reports here was an element written by an earlier loop or a
# cursor read whose failure returns first); uninitialized reads stay covered
# by -Wall's -Wmaybe-uninitialized in the -Werror release build and by the
# ASan/UBSan and TSan runs of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
if [ "${1:-}" = "-j" ]; then jobs=$2; shift 2; fi
dir=build-analyze
# Configure only: the project's sources include no generated header, so no
# target needs building before they can be compiled.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWD_BENCH=OFF \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
exec python3 - "$dir/compile_commands.json" "$PWD" "$jobs" "$@" <<'EOF'
import concurrent.futures, json, os, re, shlex, subprocess, sys, time

db, root, jobs, only = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
only = {os.path.abspath(f) for f in only}
DIRS = ("core", "api", "daemon", "gpu", "cpu")
FLAGS = ["-fanalyzer", "-Wno-analyzer-use-of-uninitialized-value",
         "-fdiagnostics-plain-output", "-fno-diagnostics-show-caret"]

# tests/analyzer.supp: "<path> <function> <-Wanalyzer-check>  # reason".
supp = set()
with open(os.path.join(root, "tests", "analyzer.supp")) as f:
    for ln in f:
        ln = ln.split("#", 1)[0].split()
        if ln:
            supp.add(tuple(ln))

cmds = []
for e in json.load(open(db)):
    src = os.path.abspath(os.path.join(e["directory"], e["file"]))
    rel = os.path.relpath(src, root)
    if rel.split(os.sep)[0] not in DIRS or (only and src not in only):
        continue
    args = shlex.split(e["command"])
    args[args.index("-o") + 1] = "/dev/null"
    cmds.append((rel, e["directory"], args + FLAGS))

def run(c):
    rel, cwd, args = c
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    return rel, p.returncode, p.stderr

t0 = time.monotonic()
findings, suppressed, failed = [], 0, []
with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
    for rel, rc, out in ex.map(run, cmds):
        if rc != 0:
            failed.append(rel)
        func, cur = "?", None
        for ln in out.splitlines():
            m = re.match(r"(.*): In function [‘'](\w+)[’']:$", ln)
            if m:
                func = m.group(2)
                continue
            m = re.match(r"(.*?):\d+:\d+: (warning|error): .*\[(-W[\w-]+)\]$", ln)
            if m or re.match(r".*?:\d+:\d+: (warning|error): ", ln):
                path = os.path.relpath(m.group(1), root) if m else rel
                key = (path, func, m.group(3) if m else "")
                cur = None if key in supp else [ln]
                if cur is None:
                    suppressed += 1
                else:
                    findings.append(cur)
            elif cur is not None and ": note: " in ln:
                cur.append("    " + ln)
for f in findings:
    print("\n".join(f))
for rel in failed:
    print(f"analyze.sh: {rel}: the compiler failed")
print(f"analyze.sh: {len(cmds)} files, {len(findings)} findings "
      f"({suppressed} suppressed by tests/analyzer.supp), {time.monotonic() - t0:.0f} s")
sys.exit(1 if findings or failed else 0)
EOF
