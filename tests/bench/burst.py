#!/usr/bin/env python3
"""Burst benchmark for whisperd serve (prints figures, passes or fails
nothing): N requests sent one after another against the same N sent at once.

The question it answers (issue #12's proof on the CPU engine): do N
concurrent requests all get their answer sooner than the same N sent
sequentially? With batching, the concurrent burst shares each decoder step
(every weight read once for all rows), so its last answer should come
before the sequential run ends; the encoder (one 30 s window per request)
is the part no batching shortens on a CPU, whose matrix products already run
at the cores' peak.

One daemon (started here on a free loopback port, the real binary and
model), one warm-up request, then --repeats rounds of: N sequential
requests (total time), N concurrent requests (time until the last answer).
Every answer's text must equal the warm-up's, so both runs do the same
work. Prints each round and the medians, and the ratio concurrent /
sequential (below 1: the burst is answered sooner).

With --whisper-server PATH (whisper.cpp's server, the same ggml model,
greedy: -bs 1 -bo 1, all online cores) the same concurrent burst also goes
to its /inference in every round, right after whisperd's, and the ratio of
the last answers (whisperd / whisper-server, median of the rounds) is
printed: issue #22's "8 concurrent jfk, last answer" figure.

Both servers get the same language. whisper-server's default is English
(it detects only when asked for "auto"), whisperd's is to detect, as
openai/whisper does: on a multilingual model detection is an encode of its
own (openai-exact), so the default here, --language en, sends "en" to
both; --language auto sends nothing to whisperd and "auto" to
whisper-server, so both detect. (On an English-only model the language
is English either way.)

  python3 tests/bench/burst.py                       # 8 x jfk.wav, tiny.en, --device cpu
  python3 tests/bench/burst.py --device vulkan -n 4  # the Vulkan engine
  python3 tests/bench/burst.py --compute-type int8 --whisper-server /tmp/wcpp/build-cpu/bin/whisper-server
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api"))
import wd_api  # noqa: E402


def one(port, data, fmt, lang):
    r = wd_api.post_audio(port, data=data, filename="audio.wav", response_format=fmt,
                          language=None if lang == "auto" else lang, timeout=600)
    if r.status != 200:
        raise SystemExit(f"burst: HTTP {r.status}: {r.body[:200]!r}")
    return r.body


def wcpp_one(port, data, lang):
    body, ctype = wd_api.multipart([("file", ("audio.wav", data, "audio/wav")),
                                    ("response_format", "json"), ("temperature", "0.0"),
                                    ("language", lang)])
    r = wd_api.request(port, "POST", "/inference", body, {"Content-Type": ctype}, timeout=600)
    if r.status != 200:
        raise SystemExit(f"burst: whisper-server HTTP {r.status}: {r.body[:200]!r}")
    return r.body


def start_wcpp(path, model):
    """whisper.cpp's server on a free loopback port, ready; (process, port)."""
    port = wd_api.free_port()
    p = subprocess.Popen([path, "-m", model, "-t", str(os.cpu_count()), "-bs", "1", "-bo", "1",
                          "--host", "127.0.0.1", "--port", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            if wd_api.request(port, "GET", "/", timeout=2).status == 200:
                return p, port
        except OSError:
            pass
        if p.poll() is not None:
            raise SystemExit(f"burst: {path} exited {p.returncode}")
        time.sleep(0.1)
    p.kill()
    raise SystemExit("burst: whisper-server did not start in 60 s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=8, help="requests per burst (default 8)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--model", default=wd_api.TINY_EN)
    ap.add_argument("--audio", default=wd_api.JFK_WAV)
    ap.add_argument("--device", default="cpu", help="--device of the daemon (default cpu)")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--compute-type", default="f32", help="--compute-type of the daemon")
    ap.add_argument("--whisper-server", help="whisper.cpp's whisper-server: the same burst there")
    ap.add_argument("--language", default="en",
                    help="sent to both servers (default en); auto: both detect it")
    a = ap.parse_args()
    data = wd_api.read_file(a.audio)
    d = wd_api.start_daemon(model=a.model, log_level="warning",
                            args=["--device", a.device, "--max-batch", str(a.max_batch),
                                  "--compute-type", a.compute_type])
    wc = start_wcpp(a.whisper_server, a.model) if a.whisper_server else None
    peer = []
    try:
        if wc:
            wcpp_one(wc[1], data, a.language)  # warm-up
        ref = one(d.port, data, "json", a.language)
        print(f"whisperd --device {a.device} --max-batch {a.max_batch} --compute-type {a.compute_type}, "
              f"{os.path.basename(a.model)}, {a.n} x {os.path.basename(a.audio)}, language {a.language}")
        print(f"text: {json.loads(ref)['text'][:80]}")
        seq, con = [], []
        for rnd in range(a.repeats):
            t0 = time.monotonic()
            outs = [one(d.port, data, "json", a.language) for _ in range(a.n)]
            seq.append(time.monotonic() - t0)
            t0 = time.monotonic()
            outs += wd_api.parallel(a.n, lambda i: one(d.port, data, "json", a.language))
            con.append(time.monotonic() - t0)
            same = sum(o == ref for o in outs)
            print(f"round {rnd + 1}: sequential {seq[-1]:.3f} s, concurrent {con[-1]:.3f} s "
                  f"(ratio {con[-1] / seq[-1]:.2f}), {same}/{len(outs)} answers identical")
            if same != len(outs):
                raise SystemExit("burst: an answer differs from the request alone")
            if wc:
                t0 = time.monotonic()
                wd_api.parallel(a.n, lambda i: wcpp_one(wc[1], data, a.language))
                peer.append(time.monotonic() - t0)
                print(f"  whisper-server: concurrent {peer[-1]:.3f} s (whisperd / whisper-server "
                      f"{con[-1] / peer[-1]:.3f})")
        ms, mc = statistics.median(seq), statistics.median(con)
        print(f"median: sequential {ms:.3f} s ({ms / a.n * 1e3:.0f} ms a request), "
              f"concurrent {mc:.3f} s; ratio {mc / ms:.2f} "
              f"({'sooner' if mc < ms else 'NOT sooner'} than one after another)")
        if peer:
            r = statistics.median(c / p for c, p in zip(con, peer))
            print(f"whisper-server: {a.n} concurrent, last answer {statistics.median(peer):.3f} s "
                  f"(median); whisperd / whisper-server {r:.3f} (median of paired rounds)")
    finally:
        if wc:
            wc[0].terminate()
            wc[0].wait()
        wd_api.stop_daemon(d)


if __name__ == "__main__":
    main()
