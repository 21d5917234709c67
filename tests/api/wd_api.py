"""Helpers for the black-box API suite: start and stop the real whisperd,
speak HTTP to it (plain, multipart, raw bytes), read /metrics, check error
bodies, and listen on a NOTIFY_SOCKET the way systemd does.

Standard library only, so the benchmark (tests/bench/load.py) can use it
without the venv.
"""

import atexit
import ctypes
import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import io
import time
import uuid
import wave

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
AUDIO = os.path.join(ROOT, "tests", "data", "audio")
WHISPERD = os.environ.get("WHISPERD_BIN") or os.path.join(ROOT, "build", "daemon", "whisperd")
TINY_EN = os.path.join(ROOT, "models", "ggml-tiny.en.bin")
BASE = os.path.join(ROOT, "models", "ggml-base.bin")
JFK_WAV = os.path.join(AUDIO, "jfk.wav")
JFK_MP3 = os.path.join(AUDIO, "jfk.mp3")

# tiny.en on jfk.wav (tests/model_cli.cmake has the same words and times).
JFK_TEXT = ("And so my fellow Americans ask not what your country can do for you "
            "ask what you can do for your country")
JFK_SEGMENTS = [
    (0.0, 7.74, "And so my fellow Americans ask not what your country can do for you"),
    (7.74, 10.74, "ask what you can do for your country"),
]
FORMATS = ["json", "text", "srt", "verbose_json", "vtt"]

# The daemon, lavapipe and the other tests share two cores.
READY_TIMEOUT_S = float(os.environ.get("WD_API_READY_TIMEOUT", "240"))
REQUEST_TIMEOUT_S = float(os.environ.get("WD_API_REQUEST_TIMEOUT", "180"))


def words(text):
    """Lower-case words without punctuation, to compare texts loosely."""
    return re.findall(r"[a-z0-9']+", text.lower())


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copies_wav(n, gap_s=0.0):
    """n copies of jfk.wav (11 s) with gap_s of silence after each, as WAV bytes."""
    with wave.open(JFK_WAV, "rb") as w:
        params, speech = w.getparams(), w.readframes(w.getnframes())
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        for _ in range(n):
            w.writeframes(speech + b"\0\0" * int(gap_s * 16000))
    return out.getvalue()


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


# --- HTTP --------------------------------------------------------------------

class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers          # lower-case name -> value (last wins)
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    @property
    def content_type(self):
        return self.headers.get("content-type", "")

    def __repr__(self):
        return f"<Response {self.status} {self.content_type} {self.body[:300]!r}>"


def request(port, method, path, body=None, headers=None, timeout=REQUEST_TIMEOUT_S,
            host="127.0.0.1"):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.reason, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        conn.close()


def multipart(fields, boundary=None):
    """fields: list of (name, value) with value a str, or a tuple
    (filename, bytes, content_type). Returns (body, content_type)."""
    boundary = boundary or ("wdtest" + uuid.uuid4().hex)
    out = []
    for name, value in fields:
        out.append(f"--{boundary}\r\n".encode())
        if isinstance(value, tuple):
            fname, data, ctype = value
            out.append(f'Content-Disposition: form-data; name="{name}"; filename="{fname}"\r\n'
                       f"Content-Type: {ctype}\r\n\r\n".encode())
            out.append(data)
        else:
            out.append(f'Content-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
            out.append(str(value).encode())
        out.append(b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def audio_fields(path=JFK_WAV, model="whisper-1", data=None, filename=None, fields=(),
                 **extra):
    """The fields of a transcription request: model, the keyword ones, the
    (name, value) pairs of `fields` (for names like timestamp_granularities[]),
    then the file (path's bytes, or data)."""
    out = []
    if model is not None:
        out.append(("model", model))
    out.extend((k, v) for k, v in extra.items() if v is not None)
    out.extend(fields)
    fields = out
    if path is not None or data is not None:
        if data is None:
            data = read_file(path)
        fields.append(("file", (filename or os.path.basename(path or "audio.wav"), data,
                                "application/octet-stream")))
    return fields


def post_audio(port, endpoint="transcriptions", headers=None, timeout=REQUEST_TIMEOUT_S,
               **kw):
    """POST /v1/audio/<endpoint> with audio_fields(**kw)."""
    body, ctype = multipart(audio_fields(**kw))
    h = {"Content-Type": ctype}
    h.update(headers or {})
    return request(port, "POST", f"/v1/audio/{endpoint}", body, h, timeout=timeout)


def sse_events(body):
    """The JSON payloads of an SSE body's `data:` lines ([DONE] ends it)."""
    events = []
    for block in body.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = [ln[5:].lstrip(" ") for ln in block.split("\n") if ln.startswith("data:")]
        if not data:
            continue
        payload = "\n".join(data)
        if payload.startswith("[DONE]"):
            break
        events.append(json.loads(payload))
    return events


def check_error(r, status, param=None, code=None, etype=None, any_param=False):
    """r is an OpenAI-shaped error: {"error":{"message","type","param","code"}}
    with the given status (and param/code/type where given)."""
    assert r.status == status, f"want {status}, got {r!r}"
    assert "application/json" in r.content_type, f"error not JSON: {r!r}"
    doc = r.json()
    assert set(doc) == {"error"}, doc
    err = doc["error"]
    assert set(err) >= {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"], err
    assert isinstance(err["type"], str) and err["type"], err
    assert err["param"] is None or isinstance(err["param"], str), err
    assert err["code"] is None or isinstance(err["code"], str), err
    if not any_param:
        allowed = param if isinstance(param, tuple) else (param,)
        assert err["param"] in allowed, f"param: want {param!r}, got {err!r}"
    if code is not None:
        assert err["code"] == code, f"code: want {code!r}, got {err!r}"
    if etype is not None:
        assert err["type"] == etype, err
    elif status < 500:
        assert err["type"] == "invalid_request_error", err
    return err



def assert_jfk_json(r):
    assert r.status == 200, r
    assert r.json()["text"] == JFK_TEXT, r


def assert_healthy(d):
    """The daemon is up and transcribes jfk.wav correctly."""
    assert d.alive(), f"whisperd died:\n{d.log_tail()}"
    r = request(d.port, "GET", "/health", timeout=10)
    assert r.status == 200, r
    assert_jfk_json(post_audio(d.port))


# --- what each response format must hold ------------------------------------

def ts(sec, sep):
    ms = int(round(sec * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


CONTENT_TYPES = {
    "json": ("application/json",),
    "verbose_json": ("application/json",),
    "text": ("text/plain; charset=utf-8",),
    "srt": ("text/plain; charset=utf-8",),   # OpenAI's own, for all three
    "vtt": ("text/plain; charset=utf-8",),
}


def check_content_type(fmt, ctype):
    assert any(ctype.startswith(c) for c in CONTENT_TYPES[fmt]), f"{fmt}: content type {ctype!r}"


def check_transcript(fmt, payload, exact=True, task="transcribe"):
    """payload: the parsed JSON (dict) for json/verbose_json, else the body
    text. exact: tiny.en's jfk.wav words and times (JFK_TEXT, JFK_SEGMENTS);
    otherwise the jfk words with any punctuation and casing, times only in
    shape (another model)."""
    if fmt == "json":
        assert isinstance(payload, dict), payload
        text = payload["text"]
        if exact:
            assert text == JFK_TEXT, payload
        else:
            assert words(text) == words(JFK_TEXT), payload
        assert not text.startswith(" "), payload
        return
    if fmt == "verbose_json":
        assert isinstance(payload, dict), payload
        assert payload.get("task", task) == task, payload
        assert payload["language"] == "english", payload
        assert abs(payload["duration"] - 11.0) < 0.01, payload
        segs = payload["segments"]
        if exact:
            assert payload["text"] == JFK_TEXT, payload
            assert len(segs) == len(JFK_SEGMENTS), segs
        else:
            assert words(payload["text"]) == words(JFK_TEXT), payload
            assert segs, payload
        prev_end = 0.0
        for i, s in enumerate(segs):
            assert s["id"] == i, s
            assert isinstance(s["seek"], int) and s["seek"] >= 0, s
            assert prev_end - 1e-6 <= s["start"] <= s["end"] <= 11.0 + 1e-6, s
            prev_end = s["end"]
            assert s["text"].startswith(" "), s          # Whisper's leading space kept
            toks = s["tokens"]
            assert toks and all(isinstance(t, int) for t in toks), s
            assert toks[0] >= 50363 and toks[-1] >= 50363, f"timestamp tokens at both ends: {s}"
            assert s["temperature"] == 0.0, s
            assert s["avg_logprob"] <= 0.0, s
            assert s["compression_ratio"] > 0.0, s
            assert 0.0 <= s["no_speech_prob"] <= 1.0, s
            if exact:
                start, end, text = JFK_SEGMENTS[i]
                assert abs(s["start"] - start) < 1e-6 and abs(s["end"] - end) < 1e-6, s
                assert s["text"].strip() == text, s
        assert "words" not in payload or payload["words"] is None, payload
        return
    assert isinstance(payload, str), payload
    if fmt == "text":
        if exact:
            assert " ".join(payload.split()) == JFK_TEXT, repr(payload)
        else:
            assert words(payload) == words(JFK_TEXT), repr(payload)
        return
    if fmt == "srt":
        body = payload.replace("\r\n", "\n")
        if exact:
            want = "".join(f"{i + 1}\n{ts(a, ',')} --> {ts(b, ',')}\n{t}\n\n"
                           for i, (a, b, t) in enumerate(JFK_SEGMENTS))
            assert body.rstrip("\n") == want.rstrip("\n"), repr(payload)
        else:
            cues = re.findall(r"(?m)^(\d+)\n(\d\d:\d\d:\d\d,\d{3}) --> (\d\d:\d\d:\d\d,\d{3})\n(.+)$",
                              body)
            assert cues and [int(c[0]) for c in cues] == list(range(1, len(cues) + 1)), repr(payload)
            assert words(" ".join(c[3] for c in cues)) == words(JFK_TEXT), repr(payload)
        return
    if fmt == "vtt":
        body = payload.replace("\r\n", "\n")
        assert body.startswith("WEBVTT\n\n"), repr(payload)
        cues = re.findall(r"(?m)^((?:\d\d:)?\d\d:\d\d\.\d{3}) --> ((?:\d\d:)?\d\d:\d\d\.\d{3})\n(.+)$",
                          body)
        assert cues, repr(payload)
        if exact:
            got = [(a[-9:], b[-9:], t) for a, b, t in cues]
            want = [(ts(a, ".")[-9:], ts(b, ".")[-9:], t) for a, b, t in JFK_SEGMENTS]
            assert got == want, repr(payload)
        else:
            assert words(" ".join(c[2] for c in cues)) == words(JFK_TEXT), repr(payload)
        return
    raise AssertionError(f"unknown format {fmt}")


def check_stream(events, exact=True, segments=False):
    """SSE events of a stream=true transcription: one transcript.text.delta
    per segment, then transcript.text.done with the whole text and usage.
    segments: the request opted in (timestamp_granularities[]=segment), so
    each segment's transcript.text.segment follows its delta
    (check_segment_events); a verbose_json document for segments: the one
    whose segments they repeat; else there must be none."""
    assert events, "no events"
    assert events[-1]["type"] == "transcript.text.done", events
    body = events[:-1]
    if isinstance(segments, dict):
        check_segment_events(events, exact=False, verbose=segments)
    elif segments:
        check_segment_events(events, exact)
    else:
        assert all(e["type"] == "transcript.text.delta" for e in body), events
    deltas = [e for e in body if e["type"] == "transcript.text.delta"]
    assert deltas, events
    assert all(isinstance(e["delta"], str) and e["delta"] for e in deltas), events
    joined = "".join(e["delta"] for e in deltas)
    # OpenAI's done event: usage as tokens (input = audio positions, 50 a
    # second, plus prompt tokens; output = the tokens decoded).
    u = events[-1].get("usage")
    assert u and u["type"] == "tokens", events[-1]
    assert u["input_token_details"]["audio_tokens"] >= 50 and u["output_tokens"] > 0, u
    assert u["input_tokens"] == (u["input_token_details"]["audio_tokens"]
                                 + u["input_token_details"]["text_tokens"]), u
    assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"], u
    if exact:
        assert len(deltas) == len(JFK_SEGMENTS), events
        assert " ".join(joined.split()) == JFK_TEXT, events
        assert events[-1]["text"] == JFK_TEXT, events
    else:
        assert words(joined) == words(JFK_TEXT), events
        assert words(events[-1]["text"]) == words(JFK_TEXT), events


def check_segment_events(events, exact=True, verbose=None):
    """The transcript.text.segment events of an opted-in stream (events ends
    with its done event): OpenAI's shape {type, id, start, end, text,
    speaker} with speaker "" (no diarization); ids seg_0, seg_1, ... in
    order; times non-decreasing; each right after its segment's delta (the
    same text, but for the first delta's leading space); their texts joined
    and stripped are the done event's text. exact: tiny.en's JFK_SEGMENTS.
    verbose: a verbose_json document of the same audio, whose segments the
    events must repeat exactly (text and times). Returns the events."""
    done = events[-1]
    assert done["type"] == "transcript.text.done", events
    body = events[:-1]
    assert all(e["type"] in ("transcript.text.delta", "transcript.text.segment")
               for e in body), events
    segs = [e for e in body if e["type"] == "transcript.text.segment"]
    assert segs and body[-1]["type"] == "transcript.text.segment", events
    prev_end, pending = 0.0, ""
    for e in body:
        if e["type"] == "transcript.text.delta":
            pending += e["delta"]
            continue
        i = segs.index(e)
        assert set(e) == {"type", "id", "start", "end", "text", "speaker"}, e
        assert e["id"] == f"seg_{i}" and e["speaker"] == "", e
        assert isinstance(e["start"], float) and isinstance(e["end"], float), e
        assert prev_end - 1e-6 <= e["start"] <= e["end"], (prev_end, e)
        prev_end = e["end"]
        # Its deltas came just before it (the first one without the space).
        assert pending == (e["text"].lstrip() if i == 0 else e["text"]), (pending, e)
        pending = ""
    assert "".join(e["text"] for e in segs).strip() == done["text"], events
    if exact:
        assert len(segs) == len(JFK_SEGMENTS), segs
        for e, (start, end, text) in zip(segs, JFK_SEGMENTS):
            assert abs(e["start"] - start) < 1e-6 and abs(e["end"] - end) < 1e-6, e
            assert e["text"].strip() == text, e
    if verbose is not None:
        want = [(f"seg_{s['id']}", s["start"], s["end"], s["text"]) for s in verbose["segments"]]
        assert [(e["id"], e["start"], e["end"], e["text"]) for e in segs] == want, (segs, want)
    return segs


# --- raw sockets -------------------------------------------------------------

def parse_raw_response(data):
    """Status, lower-case headers and body of one HTTP/1.1 response in data
    (chunked bodies are de-chunked)."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        raise ValueError(f"not an HTTP response: {data[:200]!r}")
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2:]
        body = out
    elif "content-length" in headers:
        body = body[:int(headers["content-length"])]
    return Response(int(m.group(1)), "", headers, body)


def recv_all(sock, timeout):
    """Reads until the peer closes or timeout passes; returns the bytes."""
    sock.settimeout(timeout)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            b = sock.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, BrokenPipeError):
            break
        if not b:
            break
        chunks.append(b)
        data = b"".join(chunks)
        # Stop at the end of one complete response.
        if b"\r\n\r\n" in data:
            try:
                r = parse_raw_response(data)
                head, _, body = data.partition(b"\r\n\r\n")
                if "content-length" in r.headers and len(body) >= int(r.headers["content-length"]):
                    break
                if r.headers.get("transfer-encoding", "").lower() == "chunked" and body.endswith(b"0\r\n\r\n"):
                    break
            except ValueError:
                pass
    return b"".join(chunks)


def send_streaming(port, head, body_chunks, pause_s=0.0, timeout=60):
    """Sends head, then body chunks one by one, watching for an early answer
    (a server may refuse an oversize body before it is all sent). Returns
    (Response or None, bytes sent of the body, whether sending failed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sent, broke = 0, False
    try:
        s.sendall(head)
        for c in body_chunks:
            r, _, _ = select.select([s], [], [], 0)
            if r:
                break                      # the server answered (or closed) early
            try:
                s.sendall(c)
            except (BrokenPipeError, ConnectionResetError):
                broke = True
                break
            sent += len(c)
            if pause_s:
                time.sleep(pause_s)
        data = recv_all(s, timeout)
    finally:
        s.close()
    return (parse_raw_response(data) if data else None), sent, broke


class Background:
    """One request on a raw socket, its answer read by a thread; .close()
    disconnects it."""

    def __init__(self, port, endpoint="transcriptions", **kw):
        body, ctype = multipart(audio_fields(**kw))
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall((f"POST /v1/audio/{endpoint} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
                          + body)
        self.data = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            self.data = recv_all(self.sock, REQUEST_TIMEOUT_S)
        except OSError:
            self.data = b""

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def response(self, timeout=REQUEST_TIMEOUT_S):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "no answer"
        self.sock.close()
        return parse_raw_response(self.data)


def parallel(n, fn):
    """fn(0..n-1) on n threads at once; their results in order."""
    out = [None] * n
    errs = []

    def run(i):
        try:
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise errs[0]
    return out


# --- /metrics ----------------------------------------------------------------

METRIC_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def metrics(port, headers=None):
    """Prometheus text -> {"name" or "name{labels}": value}."""
    r = request(port, "GET", "/metrics", headers=headers, timeout=30)
    assert r.status == 200, r
    out = {}
    for ln in r.text.splitlines():
        if not ln or ln.startswith("#"):
            continue
        m = METRIC_RE.match(ln)
        if m:
            try:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
            except ValueError:
                pass
    return out


def job_counts(port):
    """Job figures from /metrics: running and queued (gauges), done and
    failed (counters; failed includes cancelled), cancelled where the daemon
    counts it apart (else None)."""
    m = metrics(port)
    cancel = [k for k in m if "cancel" in k.split("{")[0]]
    return {
        "running": m.get("whisperd_jobs_running"),
        "queued": m.get("whisperd_queue_depth"),
        "done": m.get('whisperd_jobs_total{result="done"}'),
        "failed": m.get('whisperd_jobs_total{result="failed"}'),
        "cancelled": sum(m[k] for k in cancel) if cancel else None,
        "raw": m,
    }


def wait_counts(port, pred, timeout=60, what="condition"):
    """Polls job_counts until pred(counts) holds; returns the counts."""
    deadline = time.monotonic() + timeout
    c = None
    while time.monotonic() < deadline:
        c = job_counts(port)
        if pred(c):
            return c
        time.sleep(0.05)
    raise AssertionError(f"/metrics: {what} not reached in {timeout} s: "
                         f"{ {k: v for k, v in (c or {}).items() if k != 'raw'} }")


# --- the daemon --------------------------------------------------------------

class DaemonError(Exception):
    pass


def _die_with_parent():
    """In the child before exec: SIGKILL when the test process dies, so that
    a killed or crashed test run leaves no daemon behind."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@atexit.register
def _kill_leftovers():
    for d in Daemon.live:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()


class Daemon:
    """One whisperd serve process on 127.0.0.1:<free port>.

    args: extra command-line options; env: extra environment. Log (stdout
    and stderr) goes to a file, see .log()."""

    live = []  # every Daemon started in this process, for failure reports

    def __init__(self, model=TINY_EN, args=(), env=None, port=None, log_level="info",
                 argv=None):
        self.model = model
        self.args = list(args)
        self.env = env
        self.port = port
        self.log_level = log_level
        self.argv = argv             # a whole command line of one's own (port must be given)
        self.proc = None
        self.rc = None
        fd, self.log_path = tempfile.mkstemp(prefix="whisperd-", suffix=".log")
        os.close(fd)

    def command(self):
        if self.argv:
            return list(self.argv)
        cmd = [WHISPERD, "serve", "--model", self.model, "--host", "127.0.0.1",
               "--port", str(self.port), "--log-level", self.log_level]
        return cmd + self.args

    def start(self, wait=True):
        for attempt in range(3):
            if self.port is None or (attempt > 0 and not self.argv):
                self.port = free_port()
            env = dict(os.environ)
            env.pop("NOTIFY_SOCKET", None)
            env.pop("LISTEN_FDS", None)
            env.pop("LISTEN_PID", None)
            env.pop("WATCHDOG_USEC", None)
            env.update(self.env or {})
            logf = open(self.log_path, "ab")
            self.proc = subprocess.Popen(self.command(), stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         preexec_fn=_die_with_parent)
            logf.close()
            Daemon.live.append(self)
            if not wait:
                return self
            try:
                self.wait_ready()
                return self
            except DaemonError:
                if self.proc.poll() is not None and "in use" in self.log():
                    continue  # lost the port race: another try on another port
                raise
        raise DaemonError("could not bind a free port:\n" + self.log_tail())

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DaemonError(f"whisperd exited with {self.proc.returncode} before ready:\n"
                                  + self.log_tail())
            try:
                if request(self.port, "GET", "/ready", timeout=5).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise DaemonError(f"whisperd not ready after {timeout} s:\n" + self.log_tail())

    @property
    def pid(self):
        return self.proc.pid

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self):
        """The daemon's resident set (VmRSS) in KiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise DaemonError("no VmRSS for the daemon")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Signals the daemon and waits; returns its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.rc = "hung"
                return self.rc
        self.rc = self.proc.returncode
        return self.rc

    def log(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n=60):
        return "\n".join(self.log().splitlines()[-n:])

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        rc = self.stop()
        if exc[0] is None:
            assert rc == 0, f"whisperd exit code {rc} after SIGTERM:\n{self.log_tail()}"


def start_daemon(**kw):
    return Daemon(**kw).start()


def stop_daemon(d):
    """SIGTERM; the daemon must exit 0."""
    rc = d.stop()
    assert rc == 0, f"whisperd exit code {rc} after SIGTERM:\n{d.log_tail()}"


# --- sd_notify ---------------------------------------------------------------

class NotifyListener:
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET.
    .messages: [(monotonic time, "KEY=value")], one per line of each
    datagram."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="wdn")          # short: sun_path is 108 bytes
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages = []
        self.datagrams = []
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.sock.settimeout(0.2)
        while not self.closed:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            t = time.monotonic()
            text = data.decode("utf-8", "replace")
            with self.cond:
                self.datagrams.append((t, text))
                for ln in text.split("\n"):
                    if ln:
                        self.messages.append((t, ln))
                self.cond.notify_all()

    def wait_for(self, pred, timeout):
        """Waits until a message satisfies pred(msg); returns (t, msg) or None."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for t, m in self.messages:
                    if pred(m):
                        return t, m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def find(self, prefix):
        with self.cond:
            return [(t, m) for t, m in self.messages if m.startswith(prefix)]

    def close(self):
        self.closed = True
        self.thread.join(2)
        self.sock.close()
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass
