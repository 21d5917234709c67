#!/usr/bin/env python3
"""Soak run for whisperd serve (issue #13): a script, not a test. Loopback
only, bounded in count (--requests) and in time (--seconds).

One daemon (the real build/daemon/whisperd and model, started here on a free
127.0.0.1 port), then:

 1. references: every distinct request of the mix (file x format x options,
    and every malformed upload) is sent once, alone; its answer (status and
    parsed body) is the reference.
 2. warm-up: the first --warmup requests of the schedule, 16 clients; then,
    idle, the daemon's RSS and open fds are noted.
 3. soak: the rest of the schedule, --clients threads. The schedule mixes
    transcriptions (short files: jfk.wav and cards/*.wav; a ~2-minute file
    made from the same speech) in every response format, stream=true (SSE)
    and word timestamps; translations (a clean 400 on an English-only
    model); malformed or non-audio uploads; clients that disconnect
    mid-upload or mid-job; /health, /ready, /metrics, /v1/models. Every
    answer must equal its reference exactly (parsed JSON, SSE events or
    text); 429 is allowed (OpenAI-shaped); anything else is a failure. A
    request unanswered after --hang-s seconds is a hang.
 4. the end, idle: RSS within 5% of the warm-up figure, fds not above it,
    /metrics queue depth and running jobs 0.
 5. abuse (--no-abuse skips it): slow-loris connections trickling headers
    while normal requests are served; the same up to the connection cap
    (can trickling clients exhaust it?); a slow reader; a 2 GB upload
    (Content-Length and chunked) refused early without RSS growth; a WAV
    header claiming 10 hours; a real 10-hour FLAC (silence, ~1.5 MB)
    against the audio-length cap, with the RSS it costs.

Prints counts per kind and outcome, p50/p95/max latency per kind, RSS and
fd figures, each check PASS or FAIL, and an overall PASS/FAIL line; exits 1
on FAIL. --plot FILE writes a PNG of RSS and latency over the run when
matplotlib is importable.

  python3 tests/bench/soak.py                                  # 10,000 requests (~30+ min)
  python3 tests/bench/soak.py --requests 500 --min-transcriptions 50   # a quick pass
  python3 tests/bench/soak.py --model models/ggml-base.bin     # real translations
"""

import argparse
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
import wave
import io

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "api"))
sys.path.insert(0, HERE)
import wd_api  # noqa: E402
from load import long_audio, pct  # noqa: E402  (pct is re-exported to scaleout.py)

TRANSCRIBE = "/v1/audio/transcriptions"
TRANSLATE = "/v1/audio/translations"
FORMATS = ["json", "text", "srt", "verbose_json", "vtt"]

# --- the daemon's process ----------------------------------------------------


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1])
    except OSError:
        pass
    return None


class PeakRss:
    """Samples a process's RSS every 50 ms on a thread until stop(), which
    returns the peak's growth over the first sample, in MiB."""

    def __init__(self, pid):
        self.pid = pid
        self.r0 = rss_kb(pid) or 0
        self.peak = self.r0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._watch, daemon=True)
        self._t.start()

    def _watch(self):
        while not self._stop.wait(0.05):
            v = rss_kb(self.pid)
            if v:
                self.peak = max(self.peak, v)

    def stop(self):
        self._stop.set()
        self._t.join(2)
        return (self.peak - self.r0) / 1024


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class Sampler:
    """RSS (KiB) and open fds of pid every `period` seconds, with the phase
    name: samples = [(t, rss_kb, fds, phase)]."""

    def __init__(self, pid, t0, period=1.0):
        self.pid, self.t0, self.period = pid, t0, period
        self.samples = []
        self.phase = "start"
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_ev.is_set():
            self.samples.append((time.monotonic() - self.t0, rss_kb(self.pid), fd_count(self.pid),
                                 self.phase))
            self.stop_ev.wait(self.period)

    def stop(self):
        self.stop_ev.set()
        self.thread.join(5)


# --- answers -----------------------------------------------------------------


def normalize(r):
    """(status, media type, payload) of a Response: parsed JSON for JSON,
    the SSE events for a stream, text otherwise."""
    ctype = r.content_type.split(";")[0].strip()
    if ctype == "application/json":
        try:
            payload = json.loads(r.body)
        except ValueError:
            payload = ("unparsable json", r.text)
    elif ctype == "text/event-stream":
        try:
            payload = wd_api.sse_events(r.body)
        except ValueError:
            payload = ("unparsable sse", r.text)
    else:
        payload = r.text
    return (r.status, ctype, payload)


def openai_error(r):
    """None when r is an OpenAI-shaped 4xx error, else why not."""
    try:
        wd_api.check_error(r, r.status, any_param=True)
    except (AssertionError, ValueError, KeyError) as e:
        return f"not an OpenAI error: {e}"[:300]
    if not 400 <= r.status < 500:
        return f"status {r.status}"
    return None


# --- request variants ----------------------------------------------------------


class Variant:
    """One distinct request. how: "http" (method, path, body, headers),
    "cut_upload" (the whole request's bytes, sent in part), "cut_job" (sent
    whole, then the socket closed before the answer). kind: the group it
    is counted in."""

    def __init__(self, name, kind, method, path, body=None, headers=None, how="http",
                 transcription=False, compare=True):
        self.name, self.kind, self.method, self.path = name, kind, method, path
        self.body, self.headers, self.how = body, headers or {}, how
        self.transcription = transcription    # a full transcription when answered 200
        self.compare = compare                # the answer must equal the reference
        self.ref = None


def post_variant(name, kind, path, fields, **kw):
    body, ctype = wd_api.multipart(fields)
    return Variant(name, kind, "POST", path, body, {"Content-Type": ctype}, **kw)


def wav_header_claiming(seconds, data_s=1.0):
    """A WAV (16 kHz s16 mono) whose header declares `seconds` of audio but
    which carries data_s seconds of jfk.wav's samples."""
    with wave.open(wd_api.JFK_WAV, "rb") as w:
        pcm = w.readframes(int(16000 * data_s))
    n = int(seconds * 16000) * 2
    n = min(n, 0xFFFFFFFF - 36)
    return (b"RIFF" + (36 + n).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
            + (1).to_bytes(2, "little") + (1).to_bytes(2, "little")
            + (16000).to_bytes(4, "little") + (32000).to_bytes(4, "little")
            + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
            + b"data" + n.to_bytes(4, "little") + pcm)


def _crc_table(poly, width):
    top, mask = 1 << (width - 1), (1 << width) - 1
    table = []
    for b in range(256):
        c = b << (width - 8)
        for _ in range(8):
            c = ((c << 1) ^ poly) if c & top else (c << 1)
        table.append(c & mask)
    return table


_CRC8, _CRC16 = _crc_table(0x07, 8), _crc_table(0x8005, 16)


def _crc8(data):
    c = 0
    for b in data:
        c = _CRC8[c ^ b]
    return c


def _crc16(data):
    c = 0
    for b in data:
        c = ((c << 8) & 0xFFFF) ^ _CRC16[(c >> 8) ^ b]
    return c


def _utf8_num(n):
    """FLAC's frame number coding (UTF-8's scheme, up to 31 bits here)."""
    if n < 0x80:
        return bytes([n])
    for nbytes, lead in ((2, 0xC0), (3, 0xE0), (4, 0xF0), (5, 0xF8), (6, 0xFC)):
        if n < 1 << (5 * nbytes + 1) or nbytes == 6:
            out = []
            for _ in range(nbytes - 1):
                out.append(0x80 | (n & 0x3F))
                n >>= 6
            return bytes([lead | n] + out[::-1])
    raise ValueError(n)


def flac_silence(seconds):
    """A valid FLAC file (16 kHz, 16-bit mono) of `seconds` of silence:
    4096-sample frames each one CONSTANT subframe, ~12 bytes a frame, so
    10 hours take ~1.6 MB. Every frame carries its CRC-8 and CRC-16."""
    total = int(seconds * 16000)
    block = 4096
    si = 4096
    for v, bits in ((4096, 16), (0, 24), (0, 24), (16000, 20), (0, 3), (15, 5), (total, 36)):
        si = (si << bits) | v
    streaminfo = si.to_bytes(18, "big") + bytes(16)
    out = [b"fLaC", bytes([0x80, 0, 0, 34]), streaminfo]
    for i in range((total + block - 1) // block):
        n = min(block, total - i * block)
        if n == block:
            head = bytes([0xFF, 0xF8, 0xC5, 0x08]) + _utf8_num(i)
        else:   # a short last frame: block size in 16 bits after the number
            head = bytes([0xFF, 0xF8, 0x75, 0x08]) + _utf8_num(i) + (n - 1).to_bytes(2, "big")
        head += bytes([_crc8(head)])
        frame = head + b"\x00\x00\x00"           # CONSTANT subframe, value 0
        out.append(frame + _crc16(frame).to_bytes(2, "big"))
    return b"".join(out)


def build_variants(long_s, seed):
    """The catalogue: {kind: [Variant]}."""
    rnd = random.Random(seed)
    jfk = wd_api.read_file(wd_api.JFK_WAV)
    shorts = [("jfk.wav", jfk)] + [
        (f"card{i}.wav", wd_api.read_file(os.path.join(wd_api.AUDIO, "cards", f"00{i}.wav")))
        for i in range(1, 6)]
    long_data, long_dur = long_audio(long_s)
    v = {k: [] for k in ("short", "long", "translate", "malformed", "cut_upload", "cut_job",
                         "health", "ready", "metrics", "models")}

    def opts_list(fname):
        out = [(f"{fmt}", [("response_format", fmt)]) for fmt in FORMATS]
        out.append(("stream", [("stream", "true")]))
        out.append(("words", [("response_format", "verbose_json"),
                              ("timestamp_granularities[]", "word")]))
        return out

    for fname, data in shorts:
        for oname, extra in opts_list(fname):
            v["short"].append(post_variant(f"{fname}/{oname}", "short", TRANSCRIBE,
                                           [("model", "whisper-1")] + extra
                                           + [("file", (fname, data, "audio/wav"))],
                                           transcription=True))
    for oname, extra in [("json", [("response_format", "json")]),
                         ("srt", [("response_format", "srt")]),
                         ("stream", [("stream", "true")]),
                         ("words", [("response_format", "verbose_json"),
                                    ("timestamp_granularities[]", "word")])]:
        v["long"].append(post_variant(f"long{long_dur:.0f}s/{oname}", "long", TRANSCRIBE,
                                      [("model", "whisper-1")] + extra
                                      + [("file", ("long.wav", long_data, "audio/wav"))],
                                      transcription=True))
    for fname, data in shorts[:2]:
        for fmt in ("json", "text", "verbose_json"):
            v["translate"].append(post_variant(f"{fname}/{fmt}", "translate", TRANSLATE,
                                               [("model", "whisper-1"), ("response_format", fmt),
                                                ("file", (fname, data, "audio/wav"))],
                                               transcription=True))
    noise = bytes(rnd.getrandbits(8) for _ in range(40000))
    mal = [
        ("random-bytes", [("model", "whisper-1"), ("file", ("noise.wav", noise, "audio/wav"))]),
        ("text-file", [("model", "whisper-1"),
                       ("file", ("notes.mp3", b"not audio at all\n" * 500, "audio/mpeg"))]),
        ("truncated-wav-header", [("model", "whisper-1"), ("file", ("cut.wav", jfk[:30], "audio/wav"))]),
        ("wav-no-samples", [("model", "whisper-1"), ("file", ("empty.wav", jfk[:44], "audio/wav"))]),
        ("empty-file", [("model", "whisper-1"), ("file", ("empty.wav", b"", "audio/wav"))]),
        ("wrong-field-name", [("model", "whisper-1"), ("audio", ("jfk.wav", jfk, "audio/wav"))]),
        ("missing-file", [("model", "whisper-1"), ("response_format", "json")]),
        ("missing-model", [("file", ("jfk.wav", jfk, "audio/wav"))]),
        ("bad-response-format", [("model", "whisper-1"), ("response_format", "xml"),
                                 ("file", ("jfk.wav", jfk, "audio/wav"))]),
        ("bad-temperature", [("model", "whisper-1"), ("temperature", "hot"),
                             ("file", ("jfk.wav", jfk, "audio/wav"))]),
        ("words-without-verbose", [("model", "whisper-1"), ("timestamp_granularities[]", "word"),
                                   ("file", ("jfk.wav", jfk, "audio/wav"))]),
        ("unknown-model", [("model", "whisper-9"), ("file", ("jfk.wav", jfk, "audio/wav"))]),
    ]
    for name, fields in mal:
        v["malformed"].append(post_variant(name, "malformed", TRANSCRIBE, fields))
    body, ctype = wd_api.multipart([("model", "whisper-1"), ("file", ("jfk.wav", jfk, "audio/wav"))])
    v["malformed"].append(Variant("json-body", "malformed", "POST", TRANSCRIBE,
                                  b'{"model":"whisper-1"}', {"Content-Type": "application/json"}))
    v["malformed"].append(Variant("cut-multipart", "malformed", "POST", TRANSCRIBE,
                                  body[:len(body) // 2], {"Content-Type": ctype}))
    v["malformed"].append(Variant("no-boundary", "malformed", "POST", TRANSCRIBE, body,
                                  {"Content-Type": "multipart/form-data"}))
    for fname, data in (shorts[0], ("long.wav", long_data)):
        body, ctype = wd_api.multipart([("model", "whisper-1"), ("response_format", "json"),
                                        ("file", (fname, data, "audio/wav"))])
        raw = (f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ctype}\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        v["cut_upload"].append(Variant(f"{fname}", "cut_upload", "POST", TRANSCRIBE, raw,
                                       how="cut_upload", compare=False))
        v["cut_job"].append(Variant(f"{fname}", "cut_job", "POST", TRANSCRIBE, raw,
                                    how="cut_job", compare=False))
    v["health"].append(Variant("health", "health", "GET", "/health"))
    v["ready"].append(Variant("ready", "ready", "GET", "/ready"))
    v["metrics"].append(Variant("metrics", "metrics", "GET", "/metrics", compare=False))
    v["models"].append(Variant("models", "models", "GET", "/v1/models"))
    return v, long_dur


# Shares of the schedule per kind (the rest of 1.0 goes to the four GETs).
DEFAULT_MIX = {"short": 0.155, "long": 0.005, "translate": 0.02, "malformed": 0.05,
               "cut_upload": 0.025, "cut_job": 0.025}


def schedule(variants, n, mix, min_trans, seed):
    """n variants in a shuffled order with the mix's shares; at least
    min_trans short+long transcriptions (when n allows)."""
    rnd = random.Random(seed)
    counts = {k: int(round(n * s)) for k, s in mix.items()}
    full = counts["short"] + counts["long"]
    if full < min_trans:
        counts["short"] += min(min_trans, n) - full
    rest = max(0, n - sum(counts.values()))
    for i, k in enumerate(("health", "ready", "metrics", "models")):
        counts[k] = rest // 4 + (1 if i < rest % 4 else 0)
    out = []
    for k, c in counts.items():
        out += [variants[k][i % len(variants[k])] for i in range(c)]
    rnd.shuffle(out)
    return out[:n]


# --- one request ---------------------------------------------------------------


class Result:
    __slots__ = ("variant", "t0", "t1", "status", "outcome", "detail")

    def __init__(self, variant, t0, t1, status, outcome, detail=""):
        self.variant, self.t0, self.t1 = variant, t0, t1
        self.status, self.outcome, self.detail = status, outcome, detail


def raw_cut(port, var, rnd, timeout):
    """Sends part of the request (cut_upload) or all of it (cut_job), then
    closes the socket without reading an answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        if var.how == "cut_upload":
            head = var.body.index(b"\r\n\r\n") + 4
            n = head + int((len(var.body) - head) * rnd.uniform(0.05, 0.9))
            s.sendall(var.body[:n])
            time.sleep(rnd.uniform(0.0, 0.3))
        else:
            s.sendall(var.body)
            time.sleep(rnd.uniform(0.05, 1.5))   # the job is queued or running
    finally:
        s.close()


def do_request(port, var, rnd, hang_s, t0):
    ts = time.monotonic()
    try:
        if var.how != "http":
            raw_cut(port, var, rnd, hang_s)
            return Result(var, ts - t0, time.monotonic() - t0, None, "disconnected")
        r = wd_api.request(port, var.method, var.path, var.body, var.headers, timeout=hang_s)
    except socket.timeout:
        return Result(var, ts - t0, time.monotonic() - t0, None, "hang",
                      f"no answer in {hang_s} s")
    except OSError as e:
        return Result(var, ts - t0, time.monotonic() - t0, None, "conn_error",
                      f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - http.client's own errors, reported
        return Result(var, ts - t0, time.monotonic() - t0, None, "conn_error",
                      f"{type(e).__name__}: {e}")
    t1 = time.monotonic() - t0
    if r.status == 429:
        why = openai_error(r)
        return Result(var, ts - t0, t1, 429, "bad_error" if why else "429", why or "")
    got = normalize(r)
    if var.ref is None or not var.compare:
        if r.status == 200:
            if var.kind == "metrics" and "whisperd_queue_depth" not in r.text:
                return Result(var, ts - t0, t1, 200, "wrong", "no whisperd_queue_depth")
            return Result(var, ts - t0, t1, 200, "ok")
        why = openai_error(r)
        return Result(var, ts - t0, t1, r.status, "bad_error" if why else "error_ok", why or "")
    if r.status >= 400:
        why = openai_error(r)
        if why:
            return Result(var, ts - t0, t1, r.status, "bad_error", why)
    if got != var.ref:
        return Result(var, ts - t0, t1, r.status, "wrong",
                      f"want {str(var.ref)[:200]} got {str(got)[:200]}")
    return Result(var, ts - t0, t1, r.status, "ok" if r.status < 400 else "error_ok")


def run_clients(port, sched, clients, hang_s, deadline, t0, seed, results, progress=None):
    """Runs sched on `clients` threads until done or deadline (monotonic);
    appends Results; returns how many were started."""
    lock = threading.Lock()
    nxt = [0]

    def client(i):
        rnd = random.Random(seed * 1000 + i)
        while True:
            with lock:
                if nxt[0] >= len(sched) or time.monotonic() >= deadline:
                    return
                var = sched[nxt[0]]
                nxt[0] += 1
            res = do_request(port, var, rnd, hang_s, t0)
            with lock:
                results.append(res)
                if progress:
                    progress(len(results))

    ts = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return nxt[0]


# --- figures ---------------------------------------------------------------------


def report_results(results):
    kinds = sorted({r.variant.kind for r in results})
    print(f"\n{'kind':<11} {'n':>6} {'outcomes':<44} {'p50 s':>7} {'p95 s':>7} {'max s':>7}")
    for k in kinds:
        rs = [r for r in results if r.variant.kind == k]
        oc = {}
        for r in rs:
            key = f"{r.outcome}" + (f":{r.status}" if r.status is not None else "")
            oc[key] = oc.get(key, 0) + 1
        lat = [r.t1 - r.t0 for r in rs if r.outcome not in ("hang",)]
        ocs = " ".join(f"{a}={b}" for a, b in sorted(oc.items()))
        print(f"{k:<11} {len(rs):>6} {ocs:<44} {pct(lat, .5):>7.2f} {pct(lat, .95):>7.2f} "
              f"{max(lat) if lat else float('nan'):>7.2f}")


def wait_idle(port, timeout):
    """Waits for queue depth and running jobs 0; returns (queued, running)."""
    deadline = time.monotonic() + timeout
    q = run = None
    while time.monotonic() < deadline:
        c = wd_api.job_counts(port)
        q, run = c["queued"], c["running"]
        if q == 0 and run == 0:
            break
        time.sleep(0.5)
    return q, run


def settle_fds(pid, limit, timeout=10.0):
    """The fd count once it is at most `limit` (closing sockets take a
    moment), or the last count after timeout."""
    deadline = time.monotonic() + timeout
    n = fd_count(pid)
    while n is not None and n > limit and time.monotonic() < deadline:
        time.sleep(0.25)
        n = fd_count(pid)
    return n


def plot(path, sampler, results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"soak: matplotlib is not importable; no plot written to {path}")
        return
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    s = [x for x in sampler.samples if x[1] is not None]
    a1.plot([x[0] for x in s], [x[1] / 1024 for x in s], lw=1)
    a1.set_ylabel("whisperd RSS (MiB)")
    a1b = a1.twinx()
    a1b.plot([x[0] for x in s], [x[2] for x in s], lw=1, color="tab:gray")
    a1b.set_ylabel("open fds")
    for k in sorted({r.variant.kind for r in results}):
        rs = [r for r in results if r.variant.kind == k and r.outcome != "hang"]
        a2.scatter([r.t1 for r in rs], [r.t1 - r.t0 for r in rs], s=3, label=k)
    a2.set_yscale("log")
    a2.set_ylabel("latency (s)")
    a2.set_xlabel("seconds since start")
    a2.legend(markerscale=4, fontsize=7, ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"soak: plot written to {path}")


# --- abuse -------------------------------------------------------------------------


class Loris:
    """n connections that send a request line and then header bytes, one
    byte per connection every `gap` seconds, from one thread."""

    def __init__(self, port, n, gap):
        self.socks, self.dropped, self.refused = [], 0, 0
        for _ in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode())
                self.socks.append(s)
            except OSError:
                self.refused += 1
        self.gap = gap
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_ev.wait(self.gap):
            for s in list(self.socks):
                try:
                    s.send(b"a")
                except OSError:
                    self.dropped += 1
                    self.socks.remove(s)
                    s.close()

    def open_count(self):
        return len(self.socks)

    def close(self):
        self.stop_ev.set()
        self.thread.join(self.gap + 5)
        for s in self.socks:
            s.close()


def normal_ok(port, ref_vars, hang_s):
    """One of each ref_vars, sent now; [(name, outcome, latency)]."""
    out = []
    for v in ref_vars:
        t = time.monotonic()
        r = do_request(port, v, random.Random(0), hang_s, t)
        out.append((v.name, r.outcome, r.t1 - r.t0))
    return out


def abuse(d, variants, args, checks, sampler):
    port, pid = d.port, d.pid
    jfk_json = next(v for v in variants["short"] if v.name == "jfk.wav/json")
    health = variants["health"][0]
    probe = [health, jfk_json]

    # 1. Slow-loris under the cap: others still served.
    sampler.phase = "abuse"
    n = args.loris
    lo = Loris(port, n, 1.0)
    time.sleep(2)
    res = normal_ok(port, probe * 2, 120)
    time.sleep(3)
    ok = all(o == "ok" for _, o, _ in res)
    checks.append((ok, f"slow-loris: {n} trickling connections ({lo.open_count()} still open), "
                       f"normal requests served: {res}"))
    lo.close()

    # 2. Slow-loris up to the connection cap: is anyone served once the
    # header timeout (--header-timeout, 15 s) has passed? (Each byte restarts
    # MHD's idle timer, so only the header deadline ends them.)
    cap = args.max_connections
    lo = Loris(port, cap, 2.0)
    time.sleep(1)
    served = []
    t_end = time.monotonic() + args.idle_timeout + 15
    while time.monotonic() < t_end:
        t = time.monotonic()
        try:
            r = wd_api.request(port, "GET", "/health", timeout=5)
            served.append((round(t - (t_end - args.idle_timeout - 15), 1), r.status))
            if r.status == 200:
                break
        except Exception as e:  # noqa: BLE001
            served.append((round(t - (t_end - args.idle_timeout - 15), 1), type(e).__name__))
        time.sleep(2)
    ok = any(s == 200 for _, s in served)
    checks.append((ok, f"slow-loris at the cap ({cap} connections trickling headers, "
                       f"{lo.open_count()} still open after {args.idle_timeout + 15} s "
                       f"or the first answer): /health answered: "
                       f"{'yes' if ok else 'never'} {served[-4:]}"))
    lo.close()
    time.sleep(1)

    # 3. A slow reader of a long answer (small receive buffer, 1 byte per
    # 0.2 s) while others are served.
    words_long = next(v for v in variants["long"] if v.name.endswith("/words"))
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.connect(("127.0.0.1", port))
    raw = (f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           + "".join(f"{k}: {v}\r\n" for k, v in words_long.headers.items())
           + f"Content-Length: {len(words_long.body)}\r\n\r\n").encode() + words_long.body
    s.sendall(raw)
    got = b""
    s.settimeout(args.hang_s)
    got += s.recv(1)                           # the answer has begun: the job is done
    s.settimeout(5)
    reader_stop = threading.Event()

    def trickle():
        nonlocal got
        while not reader_stop.is_set():
            try:
                b = s.recv(1)
            except OSError:
                return
            if not b:
                return
            got += b
            time.sleep(0.2)

    th = threading.Thread(target=trickle, daemon=True)
    th.start()
    res = normal_ok(port, probe * 2, 120)
    reader_stop.set()
    th.join(10)
    s.close()
    ok = all(o == "ok" for _, o, _ in res)
    checks.append((ok, f"slow reader ({len(got)} bytes of a {words_long.name} answer read "
                       f"slowly), normal requests served: {res}"))

    # 4. A 2 GB upload: refused early, no buffering.
    for mode in ("content-length", "chunked"):
        _, ctype = wd_api.multipart([("model", "whisper-1")])
        size = 2 << 30
        extra = (f"Content-Length: {size}\r\n" if mode == "content-length"
                 else "Transfer-Encoding: chunked\r\n")
        head = (f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ctype}\r\n"
                f"{extra}\r\n").encode()
        chunk = os.urandom(1 << 16)
        if mode == "chunked":
            chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)
        limit = args.big_send_mb << 4                       # 64 KiB chunks
        peak = PeakRss(pid)
        t = time.monotonic()
        try:
            r, sent, broke = wd_api.send_streaming(port, head, (chunk for _ in range(limit)),
                                                   timeout=10)
        except OSError as e:
            r, sent, broke = None, -1, f"{type(e).__name__}"
        dt = time.monotonic() - t
        grow = peak.stop()
        why = openai_error(r) if r is not None else "no answer"
        # A chunked body has no length to refuse up front: the daemon answers
        # 413 as soon as it crosses --max-body-mb, in the middle of the body.
        ok = r is not None and r.status == 413 and why is None
        # Up to the cap a chunked body is kept (it may yet be a valid upload):
        # its RSS may grow by the cap (25 MiB), never by the 2 GB.
        ok = ok and grow < args.big_rss_mb + (25 if mode == "chunked" else 0)
        checks.append((ok, f"2 GB upload ({mode}): {r.status if r else None} after "
                           f"{sent / 1e6:.1f} MB sent in {dt:.2f} s, RSS peak +{grow:.1f} MiB"
                           f"{'' if why is None else ', ' + why}"))

    # 5. Ten hours: a WAV header that claims it (1 s of data), and a real
    # 10-hour FLAC of silence against the audio-length cap.
    tenh = [("WAV header claiming 10 h", wav_header_claiming(36000)),
            ("10 h FLAC of silence", flac_silence(36000))]
    for name, data in tenh:
        peak = PeakRss(pid)
        t = time.monotonic()
        try:
            r = wd_api.post_audio(port, path=None, data=data, filename="ten-hours.audio",
                                  timeout=args.hang_s)
        except OSError as e:
            r = None
            err = f"{type(e).__name__}: {e}"
        dt = time.monotonic() - t
        grow = peak.stop()
        why = openai_error(r) if r is not None else err
        msg = ""
        if r is not None and r.status >= 400 and why is None:
            msg = r.json()["error"]["message"][:90]
        if name.startswith("WAV"):
            # The header lies: the file holds 1 s. Transcribing that second
            # (libsndfile trusts the data chunk it finds) or refusing it
            # (OpenAI-shaped 400) are both sound; it must stay cheap.
            ok = r is not None and (r.status == 200 or (r.status == 400 and why is None)) \
                and grow < args.big_rss_mb
            if r is not None and r.status == 200:
                msg = f"transcribed the 1 s present: {r.text[:60]!r}"
                why = None
        else:
            ok = r is not None and r.status == 400 and why is None and grow < args.big_rss_mb
        checks.append((ok, f"{name} ({len(data) / 1e6:.2f} MB upload): "
                           f"{r.status if r else None} in {dt:.2f} s, RSS peak +{grow:.1f} MiB"
                           f" ({msg or why})"))


# --- main ----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=10000, help="requests in all (default 10000)")
    ap.add_argument("--seconds", type=float, default=1800,
                    help="stop starting requests after this long (default 1800)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--min-transcriptions", type=int, default=1000,
                    help="full transcriptions the run must contain (default 1000)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="warm-up requests before the RSS/fd baseline (default 5%% of --requests)")
    ap.add_argument("--warmup-long", type=int, default=16,
                    help="long-file requests sent at once at the start of the warm-up "
                         "(extra to --requests; default 16)")
    ap.add_argument("--mix", default="",
                    help="shares per kind, e.g. short=0.2,long=0.01,malformed=0.05 "
                         f"(default {','.join(f'{k}={v}' for k, v in DEFAULT_MIX.items())}; "
                         "the rest: health, ready, metrics, models)")
    ap.add_argument("--model", default=wd_api.TINY_EN)
    ap.add_argument("--long-s", type=float, default=120, help="the long file's length (s)")
    ap.add_argument("--hang-s", type=float, default=600,
                    help="a request unanswered this long is a hang (default 600)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--max-connections", type=int, default=64,
                    help="the daemon's --max-connections (default 64)")
    ap.add_argument("--idle-timeout", type=int, default=30,
                    help="the daemon's --idle-timeout (default 30, its own default)")
    ap.add_argument("--daemon-arg", action="append", default=[],
                    help="one more argument for whisperd serve (repeatable)")
    ap.add_argument("--no-abuse", action="store_true", help="skip the abuse phase")
    ap.add_argument("--abuse-only", action="store_true",
                    help="references for jfk.wav and /health, then only the abuse phase")
    ap.add_argument("--loris", type=int, default=24,
                    help="slow-loris connections in the under-the-cap check (default 24)")
    ap.add_argument("--big-send-mb", type=int, default=160,
                    help="at most this much of the 2 GB upload is sent (default 160: over "
                         "well past the daemon's 25 MiB body cap)")
    ap.add_argument("--big-rss-mb", type=float, default=8,
                    help="RSS growth allowed for the 2 GB upload and the 10-hour file (MiB)")
    ap.add_argument("--rss-tolerance", type=float, default=0.05)
    ap.add_argument("--plot", metavar="FILE", help="write a PNG of RSS and latency over the run")
    args = ap.parse_args()

    mix = dict(DEFAULT_MIX)
    for item in filter(None, args.mix.split(",")):
        k, _, val = item.partition("=")
        if k not in mix:
            ap.error(f"--mix: unknown kind {k!r} (known: {', '.join(mix)})")
        mix[k] = float(val)
    if sum(mix.values()) > 1.0:
        ap.error("--mix: shares add up to more than 1")
    warm_n = args.warmup or max(args.clients * 4, args.requests // 20)
    warm_n = min(warm_n, args.requests // 2)

    t_begin = time.monotonic()
    print(f"soak: building the request catalogue (long file {args.long_s:.0f} s, "
          f"10-hour FLAC for the abuse phase)", flush=True)
    variants, long_dur = build_variants(args.long_s, args.seed)
    sched = schedule(variants, args.requests, mix, args.min_transcriptions, args.seed)
    if args.abuse_only:
        sched = []
    d = wd_api.Daemon(model=args.model, log_level="warning",
                      args=["--max-connections", str(args.max_connections),
                            "--idle-timeout", str(args.idle_timeout),
                            "--queue-max", str(max(64, 4 * args.clients)),
                            "--timeout", str(int(args.hang_s) + 60)] + args.daemon_arg)
    d.start()
    pid, port = d.pid, d.port
    print(f"soak: whisperd pid {pid} on 127.0.0.1:{port}, model {os.path.basename(args.model)}, "
          f"{args.clients} clients, {len(sched)} requests scheduled "
          f"({sum(v.transcription and v.kind in ('short', 'long') for v in sched)} full "
          f"transcriptions), at most {args.seconds:.0f} s", flush=True)
    t0 = time.monotonic()
    sampler = Sampler(pid, t0)
    checks = []          # (ok, line)
    results = []
    try:
        # 1. References, each alone.
        sampler.phase = "references"
        all_vars = [x for k in variants.values() for x in k]
        t = time.monotonic()
        for v in all_vars:
            if v.how != "http" or not v.compare:
                continue
            if args.abuse_only and v.name not in ("jfk.wav/json", "health"):
                continue
            r = wd_api.request(port, v.method, v.path, v.body, v.headers, timeout=args.hang_s)
            v.ref = normalize(r)
            if r.status >= 400 and openai_error(r):
                checks.append((False, f"reference {v.kind}/{v.name}: {openai_error(r)}"))
            if v.kind in ("short", "long") and r.status != 200:
                checks.append((False, f"reference {v.kind}/{v.name}: HTTP {r.status} {r.body[:200]!r}"))
        jref = next(v for v in variants["short"] if v.name == "jfk.wav/json").ref
        checks.append((jref[0] == 200 and jref[2].get("text") == wd_api.JFK_TEXT
                       if args.model == wd_api.TINY_EN else jref[0] == 200,
                       f"reference jfk.wav/json: {str(jref)[:120]}"))
        print(f"soak: {sum(v.ref is not None for v in all_vars)} references in "
              f"{time.monotonic() - t:.1f} s", flush=True)

        deadline = t0 + args.seconds
        last = [time.monotonic()]

        def progress(n):
            if time.monotonic() - last[0] >= 30:
                last[0] = time.monotonic()
                bad = sum(r.outcome in ("wrong", "hang", "bad_error", "conn_error")
                          for r in results)
                print(f"  {time.monotonic() - t0:7.0f} s  {n} done, {bad} failures, "
                      f"RSS {rss_kb(pid) / 1024:.0f} MiB, {fd_count(pid)} fds", flush=True)

        # 2. Warm-up, then the baseline once idle.
        # The long jobs first, all at once, so that the allocator's high
        # water (concurrent 2-minute jobs, their word timings) is reached
        # before the baseline is taken.
        sampler.phase = "warm-up"
        warm = ([variants["long"][i % len(variants["long"])] for i in range(args.warmup_long)]
                if sched else []) + sched[:warm_n]
        started = run_clients(port, warm, args.clients, args.hang_s, deadline, t0,
                              args.seed, results, progress)
        extra = len(warm) - len(sched[:warm_n])
        started -= extra
        wait_idle(port, 120)
        time.sleep(2)
        rss_warm, fd_warm = rss_kb(pid), settle_fds(pid, 0, 3)
        t_warm = time.monotonic() - t0
        print(f"soak: warm-up ({started} requests and {extra} long ones) done at {t_warm:.0f} s: RSS "
              f"{rss_warm / 1024:.1f} MiB, {fd_warm} fds", flush=True)

        # 3. The soak.
        sampler.phase = "soak"
        started += run_clients(port, sched[warm_n:], args.clients, args.hang_s, deadline, t0,
                               args.seed + 1, results, progress)
        t_soak = time.monotonic() - t0

        # 4. The end, idle.
        sampler.phase = "end"
        q, run = wait_idle(port, 120)
        time.sleep(2)
        rss_end = rss_kb(pid)
        fd_end = settle_fds(pid, fd_warm)
        m = wd_api.job_counts(port)
        q, run = m["queued"], m["running"]
        peak = max((s[1] for s in sampler.samples if s[3] == "soak" and s[1]), default=0)

        report_results(results)
        n_full = sum(1 for r in results if r.variant.kind in ("short", "long")
                     and r.outcome == "ok" and r.status == 200)
        bad = [r for r in results if r.outcome in ("wrong", "hang", "bad_error", "conn_error")]
        by = {}
        for r in bad:
            by.setdefault(r.outcome, []).append(r)
        print(f"\nsoak: {len(results)} requests of {len(sched) + extra} scheduled in {t_soak:.0f} s "
              f"(references and warm-up included), {n_full} full transcriptions answered "
              f"and identical to their references")
        for k, rs in by.items():
            print(f"  {k}: {len(rs)}")
            for r in rs[:5]:
                print(f"    {r.variant.kind}/{r.variant.name} at {r.t0:.1f} s: {r.status} {r.detail}")
        if len(results) < len(sched) + extra:
            print(f"soak: the time bound (--seconds {args.seconds:.0f}) stopped the run after "
                  f"{len(results)} of {len(sched) + extra} requests")
        checks.append((n_full >= min(args.min_transcriptions, args.requests + args.warmup_long),
                       f"full transcriptions: {n_full} (at least {args.min_transcriptions})"))
        checks.append((not by.get("wrong"), f"wrong answers: {len(by.get('wrong', []))}"))
        checks.append((not by.get("hang"), f"hangs (no answer in {args.hang_s:.0f} s): "
                                           f"{len(by.get('hang', []))}"))
        checks.append((not by.get("bad_error") and not by.get("conn_error"),
                       f"failures that are not OpenAI-shaped 4xx/429: "
                       f"{len(by.get('bad_error', []))}, connection errors: "
                       f"{len(by.get('conn_error', []))}"))
        growth = (rss_end - rss_warm) / rss_warm
        checks.append((abs(growth) <= args.rss_tolerance,
                       f"RSS after warm-up {rss_warm / 1024:.1f} MiB, at the end "
                       f"{rss_end / 1024:.1f} MiB ({growth * 100:+.1f}%; peak under load "
                       f"{peak / 1024:.1f} MiB)"))
        checks.append((fd_end is not None and fd_end <= fd_warm,
                       f"open fds after warm-up {fd_warm}, at the end {fd_end}"))
        checks.append((q == 0 and run == 0, f"/metrics at the end: queue depth {q}, "
                                             f"running jobs {run}"))
        if args.abuse_only:
            checks = [c for c in checks if not c[1].startswith(("full transcriptions", "RSS"))]

        # 5. Abuse.
        if not args.no_abuse:
            print("\nsoak: abuse phase", flush=True)
            abuse(d, variants, args, checks, sampler)
            sampler.phase = "after"
            q2, run2 = wait_idle(port, 120)
            fd2 = settle_fds(pid, fd_warm, 30)
            checks.append((d.alive() and q2 == 0 and run2 == 0 and fd2 is not None
                           and fd2 <= fd_warm,
                           f"after the abuse: daemon {'alive' if d.alive() else 'DEAD'}, "
                           f"queue {q2}, running {run2}, fds {fd2} (warm-up {fd_warm}), "
                           f"RSS {rss_kb(pid) / 1024:.1f} MiB"))
            r = do_request(port, next(v for v in variants["short"] if v.name == "jfk.wav/json"),
                           random.Random(0), 120, time.monotonic())
            checks.append((r.outcome == "ok", f"jfk.wav after the abuse: {r.outcome} {r.detail}"))
    finally:
        sampler.stop()
        rc = d.stop()
    checks.append((rc == 0, f"whisperd exit code after SIGTERM: {rc}"))
    print()
    for ok, line in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {line}")
    if args.plot:
        try:
            plot(args.plot, sampler, results)
        except Exception as e:  # noqa: BLE001 - a plot must not hide the verdict
            print(f"soak: no plot: {type(e).__name__}: {e}")
    passed = all(ok for ok, _ in checks)
    print(f"\nsoak: {'PASS' if passed else 'FAIL'} ({time.monotonic() - t_begin:.0f} s in all)")
    if not passed:
        print(f"whisperd log tail:\n{d.log_tail(30)}")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
