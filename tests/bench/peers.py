#!/usr/bin/env python3
"""whisperd's CPU engine beside its CPU peers, in one run (issue #12's
proof; a benchmark: prints figures and the issue's targets as met or not,
and fails nothing).

Engines, each given the same threads (--threads, default 2):
  whisperd     build/daemon/whisperd transcribe --device cpu -l en -m models/ggml-M.bin
               (greedy with the openai temperature fallback is its default;
               it uses the online cores, it has no thread option)
  whisperd-int8, whisperd-bf16
               the same with --compute-type int8 / bf16 (skipped where the
               CPU lacks the instructions)
  whispercpp   whisper.cpp's whisper-cli, CPU backend, pinned commit 233fe1f
               (/work/shared/tools/build-whispercpp.sh), -t T -bs 1 -bo 1 -l en,
               on the same ggml file
  fw-float32   faster-whisper on CPU, CTranslate2 dir models/ct2-M, cpu_threads T,
  fw-int8      compute_type float32 / int8; greedy (beam 1, best_of 1), no
               VAD, openai's temperature fallback (tests/bench/peers_fw.py says
               exactly); it runs in its own venv (--venv, made on first use with
               pip install faster-whisper)

Files: tests/data/audio/jfk.wav (11 s) and a ~2-minute 16 kHz WAV made here
from the real speech in tests/data/audio (load.py's long_audio()).

Per model, file and engine: the wall time of the whole process (model load
included), its user+sys CPU and peak RSS (wait4's ru_maxrss), medians over
--repeats runs (--long-repeats on the long file). Each repeat runs the
engines one after another (paired; the order rotates from repeat to repeat),
and the ratio whisperd/peer is the median of the per-repeat ratios. Before the
timed runs every engine transcribes jfk.wav once untimed (every model file
is then in the page cache), and those transcripts are printed and compared.

Steps, per model, on jfk.wav's one window:
  encoder ms per 30 s window: whisperd: bench_engine's best of --repeats;
    whisper.cpp: whisper_print_timings' encode time, best over the timed jfk
    runs; faster-whisper: ctranslate2 encode, best of --repeats.
  decoder ms per token: whisperd: bench_engine's decoder step (the last step
    of each run, averaged); whisper.cpp: decode time per run (all single-
    token decodes of the run averaged; median over the jfk runs);
    faster-whisper: (generate to the end - generate one token) / tokens.
  The three are measured differently (see peers_fw.py); close figures are a
  tie, not a ranking.

  python3 tests/bench/peers.py                    # defaults: meant as ~15 min on 2 idle cores
  python3 tests/bench/peers.py --models tiny.en --files jfk --repeats 9
  python3 tests/bench/peers.py --engines whisperd,whispercpp --json out.json
"""

import argparse
import difflib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from load import long_audio  # noqa: E402

ENGINES = ["whisperd", "whisperd-int8", "whisperd-bf16", "whispercpp", "fw-float32", "fw-int8"]
JFK = os.path.join(ROOT, "tests", "data", "audio", "jfk.wav")
WCPP_CANDIDATES = [
    os.path.join(ROOT, "build", "whispercpp", "build-cpu", "bin", "whisper-cli"),
    "/tmp/wcpp/build-cpu/bin/whisper-cli",
]
WCPP_MIRROR = "/work/.mirror/ggml-org+whisper.cpp"
WCPP_BUILD = "/work/shared/tools/build-whispercpp.sh"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---- running a child and what it cost -------------------------------------

_current = [None]  # the child running now, for on_term


def on_term(signum, frame):
    """SIGTERM: end the running child too (it would outlive us otherwise)."""
    p = _current[0]
    if p is not None:
        p.kill()
    sys.exit(128 + signum)


def run_child(argv, env=None, timeout=1800):
    """Runs argv to the end; returns a dict of rc, wall s, cpu s (user+sys),
    peak RSS MiB, stdout and stderr text. Output goes to files, not pipes, so
    the child never blocks on us; wait4 gives its own rusage."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             env=env, cwd=ROOT)
        killer = threading.Timer(timeout, p.kill)  # a hung child ends the run, not the script
        killer.start()
        _current[0] = p
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            killer.cancel()
            _current[0] = None
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return {"rc": p.returncode, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                "rss_mib": ru.ru_maxrss / 1024.0,
                "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace")}


# ---- the engines ----------------------------------------------------------

class Engine:
    """One peer: the command for a transcription, and its transcript."""

    def __init__(self, name, args):
        self.name, self.args = name, args

    def available(self, models):
        """None when it can run, else why not."""
        raise NotImplementedError

    def argv(self, model, audio):
        raise NotImplementedError

    def env(self):
        return None

    def text(self, res):
        """The transcript in a run's output (timestamps removed)."""
        lines = [re.sub(r"^\[[0-9:.]+ --> [0-9:.]+\]\s*", "", ln).strip()
                 for ln in res["stdout"].splitlines()]
        return " ".join(ln for ln in lines if ln)


class Whisperd(Engine):
    def __init__(self, name, args):
        super().__init__(name, args)
        self.compute = name.split("-", 1)[1] if "-" in name else "f32"

    def available(self, models):
        if not os.access(self.args.whisperd, os.X_OK):
            return f"{self.args.whisperd} is not built (scripts/build.sh release)"
        missing = [ggml(m) for m in models if not os.path.exists(ggml(m))]
        if missing:
            return f"missing {', '.join(missing)}"
        dev = subprocess.run([self.args.whisperd, "devices"], capture_output=True, text=True).stdout
        m = re.search(rf"compute {self.compute}\s+(.*)", dev)
        if self.compute != "f32" and (not m or "needs" in m.group(1)):
            return m.group(1).strip() if m else "this whisperd has no --compute-type"
        return None

    def argv(self, model, audio):
        return [self.args.whisperd, "transcribe", "--device", "cpu", "-l", "en",
                "--compute-type", self.compute, "--log-level", "warning", "-m", ggml(model), audio]


class WhisperCpp(Engine):
    def available(self, models):
        b = self.args.whispercpp
        if not b:
            return ("no whisper-cli found; build whisper.cpp's pinned commit with\n"
                    f"      {WCPP_BUILD} {WCPP_MIRROR} build/whispercpp\n"
                    "    (the source: a clone or bare mirror of ggml-org/whisper.cpp), then pass\n"
                    "      --whispercpp build/whispercpp/build-cpu/bin/whisper-cli")
        if not os.access(b, os.X_OK):
            return f"{b} is not executable"
        missing = [ggml(m) for m in models if not os.path.exists(ggml(m))]
        return f"missing {', '.join(missing)}" if missing else None

    def argv(self, model, audio):
        return [self.args.whispercpp, "-m", ggml(model), "-f", audio, "-t", str(self.args.threads),
                "-bs", "1", "-bo", "1", "-l", "en"]


class FasterWhisper(Engine):
    def __init__(self, name, args):
        super().__init__(name, args)
        self.ctype = name.split("-", 1)[1]
        self.py = os.path.join(args.venv, "bin", "python")

    def available(self, models):
        why = ensure_venv(self.args.venv)
        if why:
            return why
        missing = [ct2(m) for m in models if not os.path.isdir(ct2(m))]
        return f"missing {', '.join(missing)}" if missing else None

    def argv(self, model, audio):
        return [self.py, os.path.join(HERE, "peers_fw.py"), "transcribe", ct2(model), self.ctype,
                str(self.args.threads), audio]

    def env(self):
        # CTranslate2 takes its threads from cpu_threads; keep OpenMP there too.
        return dict(os.environ, OMP_NUM_THREADS=str(self.args.threads))

    def text(self, res):
        return res["stdout"].strip()


_venv_state = {}


def ensure_venv(venv):
    """Makes the faster-whisper venv on first use; None when it imports."""
    if venv in _venv_state:
        return _venv_state[venv]
    py = os.path.join(venv, "bin", "python")
    why = None
    ok = lambda: subprocess.run([py, "-c", "import faster_whisper"], capture_output=True).returncode == 0  # noqa
    if not (os.path.exists(py) and ok()):
        log(f"peers: installing faster-whisper into {venv} (pip) ...")
        r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
        if r.returncode == 0:
            r = subprocess.run([py, "-m", "pip", "install", "-q", "faster-whisper"],
                               capture_output=True, text=True)
        if r.returncode != 0 or not ok():
            why = f"pip install faster-whisper into {venv} failed: {r.stderr.strip()[-300:]}"
    _venv_state[venv] = why
    return why


def ggml(m):
    return os.path.join(ROOT, "models", f"ggml-{m}.bin")


def ct2(m):
    return os.path.join(ROOT, "models", f"ct2-{m}")


# ---- per-step figures -----------------------------------------------------

ENC_RE = re.compile(r"^encoder:\s+([0-9.]+) ms per 30 s window", re.M)
DEC_RE = re.compile(r"^decoder step:\s+([0-9.]+) ms per token", re.M)
WCPP_ENC_RE = re.compile(r"encode time =\s*([0-9.]+) ms /\s*(\d+) runs")
WCPP_DEC_RE = re.compile(r"decode time =\s*([0-9.]+) ms /\s*(\d+) runs")
WCPP_FALLBACK_RE = re.compile(r"fallbacks =\s*(\d+) p /\s*(\d+) h")


def parse_steps(text):
    e, d = ENC_RE.search(text), DEC_RE.search(text)
    return (float(e.group(1)) if e else None, float(d.group(1)) if d else None)


def wcpp_timings(stderr):
    """(encode ms per run, decode ms per run, fallbacks) from
    whisper_print_timings; None where absent."""
    e, d, f = WCPP_ENC_RE.search(stderr), WCPP_DEC_RE.search(stderr), WCPP_FALLBACK_RE.search(stderr)
    enc = float(e.group(1)) / int(e.group(2)) if e and int(e.group(2)) else None
    dec = float(d.group(1)) / int(d.group(2)) if d and int(d.group(2)) else None
    return enc, dec, (int(f.group(1)) + int(f.group(2))) if f else None


def step_figures(eng, model, args):
    """(encoder ms, decoder ms/token, note) for whisperd and faster-whisper,
    from their step benchmarks on jfk's window."""
    if eng.name.startswith("whisperd"):
        if not os.access(args.bench_engine, os.X_OK):
            return None, None, f"{args.bench_engine} is not built"
        res = run_child([args.bench_engine, ggml(model), JFK, str(args.repeats),
                         f"cpu:{eng.compute}"])
    elif eng.name.startswith("fw-"):
        res = run_child([eng.py, os.path.join(HERE, "peers_fw.py"), "steps", ct2(model), eng.ctype,
                         str(args.threads), JFK, str(args.repeats)], env=eng.env())
    else:
        return None, None, "from the timed runs"
    if res["rc"] != 0:
        return None, None, f"exit {res['rc']}: {res['stderr'].strip()[-300:]}"
    enc, dec = parse_steps(res["stdout"])
    return enc, dec, res["stdout"].strip()


# ---- transcripts ----------------------------------------------------------

def words(text):
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def agreement(a, b):
    """Share of words the two transcripts have in common, in order."""
    wa, wb = words(a), words(b)
    if not wa and not wb:
        return 1.0
    m = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False)
    return 2.0 * sum(x.size for x in m.get_matching_blocks()) / (len(wa) + len(wb))


# ---- the run --------------------------------------------------------------

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, f="{:.2f}"):
    return "-" if x is None else f.format(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="tiny.en,base")
    ap.add_argument("--files", default="jfk,long", help="jfk and/or long")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per model, file, engine")
    ap.add_argument("--long-repeats", type=int, default=2,
                    help="timed runs on the long file (default 2, to keep the run near 15 min)")
    ap.add_argument("--long-s", type=float, default=120.0, help="length of the long file, s")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--whisperd", default=os.path.join(ROOT, "build", "daemon", "whisperd"))
    ap.add_argument("--bench-engine", default=os.path.join(ROOT, "build", "tests", "bench", "bench_engine"))
    ap.add_argument("--whispercpp", default=None, help="path to whisper.cpp's whisper-cli")
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "peers-venv"),
                    help="venv for faster-whisper (made with pip when absent)")
    ap.add_argument("--json", default=None, help="write every figure here too")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    models = [m for m in args.models.split(",") if m]
    files = [f for f in args.files.split(",") if f]
    if set(files) - {"jfk", "long"}:
        ap.error("--files takes jfk and/or long")
    if set(args.engines.split(",")) - set(ENGINES):
        ap.error(f"--engines takes {','.join(ENGINES)}")
    if args.whispercpp is None:
        args.whispercpp = next((c for c in WCPP_CANDIDATES if os.access(c, os.X_OK)), None)

    cores = os.cpu_count()
    print(f"peers: {cores} online cores, --threads {args.threads}; models {','.join(models)}, "
          f"files {','.join(files)}, {args.repeats} repeats ({args.long_repeats} on long); "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.threads != cores:
        print(f"  note: whisperd's CPU engine uses all {cores} online cores (it has no thread "
              f"option), the peers {args.threads}")

    engines = []
    for name in [e for e in ENGINES if e in args.engines.split(",")]:
        cls = WhisperCpp if name == "whispercpp" else Whisperd if name.startswith("whisperd") else FasterWhisper
        eng = cls(name, args)
        why = eng.available(models)
        if why:
            print(f"  skip {name}: {why}")
        else:
            engines.append(eng)
            if name == "whispercpp":
                print(f"  whispercpp: {args.whispercpp}")
    if not engines:
        print("peers: nothing to run")
        return 1

    tmp = tempfile.TemporaryDirectory(prefix="wd-peers-")
    paths = {"jfk": JFK}
    durs = {"jfk": 11.0}
    if "long" in files:
        data, durs["long"] = long_audio(args.long_s)
        paths["long"] = os.path.join(tmp.name, f"long-{int(args.long_s)}s.wav")
        with open(paths["long"], "wb") as f:
            f.write(data)

    report = {"cores": cores, "threads": args.threads, "repeats": args.repeats,
              "long_repeats": args.long_repeats, "durations_s": durs,
              "whispercpp": args.whispercpp, "runs": {}, "steps": {}, "transcripts": {},
              "ratios": {}}
    t_start = time.monotonic()

    for model in models:
        # Warm-up and the transcripts: jfk once per engine, untimed.
        texts = {}
        for eng in engines:
            res = run_child(eng.argv(model, JFK), env=eng.env())
            if res["rc"] != 0:
                print(f"  {eng.name} {model}: exit {res['rc']}: {res['stderr'].strip()[-400:]}")
                continue
            texts[eng.name] = eng.text(res)
        report["transcripts"][model] = texts
        print(f"\n== {model}: jfk.wav transcripts (word agreement with "
              f"{'whisperd' if 'whisperd' in texts else 'the first'})")
        ref = texts.get("whisperd") or next(iter(texts.values()), "")
        for name, t in texts.items():
            print(f"  {name:<13} {agreement(ref, t):6.1%}  {t}")

        # Timed runs, paired: every repeat runs each engine once, in turn.
        for fname in files:
            reps = args.repeats if fname == "jfk" else args.long_repeats
            runs = {e.name: [] for e in engines}
            long_texts = {}
            for r in range(reps):
                for eng in engines[r % len(engines):] + engines[:r % len(engines)]:
                    res = run_child(eng.argv(model, paths[fname]), env=eng.env())
                    if res["rc"] != 0:
                        print(f"  {eng.name} {model} {fname}: exit {res['rc']}: "
                              f"{res['stderr'].strip()[-400:]}")
                        runs[eng.name].append(None)
                        continue
                    rec = {k: res[k] for k in ("wall_s", "cpu_s", "rss_mib")}
                    if eng.name == "whispercpp":
                        rec["encode_ms"], rec["decode_ms"], rec["fallbacks"] = wcpp_timings(res["stderr"])
                    if fname == "long" and r == 0:
                        long_texts[eng.name] = eng.text(res)
                    runs[eng.name].append(rec)
                log(f"  [{time.monotonic() - t_start:5.0f} s] {model} {fname} repeat {r + 1}/{reps}")
            report["runs"].setdefault(model, {})[fname] = runs
            if long_texts:
                report["transcripts"].setdefault(model + " long", long_texts)

            # Paired ratios whisperd / peer, per repeat, then the median.
            rat = {}
            for eng in engines:
                if eng.name == "whisperd" or "whisperd" not in runs:
                    continue
                pr = [a["wall_s"] / b["wall_s"] for a, b in zip(runs["whisperd"], runs[eng.name])
                      if a and b]
                rat[eng.name] = statistics.median(pr) if pr else None
            # The reduced-precision modes against faster-whisper's int8.
            for mine in ("whisperd-int8", "whisperd-bf16"):
                if mine in runs and "fw-int8" in runs:
                    pr = [a["wall_s"] / b["wall_s"] for a, b in zip(runs[mine], runs["fw-int8"])
                          if a and b]
                    rat[f"{mine}/fw-int8"] = statistics.median(pr) if pr else None
            report["ratios"].setdefault(model, {})[fname] = rat

            print(f"\n== {model}, {fname} ({durs[fname]:.0f} s of audio), {reps} runs each: medians")
            print(f"  {'engine':<13} {'wall s':>7} {'RTF':>6} {'cpu s':>7} {'RSS MiB':>8} "
                  f"{'whisperd/peer wall (paired)':>28}")
            for eng in engines:
                ok = [x for x in runs[eng.name] if x]
                if not ok:
                    print(f"  {eng.name:<13} (no successful run)")
                    continue
                w = med([x["wall_s"] for x in ok])
                extra = ""
                if eng.name == "whispercpp":
                    fb = sum(x.get("fallbacks") or 0 for x in ok)
                    extra = f"  ({fb} fallbacks)" if fb else ""
                print(f"  {eng.name:<13} {w:7.2f} {w / durs[fname]:6.3f} "
                      f"{med([x['cpu_s'] for x in ok]):7.2f} {med([x['rss_mib'] for x in ok]):8.1f} "
                      f"{fmt(rat.get(eng.name), '{:.3f}x'):>28}{extra}")
            for k, v in rat.items():
                if "/" in k and v is not None:
                    print(f"  {k} wall (paired): {v:.3f}x")
            if fname == "long" and long_texts:
                base = long_texts.get("whisperd") or next(iter(long_texts.values()))
                agree = ", ".join(f"{n} {agreement(base, t):.1%}" for n, t in long_texts.items())
                print(f"  long transcript word agreement with {'whisperd' if 'whisperd' in long_texts else 'the first'}: "
                      f"{agree} ({len(words(base))} words)")

        # Step figures.
        steps = {}
        for eng in engines:
            if eng.name == "whispercpp":
                jr = [x for x in report["runs"].get(model, {}).get("jfk", {}).get("whispercpp", []) if x]
                enc = min((x["encode_ms"] for x in jr if x.get("encode_ms")), default=None)
                dec = med([x.get("decode_ms") for x in jr])
                steps[eng.name] = {"encoder_ms": enc, "decoder_ms": dec,
                                   "note": "whisper_print_timings over the timed jfk runs"
                                   if jr else "needs --files jfk"}
            else:
                enc, dec, note = step_figures(eng, model, args)
                steps[eng.name] = {"encoder_ms": enc, "decoder_ms": dec, "note": note}
        report["steps"][model] = steps
        print(f"\n== {model}: steps (jfk's window)")
        print(f"  {'engine':<13} {'encoder ms/window':>18} {'decoder ms/token':>17}")
        for name, s in steps.items():
            print(f"  {name:<13} {fmt(s['encoder_ms'], '{:.1f}'):>18} {fmt(s['decoder_ms']):>17}")
            if s["encoder_ms"] is None and s["note"]:
                print(f"    ({s['note'][-300:]})")

    # The issue's targets.
    print("\n== issue #12 targets (this machine, this run)")
    targets = []

    def target(label, value, limit, what):
        if value is None:
            targets.append({"target": label, "met": None})
            print(f"  {label}: not measured ({what})")
            return
        met = value <= limit
        targets.append({"target": label, "value": value, "limit": limit, "met": met})
        print(f"  {label}: {value:.3f} (at most {limit}) -> {'met' if met else 'NOT met'}")

    r = report["ratios"].get("tiny.en", {}).get("jfk", {}).get("whispercpp")
    target("tiny.en jfk wall, whisperd/whisper.cpp, median of paired runs", r, 1.0,
           "needs tiny.en, jfk, whisperd and whispercpp")
    target("  aim", r, 0.8, "as above")
    for model in models:
        st = report["steps"].get(model, {})
        wd, wc = st.get("whisperd", {}), st.get("whispercpp", {})
        for key, what in (("encoder_ms", "encoder ms/window"), ("decoder_ms", "decoder ms/token")):
            a, b = wd.get(key), wc.get(key)
            target(f"{model} {what}, whisperd/whisper.cpp", a / b if a and b else None, 1.0,
                   "needs whisperd's bench_engine and whisper.cpp's jfk runs")
        r = report["ratios"].get(model, {}).get("long", {}).get("fw-float32")
        target(f"{model} long wall, whisperd/faster-whisper float32, median of paired runs", r, 1.0,
               "needs long, whisperd and fw-float32")
    report["targets"] = targets
    report["loadavg_end"] = os.getloadavg()[0]
    print(f"\npeers: {time.monotonic() - t_start:.0f} s in all; load average {os.getloadavg()[0]:.1f} "
          f"at the end (above the {cores} cores: other work shared them, and engines whose "
          f"threads spin while they wait suffer most)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"peers: figures in {args.json}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
