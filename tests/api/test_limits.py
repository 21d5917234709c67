"""Body, audio and connection limits, with --max-body-mb 1, --idle-timeout 3,
--header-timeout 6, --max-audio-s 20 and --max-connections 8: an oversize
body is refused with 413 whether it comes with a Content-Length or chunked
(an endless chunked one as soon as it crosses the cap); audio over the cap
gets 400; a client that stalls mid-upload (or never sends a full request)
is dropped after the idle timeout, and one that trickles its headers after
the header timeout; connections over the cap are refused; the daemon
serves others meanwhile and after."""

import http.client
import io
import select
import shutil
import socket
import subprocess
import tempfile
import time
import wave

import pytest

import wd_api
from wd_api import JFK_WAV, assert_healthy, check_error, multipart, send_streaming

IDLE_S = 3
HEADER_S = 6
MAX_MB = 1
MAX_AUDIO_S = 20
MAX_CONN = 8
TRANSCRIBE = "/v1/audio/transcriptions"


@pytest.fixture(scope="module")
def lim_daemon():
    d = wd_api.start_daemon(args=["--max-body-mb", str(MAX_MB), "--idle-timeout", str(IDLE_S),
                                  "--header-timeout", str(HEADER_S),
                                      "--max-audio-s", str(MAX_AUDIO_S),
                                      "--max-connections", str(MAX_CONN)])
    yield d
    wd_api.stop_daemon(d)


def big_wav(seconds=70):
    """A real WAV of jfk.wav repeated (16 kHz s16 mono: 32 KB/s)."""
    with wave.open(JFK_WAV, "rb") as w:
        params, frames = w.getparams(), w.readframes(w.getnframes())
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        pcm = frames * (int(seconds * 16000 * 2) // len(frames) + 1)
        w.writeframes(pcm[:int(seconds * 16000) * 2])
    return out.getvalue()


def chunks(data, size=65536):
    return [data[i:i + size] for i in range(0, len(data), size)]


def head(port, ctype, extra):
    return (f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: {ctype}\r\n{extra}\r\n").encode()


def check_413(r, sent, total):
    assert r is not None, f"no answer to an oversize body (sent {sent} of {total} bytes)"
    check_error(r, 413, any_param=True)


def test_oversize_with_content_length(lim_daemon):
    body, ctype = multipart(wd_api.audio_fields(path=None, data=big_wav(), filename="big.wav"))
    assert len(body) > 2 * MAX_MB << 20
    r, sent, _ = send_streaming(lim_daemon.port, head(lim_daemon.port, ctype,
                                                      f"Content-Length: {len(body)}\r\n"),
                                chunks(body))
    check_413(r, sent, len(body))


def test_oversize_content_length_refused_before_the_body(lim_daemon):
    """A Content-Length over the cap is refused from the headers: the
    answer comes although the body never does."""
    _, ctype = multipart([("model", "whisper-1")])
    r, _, _ = send_streaming(lim_daemon.port, head(lim_daemon.port, ctype,
                                                   f"Content-Length: {100 << 20}\r\n"), [],
                             timeout=IDLE_S + 10)
    check_413(r, 0, 100 << 20)


def test_oversize_chunked(lim_daemon):
    body, ctype = multipart(wd_api.audio_fields(path=None, data=big_wav(), filename="big.wav"))
    framed = [b"%x\r\n%s\r\n" % (len(c), c) for c in chunks(body)] + [b"0\r\n\r\n"]
    r, sent, _ = send_streaming(lim_daemon.port, head(lim_daemon.port, ctype,
                                                      "Transfer-Encoding: chunked\r\n"), framed)
    check_413(r, sent, len(body))


def test_endless_chunked_refused_at_the_cap(lim_daemon):
    """A chunked upload of 2 GB is answered 413 once it crosses the 1 MiB cap,
    not read to its end (nor buffered), and the daemon's memory stays put."""
    _, ctype = multipart([("model", "whisper-1")])
    chunk = b"\0" * (1 << 20)
    framed = (b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(2048))
    rss0 = lim_daemon.rss_kib()
    t0 = time.monotonic()
    r, sent, broke = send_streaming(lim_daemon.port, head(lim_daemon.port, ctype,
                                                          "Transfer-Encoding: chunked\r\n"), framed)
    dt = time.monotonic() - t0
    check_413(r, sent, 2048 << 20)
    # The cap, the linger (16 MiB) and the socket buffers: far below 2 GB.
    assert sent < (MAX_MB + 32) << 20, f"{sent} bytes sent before the 413"
    assert dt < 20, f"413 after {dt:.1f} s"
    assert lim_daemon.rss_kib() < rss0 + 64 * 1024
    assert_healthy(lim_daemon)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_endless_chunked_curl(lim_daemon):
    """curl streaming a chunked body from a pipe stops at the early 413."""
    p = subprocess.run(f"head -c {2 << 30} /dev/zero | curl -sS --max-time 60 -o /dev/null "
                       f"-w '%{{http_code}} %{{size_upload}}' -X POST -H 'Transfer-Encoding: chunked' "
                       f"-H 'Content-Type: multipart/form-data; boundary=x' -T - "
                       f"{lim_daemon.url}{TRANSCRIBE}", shell=True, capture_output=True, text=True)
    code, _, up = p.stdout.partition(" ")
    assert code == "413", (p.returncode, p.stdout, p.stderr)
    assert int(float(up)) < (MAX_MB + 32) << 20, p.stdout


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_oversize_curl(lim_daemon):
    """curl sends `Expect: 100-continue` for a large file and gets the 413
    instead of the 100."""
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        f.write(big_wav())
        f.flush()
        p = subprocess.run(["curl", "-sS", "--max-time", "60", "-w", "\n%{http_code}",
                            "-F", f"file=@{f.name}", "-F", "model=whisper-1",
                            f"{lim_daemon.url}{TRANSCRIBE}"], capture_output=True, text=True)
    body, _, code = p.stdout.rpartition("\n")
    assert code == "413", (p.returncode, p.stdout, p.stderr)
    assert '"error"' in body, body


def test_under_the_cap_still_served(lim_daemon):
    # jfk.wav (344 KiB) is well under 1 MiB.
    assert_healthy(lim_daemon)


def closed_after(sock, limit):
    """Seconds until the peer closes sock (or answers and closes), None if
    it is still open after limit seconds."""
    t0 = time.monotonic()
    sock.settimeout(0.5)
    while time.monotonic() - t0 < limit:
        try:
            b = sock.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - t0
        if not b:
            return time.monotonic() - t0
    return None


@pytest.mark.parametrize("what", ["half_body", "half_headers", "nothing", "chunked_half"])
def test_stalled_client_dropped(lim_daemon, what):
    body, ctype = multipart(wd_api.audio_fields())
    s = socket.create_connection(("127.0.0.1", lim_daemon.port))
    try:
        if what == "half_body":
            s.sendall(head(lim_daemon.port, ctype, f"Content-Length: {len(body)}\r\n")
                      + body[:len(body) // 2])
        elif what == "half_headers":
            s.sendall(f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty".encode())
        elif what == "chunked_half":
            s.sendall(head(lim_daemon.port, ctype, "Transfer-Encoding: chunked\r\n")
                      + b"%x\r\n%s\r\n" % (len(body) // 2, body[:len(body) // 2]))
        t = closed_after(s, IDLE_S + 20)
    finally:
        s.close()
    assert t is not None, f"{what}: a stalled connection still open after {IDLE_S + 20} s"
    assert t >= IDLE_S - 1.5, f"{what}: dropped after {t:.1f} s, before the {IDLE_S} s idle timeout"
    assert lim_daemon.alive()


def wait_connections_closed(d, limit_s=15):
    """Waits until the daemon holds no connection but the /metrics request
    asking: an earlier test's connection (a lingering 413, a stalled client)
    still counts against this address's share until the daemon has closed
    it, which a loaded machine (ASan in CI) can take a moment to do."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if wd_api.metrics(d.port).get("whisperd_http_connections_open", 0) <= 1:
            return
        time.sleep(0.1)
    raise AssertionError(f"connections still open after {limit_s} s")


def test_slow_loris_cut_at_the_header_timeout(lim_daemon):
    """Clients that trickle header bytes faster than the idle timeout, enough
    to fill this address's share of the connections, are all cut off at the
    header timeout; /health is served again right after."""
    share = MAX_CONN * 3 // 4                  # --max-connections-per-ip 0: 3/4 of the cap
    wait_connections_closed(lim_daemon)
    socks = []
    try:
        t0 = time.monotonic()
        def trickler():
            s = socket.create_connection(("127.0.0.1", lim_daemon.port), timeout=2)
            s.sendall(b"POST " + TRANSCRIBE.encode() + b" HTTP/1.1\r\nX-a: ")
            return s

        for _ in range(share):
            socks.append(trickler())
        # The /metrics connection wait_connections_closed asked through can
        # still count against the share for a moment (seen once under ASan:
        # the last socket refused at once): replace a socket the daemon
        # closed at connect, long before the header timeout could.
        time.sleep(0.3)
        for i, s in enumerate(socks):
            try:
                s.settimeout(0.01)
                if s.recv(1) == b"":
                    s.close()
                    socks[i] = trickler()
            except socket.timeout:
                pass
            except OSError:
                socks[i] = trickler()
        # The address's share is taken: one more connection from it is refused.
        with pytest.raises(OSError):
            r = wd_api.request(lim_daemon.port, "GET", "/health", timeout=2)
            pytest.fail(f"connection {share + 1} from one address served: {r!r}")
        closed = {}
        while len(closed) < len(socks) and time.monotonic() - t0 < HEADER_S + 8:
            for i, s in enumerate(socks):
                if i in closed:
                    continue
                try:
                    s.sendall(b"a")            # one byte a second: the idle timer never fires
                    s.settimeout(0.01)
                    if s.recv(1) == b"":
                        closed[i] = time.monotonic() - t0
                except socket.timeout:
                    pass
                except OSError:
                    closed[i] = time.monotonic() - t0
            time.sleep(1.0 / len(socks))
        assert len(closed) == len(socks), f"{len(socks) - len(closed)} still open after {HEADER_S + 8} s"
        assert min(closed.values()) >= HEADER_S - 1, closed
        assert max(closed.values()) <= HEADER_S + 4, closed
        assert_healthy(lim_daemon)
        m = wd_api.request(lim_daemon.port, "GET", "/metrics").text
        cut = [l for l in m.splitlines()
               if l.startswith("whisperd_http_connections_header_timeouts_total ")]
        assert cut and float(cut[0].split()[1]) >= share, cut
    finally:
        for s in socks:
            s.close()


def test_stall_does_not_block_others(lim_daemon):
    body, ctype = multipart(wd_api.audio_fields())
    stalled = []
    try:
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", lim_daemon.port))
            s.sendall(head(lim_daemon.port, ctype, f"Content-Length: {len(body)}\r\n")
                      + body[:1000])
            stalled.append(s)
        assert_healthy(lim_daemon)
    finally:
        for s in stalled:
            s.close()
    assert_healthy(lim_daemon)


def test_audio_over_max_audio_s(lim_daemon):
    data = big_wav(seconds=MAX_AUDIO_S + 5)          # 25 s: 800 KB, under the body cap
    assert len(data) < MAX_MB << 20
    r = wd_api.post_audio(lim_daemon.port, path=None, data=data, filename="long.wav")
    check_error(r, 400, any_param=True)
    assert_healthy(lim_daemon)


def server_closed(sock):
    """True when the daemon has closed this socket (EOF or reset is readable)."""
    r, _, _ = select.select([sock], [], [], 0)
    if not r:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_connections_over_the_cap(lim_daemon):
    """--max-connections 8 (and 6 per address): with the slots held, a 9th
    connection gets no service (closed at once, 503, or left waiting
    unaccepted); once they go, requests are served again.

    The held sockets send nothing, so the daemon drops them after the
    --idle-timeout (3 s). On a loaded machine that can happen before the 9th
    request is accepted, and then serving it is right: a 200 only fails the
    test if every held slot was still open when it came back."""
    share = MAX_CONN * 3 // 4                  # --max-connections-per-ip 0: 3/4 of the cap
    wait_connections_closed(lim_daemon)
    socks = [socket.create_connection(("127.0.0.1", lim_daemon.port)) for _ in range(MAX_CONN)]
    try:
        # Wait until the daemon has seen all 8: the 2 over the per-address share are closed.
        t0 = time.monotonic()
        while sum(map(server_closed, socks)) < MAX_CONN - share and time.monotonic() - t0 < 2:
            time.sleep(0.05)
        try:
            r = wd_api.request(lim_daemon.port, "GET", "/health", timeout=IDLE_S - 1)
            after = sum(map(server_closed, socks))
            # served is right once a held slot beyond the per-address share
            # went (the idle timeout), whether before or during the request
            assert r.status == 503 or after > MAX_CONN - share, (
                f"connection {MAX_CONN + 1} served with {MAX_CONN - after} of "
                f"{MAX_CONN} held connections open: {r!r}")
        except (ConnectionResetError, ConnectionRefusedError, BrokenPipeError, TimeoutError,
                http.client.RemoteDisconnected):
            pass
    finally:
        for s in socks:
            s.close()
    time.sleep(0.5)
    assert_healthy(lim_daemon)
