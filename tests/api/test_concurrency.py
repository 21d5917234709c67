"""Several clients at once: concurrent requests get the same words as one
alone (batching); with --queue-max 1 --max-batch 1 a full queue answers 429
with Retry-After, and so does a spent audio budget (--queue-audio-s); a
client that disconnects has its job cancelled, running or queued, and the
daemon goes on serving."""

import io
import socket
import time
import wave

import pytest

import wd_api
from wd_api import (Background, assert_healthy, assert_jfk_json, check_error, multipart,
                    parallel, wait_counts)

TRANSCRIBE = "/v1/audio/transcriptions"


@pytest.fixture(scope="module")
def q_daemon():
    """One running job, one queued, the rest refused."""
    d = wd_api.start_daemon(args=["--queue-max", "1", "--max-batch", "1"])
    yield d
    wd_api.stop_daemon(d)


def test_concurrent_requests_same_words(daemon):
    fmts = ["json", "verbose_json", "text", "json"]
    rs = parallel(len(fmts), lambda i: wd_api.post_audio(daemon.port, response_format=fmts[i]))
    for fmt, r in zip(fmts, rs):
        assert r.status == 200, r
        wd_api.check_transcript(fmt, r.json() if "json" in fmt else r.text)


def test_audio_budget_429():
    """--queue-audio-s 15: a 33 s upload is taken (the worker held nothing),
    and while it runs the next request is refused 429 with Retry-After
    before its audio is decoded; once it ends, requests are taken again."""
    with wave.open(wd_api.JFK_WAV, "rb") as w:
        params, frames = w.getparams(), w.readframes(w.getnframes())
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setparams(params)
        w.writeframes(frames * 3)
    d = wd_api.start_daemon(args=["--queue-audio-s", "15"])
    try:
        long = Background(d.port, data=buf.getvalue(), filename="long.wav")
        wait_counts(d.port, lambda c: c["running"] + c["queued"] >= 1, what="long job queued")
        r = wd_api.post_audio(d.port)
        check_error(r, 429, etype="rate_limit_error")
        assert int(r.headers["retry-after"]) >= 1, r
        r = long.response()
        assert r.status == 200, r
        assert "americans" in wd_api.words(r.json()["text"]), r
        wait_counts(d.port, lambda c: c["running"] + c["queued"] == 0, what="idle")
        assert_jfk_json(wd_api.post_audio(d.port))
    finally:
        wd_api.stop_daemon(d)


def test_queue_full_429(q_daemon):
    n = 6
    rs = parallel(n, lambda i: wd_api.post_audio(q_daemon.port))
    ok = [r for r in rs if r.status == 200]
    busy = [r for r in rs if r.status == 429]
    assert len(ok) + len(busy) == n, rs
    assert ok and busy, [r.status for r in rs]
    assert len(ok) <= 2 + 1, f"queue-max 1 + max-batch 1 let {len(ok)} of {n} through at once"
    for r in ok:
        assert_jfk_json(r)
    for r in busy:
        check_error(r, 429, param=None, etype=r.json()["error"]["type"])
        ra = r.headers.get("retry-after")
        assert ra is not None and ra.isdigit() and int(ra) >= 1, r.headers
    assert_healthy(q_daemon)


def test_disconnect_cancels_running_job(q_daemon):
    before = wait_counts(q_daemon.port, lambda c: c["running"] == 0 and c["queued"] == 0,
                         what="idle")
    b = Background(q_daemon.port)
    wait_counts(q_daemon.port, lambda c: c["running"] == 1, what="job running")
    t0 = time.monotonic()
    b.close()
    after = wait_counts(q_daemon.port, lambda c: c["running"] == 0, timeout=30, what="job ended")
    took = time.monotonic() - t0
    assert after["done"] == before["done"], \
        f"the abandoned job ran to completion ({took:.1f} s) instead of being cancelled"
    assert after["failed"] == before["failed"] + 1, (before, after)
    if before["cancelled"] is not None:
        assert after["cancelled"] == before["cancelled"] + 1, after
    assert_healthy(q_daemon)


def test_disconnect_cancels_queued_job(q_daemon):
    before = wait_counts(q_daemon.port, lambda c: c["running"] == 0 and c["queued"] == 0,
                         what="idle")
    a = Background(q_daemon.port)
    wait_counts(q_daemon.port, lambda c: c["running"] == 1, what="first job running")
    b = Background(q_daemon.port)
    wait_counts(q_daemon.port, lambda c: c["queued"] == 1, what="second job queued")
    b.close()
    wait_counts(q_daemon.port, lambda c: c["queued"] == 0, timeout=30,
                what="queued job dropped")
    r = a.response()
    assert_jfk_json(r)
    after = wait_counts(q_daemon.port, lambda c: c["running"] == 0 and c["queued"] == 0,
                        what="idle")
    assert after["done"] == before["done"] + 1, (before, after)
    assert after["failed"] == before["failed"] + 1, (before, after)
    if before["cancelled"] is not None:
        assert after["cancelled"] == before["cancelled"] + 1, after
    assert_healthy(q_daemon)


def test_disconnect_during_upload_and_stream(q_daemon):
    """A client that leaves in the middle of its upload, and one that leaves
    a stream=true answer after the first event."""
    body, ctype = multipart(wd_api.audio_fields())
    s = socket.create_connection(("127.0.0.1", q_daemon.port))
    s.sendall((f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body[:len(body) // 3])
    s.close()
    body, ctype = multipart(wd_api.audio_fields(stream="true"))
    s = socket.create_connection(("127.0.0.1", q_daemon.port))
    s.sendall((f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    s.settimeout(wd_api.REQUEST_TIMEOUT_S)
    got = b""
    while b"data:" not in got:
        b = s.recv(4096)
        assert b, f"stream closed early: {got!r}"
        got += b
    s.close()
    wait_counts(q_daemon.port, lambda c: c["running"] == 0 and c["queued"] == 0, what="idle")
    assert_healthy(q_daemon)
