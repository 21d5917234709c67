"""Several devices in one daemon: --device cpu,vulkan runs two workers, the
native CPU engine and the Vulkan engine (lavapipe on a host without a GPU),
each with its own engine, behind one queue front (core/workers.h).

Concurrent requests all get tiny.en's exact words, and both workers run
some of them (per-worker /metrics series, whose sums are the summed
series). A client that leaves has its job cancelled on the worker that runs
it (the job id names the worker). A lost device fails its running job and
rebuilds while the other worker keeps serving. A device that cannot be
opened fails the start instead of leaving fewer workers. A group of one keeps the old
figures and ids (the rest of the suite runs on one device).
"""

import re
import time

import pytest

import wd_api
from wd_api import (Background, assert_jfk_json, metrics, parallel, post_audio, start_daemon,
                    stop_daemon)

WORKERS = {0: "cpu", 1: "vulkan"}


@pytest.fixture(scope="module")
def duo():
    # --max-batch 2: each worker decodes two requests at once, so six
    # requests load both before any finishes.
    d = start_daemon(args=["--device", "cpu,vulkan", "--max-batch", "2"])
    yield d
    stop_daemon(d)


def per_worker(port):
    """{worker index: {"done", "failed", "running", "queued"}} from /metrics,
    with the summed series beside them under "sum"."""
    m = metrics(port)
    out = {}
    for i, dev in WORKERS.items():
        lab = f'worker="{i}",device="{dev}"'
        out[i] = {
            "done": m.get(f'whisperd_worker_jobs_total{{{lab},result="done"}}'),
            "failed": m.get(f'whisperd_worker_jobs_total{{{lab},result="failed"}}'),
            "running": m.get(f"whisperd_worker_running{{{lab}}}"),
            "queued": m.get(f"whisperd_worker_queued{{{lab}}}"),
        }
        assert None not in out[i].values(), (i, out[i], sorted(k for k in m if "worker_" in k))
    out["sum"] = {
        "done": m['whisperd_jobs_total{result="done"}'],
        "failed": m['whisperd_jobs_total{result="failed"}'],
        "running": m["whisperd_jobs_running"],
        "queued": m["whisperd_queue_depth"],
    }
    return out


def wait_worker(port, pred, timeout=120, what="condition"):
    deadline = time.monotonic() + timeout
    c = None
    while time.monotonic() < deadline:
        c = per_worker(port)
        if pred(c):
            return c
        time.sleep(0.05)
    raise AssertionError(f"/metrics: {what} not reached in {timeout} s: {c}")


def test_start_logs_both_devices(duo):
    log = duo.log()
    assert "devices: 2 engines: cpu, vulkan" in log, duo.log_tail()
    assert "device cpu: the native CPU engine" in log
    assert "device vulkan: the best Vulkan device" in log
    # Each worker ran its warm-up job: both engines' recordings work.
    c = per_worker(duo.port)
    assert c[0]["done"] >= 1 and c[1]["done"] >= 1, c


def test_concurrent_requests_right_and_on_both_workers(duo):
    before = wait_worker(duo.port, lambda c: c["sum"]["running"] == 0 and c["sum"]["queued"] == 0,
                         what="idle")
    n = 6
    fmts = ["json", "verbose_json", "text", "srt", "vtt", "json"]
    rs = parallel(n, lambda i: post_audio(duo.port, response_format=fmts[i]))
    for fmt, r in zip(fmts, rs):
        assert r.status == 200, r
        wd_api.check_transcript(fmt, r.json() if "json" in fmt else r.text)
    after = wait_worker(duo.port, lambda c: c["sum"]["running"] == 0, what="idle again")
    ran = {i: after[i]["done"] - before[i]["done"] for i in WORKERS}
    assert sum(ran.values()) == n, (before, after)
    # Least-loaded: with two rows each, both workers take jobs of the burst.
    assert ran[0] >= 1 and ran[1] >= 1, f"jobs per worker: {ran}"
    for k in ("done", "failed"):
        assert after["sum"][k] == after[0][k] + after[1][k], after


def test_cancel_reaches_the_worker_running_the_job(duo):
    """A on the CPU worker (idle: the lowest index), B on the Vulkan one (the
    CPU worker has a job); B's client leaves: the Vulkan worker's job is
    cancelled and A still completes."""
    before = wait_worker(duo.port, lambda c: c["sum"]["running"] == 0 and c["sum"]["queued"] == 0,
                         what="idle")
    a = Background(duo.port)
    wait_worker(duo.port, lambda c: c[0]["running"] == 1, what="A running on cpu")
    b = Background(duo.port)
    wait_worker(duo.port, lambda c: c[1]["running"] == 1, what="B running on vulkan")
    b.close()
    after = wait_worker(duo.port, lambda c: c[1]["running"] == 0, timeout=30,
                        what="B cancelled")
    assert after[1]["failed"] == before[1]["failed"] + 1, (before, after)
    assert after[1]["done"] == before[1]["done"], \
        f"B ran to completion instead of being cancelled: {before} -> {after}"
    assert_jfk_json(a.response())
    after = wait_worker(duo.port, lambda c: c[0]["running"] == 0, what="A done")
    assert after[0]["done"] == before[0]["done"] + 1, (before, after)
    assert after[0]["failed"] == before[0]["failed"], (before, after)


@pytest.fixture(scope="module")
def lossy_duo():
    # WHISPERD_FAULT_INJECT=submit:5 fails the fifth Vulkan submit after
    # ready as a lost device would (gpu/vk_fault.h; test_device_loss.py):
    # the second decoder step of the first job on the Vulkan worker. The
    # CPU engine makes no Vulkan submits.
    d = start_daemon(args=["--device", "cpu,vulkan", "--max-batch", "2"],
                     env={"WHISPERD_FAULT_INJECT": "submit:5"})
    yield d
    stop_daemon(d)


def test_lost_device_recovers_while_the_other_serves(lossy_duo):
    """A on the CPU worker, B on the Vulkan one, whose device is lost under
    it: B gets 503, A its words; the daemon stays ready (one device still
    serves), the Vulkan worker rebuilds, and both serve again."""
    d = lossy_duo
    a = Background(d.port)
    wait_worker(d.port, lambda c: c[0]["running"] == 1, what="A running on cpu")
    b = Background(d.port)
    rb = b.response()
    assert rb.status == 503, rb
    assert wd_api.request(d.port, "GET", "/ready", timeout=10).status == 200, \
        "one lost device of two made the daemon unready"
    assert_jfk_json(a.response())
    m = metrics(d.port)
    assert m['whisperd_worker_device_losses_total{worker="1",device="vulkan"}'] == 1, m
    assert m['whisperd_worker_device_losses_total{worker="0",device="cpu"}'] == 0, m
    assert m["whisperd_device_losses_total"] == 1, m
    deadline = time.monotonic() + 120
    while m['whisperd_worker_device_lost{worker="1",device="vulkan"}'] != 0:
        assert time.monotonic() < deadline, "the Vulkan worker never rebuilt:\n" + d.log_tail()
        time.sleep(0.2)
        m = metrics(d.port)
    assert "engine rebuilt" in d.log(), d.log_tail()
    before = per_worker(d.port)
    rs = parallel(4, lambda i: post_audio(d.port))
    for r in rs:
        assert_jfk_json(r)
    after = wait_worker(d.port, lambda c: c["sum"]["running"] == 0, what="idle")
    assert after[1]["done"] > before[1]["done"], (before, after)


def test_a_device_that_fails_fails_the_start():
    """Device 7 does not exist here: no daemon on the CPU engine alone."""
    d = wd_api.Daemon(args=["--device", "cpu,7"]).start(wait=False)
    try:
        rc = d.proc.wait(timeout=wd_api.READY_TIMEOUT_S)
    finally:
        if d.alive():
            d.proc.kill()
    assert rc != 0, d.log_tail()
    log = d.log()
    assert "device 2 of 2 (vulkan:7)" in log, d.log_tail()
    assert "serve: ready" not in log, d.log_tail()


def test_all_resolves_and_says_so():
    """--device all: every GPU (vulkan:N each), or the CPU engine alone on a
    host without one (lavapipe is not a GPU); the log says which."""
    d = start_daemon(args=["--device", "all"])
    try:
        assert "device all: " in d.log(), d.log_tail()
        labels = sorted(re.findall(r'whisperd_worker_running\{worker="\d+",device="([^"]*)"\}',
                                   wd_api.request(d.port, "GET", "/metrics").text))
        assert labels == ["cpu"] or (labels and all(re.fullmatch(r"vulkan:\d+", x)
                                                    for x in labels)), labels
        if labels == ["cpu"]:
            assert "so the native CPU engine" in d.log(), d.log_tail()
        assert_jfk_json(post_audio(d.port))
    finally:
        stop_daemon(d)


def test_one_device_series(daemon):
    """The default daemon (one device) shows one worker series whose figures
    are the summed ones."""
    m = metrics(daemon.port)
    lines = [k for k in m if k.startswith("whisperd_worker_running{")]
    assert len(lines) == 1 and 'worker="0"' in lines[0], lines
    r = post_audio(daemon.port)
    assert_jfk_json(r)
    m = metrics(daemon.port)
    done = [v for k, v in m.items() if k.startswith("whisperd_worker_jobs_total{")
            and 'result="done"' in k]
    assert done == [m['whisperd_jobs_total{result="done"}']], m
