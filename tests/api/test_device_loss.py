"""A lost GPU device while a job runs: the running job gets 503 with an
OpenAI-style error, the daemon rebuilds its engine (device, weights,
recordings) without restarting, the job queued behind it then runs, and so
does every later request; /metrics counts the loss and the rebuild.

The loss is injected: WHISPERD_FAULT_INJECT=submit:N fails the Nth GPU
submit after the daemon is ready as VK_ERROR_DEVICE_LOST would
(gpu/vk_fault.h). For jfk.wav on tiny.en the submits are encode, cross K/V,
the prompt's prefill, then one per token: submit 5 is the second decoder
step, in the middle of the job.
"""

import threading
import time

import pytest

from wd_api import (JFK_TEXT, assert_jfk_json, check_error, metrics, post_audio, request,
                    start_daemon, stop_daemon)


@pytest.fixture(scope="module")
def lossy():
    # --max-batch 1: a second request waits in the queue while the first runs.
    # The Vulkan engine (lavapipe without a GPU): the CPU engine has no
    # device to lose and no submits to fail.
    d = start_daemon(args=["--max-batch", "1", "--device", "vulkan"],
                     env={"WHISPERD_FAULT_INJECT": "submit:5"})
    yield d
    stop_daemon(d)


def test_running_job_gets_503_queued_job_runs_after_rebuild(lossy):
    results = {}

    def send(name):
        results[name] = post_audio(lossy.port)

    first = threading.Thread(target=send, args=("first",))
    first.start()
    time.sleep(0.3)  # the first is decoding (or at least queued first) when the second comes
    second = threading.Thread(target=send, args=("second",))
    second.start()
    first.join()
    second.join()

    statuses = sorted(r.status for r in results.values())
    assert statuses == [200, 503], results
    failed = next(r for r in results.values() if r.status == 503)
    err = check_error(failed, 503, code="device_unavailable", etype="server_error")
    assert "device" in err["message"].lower(), err
    ok = next(r for r in results.values() if r.status == 200)
    assert ok.json()["text"] == JFK_TEXT, ok

    log = lossy.log()
    assert "fault injection" in log
    assert "rebuilding the engine" in log and "engine rebuilt" in log, lossy.log_tail()


def test_later_requests_succeed_and_metrics_count_the_reset(lossy):
    # Ready again once rebuilt (503 "device_rebuilding" while it was not).
    assert request(lossy.port, "GET", "/ready", timeout=10).status == 200
    assert_jfk_json(post_audio(lossy.port))
    m = metrics(lossy.port)
    assert m["whisperd_device_losses_total"] == 1, m
    assert m["whisperd_device_resets_total"] == 1, m
    assert m['whisperd_jobs_total{result="failed"}'] == 1, m
    assert m['whisperd_jobs_total{result="done"}'] >= 2, m
