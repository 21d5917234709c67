"""Host faults: an out-of-memory in the middle of a job fails that job with
an OpenAI-style 500 and nothing else (its batch mates and later requests are
answered correctly); a real out-of-memory, the daemon's address space capped
under it while a large upload arrives, is answered 500 and the daemon serves
again once memory is back; SIGKILL in the middle of a job leaves nothing
that stops a restart on the same port.

The first is injected: WHISPERD_FAULT_INJECT=oom:N makes the Nth transcript
segment stored after the daemon is ready fail as a failed malloc would
(core/fault.h). The second is real: prlimit(RLIMIT_AS) on the running
daemon, so every allocation past the cap returns NULL wherever it is.
A slow decode (WHISPERD_FAULT_INJECT=decode_delay:MS, as slow as hours of
audio) holds no HTTP thread: /health answers at once beside it; one slower
than --decode-timeout is cut at the deadline and answered 400.
(Device loss has its own file, test_device_loss.py; SIGTERM under load is in
test_systemd.py.)
"""

import io
import os
import resource
import signal
import time
import wave

import pytest

import wd_api
from wd_api import (JFK_TEXT, JFK_WAV, Background, Daemon, assert_healthy, assert_jfk_json,
                    check_error, free_port, job_counts, multipart, parallel, post_audio,
                    send_streaming, wait_counts)


def long_wav(seconds):
    """jfk.wav repeated to `seconds` (16 kHz s16 mono)."""
    with wave.open(JFK_WAV, "rb") as w:
        params, frames = w.getparams(), w.readframes(w.getnframes())
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        pcm = frames * (int(seconds * 32000) // len(frames) + 1)
        w.writeframes(pcm[:int(seconds * 16000) * 2])
    return out.getvalue()


def vm_size(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


def test_oom_mid_job_fails_that_job_only():
    # oom:2: the second segment stored, while three jobs decode in one batch.
    d = wd_api.start_daemon(env={"WHISPERD_FAULT_INJECT": "oom:2"})
    try:
        c0 = job_counts(d.port)                # the warm-up job is counted
        rs = parallel(3, lambda i: post_audio(d.port))
        failed = [r for r in rs if r.status != 200]
        assert len(failed) == 1, [r.status for r in rs]
        check_error(failed[0], 500, etype="server_error")
        assert "memory" in failed[0].json()["error"]["message"], failed[0]
        for r in rs:
            if r.status == 200:
                assert r.json()["text"] == JFK_TEXT, r
        c = wait_counts(d.port, lambda c: c["running"] == 0 and c["queued"] == 0,
                        what="worker idle")
        assert c["failed"] - c0["failed"] == 1 and c["done"] - c0["done"] == 2, (c0, c)
        assert "fault injection armed: oom:2" in d.log()
        assert_healthy(d)                      # once: the fault does not fire again
        assert job_counts(d.port)["failed"] - c0["failed"] == 1
    finally:
        wd_api.stop_daemon(d)


def test_slow_decode_holds_no_http_thread():
    # One HTTP thread: were it decoding, /health would wait the whole 2.5 s.
    d = wd_api.start_daemon(args=["--http-threads", "1", "--decode-threads", "1"],
                            env={"WHISPERD_FAULT_INJECT": "decode_delay:2500"})
    try:
        bgs = [Background(d.port) for _ in range(2)]  # the second waits for the decode thread
        time.sleep(0.3)
        lat = []
        for _ in range(10):
            t0 = time.monotonic()
            r = wd_api.request(d.port, "GET", "/health")
            lat.append(time.monotonic() - t0)
            assert r.status == 200, r
            time.sleep(0.1)
        assert max(lat) < 0.5, lat
        for b in bgs:
            r = b.response()
            assert_jfk_json(r)
        assert "fault injection armed: decode_delay:2500" in d.log()
    finally:
        wd_api.stop_daemon(d)


def test_decode_past_the_deadline_is_cut():
    """--decode-timeout bounds one upload's decode (core/audio.h timeout_s):
    a decode slowed far past it (decode_delay:20000, checked between slices
    as a real decode is between its reads) is stopped at the deadline and
    answered 400, and its thread is free for the next upload at once. With
    one decode thread two such uploads are both answered within a few
    seconds, not 20 s each; /health answers beside them."""
    d = wd_api.start_daemon(args=["--decode-threads", "1", "--decode-timeout", "1"],
                            env={"WHISPERD_FAULT_INJECT": "decode_delay:20000"})
    try:
        t0 = time.monotonic()
        bgs = [Background(d.port) for _ in range(2)]
        time.sleep(0.2)
        r = wd_api.request(d.port, "GET", "/health")
        assert r.status == 200, r
        rs = [b.response(timeout=60) for b in bgs]
        took = time.monotonic() - t0
        for r in rs:
            check_error(r, 400, param="file", code="audio_decode_timeout")
            assert "took too long to decode" in r.json()["error"]["message"], r
        assert took < 10, f"two uploads cut at 1 s each took {took:.1f} s"
        # Every upload is slowed past the limit here, so the daemon's health
        # is its liveness and an idle worker.
        assert d.alive() and wd_api.request(d.port, "GET", "/health").status == 200
        wait_counts(d.port, lambda c: c["running"] == 0 and c["queued"] == 0, what="idle")
    finally:
        wd_api.stop_daemon(d)


REGRESS_AUDIO = os.path.join(wd_api.ROOT, "tests", "fuzz", "regress", "audio")


def test_fuzz_found_audio_answered_within_the_decode_deadline():
    """The uploads the audio fuzzer found hanging, leaking or giving NaN
    (tests/fuzz/regress/audio) sent to the daemon with --decode-timeout 2:
    each is answered (400, or 200 where the file still decodes) within the
    deadline and a margin, however its decode goes, and the daemon then
    transcribes jfk as usual."""
    names = sorted(os.listdir(REGRESS_AUDIO))
    assert names, REGRESS_AUDIO
    d = wd_api.start_daemon(args=["--decode-threads", "1", "--decode-timeout", "2"])
    try:
        for name in names:
            with open(os.path.join(REGRESS_AUDIO, name), "rb") as f:
                data = f.read()
            t0 = time.monotonic()
            r = post_audio(d.port, data=data, filename=name, path=None,
                           response_format="json", timeout=60)
            took = time.monotonic() - t0
            assert r.status in (200, 400), (name, r)
            if r.status == 400:
                assert r.json()["error"]["param"] == "file", (name, r.json())
            # 2 s of decoding at most, then a transcription of whatever
            # audio came out (a few seconds of noise at most here)
            assert took < 30, f"{name}: answered after {took:.1f} s"
        assert_jfk_json(post_audio(d.port, response_format="json"))
    finally:
        wd_api.stop_daemon(d)


def sanitized():
    """The daemon is built with a sanitizer: its shadow memory takes terabytes
    of address space and it aborts rather than return NULL past a cap."""
    import subprocess
    out = subprocess.run(["ldd", wd_api.WHISPERD], capture_output=True, text=True).stdout
    return "libasan" in out or "libtsan" in out


@pytest.mark.skipif(sanitized(), reason="RLIMIT_AS and sanitizer shadow memory do not mix")
def test_real_oom_on_a_large_upload_then_recovers():
    # --timeout 30: were the cap not to bite, the long job ends in a 504
    # (and a failed check) rather than running for minutes.
    d = wd_api.start_daemon(args=["--max-body-mb", "64", "--timeout", "30"])
    try:
        assert_healthy(d)                      # every lazy buffer is in place
        # A 38 MB upload: its body buffer (and its 77 MB of samples) must be
        # mapped anew, past what malloc's arenas already hold in reserve.
        big = long_wav(20 * 60)
        soft, hard = resource.prlimit(d.pid, resource.RLIMIT_AS)
        cap = vm_size(d.pid) + (8 << 20)       # 8 MiB of address space to spare
        resource.prlimit(d.pid, resource.RLIMIT_AS, (cap, hard))
        try:
            body, ctype = multipart(wd_api.audio_fields(path=None, data=big, filename="long.wav"))
            head = (f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            # Sent in pieces, watching for the answer that may come mid-body.
            r, _, _ = send_streaming(d.port, head, [body[i:i + (1 << 20)]
                                                    for i in range(0, len(body), 1 << 20)])
            assert r is not None, "no answer under the memory cap"
            check_error(r, 500, etype="server_error")
            assert "memory" in r.json()["error"]["message"], r
            assert d.alive(), d.log_tail()
            r = wd_api.request(d.port, "GET", "/health", timeout=10)
            assert r.status == 200, r
        finally:
            resource.prlimit(d.pid, resource.RLIMIT_AS, (soft, hard))
        assert_healthy(d)
        r = post_audio(d.port, path=None, data=long_wav(40), filename="40s.wav", timeout=120)
        assert r.status == 200 and JFK_TEXT[:30] in r.json()["text"], r
    finally:
        wd_api.stop_daemon(d)


def test_sigkill_mid_job_then_restart_on_the_same_port():
    port = free_port()
    argv = [wd_api.WHISPERD, "serve", "--model", wd_api.TINY_EN, "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "info"]
    first = Daemon(argv=argv, port=port).start()
    bg = None
    try:
        data = long_wav(90)
        bg = Background(port, path=None, data=data, filename="90s.wav")
        wait_counts(port, lambda c: c["running"] >= 1, what="job running")
        time.sleep(0.5)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        assert first.proc.returncode == -signal.SIGKILL
        # The client is not left hanging: its connection is gone.
        bg.thread.join(10)
        assert not bg.thread.is_alive(), "client still waiting after SIGKILL"
        assert not bg.data or b"HTTP/1.1 200" not in bg.data[:20]
        t0 = time.monotonic()
        second = Daemon(argv=argv, port=port).start()   # same port, no other try
        try:
            took = time.monotonic() - t0
            assert second.port == port
            assert_healthy(second)
            r = post_audio(port, path=None, data=long_wav(30), filename="30s.wav", timeout=120)
            assert r.status == 200, r
            print(f"restart to ready on port {port}: {took:.1f} s")
        finally:
            wd_api.stop_daemon(second)
    finally:
        if bg:
            bg.close()
        if first.alive():
            first.proc.kill()
