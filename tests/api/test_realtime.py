"""OpenAI's Realtime transcription sessions on GET /v1/realtime (issue #26):
the official Python SDK's realtime client (`client.realtime.connect`,
websockets underneath), unmodified but for the base URL and key, streams
jfk.wav as 24 kHz PCM and as G.711 μ-law, with commits of its own and with
server_vad, and gets the sentence in `completed` events; a raw WebSocket
client sends what an SDK never would (bad JSON, unknown events, binary
frames, an empty commit, a frame over the size limit) and gets an error
event or a close, and the daemon goes on serving.
"""

import base64
import difflib
import json
import os
import subprocess
import time

import pytest

import wd_api
from wd_api import start_daemon, stop_daemon

openai = pytest.importorskip("openai")
ws_sync = pytest.importorskip("websockets.sync.client")

JFK_WORDS = wd_api.words(wd_api.JFK_TEXT)
VAD_MODEL = os.path.join(wd_api.ROOT, "models", "silero-vad-v6.safetensors")


def pcm_of(fmt, rate):
    """jfk.wav as ffmpeg converts it: s16le or mulaw, mono, at rate."""
    return subprocess.run(["ffmpeg", "-loglevel", "error", "-i", wd_api.JFK_WAV, "-ac", "1",
                           "-ar", str(rate), "-f", fmt, "-"], check=True,
                          capture_output=True).stdout


@pytest.fixture(scope="module")
def daemon():
    if not os.path.exists(wd_api.TINY_EN):
        pytest.skip("tiny.en missing (scripts/fetch-model.sh tiny.en)")
    if not os.path.exists(VAD_MODEL):
        pytest.skip("models/silero-vad-v6.safetensors not present (scripts/fetch-vad.sh)")
    d = start_daemon(args=["--api-key", "sk-rt", "--realtime-sessions", "4",
                           "--vad-model", VAD_MODEL])
    yield d
    stop_daemon(d)


def client(d, key="sk-rt"):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{d.port}/v1", api_key=key)


def stream(conn, data, bytes_per_piece):
    for i in range(0, len(data), bytes_per_piece):
        conn.input_audio_buffer.append(audio=base64.b64encode(data[i:i + bytes_per_piece]).decode())


def collect(conn, n_items=None, timeout=120):
    """Server events until every committed item has completed (or failed):
    n_items of them, or (n_items None) every one before a `cleared`, which
    the server sends after everything the appends before it caused."""
    committed, done, events, cleared = [], {}, [], n_items is not None
    if not cleared:
        conn.input_audio_buffer.clear()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ev = conn.recv()
        events.append(ev)
        if ev.type == "input_audio_buffer.committed":
            committed.append(ev.item_id)
        elif ev.type == "input_audio_buffer.cleared":
            cleared = True
        elif ev.type in ("conversation.item.input_audio_transcription.completed",
                         "conversation.item.input_audio_transcription.failed"):
            done[ev.item_id] = ev
        elif ev.type == "error":
            raise AssertionError(f"error event: {ev}")
        if cleared and committed and len(done) == len(committed) and (
                n_items is None or len(committed) >= n_items):
            return committed, done, events
    raise AssertionError(f"not every turn completed: {[e.type for e in events]}")


def test_manual_commits_pcm16_24khz(daemon):
    pcm = pcm_of("s16le", 24000)
    with client(daemon).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        assert conn.recv().type == "session.created"
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "whisper-1", "language": "en"},
            "turn_detection": None}}, "include": ["item.input_audio_transcription.logprobs"]})
        ev = conn.recv()
        assert ev.type == "session.updated", ev
        stream(conn, pcm, 4800)                      # 100 ms pieces
        conn.input_audio_buffer.commit()
        committed, done, events = collect(conn, 1)
        item = committed[0]
        fin = done[item]
        assert fin.type.endswith(".completed"), fin
        assert wd_api.words(fin.transcript) == JFK_WORDS, fin.transcript
        assert fin.logprobs and fin.logprobs[0].token, fin
        deltas = "".join(e.delta for e in events if e.type.endswith(".delta") and e.item_id == item)
        assert wd_api.words(deltas) == JFK_WORDS, deltas
        # an empty commit is an error event, and the session goes on
        conn.input_audio_buffer.commit()
        ev = conn.recv()
        assert ev.type == "error" and ev.error.code == "input_audio_buffer_commit_empty", ev


def test_server_vad_turns_pcmu(daemon):
    """μ-law at 8 kHz at real-time pace in 40 ms pieces, then 1.5 s of
    silence; server_vad finds the speech (speech_started, speech_stopped,
    committed) and the turns' transcripts are the sentence."""
    ulaw = pcm_of("mulaw", 8000) + bytes([0xFF]) * 12000
    with client(daemon).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        assert conn.recv().type == "session.created"
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcmu"},
            "turn_detection": {"type": "server_vad", "threshold": 0.5,
                               "prefix_padding_ms": 300, "silence_duration_ms": 800}}}})
        assert conn.recv().type == "session.updated"
        t0 = time.monotonic()
        for i in range(0, len(ulaw), 320):
            stream(conn, ulaw[i:i + 320], 320)
            time.sleep(max(0.0, t0 + (i + 320) / 8000 - time.monotonic()))
        committed, done, events = collect(conn)
        types = [e.type for e in events]
        assert types.count("input_audio_buffer.speech_started") == len(committed), types
        assert types.count("input_audio_buffer.speech_stopped") == len(committed), types
        starts = [e.audio_start_ms for e in events if e.type.endswith("speech_started")]
        assert 0 <= starts[0] < 1000, starts
        text = " ".join(done[i].transcript for i in committed)
        # tiny.en on telephone audio cut into turns: the sentence, give or
        # take a word ("and so am i fellow americans")
        match = difflib.SequenceMatcher(None, wd_api.words(text), JFK_WORDS).ratio()
        assert match > 0.85 and wd_api.words(text)[-2:] == ["your", "country"], (match, text)


def test_turns_wait_for_a_model_loaded_on_demand():
    """--models-memory: base is offered, not loaded. Two turns committed
    for it at once (the second while the first waits) wait for the load
    on the session's thread, then complete with base's words."""
    if not os.path.exists(wd_api.BASE) or not os.path.exists(wd_api.TINY_EN):
        pytest.skip("tiny.en or base missing (scripts/fetch-model.sh)")
    d = start_daemon(args=["--models", wd_api.BASE, "--models-memory", "600"])
    try:
        pcm = pcm_of("s16le", 24000)
        with client(d, "x").realtime.connect(extra_query={"intent": "transcription"}) as conn:
            assert conn.recv().type == "session.created"
            conn.session.update(session={"type": "transcription", "audio": {"input": {
                "transcription": {"model": "base"}, "turn_detection": None}}})
            assert conn.recv().type == "session.updated"
            for _ in range(2):
                stream(conn, pcm, 48000)
                conn.input_audio_buffer.commit()
            committed, done, events = collect(conn, 2)
            assert len(committed) == 2
            for item in committed:
                assert done[item].type.endswith(".completed"), done[item]
                assert wd_api.words(done[item].transcript) == JFK_WORDS, done[item]
        log = d.log()
        assert "waits for model base to load" in log and "model base on" in log
    finally:
        stop_daemon(d)


def test_turns_held_for_a_load_are_capped():
    """While base loads (held 6 s by the load_delay fault), a session holds
    at most 8 committed turns for it, each with its own copy of the audio:
    the 9th fails at once with model_loading, the session goes on, and the
    8 held ones complete with base's words once it is loaded (the session
    parked in the server, woken by the load, not looking every few ms)."""
    if not os.path.exists(wd_api.BASE) or not os.path.exists(wd_api.TINY_EN):
        pytest.skip("tiny.en or base missing (scripts/fetch-model.sh)")
    d = start_daemon(args=["--models", wd_api.BASE, "--models-memory", "600",
                           "--fault-inject", "load_delay:6000"])
    try:
        pcm = pcm_of("s16le", 24000)[:24000 * 2 * 2]   # 2 s: "And so my fellow"
        with client(d, "x").realtime.connect(extra_query={"intent": "transcription"}) as conn:
            assert conn.recv().type == "session.created"
            conn.session.update(session={"type": "transcription", "audio": {"input": {
                "transcription": {"model": "base"}, "turn_detection": None}}})
            assert conn.recv().type == "session.updated"
            for _ in range(9):
                stream(conn, pcm, 48000)
                conn.input_audio_buffer.commit()
            committed, done, events = collect(conn, 9, timeout=90)
            assert len(committed) == 9
            last = done[committed[-1]]
            assert last.type.endswith(".failed") and last.error.code == "model_loading", last
            assert "already wait" in last.error.message, last
            for item in committed[:-1]:
                assert done[item].type.endswith(".completed"), done[item]
                assert wd_api.words(done[item].transcript)[:2] == ["and", "so"], done[item]
        assert "model base on" in d.log()
    finally:
        stop_daemon(d)


def test_turns_for_a_model_that_fails_to_load_fail_at_once(tmp_path):
    """base's file is offered at start, then replaced by a truncated one:
    two turns committed for it fail with model_load_failed and the load's
    reason as soon as the load fails (not after the wait for a load), and
    the load is tried once."""
    if not os.path.exists(wd_api.BASE) or not os.path.exists(wd_api.TINY_EN):
        pytest.skip("tiny.en or base missing (scripts/fetch-model.sh)")
    path = str(tmp_path / "base.bin")
    with open(wd_api.BASE, "rb") as f:
        whole = f.read()
    with open(path, "wb") as f:
        f.write(whole)
    d = start_daemon(args=["--models", path, "--models-memory", "3000"])
    try:
        with open(path + ".cut", "wb") as f:
            f.write(whole[:len(whole) // 2])
        os.rename(path + ".cut", path)
        pcm = pcm_of("s16le", 24000)
        with client(d, "x").realtime.connect(extra_query={"intent": "transcription"}) as conn:
            assert conn.recv().type == "session.created"
            conn.session.update(session={"type": "transcription", "audio": {"input": {
                "transcription": {"model": "base"}, "turn_detection": None}}})
            assert conn.recv().type == "session.updated"
            t0 = time.monotonic()
            for _ in range(2):
                stream(conn, pcm, 48000)
                conn.input_audio_buffer.commit()
            committed, done, events = collect(conn, 2, timeout=20)
            assert time.monotonic() - t0 < 15
            assert len(committed) == 2
            for item in committed:
                assert done[item].type.endswith(".failed"), done[item]
                assert done[item].error.code == "model_load_failed", done[item]
                assert "truncated" in done[item].error.message, done[item]
        assert d.log().count("could not be loaded") == 1, d.log()
    finally:
        stop_daemon(d)


def test_partial_transcripts_of_the_open_turn():
    """--realtime-partials-ms 700: jfk.wav at real-time pace with
    server_vad; while the turn is spoken, partial events (whisperd's own,
    passed through by the Python SDK) carry the turn so far, each before
    its turn's committed event, and the completed transcript is the
    sentence as without partials."""
    d = start_daemon(args=["--vad-model", VAD_MODEL, "--realtime-partials-ms", "700"])
    try:
        # one turn of the whole sentence (its pauses are under 1.2 s): room for
        # several partials even where an encode takes a second (ASan)
        pcm = pcm_of("s16le", 24000) + bytes(96000)
        with client(d, "x").realtime.connect(extra_query={"intent": "transcription"}) as conn:
            assert conn.recv().type == "session.created"
            conn.session.update(session={"type": "transcription", "audio": {"input": {
                "turn_detection": {"type": "server_vad", "silence_duration_ms": 1200}}}})
            assert conn.recv().type == "session.updated"
            t0 = time.monotonic()
            for i in range(0, len(pcm), 1920):                # 40 ms pieces
                stream(conn, pcm[i:i + 1920], 1920)
                time.sleep(max(0.0, t0 + (i + 1920) / 48000 - time.monotonic()))
            committed, done, events = collect(conn)
        types = [e.type for e in events]
        partials = [(k, e) for k, e in enumerate(events) if e.type.endswith("transcription.partial")]
        assert partials, types
        for k, e in partials:
            assert e.item_id in committed and wd_api.words(e.transcript), e
            mine = [j for j, x in enumerate(events)
                    if x.type == "input_audio_buffer.committed" and x.item_id == e.item_id]
            assert k < mine[0], (k, mine, types)
        text = " ".join(done[i].transcript for i in committed)
        assert wd_api.words(text) == JFK_WORDS, text
        print("partials:", [(e.item_id[-2:], e.transcript) for _, e in partials])
    finally:
        stop_daemon(d)


def raw(daemon, key="sk-rt", subprotocols=None, headers=True):
    extra = {"Authorization": f"Bearer {key}"} if headers else None
    return ws_sync.connect(f"ws://127.0.0.1:{daemon.port}/v1/realtime?intent=transcription",
                           additional_headers=extra, subprotocols=subprotocols,
                           max_size=None, open_timeout=30)


def send_jfk_and_commit(ws):
    """A raw client's manual turn: jfk.wav as 24 kHz PCM, committed."""
    ws.send(json.dumps({"type": "session.update", "session": {
        "type": "transcription", "audio": {"input": {"turn_detection": None}}}}))
    ws.send(json.dumps({"type": "input_audio_buffer.append",
                        "audio": base64.b64encode(pcm_of("s16le", 24000)).decode()}))
    ws.send(json.dumps({"type": "input_audio_buffer.commit"}))


def next_error(ws):
    while True:
        ev = json.loads(ws.recv(timeout=30))
        if ev["type"] == "error":
            return ev["error"]


def test_bad_messages_get_error_events_and_the_session_survives(daemon):
    with raw(daemon) as ws:
        assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
        ws.send("{not json")
        assert next_error(ws)["code"] == "invalid_json"
        ws.send(json.dumps({"type": "response.create", "event_id": "e1"}))
        err = next_error(ws)
        assert err["code"] == "invalid_event" and err["event_id"] == "e1", err
        ws.send(json.dumps({"no": "type"}))
        assert next_error(ws)["param"] == "type"
        ws.send(b"\x00\x01binary")
        assert next_error(ws)["code"] == "invalid_event"
        ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": "!!!"}))
        assert next_error(ws)["param"] == "audio"
        ws.send(json.dumps({"type": "session.update", "session": {
            "type": "transcription", "audio": {"input": {"format": {"type": "audio/pcm",
                                                                    "rate": 16000}}}}}))
        assert next_error(ws)["param"] == "session.audio.input.format.rate"
        ws.send(json.dumps({"type": "session.update", "session": {"type": "realtime"}}))
        assert next_error(ws)["param"] == "session.type"
        # still a working session: a manual commit is transcribed
        ws.send(json.dumps({"type": "session.update", "session": {
            "type": "transcription", "audio": {"input": {"turn_detection": None}}}}))
        pcm = pcm_of("s16le", 24000)
        ws.send(json.dumps({"type": "input_audio_buffer.append",
                            "audio": base64.b64encode(pcm).decode()}))
        ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        while True:
            ev = json.loads(ws.recv(timeout=120))
            if ev["type"].endswith("transcription.completed"):
                assert wd_api.words(ev["transcript"]) == JFK_WORDS, ev
                break
            assert ev["type"] != "error", ev


def test_oversize_frame_closes_1009_and_the_daemon_serves_on(daemon):
    ws = raw(daemon)
    ws.recv(timeout=30)
    with pytest.raises(Exception):  # the server closes while the frame is still going out
        ws.send("x" * (17 << 20))
        while True:
            ws.recv(timeout=30)
    assert ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 1009
    ws.close()
    assert wd_api.request(daemon.port, "GET", "/health").status == 200


def test_auth_and_handshake(daemon):
    import websockets.exceptions as wse
    with pytest.raises(wse.InvalidStatus) as e:
        raw(daemon, key="wrong")
    assert e.value.response.status_code == 401
    # a browser's key: the subprotocol, no Authorization header
    with raw(daemon, headers=False,
             subprotocols=["realtime", "openai-insecure-api-key.sk-rt"]) as ws:
        assert ws.subprotocol == "realtime"
        assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
    r = wd_api.request(daemon.port, "GET", "/v1/realtime",
                       headers={"Authorization": "Bearer sk-rt"})
    assert r.status == 426, r
    # a client that disconnects mid-turn leaves the daemon serving
    with raw(daemon) as ws:
        ws.recv(timeout=30)
        send_jfk_and_commit(ws)
    assert wd_api.request(daemon.port, "GET", "/health").status == 200


def test_metrics_count_sessions_and_turns(daemon):
    # A session whose client left mid-turn (the test before) ends on the
    # daemon's side once its thread has read the rest of what was sent and
    # the close: seconds on a loaded sanitizer build, not at the client's
    # return. It must end; wait for that, then read the counters.
    deadline = time.monotonic() + 60
    m = wd_api.metrics(daemon.port)
    while m["whisperd_realtime_sessions_open"] != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        m = wd_api.metrics(daemon.port)
    assert m["whisperd_realtime_sessions_total"] >= 5, m
    assert m["whisperd_realtime_turns_total"] >= 4, m
    assert m["whisperd_realtime_turn_latency_seconds_sum"] > 0, m
    assert m["whisperd_realtime_sessions_open"] == 0, m
    assert m['whisperd_http_requests_total{route="realtime",code="101"}'] >= 5, m


def test_sigterm_finishes_running_turns_then_closes_1001():
    if not os.path.exists(wd_api.TINY_EN):
        pytest.skip("tiny.en missing (scripts/fetch-model.sh tiny.en)")
    import signal
    d = start_daemon()
    try:
        ws = ws_sync.connect(f"ws://127.0.0.1:{d.port}/v1/realtime?intent=transcription",
                             max_size=None, open_timeout=30)
        ws.recv(timeout=30)
        # The start-up warm-up is a job done already: count from here.
        done0 = wd_api.metrics(d.port).get('whisperd_jobs_total{result="done"}', 0)
        send_jfk_and_commit(ws)
        while json.loads(ws.recv(timeout=30))["type"] != "input_audio_buffer.committed":
            pass
        # SIGTERM answers a job still queued 503 (a turn: failed), as for
        # uploads: wait until the worker runs it (a loaded 2-core CI machine
        # may take a while to admit it; it may even be done already)
        deadline = time.monotonic() + 30
        while (wd_api.metrics(d.port).get("whisperd_jobs_running", 0) < 1 and
               wd_api.metrics(d.port).get('whisperd_jobs_total{result="done"}', 0) <= done0 and
               time.monotonic() < deadline):
            time.sleep(0.01)
        os.kill(d.proc.pid, signal.SIGTERM)
        got = None
        with pytest.raises(Exception):
            while True:
                ev = json.loads(ws.recv(timeout=60))
                if ev["type"].endswith("transcription.completed"):
                    got = ev["transcript"]
        assert got is not None and wd_api.words(got) == JFK_WORDS, got
        assert ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 1001
        assert d.proc.wait(timeout=60) == 0, d.log_tail()
    finally:
        if d.proc.poll() is None:
            stop_daemon(d)


NODE_DIR = os.path.join(wd_api.HERE, "node")


@pytest.mark.parametrize("fmt,mode", [("pcm", "manual"), ("pcmu", "vad")])
def test_node_sdk_realtime_client(daemon, tmp_path, fmt, mode):
    """The Node SDK's OpenAIRealtimeWS (openai 6.x over ws 8), through a TLS
    front of the test's own (the SDK always opens wss://): PCM with a
    commit, μ-law with server_vad; the completed transcripts are jfk."""
    import shutil
    node = shutil.which("node")
    if not node or not os.path.exists(os.path.join(NODE_DIR, "node_modules", "ws")):
        pytest.skip("node or tests/api/node/node_modules/ws missing (scripts/install-test-deps.sh)")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
                    "/CN=127.0.0.1", "-days", "1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    audio = tmp_path / "jfk.raw"
    audio.write_bytes(pcm_of("s16le", 24000) if fmt == "pcm"
                      else pcm_of("mulaw", 8000) + bytes([0xFF]) * 12000)
    p = subprocess.run([node, os.path.join(NODE_DIR, "rt_check.mjs"), str(daemon.port), str(key),
                        str(cert), str(audio), fmt, mode], capture_output=True, text=True,
                       cwd=NODE_DIR, timeout=300)
    assert p.returncode == 0, f"node rc {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["types"][0] == "session.created", doc
    assert "session.updated" in doc["types"], doc
    text = " ".join(doc["transcripts"])
    match = difflib.SequenceMatcher(None, wd_api.words(text), JFK_WORDS).ratio()
    assert match > 0.85, (match, doc)
    if mode == "vad":
        assert "input_audio_buffer.speech_started" in doc["types"], doc


def test_a_client_that_stops_reading_is_cut_off(daemon):
    """A client that sends and never reads (its library stops reading once
    16 messages wait): the events queued for it pass 8 MiB and the session
    is cut off, while the daemon serves everyone else."""
    ws = raw(daemon)
    try:
        try:
            for _ in range(200000):          # each draws an error event of ~300 bytes
                ws.send("{")
        except Exception:
            pass                             # cut off while still sending
        deadline = time.monotonic() + 120    # a slow (sanitized) daemon is still reading
        while "client not reading" not in daemon.log() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        ws.close()
    assert "client not reading" in daemon.log()
    assert wd_api.request(daemon.port, "GET", "/health").status == 200
    with raw(daemon) as ws2:
        assert json.loads(ws2.recv(timeout=30))["type"] == "session.created"
