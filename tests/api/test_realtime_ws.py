"""/v1/realtime as hostile or unlucky clients meet it (issue #39): the
WebSocket rules (RFC 6455) and the session's bounds, driven by a raw
socket client of this file (a handshake, masked frames, frames read back
as they come) where the websockets library would not misbehave, and by
websockets where it does what is needed.
"""

import base64
import json
import os
import socket
import struct
import subprocess
import time

import pytest

import wd_api
from wd_api import start_daemon, stop_daemon

ws_sync = pytest.importorskip("websockets.sync.client")

KEY = "sk-ws"


@pytest.fixture(scope="module")
def daemon():
    if not os.path.exists(wd_api.TINY_EN):
        pytest.skip("tiny.en missing (scripts/fetch-model.sh tiny.en)")
    d = start_daemon(args=["--api-key", KEY, "--realtime-sessions", "4", "--http-threads", "16"])
    yield d
    stop_daemon(d)


def connect(d, **kw):
    return ws_sync.connect(f"ws://127.0.0.1:{d.port}/v1/realtime?intent=transcription",
                           additional_headers={"Authorization": f"Bearer {KEY}"},
                           max_size=None, open_timeout=30, **kw)


def ws_frame(opcode, payload=b"", masked=True, fin=True):
    """One client frame's bytes."""
    n = len(payload)
    hdr = bytes([(0x80 if fin else 0) | opcode])
    m = 0x80 if masked else 0
    if n < 126:
        hdr += bytes([m | n])
    elif n < 65536:
        hdr += bytes([m | 126]) + struct.pack(">H", n)
    else:
        hdr += bytes([m | 127]) + struct.pack(">Q", n)
    if masked:
        mask = os.urandom(4)
        payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        hdr += mask
    return hdr + payload


class Raw:
    """A WebSocket client on a plain socket that does what it is told:
    frames masked or not, any close payload, and no reading unless asked;
    `early` is sent with the handshake, in one write."""

    def __init__(self, d, rcvbuf=None, headers=None, timeout=30, early=b""):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # before connect, so the window stays this small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", d.port))
        hdrs = {"Host": f"127.0.0.1:{d.port}", "Upgrade": "websocket",
                "Connection": "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                "Sec-WebSocket-Version": "13", "Authorization": f"Bearer {KEY}"}
        hdrs.update(headers or {})
        req = "GET /v1/realtime?intent=transcription HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in hdrs.items() if v is not None) + "\r\n"
        self.sock.sendall(req.encode() + early)
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            got = self.sock.recv(4096)
            if not got:
                break
            self.buf += got
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1]) if lines[0] else 0
        self.headers = {k.strip().lower(): v.strip()
                        for k, _, v in (ln.partition(":") for ln in lines[1:])}

    def send(self, opcode, payload=b"", masked=True, fin=True):
        self.sock.sendall(ws_frame(opcode, payload, masked, fin))

    def frame(self):
        """The next server frame (opcode, payload), or None at the end."""
        def need(k):
            while len(self.buf) < k:
                got = self.sock.recv(65536)
                if not got:
                    return False
                self.buf += got
            return True
        if not need(2):
            return None
        n, at = self.buf[1] & 0x7f, 2
        if n == 126:
            need(4)
            n, at = struct.unpack(">H", self.buf[2:4])[0], 4
        elif n == 127:
            need(10)
            n, at = struct.unpack(">Q", self.buf[2:10])[0], 10
        if not need(at + n):
            return None
        op, payload = self.buf[0] & 0x0f, self.buf[at:at + n]
        self.buf = self.buf[at + n:]
        return op, payload

    def frames_to_end(self):
        """Every frame until the server ends the connection."""
        out = []
        try:
            while (f := self.frame()) is not None:
                out.append(f)
        except (ConnectionResetError, socket.timeout):
            pass
        return out

    def close(self):
        self.sock.close()


def sessions_open(d):
    return wd_api.metrics(d.port)["whisperd_realtime_sessions_open"]


def wait_sessions_closed(d, timeout):
    deadline = time.monotonic() + timeout
    while sessions_open(d) != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    return sessions_open(d)


def manual_turns(ws):
    """No server_vad: the session's audio waits for commits."""
    ws.send(json.dumps({"type": "session.update", "session": {
        "type": "transcription", "audio": {"input": {"turn_detection": None}}}}))


def next_of(ws, kind, timeout=60):
    """The next event of type kind; the events before it."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ev = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        if ev["type"] == kind:
            return ev, seen
        seen.append(ev)
    raise AssertionError(f"no {kind} in {[e['type'] for e in seen]}")


def test_two_large_appends_in_a_row(daemon):
    """Two appends of 140 s of 24 kHz PCM each (about 9 MB of base64, under
    the 16 MiB per message; 280 s in all, under the 300 s of uncommitted
    audio): each message is held to the limit alone, so the session goes
    on and answers the clear."""
    audio = base64.b64encode(bytes(140 * 24000 * 2)).decode()
    assert 8 << 20 < len(audio) < 16 << 20
    with connect(daemon) as ws:
        assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
        manual_turns(ws)
        next_of(ws, "session.updated")
        for _ in range(2):
            ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        _, seen = next_of(ws, "input_audio_buffer.cleared", timeout=120)
        assert not [e for e in seen if e["type"] == "error"], seen


def test_a_client_that_never_reads_is_cut_at_the_close_deadline(daemon):
    """A client whose receive window stays shut (a small SO_RCVBUF, never a
    recv after the handshake) draws megabytes of events (an error event per
    "{"; each answer under the 8 MiB cut-off of a slow reader) and pings,
    then breaks the protocol with an unmasked frame. The daemon queues its
    Close behind what the client will never read; the close handshake has a
    deadline (3 s), after which the socket is cut and the session ends."""
    assert wait_sessions_closed(daemon, 60) == 0
    c = Raw(daemon, rcvbuf=4096)
    try:
        assert c.status == 101
        frame = bytes([0x81, 0x81]) + b"\x00\x00\x00\x00{"  # "{", masked with zeros
        c.sock.sendall(frame * 30000)                         # ~7 MB of error events
        for _ in range(100):
            c.send(0x9, b"p" * 125)
        c.send(0x1, b"{}", masked=False)
        t0 = time.monotonic()
        left = wait_sessions_closed(daemon, 60)
        took = time.monotonic() - t0
        assert left == 0, "the session never ended"
        print(f"session ended {took:.1f} s after the unmasked frame")
        assert "did not read our close" in daemon.log()
    finally:
        c.close()
    assert wd_api.request(daemon.port, "GET", "/health").status == 200


def handshakes_at_once(d, n):
    """n handshakes sent at once (every connection opened first); the
    statuses they get, and their sockets (left open: a session lasts)."""
    req = ("GET /v1/realtime?intent=transcription HTTP/1.1\r\n"
           f"Host: 127.0.0.1:{d.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           f"Authorization: Bearer {KEY}\r\n\r\n").encode()
    socks = [socket.create_connection(("127.0.0.1", d.port), timeout=60) for _ in range(n)]
    for s in socks:
        s.sendall(req)
    statuses = []
    for s in socks:
        head = b""
        while b"\r\n\r\n" not in head:
            got = s.recv(4096)
            if not got:
                break
            head += got
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        statuses.append(int(line.split()[1]) if line else 0)
        if statuses[-1] == 503:  # the body may follow the head: read on for it
            while b"too_many_sessions" not in head and (got := s.recv(4096)):
                head += got
            assert b"too_many_sessions" in head, head
    return statuses, socks


def test_the_session_cap_counts_handshakes(daemon):
    """Rounds of 100 handshakes at once against --realtime-sessions 4 (16
    HTTP threads, so that many handshakes are handled at the same time): at
    most 4 are upgraded in each (the cap counts a session from its 101
    being queued, not from its having been written: counted then, the
    handshakes on the daemon's HTTP threads all passed the check before any
    counted), the rest get 503 too_many_sessions."""
    for _ in range(40):  # a race: a round shows it now and then, 40 nearly always
        assert wait_sessions_closed(daemon, 60) == 0
        statuses, socks = handshakes_at_once(daemon, 100)
        for s in socks:
            s.close()
        upgraded = statuses.count(101)
        assert 1 <= upgraded <= 4, (upgraded, statuses)
        assert statuses.count(503) == 100 - upgraded, statuses
    assert wait_sessions_closed(daemon, 60) == 0


def close_code(payload):
    return struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None


@pytest.mark.parametrize("sent,answer", [
    (b"\x03", 1002),                       # half a code
    (struct.pack(">H", 1005), 1002),        # reserved: never sent by an endpoint
    (struct.pack(">H", 1004), 1002),
    (struct.pack(">H", 1006), 1002),
    (struct.pack(">H", 1015), 1002),
    (struct.pack(">H", 999), 1002),
    (struct.pack(">H", 2000), 1002),
    (struct.pack(">H", 1000) + b"\xc3", 1007),   # a reason that is not UTF-8
    (struct.pack(">H", 1000) + b"bye", 1000),   # valid: echoed
    (struct.pack(">H", 3000), 3000),
    (b"", None),                            # no code: a close without one
])
def test_close_payloads(daemon, sent, answer):
    """RFC 6455 5.5.1 and 7.4: a Close whose payload is one byte, a reserved
    or unassigned code, or a reason that is not UTF-8 fails the connection
    (1002, 1007) instead of being echoed; a valid one is echoed."""
    c = Raw(daemon)
    try:
        assert c.status == 101
        c.send(0x8, sent)
        frames = c.frames_to_end()
        closes = [p for op, p in frames if op == 0x8]
        assert len(closes) == 1 and frames[-1][0] == 0x8, frames
        assert close_code(closes[0]) == answer, closes
    finally:
        c.close()


def test_frames_in_the_handshakes_packet(daemon):
    """Frames a client sends in the handshake's own packet are the session's
    first: session.created comes before their answers, and a Close among
    them ends the session at once (it used to be echoed and the socket and
    its session slot held until the idle timeout, 600 s)."""
    update = json.dumps({"type": "session.update", "session": {
        "type": "transcription", "audio": {"input": {"turn_detection": None}}}}).encode()
    t0 = time.monotonic()
    c = Raw(daemon, timeout=20,
            early=ws_frame(1, update) + ws_frame(8, struct.pack(">H", 1000)))
    assert c.status == 101
    frames = c.frames_to_end()
    c.close()
    texts = [json.loads(p)["type"] for op, p in frames if op == 1]
    assert texts[:2] == ["session.created", "session.updated"], texts
    assert frames[-1] == (8, struct.pack(">H", 1000)), frames[-1]
    assert time.monotonic() - t0 < 10  # ended by the server, not the timeout
    assert wait_sessions_closed(daemon, 10) == 0
    # A protocol error in that packet (an unmasked frame) is answered with
    # 1002 after session.created, not a bare disconnect.
    c = Raw(daemon, timeout=20, early=ws_frame(1, update, masked=False))
    assert c.status == 101
    frames = c.frames_to_end()
    c.close()
    assert json.loads(frames[0][1])["type"] == "session.created"
    assert frames[-1][0] == 8 and close_code(frames[-1][1]) == 1002, frames
    assert wait_sessions_closed(daemon, 10) == 0


def test_subprotocols_as_browsers_expect(daemon):
    """`realtime` offered (wherever in the list) is answered; the browser's
    key subprotocol is its bearer token; protocols offered without
    `realtime` are refused with a reason (answered with none, a browser
    fails the handshake with none); none offered, none answered."""
    key = f"openai-insecure-api-key.{KEY}"
    for offer in (f"realtime, {key}", f"openai-beta.realtime-v1, {key}, realtime"):
        c = Raw(daemon, headers={"Authorization": None, "Sec-WebSocket-Protocol": offer})
        try:
            assert c.status == 101, (offer, c.status)
            assert c.headers.get("sec-websocket-protocol") == "realtime", c.headers
        finally:
            c.close()
    c = Raw(daemon, headers={"Sec-WebSocket-Protocol": f"{key}, openai-beta.realtime-v1"})
    try:
        assert c.status == 400, c.status
        assert "sec-websocket-protocol" not in c.headers
        body = c.buf
        while b"unsupported_subprotocol" not in body and (got := c.sock.recv(4096)):
            body += got
        assert b"unsupported_subprotocol" in body, body
    finally:
        c.close()
    c = Raw(daemon)
    try:
        assert c.status == 101 and "sec-websocket-protocol" not in c.headers, c.headers
    finally:
        c.close()
    c = Raw(daemon, headers={"Sec-WebSocket-Protocol": "realtime",
                             "Authorization": "Bearer wrong"})
    try:
        assert c.status == 401
    finally:
        c.close()


def test_wrong_version_gets_426_with_the_version_spoken(daemon):
    r = wd_api.request(daemon.port, "GET", "/v1/realtime", headers={
        "Authorization": f"Bearer {KEY}", "Upgrade": "websocket", "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "8"})
    assert r.status == 426, r
    assert r.headers.get("sec-websocket-version") == "13", r.headers
    assert r.headers.get("upgrade") == "websocket", r.headers


def test_nothing_follows_our_close():
    """RFC 6455 5.5.1: after the daemon's Close (SIGTERM: 1001) it sends no
    more frames, while it waits for the client's: a ping gets no pong, a
    binary frame no error event."""
    import signal
    if not os.path.exists(wd_api.TINY_EN):
        pytest.skip("tiny.en missing (scripts/fetch-model.sh tiny.en)")
    d = start_daemon()
    try:
        c = Raw(d, headers={"Authorization": None})
        assert c.status == 101
        op, p = c.frame()
        assert op == 0x1 and json.loads(p)["type"] == "session.created"
        os.kill(d.proc.pid, signal.SIGTERM)
        op, p = c.frame()
        assert op == 0x8 and close_code(p) == 1001, (op, p)
        c.send(0x9, b"still there?")
        c.send(0x2, b"binary")
        c.send(0x1, b"{")
        after = c.frames_to_end()
        assert after == [], after
        c.close()
        assert d.proc.wait(timeout=60) == 0, d.log_tail()
    finally:
        if d.proc.poll() is None:
            stop_daemon(d)


def update(ws, **transcription):
    ws.send(json.dumps({"type": "session.update", "session": {
        "type": "transcription", "audio": {"input": {"transcription": transcription,
                                                     "turn_detection": None}}}}))
    ev = json.loads(ws.recv(timeout=30))
    return ev


def test_session_update_checks_the_language(daemon):
    """session.update takes a language the model speaks, or refuses it with
    an error event and keeps the session as it was (tiny.en: English only;
    a language not in Whisper's table is no language at all)."""
    with connect(daemon) as ws:
        assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
        ev = update(ws, language="en")
        assert ev["type"] == "session.updated", ev
        for lang, code in (("fr", "unsupported_language"), ("klingon", "invalid_value"),
                           ("zz", "invalid_value")):
            ev = update(ws, language=lang)
            assert ev["type"] == "error", (lang, ev)
            assert ev["error"]["code"] == code, ev
            assert ev["error"]["param"] == "session.audio.input.transcription.language", ev
        ev = update(ws)
        assert ev["type"] == "session.updated", ev
        assert ev["session"]["audio"]["input"]["transcription"]["language"] == "en", ev
        ev = update(ws, language="EN")  # the table's spelling, as uploads have it
        assert ev["session"]["audio"]["input"]["transcription"]["language"] == "en", ev


def test_an_echoed_type_is_cut_at_a_character(daemon):
    """An unknown event type is echoed in the error (64 bytes at most): cut
    inside a 2-byte character, the message was not UTF-8 and jansson would
    not send it; cut at a character, the error event comes."""
    with connect(daemon) as ws:
        assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
        ws.send(json.dumps({"type": "a" + "\u00e9" * 40, "event_id": "x" + "\u00e9" * 80},
                           ensure_ascii=False))
        ws.send("{")  # an error of its own, after
        ev = json.loads(ws.recv(timeout=30))
        assert ev["type"] == "error" and ev["error"]["code"] == "invalid_event", ev
        assert "a" + "\u00e9" * 31 + "`" in ev["error"]["message"], ev
        assert ev["error"]["event_id"].startswith("x" + "\u00e9" * 63), ev


def test_a_client_gone_cancels_every_turn():
    """65 turns in flight when the client leaves: the oldest (280 s of
    speech, running; --max-batch 1, so it runs alone and the others wait)
    and 64 short ones behind it. Every one is cancelled: none ends done
    after the client left (at most 64 were, newest first, so the running
    one went on to the end)."""
    if not os.path.exists(wd_api.TINY_EN):
        pytest.skip("tiny.en missing (scripts/fetch-model.sh tiny.en)")
    jfk = subprocess.run(["ffmpeg", "-loglevel", "error", "-i", wd_api.JFK_WAV, "-ac", "1",
                          "-ar", "24000", "-f", "s16le", "-"], check=True,
                         capture_output=True).stdout
    long_turn = (jfk * 26)[:280 * 48000]
    d = start_daemon(args=["--queue-max", "200", "--max-batch", "1"])
    try:
        def m(name):
            return wd_api.metrics(d.port).get(name, 0)
        with ws_sync.connect(f"ws://127.0.0.1:{d.port}/v1/realtime?intent=transcription",
                             max_size=None, open_timeout=30) as ws:
            assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
            manual_turns(ws)
            next_of(ws, "session.updated")
            for i in range(0, len(long_turn), 480000):        # 10 s pieces
                ws.send(json.dumps({"type": "input_audio_buffer.append",
                                    "audio": base64.b64encode(long_turn[i:i + 480000]).decode()}))
            ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            short = base64.b64encode(bytes(9600)).decode()    # 0.2 s of silence
            for _ in range(64):
                ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": short}))
                ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            # the clear is answered after every commit before it was submitted
            ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
            _, seen = next_of(ws, "input_audio_buffer.cleared", timeout=120)
            committed = [e for e in seen if e["type"] == "input_audio_buffer.committed"]
            assert len(committed) == 65, [e["type"] for e in seen]
            assert not [e for e in seen if e["type"].endswith((".failed", ".completed"))], seen
            done_before = m('whisperd_jobs_total{result="done"}')
            assert m("whisperd_jobs_running") == 1, "the long turn ended before the test could leave"
            assert m("whisperd_queue_depth") == 64
        assert wait_sessions_closed(d, 60) == 0
        deadline = time.monotonic() + 300
        while (m("whisperd_jobs_running") or m("whisperd_queue_depth")) and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        assert m("whisperd_jobs_running") == 0 and m("whisperd_queue_depth") == 0
        assert m('whisperd_jobs_total{result="done"}') == done_before, \
            "turns went on to the end after their client left"
    finally:
        stop_daemon(d)
