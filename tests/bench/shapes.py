#!/usr/bin/env python3
"""whisperd's CPU engine beside whisper.cpp at the shapes users deploy
(large-v3-turbo, large-v3, ...), on one random-weight ggml file both read
(issue #22's proof; a benchmark: prints figures and the issue's targets as
met or not, and fails nothing).

The file: build/tests/wd_synth_model PATH 1 SHAPE (f16 weights in
whisper.cpp's layout, the published hyper-parameters; written once into
models/synth/, 1.6 GB for large-v3-turbo, 3.1 GB for large-v3).

Per shape, --repeats paired rounds (the order alternates), each running:
  whisperd     build/tests/bench/bench_cpu_step FILE 256 1: one encoder window,
               a 224-token prefill, then 256 decoder steps at batch 1, 2, 4,
               8, 16 from position 0 (the CPU engine as `serve` builds it)
  whisper.cpp  whisper-bench -m FILE -t T (pinned commit 233fe1f, CPU
               backend): one encoder window, 256 single-token decodes at
               positions 0 .. 255, batched decodes of 5 tokens, prompts of
               256 tokens
and once (the model's peak memory in a whole transcription, the issue's
RSS target): whisperd transcribe --device cpu --temperature-inc 0 jfk.wav.
Figures are the medians over the rounds (the encoder: the best); ratios are
the medians of the per-round ratios. whisper.cpp's "batchd" is 5 tokens of
one sequence per call, whisperd's batch 8 is 8 sequences one token each:
both are per token, neither is the other's exact peer.

  python3 tests/bench/shapes.py                          # large-v3-turbo, 3 rounds
  python3 tests/bench/shapes.py --compute f32,int8,bf16  # --compute-type rows beside f32
  python3 tests/bench/shapes.py --shapes large-v3-turbo,large-v3 --repeats 2
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from peers import JFK, WCPP_BUILD, WCPP_MIRROR, fmt, run_child  # noqa: E402

WCPP_BENCH = ["/tmp/wcpp/build-cpu/bin/whisper-bench",
              os.path.join(ROOT, "build", "whispercpp", "build-cpu", "bin", "whisper-bench")]


def num(rx, text):
    m = re.search(rx, text, re.M)
    return float(m.group(1)) if m else None


def ours(res):
    o = res["stdout"]
    return {"encoder_ms": num(r"^encoder: ([0-9.]+) ms per window", o),
            "prefill_ms_tok": num(r"^prefill \d+ tokens: [0-9.]+ ms, ([0-9.]+) ms per token", o),
            "step1_ms": num(r"^batch  1: +([0-9.]+) ms per step", o),
            "step8_ms_tok": num(r"^batch  8: +[0-9.]+ ms per step .*?([0-9.]+) ms per row", o),
            "gemm": (re.search(r"^encoder GEMM: (.*)$", o, re.M) or [None, None])[1],
            "rss_mib": res["rss_mib"]}


def theirs(res):
    e = res["stderr"]
    per = r"time = +[0-9.]+ ms / +\d+ runs \( +([0-9.]+) ms per run\)"
    return {"encoder_ms": num(r"encode " + per, e), "step1_ms": num(r"decode " + per, e),
            "batchd_ms_tok": num(r"batchd " + per, e), "prefill_ms_tok": num(r"prompt " + per, e),
            "rss_mib": res["rss_mib"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="large-v3-turbo")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--whisper-bench", default=None)
    ap.add_argument("--no-transcribe", action="store_true", help="skip the RSS transcription")
    ap.add_argument("--compute", default="f32",
                    help="whisperd's --compute-type values, one row each (f32,int8,bf16)")
    args = ap.parse_args()
    wb = args.whisper_bench or next((c for c in WCPP_BENCH if os.access(c, os.X_OK)), None)
    synth = os.path.join(ROOT, "build", "tests", "wd_synth_model")
    bench = os.path.join(ROOT, "build", "tests", "bench", "bench_cpu_step")
    whisperd = os.path.join(ROOT, "build", "daemon", "whisperd")
    for p in (synth, bench, whisperd):
        if not os.access(p, os.X_OK):
            print(f"shapes: {p} is not built (scripts/build.sh release)")
            return 1
    if not wb:
        print(f"shapes: no whisper-bench; build whisper.cpp with {WCPP_BUILD} {WCPP_MIRROR} "
              "build/whispercpp, or pass --whisper-bench")
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), "?")
    print(f"shapes: {cpu}, {os.cpu_count()} cores, --threads {args.threads}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")

    for shape in [s for s in args.shapes.split(",") if s]:
        path = os.path.join(ROOT, "models", "synth", f"ggml-{shape}.bin")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            print(f"  writing {path}")
            if subprocess.run([synth, path, "1", shape]).returncode != 0:
                print(f"  cannot write the {shape} file")
                continue
        size_mib = os.path.getsize(path) / 2**20
        computes = [c for c in args.compute.split(",") if c]
        mine = ["whisperd" if c == "f32" else f"whisperd-{c}" for c in computes]
        rows = {n: [] for n in mine + ["whisper.cpp"]}
        for r in range(args.repeats):
            order = list(rows)
            order = order[r % len(order):] + order[:r % len(order)]
            for who in order:
                if who.startswith("whisperd"):
                    ct = computes[mine.index(who)]
                    res = run_child([bench, path, "256", "1", ct])
                    rows[who].append(ours(res) if res["rc"] == 0 else None)
                elif wb:
                    res = run_child([wb, "-m", path, "-t", str(args.threads)])
                    rows[who].append(theirs(res) if res["rc"] == 0 else None)
                if res["rc"] != 0:
                    print(f"  {who} exit {res['rc']}: {(res['stderr'] or res['stdout'])[-300:]}")
            print(f"  {shape}: round {r + 1}/{args.repeats}", file=sys.stderr, flush=True)
        w = [x for x in rows.get("whisperd", []) if x]
        c = [x for x in rows["whisper.cpp"] if x]

        def fig(xs, key, best=False):
            v = [x[key] for x in xs if x.get(key) is not None]
            return (min(v) if best else statistics.median(v)) if v else None

        def ratio(key, key_c=None, who="whisperd"):
            pr = [a[key] / b[key_c or key] for a, b in zip(rows.get(who, []), rows["whisper.cpp"])
                  if a and b and a.get(key) and b.get(key_c or key)]
            return statistics.median(pr) if pr else None

        print(f"\n== {shape} (random f16 weights, {size_mib:.0f} MiB file), {args.repeats} rounds")
        if w and w[0].get("gemm"):
            print(f"  whisperd encoder GEMM: {w[0]['gemm']}")
        print(f"  {'':<12} {'encoder ms':>11} {'step b1 ms':>11} {'b8 ms/row':>10} "
              f"{'batchd ms/tok':>14} {'prefill ms/tok':>15} {'peak RSS MiB':>13}")
        for who in mine:
            xs = [x for x in rows[who] if x]
            print(f"  {who:<13} {fmt(fig(xs, 'encoder_ms', True), '{:.1f}'):>10} {fmt(fig(xs, 'step1_ms'), '{:.2f}'):>11} "
                  f"{fmt(fig(xs, 'step8_ms_tok'), '{:.2f}'):>10} {'-':>14} "
                  f"{fmt(fig(xs, 'prefill_ms_tok'), '{:.2f}'):>15} {fmt(fig(xs, 'rss_mib'), '{:.1f}'):>13}")
        print(f"  {'whisper.cpp':<12} {fmt(fig(c, 'encoder_ms', True), '{:.1f}'):>11} {fmt(fig(c, 'step1_ms'), '{:.2f}'):>11} "
              f"{'-':>10} {fmt(fig(c, 'batchd_ms_tok'), '{:.2f}'):>14} "
              f"{fmt(fig(c, 'prefill_ms_tok'), '{:.2f}'):>15} {fmt(fig(c, 'rss_mib'), '{:.1f}'):>13}")
        rss = None
        for ct in computes if not args.no_transcribe else []:
            res = run_child([whisperd, "transcribe", "--device", "cpu", "-l", "en",
                             "--compute-type", ct, "--temperature-inc", "0", "--log-level",
                             "warning", "-m", path, JFK])
            got = res["rss_mib"] if res["rc"] == 0 else None
            rss = got if ct == "f32" else rss
            print(f"  whisperd transcribe --compute-type {ct} jfk.wav: peak RSS {fmt(got, '{:.1f}')} MiB, "
                  f"{fmt(got / size_mib if got else None, '{:.2f}')}x the file "
                  f"({res['wall_s']:.1f} s{'' if res['rc'] == 0 else ', exit %d' % res['rc']})")
        print("  targets (issue #22), whisperd / whisper.cpp, medians of paired rounds:")
        for label, v, lim in (("encoder per window", ratio("encoder_ms"), 0.5),
                              ("decoder step, batch 1", ratio("step1_ms"), 0.75),
                              ("prefill per token", ratio("prefill_ms_tok"), 1.0),
                              ("transcribe peak RSS / file", rss / size_mib if rss else None, 1.2)):
            state = "not measured" if v is None else ("met" if v <= lim else "NOT met")
            print(f"    {label:<26} {fmt(v, '{:.3f}'):>7} (at most {lim}) -> {state}")
        for who in mine[1:] if mine and mine[0] == "whisperd" else mine:
            print(f"  {who} / whisper.cpp: encoder {fmt(ratio('encoder_ms', who=who), '{:.3f}')}, "
                  f"step b1 {fmt(ratio('step1_ms', who=who), '{:.3f}')}, "
                  f"prefill {fmt(ratio('prefill_ms_tok', who=who), '{:.3f}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
