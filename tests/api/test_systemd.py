"""systemd integration, with this test standing in for systemd: the
sd_notify protocol on a NOTIFY_SOCKET of our own (READY=1 only once /ready
answers 200, STATUS= lines, WATCHDOG=1 when WATCHDOG_USEC is set and only
then, STOPPING=1 on SIGTERM), socket activation through
systemd-socket-activate, and SIGTERM with jobs in flight (running ones
finish with 200, queued ones get 503, exit 0)."""

import http.client
import io
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import wave

import pytest

import wd_api
from wd_api import (Background, JFK_WAV, NotifyListener, assert_healthy, assert_jfk_json, check_error,
                    request, wait_counts)

SOCKET_ACTIVATE = shutil.which("systemd-socket-activate") or "/usr/bin/systemd-socket-activate"
WATCHDOG_USEC = 5_000_000


@pytest.fixture
def notify():
    nl = NotifyListener()
    yield nl
    nl.close()


def test_notify_ready_status_watchdog_stopping(notify):
    d = wd_api.Daemon(env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": str(WATCHDOG_USEC)})
    d.start(wait=False)
    try:
        seen = []                                     # /ready answers before READY=1
        early = None                                  # a transcription sent before ready
        deadline = time.monotonic() + wd_api.READY_TIMEOUT_S
        while not notify.find("READY=1"):
            assert d.alive(), f"whisperd exited:\n{d.log_tail()}"
            assert time.monotonic() < deadline, "no READY=1:\n" + d.log_tail()
            try:
                st = request(d.port, "GET", "/ready", timeout=5).status
                if not notify.find("READY=1"):
                    seen.append(st)
                if st == 503 and early is None:
                    early = wd_api.post_audio(d.port)
            except OSError:
                pass
            time.sleep(0.02)
        # Audio before the model is ready: 503 with Retry-After (or, if it
        # became ready meanwhile, the right answer).
        assert early is not None
        if early.status == 503:
            check_error(early, 503, param=None, etype="server_error")
            assert early.headers.get("retry-after", "").isdigit(), early.headers
        else:
            assert_jfk_json(early)
        # The moment READY=1 is there, /ready says 200.
        r = request(d.port, "GET", "/ready")
        assert r.status == 200, f"READY=1 sent while /ready answers {r!r}"
        assert 503 in seen, f"/ready never answered 503 before READY=1 (saw {set(seen)})"
        assert request(d.port, "GET", "/health").status == 200
        t_ready = notify.find("READY=1")[0][0]
        status = [m for t, m in notify.find("STATUS=") if t <= t_ready]
        assert status and all(len(m) > len("STATUS=") for m in status), notify.messages
        # Watchdog pings, idle and while a job runs.
        time.sleep(2 * WATCHDOG_USEC / 1e6 * 0.6)
        assert_healthy(d)
        time.sleep(1)
        pings = [t for t, m in notify.messages if m == "WATCHDOG=1" and t >= t_ready]
        assert len(pings) >= 3, notify.messages
        gaps = [b - a for a, b in zip([t_ready] + pings, pings)]
        assert max(gaps) < WATCHDOG_USEC / 1e6, f"watchdog gaps {gaps}"
        assert len(notify.find("READY=1")) == 1, notify.messages
    finally:
        rc = d.stop()
    t_stop = time.monotonic()
    assert rc == 0, d.log_tail()
    stopping = notify.find("STOPPING=1")
    assert stopping and stopping[0][0] <= t_stop, notify.messages


@pytest.mark.skipif(not os.access(SOCKET_ACTIVATE, os.X_OK),
                    reason="systemd-socket-activate missing (Debian package systemd)")
def test_socket_activation(notify):
    p, q = wd_api.free_port(), wd_api.free_port()
    # systemd-socket-activate passes on only the -E variables: forward the
    # device choice and the sanitizer options (the ASan tree's API suite runs
    # the daemon on --device cpu, leak-checked).
    env = [a for k in ("WHISPERD_DEVICE", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS",
                       "TSAN_OPTIONS") if k in os.environ for a in ("-E", f"{k}={os.environ[k]}")]
    argv = [SOCKET_ACTIVATE, "-l", f"127.0.0.1:{p}", "-E", f"NOTIFY_SOCKET={notify.path}", *env,
            wd_api.WHISPERD, "serve", "--model", wd_api.TINY_EN, "--host", "127.0.0.1",
            "--port", str(q), "--log-level", "info"]
    d = wd_api.Daemon(argv=argv, port=p)
    d.start()      # the first connection to p makes systemd-socket-activate exec whisperd
    try:
        exe = os.readlink(f"/proc/{d.pid}/exe")
        assert os.path.basename(exe) == "whisperd", exe
        assert notify.wait_for(lambda m: m == "READY=1", 30), notify.messages
        # It serves on the socket it was handed, not on its own --port.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", q), timeout=5).close()
        assert_healthy(d)
        r = request(d.port, "GET", "/v1/models")
        assert r.status == 200, r
        # No WATCHDOG_USEC in the environment: no watchdog pings.
        assert not notify.find("WATCHDOG=1"), notify.messages
    finally:
        rc = d.stop()
    assert rc == 0, d.log_tail()
    assert notify.find("STOPPING=1"), notify.messages


def test_sigterm_finishes_running_refuses_queued(notify):
    d = wd_api.start_daemon(args=["--max-batch", "1", "--queue-max", "4",
                                  "--shutdown-grace", "120"], env={"NOTIFY_SOCKET": notify.path})
    try:
        a = Background(d.port)
        wait_counts(d.port, lambda c: c["running"] == 1, what="first job running")
        rest = [Background(d.port) for _ in range(2)]
        wait_counts(d.port, lambda c: c["queued"] == 2, what="two jobs queued")
        d.proc.send_signal(signal.SIGTERM)
        for b in rest:
            r = b.response(timeout=30)
            check_error(r, 503, param=None, etype=r.json()["error"]["type"])
        # No new work once draining: the port refuses connections.
        with pytest.raises(ConnectionRefusedError):
            wd_api.post_audio(d.port, timeout=10)
        assert_jfk_json(a.response())
    finally:
        rc = d.stop(timeout=120)
    assert rc == 0, d.log_tail()
    assert notify.find("STOPPING=1"), notify.messages


def test_sigterm_batch_in_flight_all_finish():
    d = wd_api.start_daemon(args=["--shutdown-grace", "120"])
    try:
        bs = [Background(d.port) for _ in range(3)]
        wait_counts(d.port, lambda c: c["running"] == 3, what="three jobs running together")
        d.proc.send_signal(signal.SIGTERM)
        for b in bs:
            assert_jfk_json(b.response())
    finally:
        rc = d.stop(timeout=120)
    assert rc == 0, d.log_tail()


def test_sigterm_quiesce_while_http_threads_are_busy(tmp_path):
    """SIGTERM while every HTTP thread is busy: the drain stops accepting
    (MHD_quiesce_daemon) and the daemon exits 0. In libmicrohttpd's epoll
    mode the quiescing thread and a worker both take the listen socket out
    of the worker's epoll set and the loser aborts the process
    (MHD_PANIC); the shim epoll_del_delay.c slows the main thread's removal
    so that race is lost every time, where it is not avoided."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the LD_PRELOAD shim")
    shim = str(tmp_path / "epoll_del_delay.so")
    src = os.path.join(os.path.dirname(__file__), "epoll_del_delay.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", shim, src, "-ldl"], check=True)
    # A sanitizer runtime must come first in the library list; the shim
    # loads before it, which is harmless here.
    env = {"LD_PRELOAD": shim,
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    for run in range(3):
        d = wd_api.start_daemon(args=["--http-threads", "4"], env=env)
        stop = threading.Event()

        def hammer():
            while not stop.is_set():
                try:
                    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
                    while not stop.is_set():
                        c.request("GET", "/health")
                        c.getresponse().read()
                except OSError:
                    time.sleep(0.001)

        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for t in threads:
            t.start()
        try:
            time.sleep(0.3)
            d.proc.send_signal(signal.SIGTERM)
            d.proc.wait(timeout=60)
        finally:
            stop.set()
            for t in threads:
                t.join()
            rc = d.stop(timeout=60)
        assert rc == 0, f"run {run}: exit {rc}\n{d.log_tail()}"
        assert "Fatal error" not in d.log(), d.log_tail()


def test_repeated_sigterm_while_draining():
    # Every SIGTERM after the first, sent while the daemon drains (when no
    # thread of ours waits in sigtimedwait), must be absorbed: library
    # threads started before main() (the BLAS pool) do not block signals,
    # and the default action there would kill the daemon mid-drain.
    d = wd_api.start_daemon(args=["--shutdown-grace", "120"])
    try:
        a = Background(d.port)
        wait_counts(d.port, lambda c: c["running"] == 1, what="job running")
        for _ in range(8):
            d.proc.send_signal(signal.SIGTERM)
            time.sleep(0.1)
        assert_jfk_json(a.response())
        rc = d.proc.wait(120)
    finally:
        d.stop(timeout=120)
    assert rc == 0, d.log_tail()


def long_wav(seconds=90):
    with wave.open(JFK_WAV, "rb") as w:
        params, frames = w.getparams(), w.readframes(w.getnframes())
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        for _ in range(seconds // 11 + 1):
            w.writeframes(frames)
    return out.getvalue()


def test_sigterm_grace_expires():
    """A job longer than --shutdown-grace is cut at the grace: 503, exit 0."""
    d = wd_api.start_daemon(args=["--shutdown-grace", "1"])
    try:
        b = Background(d.port, path=None, data=long_wav(), filename="long.wav")
        wait_counts(d.port, lambda c: c["running"] == 1, what="job running")
        time.sleep(0.5)
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        r = b.response(timeout=60)
        took = time.monotonic() - t0
        check_error(r, 503, param=None, etype=r.json()["error"]["type"])
        assert took < 1 + 15, f"answered {took:.1f} s after SIGTERM with a 1 s grace"
    finally:
        rc = d.stop(timeout=60)
    assert rc == 0, d.log_tail()


def test_sigterm_with_a_stalled_upload():
    """A client stuck halfway through its upload does not hold the daemon
    past the grace: exit 0 soon after SIGTERM. Until then (the 5 s that
    answers get to go out: the stalled upload takes all of them) a
    connection opened before SIGTERM is still answered, /ready 503
    shutting_down, while a new connection is refused at once rather than
    left unanswered in the listen backlog."""
    d = wd_api.start_daemon(args=["--shutdown-grace", "3"])
    s = socket.create_connection(("127.0.0.1", d.port))
    ka = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    try:
        ka.request("GET", "/ready")
        r = ka.getresponse()
        assert (r.status, r.read()) == (200, b'{"status":"ready"}')
        body, ctype = wd_api.multipart(wd_api.audio_fields())
        s.sendall((f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
                   f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
                  + body[:len(body) // 2])
        time.sleep(0.5)
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        while True:                     # the signal is taken by the main thread
            ka.request("GET", "/ready")
            r = ka.getresponse()
            got = (r.status, r.read())
            if got[0] != 200 or time.monotonic() - t0 > 10:
                break
            time.sleep(0.01)
        assert got == (503, b'{"status":"shutting_down"}'), got
        ka.request("GET", "/health")
        r = ka.getresponse()
        assert (r.status, r.read()) == (200, b'{"status":"ok"}')
        t1 = time.monotonic()
        for path in ("/ready", "/health"):
            with pytest.raises(ConnectionRefusedError):
                request(d.port, "GET", path, timeout=5)
        assert time.monotonic() - t1 < 2
        assert d.alive(), "exited before the checks: they proved nothing"
        rc = d.proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        ka.close()
        s.close()
        d.stop(timeout=60)
    assert rc == 0, d.log_tail()
    assert took < 3 + 10, f"exit took {took:.1f} s with a 3 s grace"
