#!/usr/bin/env python3
"""What diarization adds to a request's wall time (issue #41's target: a
diarized request <= 1.3x the same request without it). A benchmark: prints
figures, passes or fails nothing.

One daemon (--device cpu unless --device says otherwise, the model of
--model, by default models/ggml-base.bin) serves, one request at a time and
alternating so that drift hits both alike, each of:
  plain     response_format=json
  words     verbose_json with word timestamps and chunking_strategy=auto: the
            transcription work a diarized request asks for (the daemon turns
            word timestamps on and chunks with the VAD for diarization)
  diarized  response_format=diarized_json
on each file (default: pyannote's 30 s two-speaker sample). Prints the
median and min wall time of each and the ratios diarized/words and
diarized/plain, with the CPU model.

  python3 tests/bench/diar_overhead.py --rounds 5
  python3 tests/bench/diar_overhead.py --model models/ggml-tiny.en.bin FILE.wav ...
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "api"))
import wd_api  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SAMPLE = os.path.join(ROOT, "tests", "data", "audio", "diar", "sample.wav")

KINDS = {
    "plain": [("response_format", "json")],
    "words": [("response_format", "verbose_json"), ("timestamp_granularities[]", "word"),
              ("chunking_strategy", "auto")],
    "diarized": [("response_format", "diarized_json")],
}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", default=[SAMPLE])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "ggml-base.bin"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    d = wd_api.start_daemon(model=a.model, args=["--device", a.device])
    try:
        print(f"# diarization overhead: {os.path.basename(a.model)}, --device {a.device}, "
              f"CPU {cpu_model()}, {os.cpu_count()} cores, {a.rounds} rounds")
        print("| file | plain s (med/min) | words s | diarized s | diarized/words | diarized/plain |")
        print("|---|---|---|---|---|---|")
        for path in a.files:
            times = {k: [] for k in KINDS}
            for _ in range(1 + a.rounds):           # the first round warms up, uncounted
                for kind, fields in KINDS.items():
                    t0 = time.monotonic()
                    r = wd_api.post_audio(d.port, path=path, fields=fields)
                    dt = time.monotonic() - t0
                    if r.status != 200:
                        sys.exit(f"{kind}: HTTP {r.status}: {r.body[:300]!r}")
                    times[kind].append(dt)
            med = {k: statistics.median(v[1:]) for k, v in times.items()}
            mn = {k: min(v[1:]) for k, v in times.items()}
            print(f"| {os.path.basename(path)} | {med['plain']:.2f}/{mn['plain']:.2f} | "
                  f"{med['words']:.2f}/{mn['words']:.2f} | {med['diarized']:.2f}/{mn['diarized']:.2f} | "
                  f"{med['diarized'] / med['words']:.2f} | {med['diarized'] / med['plain']:.2f} |")
    finally:
        wd_api.stop_daemon(d)


if __name__ == "__main__":
    main()
