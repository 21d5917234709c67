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
    d = start_daemon(args=["--api-key", KEY, "--realtime-sessions", "4"])
    yield d
    stop_daemon(d)


def connect(d, **kw):
    return ws_sync.connect(f"ws://127.0.0.1:{d.port}/v1/realtime?intent=transcription",
                           additional_headers={"Authorization": f"Bearer {KEY}"},
                           max_size=None, open_timeout=30, **kw)


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
