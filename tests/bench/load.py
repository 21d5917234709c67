#!/usr/bin/env python3
"""Load benchmark for whisperd serve (a benchmark: prints figures, passes
or fails nothing).

N concurrent clients (default 1, 2, 4, 8, 16) each send a file again and
again to POST /v1/audio/transcriptions on 127.0.0.1: jfk.wav (11 s) and a
~2-minute file made at run time from the real speech in tests/data/audio
(jfk.wav and cards/*.wav with pauses). For every N and file it prints
requests/s, audio seconds per second, p50/p95 latency and the mean batch
occupancy (engine rows per step, from /metrics), first for the daemon with
batching (--max-batch 8) and then for the same daemon with --max-batch 1,
both started by this script in the same run with the same model.

Bounded in count and in time: each (daemon, file, N) point stops starting
requests after --requests requests (at least one per client) or --seconds
seconds, whichever comes first, and waits for those in flight. Loopback only.

  python3 tests/bench/load.py                     # defaults: ~12 min on lavapipe (2 cores)
  python3 tests/bench/load.py --long-ns 1,2,4,8,16  # the whole grid (~35 min on lavapipe)
  python3 tests/bench/load.py --ns 1,4,16 --long-ns 1 --seconds 10   # ~5 min
  python3 tests/bench/load.py --url http://127.0.0.1:8080   # a running daemon, one pass
"""

import argparse
import io
import os
import statistics
import sys
import threading
import time
import urllib.parse
import wave

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api"))
import wd_api  # noqa: E402


def long_audio(target_s):
    """jfk.wav and the cards recordings in turn, 0.5 s of silence between,
    until target_s seconds; 16 kHz mono s16 WAV bytes."""
    parts = [wd_api.JFK_WAV] + [os.path.join(wd_api.AUDIO, "cards", f"00{i}.wav")
                                for i in range(1, 6)]
    clips = []
    for p in parts:
        with wave.open(p, "rb") as w:
            assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, p
            clips.append(w.readframes(w.getnframes()))
    gap = bytes(2 * 8000)
    out, n, i = [], 0, 0
    while n < target_s * 16000:
        c = clips[i % len(clips)]
        out += [c, gap]
        n += (len(c) + len(gap)) // 2
        i += 1
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        pcm = b"".join(out)[:int(target_s * 16000) * 2]
        w.writeframes(pcm)
    return buf.getvalue(), len(pcm) / 32000


def occupancy_counters(port):
    """(decoder steps, rows summed over steps) from /metrics; None when the
    daemon does not export them."""
    m = wd_api.metrics(port)
    return m.get("whisperd_engine_steps_total"), m.get("whisperd_engine_step_rows_total")


def run_point(host, port, body, ctype, n, max_requests, max_seconds, timeout):
    """n clients; returns (latencies, errors, wall seconds)."""
    lat, errors = [], []
    lock = threading.Lock()
    started = [0]
    t0 = time.monotonic()
    need = max(max_requests, n)

    def client():
        while True:
            with lock:
                if started[0] >= need or (started[0] >= n and time.monotonic() - t0 >= max_seconds):
                    return
                started[0] += 1
            t = time.monotonic()
            try:
                r = wd_api.request(port, "POST", "/v1/audio/transcriptions", body,
                                   {"Content-Type": ctype}, timeout=timeout, host=host)
                ok = r.status == 200
                err = None if ok else f"{r.status}"
            except OSError as e:
                ok, err = False, type(e).__name__
            d = time.monotonic() - t
            with lock:
                (lat.append(d) if ok else errors.append(err))

    ts = [threading.Thread(target=client) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return lat, errors, time.monotonic() - t0


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def bench(label, host, port, files, ns, long_ns, args, rows_out):
    for fname, (data, dur) in files.items():
        body, ctype = wd_api.multipart(wd_api.audio_fields(path=None, data=data, filename=fname,
                                                           response_format="json"))
        for n in (long_ns if fname.startswith("long") else ns):
            s0, r0 = occupancy_counters(port)
            lat, errs, wall = run_point(host, port, body, ctype, n, args.requests, args.seconds,
                                        args.timeout)
            s1, r1 = occupancy_counters(port)
            occ = (r1 - r0) / (s1 - s0) if None not in (s0, s1, r0, r1) and s1 > s0 else float("nan")
            row = {
                "daemon": label, "file": f"{fname} ({dur:.0f} s)", "N": n, "ok": len(lat),
                "err": len(errs), "req/s": len(lat) / wall, "audio s/s": len(lat) * dur / wall,
                "p50 s": pct(lat, 0.5), "p95 s": pct(lat, 0.95), "occupancy": occ,
            }
            rows_out.append(row)
            print(fmt_row(row), flush=True)
            if errs:
                print(f"    errors: {sorted(set(errs))}", flush=True)


COLS = [("daemon", 16, "s"), ("file", 20, "s"), ("N", 3, "d"), ("ok", 4, "d"), ("err", 4, "d"),
        ("req/s", 7, ".3f"), ("audio s/s", 9, ".2f"), ("p50 s", 7, ".2f"), ("p95 s", 7, ".2f"),
        ("occupancy", 9, ".2f")]


def fmt_row(row):
    return "  ".join(format(row[c], f"<{w}{f}" if f == "s" else f">{w}{f}") for c, w, f in COLS)


def header():
    return "  ".join(format(c, f"<{w}" if f == "s" else f">{w}") for c, w, f in COLS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--url", help="measure a running daemon (loopback only) instead of starting two")
    ap.add_argument("--model", default=wd_api.TINY_EN)
    ap.add_argument("--whisperd", default=wd_api.WHISPERD)
    ap.add_argument("--ns", default="1,2,4,8,16", help="client counts for jfk.wav")
    ap.add_argument("--long-ns", default="1,2,4",
                    help="client counts for the long file (each client sends at least one)")
    ap.add_argument("--long-s", type=float, default=120, help="length of the long file (s); 0 = none")
    ap.add_argument("--requests", type=int, default=16,
                    help="requests per point (at least one per client)")
    ap.add_argument("--seconds", type=float, default=15,
                    help="no new request after this many seconds of a point (one per client always)")
    ap.add_argument("--timeout", type=float, default=900, help="one request's limit (s)")
    ap.add_argument("--batch", type=int, default=8, help="--max-batch of the batching daemon")
    ap.add_argument("--no-unbatched", action="store_true", help="skip the --max-batch 1 daemon")
    ap.add_argument("--extra", default="",
                    help="more daemon options, space-separated (e.g. '--mel-ahead off')")
    args = ap.parse_args()
    ns = [int(x) for x in args.ns.split(",") if x]
    long_ns = [int(x) for x in args.long_ns.split(",") if x] if args.long_s > 0 else []

    files = {"jfk.wav": (wd_api.read_file(wd_api.JFK_WAV), 11.0)}
    if args.long_s > 0:
        files["long.wav"] = long_audio(args.long_s)

    rows = []
    print(header(), flush=True)
    if args.url:
        u = urllib.parse.urlparse(args.url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            sys.exit("load.py: loopback addresses only")
        bench(u.netloc, u.hostname, u.port or 80, files, ns, long_ns, args, rows)
        return
    wd_api.WHISPERD = args.whisperd
    configs = [(f"max-batch {args.batch}", args.batch)]
    if not args.no_unbatched:
        configs.append(("max-batch 1", 1))
    top = max(ns + long_ns)
    for label, mb in configs:
        d = wd_api.Daemon(model=args.model, log_level="warning",
                          args=["--max-batch", str(mb), "--queue-max", str(max(64, 2 * top)),
                                "--timeout", str(int(args.timeout) + 60),
                                "--max-audio-s", str(int(max(args.long_s, 11) + 60))]
                          + args.extra.split())
        d.start()
        try:
            bench(label, "127.0.0.1", d.port, files, ns, long_ns, args, rows)
        finally:
            rc = d.stop()
            if rc != 0:
                print(f"whisperd ({label}) exited {rc}:\n{d.log_tail()}", file=sys.stderr)
    # Side by side: batching vs not, per file and N.
    if len(configs) == 2:
        print("\nbatched vs --max-batch 1 (req/s ratio, p50 ratio):")
        by = {(r["daemon"], r["file"], r["N"]): r for r in rows}
        for (lab, f, n), r in by.items():
            if lab != configs[0][0]:
                continue
            o = by.get((configs[1][0], f, n))
            if o and o["req/s"] > 0 and o["p50 s"] > 0:
                print(f"  {f:<20} N={n:<3} x{r['req/s'] / o['req/s']:.2f} req/s, "
                      f"p50 x{r['p50 s'] / o['p50 s']:.2f}")
    print(f"\nmedian p50 over all points: {statistics.median([r['p50 s'] for r in rows]):.2f} s")


if __name__ == "__main__":
    main()
