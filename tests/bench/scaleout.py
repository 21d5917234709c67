#!/usr/bin/env python3
"""Scale-out run for whisperd behind HAProxy (issue #14): a script, not a
test. Loopback only, bounded in count and in time.

Three whisperd daemons (the real build/daemon/whisperd and model, each on a
free 127.0.0.1 port) behind a real HAProxy configured from
deploy/haproxy/whisperd.cfg (health checks on /ready, leastconn, retries),
then:

 1. references: every distinct request of the mix (file x response format,
    both endpoints, /health, /v1/models) sent once, alone, straight to a
    daemon (one request per daemon at a time); its answer (status and
    parsed body) is the reference.
 2. throughput, 1 daemon: two servers put in maintenance through HAProxy's
    stats socket; --clients threads send the mix through the balancer for
    --seconds (at most --requests requests).
 3. throughput, 3 daemons: the same load (same seed, same order), all three
    servers in. Steps 2 and 3 alternate for --rounds rounds, so that what
    else the machine runs weighs on both alike; the daemons' CPU seconds
    give audio seconds per CPU second besides the wall-clock rates.
 4. failover: the same load again; after --kill-after seconds the daemon
    with the most requests in flight gets SIGKILL. The stats socket is
    polled every 50 ms: when HAProxy marks it DOWN, that no request goes
    to it while it is dead, and, once it is restarted on the same port
    (--dead-s later), when it is UP again and that it gets requests again.
    The load goes on until it has answered --rejoin-requests requests (or
    --rejoin-s passes).

Every request has a client timeout (--hang-s); a timeout is a failure.
Every answer must equal its reference; a 200 that differs is a failure.
Allowed besides, only for requests in flight between the kill and the
moment HAProxy marked the daemon DOWN (plus one second): a 502/503/504 in
OpenAI's error shape from the balancer, or a connection error, either
one reported within 5 s of that moment (a stream whose daemon dies after
its first event can only be cut). A 429 is a failure: with HAProxy's maxconn per server equal
to --queue-max, no daemon should ever have to refuse a request.

Prints per phase requests/s, audio seconds/s, latency, which server
answered how many; the failover's outcomes, time to DOWN and to rejoin;
then each check PASS or FAIL; exits 1 on FAIL.

  python3 tests/bench/scaleout.py                  # ~4 min on 2 cores
  python3 tests/bench/scaleout.py --seconds 15 --clients 4   # a quicker pass
  python3 tests/bench/scaleout.py --model models/ggml-base.bin   # real translations

Needs haproxy (apt-get install haproxy; Debian 12's 2.6 is enough).
"""

import argparse
import io
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import wave

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "api"))
sys.path.insert(0, HERE)
import wd_api  # noqa: E402
from soak import normalize, pct, post_variant, Variant  # noqa: E402

TRANSCRIBE = "/v1/audio/transcriptions"
TRANSLATE = "/v1/audio/translations"
FORMATS = ["json", "text", "srt", "verbose_json", "vtt"]
BACKEND = "whisperd"
SERVERS = ["wd1", "wd2", "wd3"]
CONFIG = os.path.join(wd_api.ROOT, "deploy", "haproxy", "whisperd.cfg")


# --- the request mix -------------------------------------------------------------


def wav_seconds(data):
    with wave.open(io.BytesIO(data), "rb") as w:
        return w.getnframes() / w.getframerate()


def build_mix():
    """[(weight, Variant)]: transcriptions of jfk.wav and cards/*.wav in
    every response format and as a stream, their translations as json and
    text (a clean 400 on an English-only model), /health and /v1/models.
    Every variant carries .audio_s, the audio seconds it transcribes (0 for
    the GETs, and for any whose reference is not a 200)."""
    files = [("jfk.wav", wd_api.JFK_WAV)] + [
        (f"card{i}.wav", os.path.join(wd_api.AUDIO, "cards", f"00{i}.wav")) for i in range(1, 6)]
    mix = []
    for fname, path in files:
        data = wd_api.read_file(path)
        secs = wav_seconds(data)
        opts = [(fmt, [("response_format", fmt)]) for fmt in FORMATS] + [
            ("stream", [("stream", "true")])]
        for oname, extra in opts:
            v = post_variant(f"{fname}/{oname}", "transcribe", TRANSCRIBE,
                             [("model", "whisper-1")] + extra
                             + [("file", (fname, data, "audio/wav"))], transcription=True)
            v.audio_s = secs
            mix.append((10, v))
        for fmt in ("json", "text"):
            v = post_variant(f"{fname}/{fmt}", "translate", TRANSLATE,
                             [("model", "whisper-1"), ("response_format", fmt),
                              ("file", (fname, data, "audio/wav"))], transcription=True)
            v.audio_s = secs
            mix.append((2, v))
    for path, kind in (("/health", "health"), ("/v1/models", "models")):
        v = Variant(kind, kind, "GET", path)
        v.audio_s = 0.0
        mix.append((30, v))
    return mix


def schedule(mix, n, seed):
    """n variants drawn by weight with a fixed seed: the same load for every
    phase."""
    rnd = random.Random(seed)
    weights = [w for w, _ in mix]
    return [v for _, v in rnd.choices([(w, v) for w, v in mix], weights=weights, k=n)]


# --- one request ---------------------------------------------------------------


class Result:
    __slots__ = ("variant", "t0", "t1", "status", "outcome", "detail", "server")

    def __init__(self, variant, t0, t1, status, outcome, detail="", server=None):
        self.variant, self.t0, self.t1 = variant, t0, t1
        self.status, self.outcome, self.detail, self.server = status, outcome, detail, server


def error_shape(r):
    """None when r is an OpenAI-shaped error, else why not."""
    try:
        wd_api.check_error(r, r.status, any_param=True,
                           etype="rate_limit_error" if r.status == 429 else None)
    except (AssertionError, ValueError, KeyError) as e:
        return f"not an OpenAI error: {e}"[:300]
    return None


def canon(answer):
    """An answer (soak.normalize's triple) with what legitimately differs
    between replicas taken out: /v1/models gives each model the `created`
    time of the daemon that answers (its start), not of the model file."""
    status, ctype, payload = answer
    if isinstance(payload, dict) and payload.get("object") == "list":
        payload = dict(payload, data=[{k: v for k, v in m.items() if k != "created"}
                                      if isinstance(m, dict) else m
                                      for m in payload.get("data", [])])
    return (status, ctype, payload)


def do_request(port, var, hang_s):
    """One request through the balancer; a Result with monotonic times.
    outcome: ok, wrong, hang, retryable (502/503/504 from the balancer),
    busy (429), conn_error, bad_error (an error that is not OpenAI-shaped or
    not expected)."""
    t0 = time.monotonic()
    try:
        r = wd_api.request(port, var.method, var.path, var.body, var.headers, timeout=hang_s)
    except socket.timeout:
        return Result(var, t0, time.monotonic(), None, "hang", f"no answer in {hang_s} s")
    except Exception as e:  # noqa: BLE001 - OSError and http.client's own errors
        return Result(var, t0, time.monotonic(), None, "conn_error", f"{type(e).__name__}: {e}")
    t1 = time.monotonic()
    server = r.headers.get("x-whisperd-server")
    if r.status in (502, 503, 504) and server is None:
        why = error_shape(r)
        return Result(var, t0, t1, r.status, "bad_error" if why else "retryable", why or "",
                      server)
    if r.status == 429:
        why = error_shape(r)
        return Result(var, t0, t1, r.status, "bad_error" if why else "busy", why or "", server)
    got = canon(normalize(r))
    if got != var.ref:
        return Result(var, t0, t1, r.status, "wrong",
                      f"want {str(var.ref)[:160]} got {str(got)[:160]}", server)
    return Result(var, t0, t1, r.status, "ok", "", server)


def run_load(port, sched, clients, hang_s, stop, results):
    """Runs sched on `clients` threads until it is used up or stop() says
    so (checked before each request); appends Results. Returns when every
    request started has its answer."""
    lock = threading.Lock()
    nxt = [0]

    def client():
        while True:
            with lock:
                if nxt[0] >= len(sched) or stop():
                    return
                var = sched[nxt[0]]
                nxt[0] += 1
            res = do_request(port, var, hang_s)
            with lock:
                results.append(res)

    ts = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


# --- HAProxy -------------------------------------------------------------------------


class Balancer:
    """haproxy -db -f deploy/haproxy/whisperd.cfg on a free loopback port,
    the three servers' addresses and the stats socket given through the
    environment the file reads."""

    def __init__(self, binary, config, ports, maxconn, workdir):
        self.port = wd_api.free_port()
        self.sock_path = os.path.join(workdir, "haproxy.sock")
        self.log_path = os.path.join(workdir, "haproxy.log")
        env = dict(os.environ)
        env.update({"WD_LB_BIND": f"127.0.0.1:{self.port}",
                    "WD_LB_STATS_SOCKET": self.sock_path,
                    "WD_SERVER_MAXCONN": str(maxconn)})
        for i, p in enumerate(ports):
            env[f"WD_SERVER{i + 1}"] = f"127.0.0.1:{p}"
        chk = subprocess.run([binary, "-c", "-f", config], env=env, capture_output=True, text=True)
        if chk.returncode != 0:
            raise SystemExit(f"scaleout: haproxy -c -f {config} failed:\n{chk.stdout}{chk.stderr}")
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen([binary, "-db", "-f", config], env=env, stdout=logf,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=wd_api._die_with_parent)
        logf.close()
        deadline = time.monotonic() + 20
        while not os.path.exists(self.sock_path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"scaleout: haproxy did not start:\n{self.log_tail()}")
            time.sleep(0.05)

    def command(self, line):
        """One command on the stats socket; its answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(self.sock_path)
            s.sendall(line.encode() + b"\n")
            out = []
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out.append(b)
        return b"".join(out).decode()

    def stats(self):
        """{server name: {column: value}} of the whisperd backend's servers
        from `show stat` (status UP, DOWN, MAINT, ...; scur in flight; stot
        sessions in all; qcur queued)."""
        text = self.command("show stat")
        lines = text.splitlines()
        cols = lines[0].lstrip("# ").split(",")
        out = {}
        for ln in lines[1:]:
            row = dict(zip(cols, ln.split(",")))
            if row.get("pxname") == BACKEND and row.get("svname") in SERVERS:
                out[row["svname"]] = row
        return out

    def set_state(self, server, state):
        ans = self.command(f"set server {BACKEND}/{server} state {state}")
        if ans.strip():
            raise SystemExit(f"scaleout: set server {server} state {state}: {ans.strip()}")

    def wait_status(self, server, want, timeout):
        """Waits until `server`'s status is want ("UP", not "UP 1/2": a
        check on the way down); returns the
        seconds it took, or None."""
        t = time.monotonic()
        while time.monotonic() - t < timeout:
            if self.stats()[server]["status"] == want:
                return time.monotonic() - t
            time.sleep(0.05)
        return None

    def log_tail(self, n=30):
        try:
            with open(self.log_path, errors="replace") as f:
                return "\n".join(f.read().splitlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)     # hard stop, as systemd's stop
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class Poller:
    """Samples the backend's stats every `period` seconds on a thread:
    samples = [(monotonic time, {server: (status, stot, scur)})]."""

    def __init__(self, lb, period=0.05):
        self.lb, self.period = lb, period
        self.samples = []
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_ev.is_set():
            try:
                st = self.lb.stats()
                self.samples.append((time.monotonic(), {
                    k: (v["status"], int(v["stot"] or 0), int(v["scur"] or 0))
                    for k, v in st.items()}))
            except (OSError, ValueError, KeyError, IndexError):
                pass
            self.stop_ev.wait(self.period)

    def first(self, server, pred, after):
        """Time of the first sample at or after `after` whose server row
        satisfies pred((status, stot, scur)); None if none yet."""
        for t, rows in list(self.samples):
            if t >= after and server in rows and pred(rows[server]):
                return t
        return None

    def last_before(self, server, t_limit):
        """The server's (status, stot, scur) in the last sample before t_limit."""
        row = None
        for t, rows in list(self.samples):
            if t >= t_limit:
                break
            row = rows.get(server, row)
        return row

    def stop(self):
        self.stop_ev.set()
        self.thread.join(5)


# --- figures -------------------------------------------------------------------------


def cpu_seconds(pid):
    """User + system CPU seconds of a live process so far (0 once gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def phase_figures(name, results, wall, cpu=None):
    """Prints and returns one phase's figures. cpu: the daemons' CPU
    seconds in the phase, for audio seconds per CPU second (what the
    daemons get done with the CPU they had, whatever else the machine ran)."""
    ok = [r for r in results if r.outcome == "ok"]
    audio = sum(r.variant.audio_s for r in ok if r.status == 200)
    lat = [r.t1 - r.t0 for r in ok if r.variant.audio_s > 0]
    by_server = {}
    for r in ok:
        by_server[r.server or "-"] = by_server.get(r.server or "-", 0) + 1
    oc = {}
    for r in results:
        oc[r.outcome] = oc.get(r.outcome, 0) + 1
    fig = {"phase": name, "requests": len(results), "ok": len(ok), "wall": wall, "cpu": cpu,
           "req/s": len(ok) / wall if wall else 0.0, "audio s/s": audio / wall if wall else 0.0,
           "audio/cpu": audio / cpu if cpu else 0.0,
           "p50": pct(lat, 0.5), "p95": pct(lat, 0.95), "servers": by_server, "outcomes": oc}
    cpu_txt = (f", {cpu:.0f} daemon CPU s ({fig['audio/cpu']:.2f} audio s each)"
               if cpu else "")
    print(f"  {name:<20} {len(results):>4} requests in {wall:5.1f} s: {fig['req/s']:5.2f} req/s, "
          f"{fig['audio s/s']:5.2f} audio s/s{cpu_txt}, transcription p50 {fig['p50']:.2f} s "
          f"p95 {fig['p95']:.2f} s; {dict(sorted(oc.items()))}; by "
          f"{dict(sorted(by_server.items()))}", flush=True)
    return fig


def bad_results(results, allowed_window=None, prompt_s=5.0):
    """Results that break the rules: hang, wrong, bad_error and busy (429)
    always; a retryable error or connection error unless it was in flight
    at some moment of allowed_window (t_a, t_b) and came promptly, at most
    prompt_s after t_b."""
    out = []
    for r in results:
        if r.outcome == "ok":
            continue
        if r.outcome in ("retryable", "conn_error") and allowed_window is not None:
            a, b = allowed_window
            if r.t0 <= b and r.t1 >= a and r.t1 <= b + prompt_s:
                continue
        out.append(r)
    return out


def show_bad(bad, t_ref):
    for r in bad[:8]:
        print(f"    {r.outcome} {r.variant.kind}/{r.variant.name} at {r.t0 - t_ref:.2f}-"
              f"{r.t1 - t_ref:.2f} s: {r.status} {r.server or ''} {r.detail}")


# --- the daemons -----------------------------------------------------------------


class PinnedDaemon(wd_api.Daemon):
    """A daemon run under `taskset -c CPU`, for --pin."""

    def __init__(self, cpu, **kw):
        super().__init__(**kw)
        self.cpu = cpu

    def command(self):
        return ["taskset", "-c", str(self.cpu)] + super().command()


def new_daemon(a, i, args, port=None):
    """Daemon i (0..2): pinned to CPU i mod the CPU count under --pin."""
    if a.pin:
        return PinnedDaemon(i % (os.cpu_count() or 1), model=a.model, log_level="warning",
                            args=args, port=port)
    return wd_api.Daemon(model=a.model, log_level="warning", args=args, port=port)


def daemon_args(a, threads_flag):
    out = ["--device", a.device, "--max-batch", str(a.max_batch),
           "--queue-max", str(a.queue_max), "--timeout", str(int(a.hang_s) + 60)]
    if threads_flag:
        out += ["--threads", str(a.threads)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--whisperd", default=wd_api.WHISPERD)
    ap.add_argument("--haproxy", default=shutil.which("haproxy") or "/usr/sbin/haproxy")
    ap.add_argument("--config", default=CONFIG, help="HAProxy configuration (default: %(default)s)")
    ap.add_argument("--model", default=wd_api.TINY_EN)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1,
                    help="--threads of each daemon, when whisperd has that option (default 1)")
    ap.add_argument("--pin", action="store_true",
                    help="run daemon i on CPU i mod the CPU count only (taskset), a stand-in "
                         "for --threads 1 where whisperd lacks it")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--queue-max", type=int, default=16,
                    help="each daemon's --queue-max, and HAProxy's maxconn per server "
                         "(default 16)")
    ap.add_argument("--clients", type=int, default=6, help="concurrent clients (default 6)")
    ap.add_argument("--seconds", type=float, default=20,
                    help="each throughput phase starts requests for this long (default 20)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="throughput rounds, each 1 daemon then 3 (default 2)")
    ap.add_argument("--requests", type=int, default=400,
                    help="at most this many requests per phase (default 400)")
    ap.add_argument("--kill-after", type=float, default=6,
                    help="failover: SIGKILL one daemon this long into the load (default 6)")
    ap.add_argument("--dead-s", type=float, default=6,
                    help="failover: restart it this long after the kill (default 6)")
    ap.add_argument("--rejoin-requests", type=int, default=5,
                    help="failover: the restarted daemon must answer this many (default 5)")
    ap.add_argument("--rejoin-s", type=float, default=60,
                    help="failover: stop waiting for them after this long (default 60)")
    ap.add_argument("--down-within", type=float, default=5,
                    help="HAProxy must mark the killed daemon DOWN this soon (default 5 s)")
    ap.add_argument("--hang-s", type=float, default=120,
                    help="client timeout of every request; a timeout is a failure (default 120)")
    ap.add_argument("--seed", type=int, default=14)
    a = ap.parse_args()

    if not os.access(a.haproxy, os.X_OK):
        sys.exit(f"scaleout: FAIL: no haproxy at {a.haproxy} (apt-get install haproxy)")
    for path in (a.whisperd, a.model):
        if not os.path.exists(path):
            sys.exit(f"scaleout: FAIL: {path} not found")
    helptext = subprocess.run([a.whisperd, "--help"], capture_output=True, text=True).stdout
    threads_flag = "--threads" in helptext
    wd_api.WHISPERD = a.whisperd

    t_begin = time.monotonic()
    mix = build_mix()
    variants = [v for _, v in mix]
    checks = []          # (ok, line)
    workdir = tempfile.mkdtemp(prefix="wd-scaleout-")
    args = daemon_args(a, threads_flag)
    print(f"scaleout: 3 x whisperd serve {' '.join(args)} ({os.path.basename(a.model)}"
          f"{', pinned to CPUs ' + ','.join(str(i % (os.cpu_count() or 1)) for i in range(3)) if a.pin else ''}), "
          f"haproxy {a.config}, {a.clients} clients, {os.cpu_count()} CPUs", flush=True)
    if not threads_flag:
        print(f"scaleout: NOTE: whisperd has no --threads option: each daemon's CPU engine "
              f"takes one thread per online CPU ({os.cpu_count()}), so 3 daemons run "
              f"{3 * (os.cpu_count() or 1)} compute threads on {os.cpu_count()} CPUs"
              f"{' (under --pin, a daemon' + chr(39) + 's threads share its one CPU)' if a.pin else ''}",
              flush=True)

    if a.pin and not shutil.which("taskset"):
        sys.exit("scaleout: FAIL: --pin needs taskset (util-linux)")
    daemons = [new_daemon(a, i, args) for i in range(len(SERVERS))]
    lb = None
    poller = None
    try:
        for d in daemons:
            d.start()
        lb = Balancer(a.haproxy, a.config, [d.port for d in daemons], a.queue_max,
                      workdir)
        print(f"scaleout: daemons on ports {[d.port for d in daemons]}, haproxy on "
              f"{lb.port} (log {lb.log_path})", flush=True)
        up = [lb.wait_status(s, "UP", 30) for s in SERVERS]
        checks.append((all(x is not None for x in up),
                       f"all three servers UP in HAProxy after start: "
                       f"{ {s: lb.stats()[s]['status'] for s in SERVERS} }"))

        # 1. References, each request alone, straight to the first daemon.
        # Three at a time, one on each daemon: every reference is still the
        # only request its daemon is running (nothing batched with it).
        t = time.monotonic()
        ref_bad = []

        def reference(i):
            for v in variants[i::len(daemons)]:
                r = wd_api.request(daemons[i].port, v.method, v.path, v.body, v.headers,
                                   timeout=a.hang_s)
                v.ref = canon(normalize(r))
                if v.kind == "transcribe" and r.status != 200:
                    ref_bad.append(f"{v.name}: {r.status}")
                if r.status >= 400 and error_shape(r):
                    ref_bad.append(f"{v.name}: {error_shape(r)}")
                if r.status != 200:
                    v.audio_s = 0.0          # an error is no audio transcribed
        wd_api.parallel(len(daemons), reference)
        jfk = next(v for v in variants if v.name == "jfk.wav/json" and v.kind == "transcribe")
        jfk_ok = jfk.ref[0] == 200 and (a.model != wd_api.TINY_EN
                                        or jfk.ref[2].get("text") == wd_api.JFK_TEXT)
        checks.append((not ref_bad and jfk_ok,
                       f"references: {len(variants)} requests alone in "
                       f"{time.monotonic() - t:.1f} s, every transcription 200"
                       f"{', jfk.wav text as expected' if jfk_ok else ', jfk.wav WRONG'}"
                       f"{'; ' + '; '.join(ref_bad[:4]) if ref_bad else ''}"))
        print(f"scaleout: references done in {time.monotonic() - t:.1f} s", flush=True)

        sched = schedule(mix, a.requests, a.seed)
        poller = Poller(lb)
        figs = {}

        # 2, 3. Throughput: one daemon, then three, the same load; in
        # --rounds alternating rounds, so that a change in what else the
        # machine runs falls on both.
        print("\nthroughput (through the balancer, the same mixed load; load average "
              f"{os.getloadavg()[0]:.1f} before):", flush=True)
        runs = {"1 daemon": [], "3 daemons": []}
        for rnd in range(a.rounds):
            for name, active in (("1 daemon", SERVERS[:1]), ("3 daemons", SERVERS)):
                for s in SERVERS:
                    lb.set_state(s, "ready" if s in active else "maint")
                for s in active:
                    if lb.wait_status(s, "UP", 30) is None:
                        checks.append((False, f"{name}: {s} not UP after 30 s"))
                results = []
                cpu0 = sum(cpu_seconds(d.pid) for d in daemons)
                t0 = time.monotonic()
                run_load(lb.port, sched, a.clients, a.hang_s,
                         lambda: time.monotonic() - t0 >= a.seconds, results)
                fig = phase_figures(f"{name}, round {rnd + 1}", results, time.monotonic() - t0,
                                    sum(cpu_seconds(d.pid) for d in daemons) - cpu0)
                runs[name].append((fig, results))
                bad = bad_results(results)
                checks.append((not bad, f"{name}, round {rnd + 1}: {len(results)} requests, "
                                        f"every answer equal to its reference, "
                                        f"failures {len(bad)}"))
                show_bad(bad, t0)
                strays = sum(n for s, n in fig["servers"].items() if s not in active)
                checks.append((strays == 0 and len(fig["servers"]) == len(active),
                               f"{name}, round {rnd + 1}: answered by {sorted(fig['servers'])} "
                               f"(want {active})"))
        tot = {}
        for name, rs in runs.items():
            wall = sum(f["wall"] for f, _ in rs)
            tot[name] = phase_figures(f"{name}, all", [r for _, res in rs for r in res], wall,
                                      sum(f["cpu"] for f, _ in rs))
        f1, f3 = tot["1 daemon"], tot["3 daemons"]
        if f1["req/s"] > 0 and f1["audio s/s"] > 0 and f1["audio/cpu"] > 0:
            print(f"  3 daemons / 1 daemon: x{f3['req/s'] / f1['req/s']:.2f} req/s, "
                  f"x{f3['audio s/s'] / f1['audio s/s']:.2f} audio s/s, "
                  f"x{f3['audio/cpu'] / f1['audio/cpu']:.2f} audio s per daemon CPU s, "
                  f"transcription p50 x{f3['p50'] / f1['p50']:.2f} ({os.cpu_count()} CPUs "
                  f"shared by the daemons (and whatever else runs: load average "
                  f"{os.getloadavg()[0]:.1f} now), so no 3x)", flush=True)

        # 4. Failover.
        print("\nfailover:", flush=True)
        results = []
        t0 = time.monotonic()
        state = {"killed": None, "restarted": None, "victim": None, "done": False}
        fsched = schedule(mix, 100000, a.seed + 1)

        def stop_load():
            return state["done"] or time.monotonic() - t0 > a.kill_after + a.dead_s + a.rejoin_s

        load = threading.Thread(target=run_load, args=(lb.port, fsched, a.clients, a.hang_s,
                                                       stop_load, results), daemon=True)
        load.start()
        time.sleep(a.kill_after)
        st = lb.stats()
        victim = max(SERVERS, key=lambda s: (int(st[s]["scur"] or 0), s))
        vi = SERVERS.index(victim)
        in_flight = int(st[victim]["scur"] or 0)
        daemons[vi].proc.kill()                             # SIGKILL
        t_kill = time.monotonic()
        daemons[vi].proc.wait()
        state["victim"] = victim
        print(f"  SIGKILL {victim} (pid {daemons[vi].pid}, port {daemons[vi].port}) at "
              f"{t_kill - t0:.1f} s with {in_flight} requests in flight on it", flush=True)
        while time.monotonic() - t_kill < a.dead_s:
            time.sleep(0.05)
        t_down = poller.first(victim, lambda r: r[0].startswith("DOWN"), t_kill)
        # Restart on the same port: HAProxy knows it by address.
        old_port = daemons[vi].port
        daemons[vi] = new_daemon(a, vi, args, port=old_port)
        t_restart = time.monotonic()
        daemons[vi].start(wait=False)
        try:
            daemons[vi].wait_ready()
        except wd_api.DaemonError as e:
            checks.append((False, f"failover: {victim} restarted on port {old_port}: {e}"))
        t_ready = time.monotonic()
        print(f"  restarted {victim} at {t_restart - t0:.1f} s (ready after "
              f"{t_ready - t_restart:.1f} s, port {daemons[vi].port})", flush=True)
        t_up = None
        while time.monotonic() - t_restart < a.rejoin_s:
            t_up = t_up or poller.first(victim, lambda r: r[0].startswith("UP"), t_restart)
            served = sum(1 for r in list(results) if r.server == victim and r.t0 >= t_restart
                         and r.outcome == "ok")
            if t_up and served >= a.rejoin_requests:
                break
            time.sleep(0.1)
        state["done"] = True
        load.join(a.hang_s + 30)
        t_end = time.monotonic()

        # Sessions sent to the victim while it was dead: from the first DOWN
        # sample to the restart.
        at_down = poller.last_before(victim, t_down + 0.001) if t_down else None
        before_restart = poller.last_before(victim, t_restart)
        # Errors are allowed for requests in flight from the kill until one
        # second after DOWN (or after --down-within, when it never came).
        window = (t_kill, (t_down or t_kill + a.down_within) + 1.0)
        inflight = [r for r in results if r.t0 <= t_kill <= r.t1]
        oc = {}
        for r in inflight:
            key = r.outcome + (f":{r.status}" if r.status else "")
            oc[key] = oc.get(key, 0) + 1
        after = [r for r in results if r.t0 >= t_restart]
        served_after = sum(1 for r in after if r.server == victim and r.outcome == "ok")
        phase_figures("failover", results, t_end - t0)
        print(f"  requests in flight at the kill: {len(inflight)} "
              f"{dict(sorted(oc.items()))}", flush=True)
        for r in inflight:
            print(f"    {r.outcome} {r.status or ''} {r.variant.kind}/{r.variant.name} "
                  f"{r.t0 - t0:.2f}-{r.t1 - t0:.2f} s by {r.server or 'the balancer'} "
                  f"{r.detail[:100]}", flush=True)
        near = [r for r in results if r.t0 <= window[1] and r.t1 >= window[0]]
        noc = {}
        for r in near:
            key = r.outcome + (f":{r.status}" if r.status else "")
            noc[key] = noc.get(key, 0) + 1
        print(f"  requests in flight between the kill and DOWN + 1 s: {len(near)} "
              f"{dict(sorted(noc.items()))}", flush=True)
        down_s = t_down - t_kill if t_down else None
        up_s = t_up - t_restart if t_up else None
        print(f"  HAProxy marked {victim} DOWN {down_s if down_s is None else round(down_s, 2)} s "
              f"after the kill; UP {up_s if up_s is None else round(up_s, 2)} s after the "
              f"restart ({t_ready - t_restart:.1f} s of it the daemon's own start-up); "
              f"{served_after} requests answered by it after the restart", flush=True)

        bad = bad_results(results, window)
        checks.append((not bad, f"failover: {len(results)} requests, every one answered "
                                f"correctly or (in flight around the kill) a clean retryable "
                                f"error; failures {len(bad)} "
                                f"(hangs {sum(r.outcome == 'hang' for r in bad)})"))
        show_bad(bad, t0)
        checks.append((down_s is not None and down_s <= a.down_within,
                       f"failover: {victim} marked DOWN in "
                       f"{'never' if down_s is None else f'{down_s:.2f} s'} "
                       f"(at most {a.down_within} s)"))
        sent_dead = (before_restart[1] - at_down[1]) if at_down and before_restart else None
        checks.append((sent_dead == 0 and before_restart is not None
                       and not before_restart[0].startswith("UP"),
                       f"failover: sessions sent to {victim} while DOWN: {sent_dead} "
                       f"(stot {at_down[1] if at_down else '?'} at DOWN, "
                       f"{before_restart[1] if before_restart else '?'} before the restart, "
                       f"status then {before_restart[0] if before_restart else '?'})"))
        checks.append((up_s is not None and served_after >= a.rejoin_requests,
                       f"failover: {victim} UP again "
                       f"{'never' if up_s is None else f'{up_s:.2f} s after the restart'}, "
                       f"answered {served_after} requests after it (at least "
                       f"{a.rejoin_requests})"))
    finally:
        if poller:
            poller.stop()
        rcs = [d.stop() for d in daemons]
        lb_rc = lb.stop() if lb else None
    checks.append((all(rc == 0 for rc in rcs),
                   f"whisperd exit codes after SIGTERM: {rcs}"))
    print()
    for ok, line in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {line}")
    passed = all(ok for ok, _ in checks)
    print(f"\nscaleout: {'PASS' if passed else 'FAIL'} ({time.monotonic() - t_begin:.0f} s in all; "
          f"haproxy exit {lb_rc}, its log {lb.log_path if lb else '-'})")
    if not passed:
        for i, d in enumerate(daemons):
            print(f"whisperd {SERVERS[i]} log tail:\n{d.log_tail(15)}")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
