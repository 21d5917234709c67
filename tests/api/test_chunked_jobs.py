"""A chunked job the daemon accepted is a job it finishes (issue #39,
defect 4). With chunking_strategy (core/chunk_job.h) the first chunk's
answer is the request's admission; every later chunk is submitted by the
daemon itself (the rest of the first batch at once, then one as each chunk
ends, from the worker's callback). A queue that other clients keep full
must not refuse those: it did, and a long upload got 429 after minutes of
work, its transcript lost.

The set-up is exact, not a race: --max-batch 2 --queue-max 1, two long
uploads hold both run slots, so the queue has room for one job. The
chunked upload's first chunk takes that place; its second, submitted right
behind it, finds the queue full. Then clients keep the queue full until the
chunked upload answers, so the chunks submitted as others end meet a full
queue too. Needs models/silero-vad-v6.safetensors (scripts/fetch-vad.sh);
skips without it.
"""
import os
import threading

import pytest

import wd_api
from wd_api import copies_wav, post_audio, stop_daemon, words

VAD_MODEL = os.path.join(wd_api.ROOT, "models", "silero-vad-v6.safetensors")



@pytest.fixture(scope="module")
def full_daemon():
    if not os.path.exists(VAD_MODEL):
        pytest.skip("models/silero-vad-v6.safetensors not present (scripts/fetch-vad.sh)")
    d = wd_api.start_daemon(args=["--vad-model", VAD_MODEL, "--max-batch", "2",
                                  "--queue-max", "1"])
    yield d
    stop_daemon(d)


def test_chunked_job_finishes_beside_a_full_queue(full_daemon):
    port = full_daemon.port
    # Three copies 20 s apart: three chunks (11 + 20 + 11 s > 30 s), 73 s.
    chunked = copies_wav(3, 20.0)
    # Two uploads of 44 s each, decoded window after window: both run slots.
    long_wav = copies_wav(4, 0.0)
    holders = [wd_api.Background(port, data=long_wav, filename="long.wav") for _ in range(2)]
    wd_api.wait_counts(port, lambda c: c["running"] == 2 and c["queued"] == 0,
                       what="both run slots taken, nothing queued")
    # Room for one job: the chunked upload's first chunk takes it.
    job = wd_api.Background(port, data=chunked, filename="three.wav", chunking_strategy="auto",
                            response_format="verbose_json")
    wd_api.wait_counts(port, lambda c: (c["queued"] or 0) >= 1, what="the first chunk queued")

    # Clients that keep the queue full until the chunked upload answers.
    # Refused, each tries again 0.2 s later: a client retrying in a tight
    # loop would take the CPUs from the worker (under ASan, on two cores,
    # nothing at all was decoded in three minutes).
    stop = threading.Event()
    statuses = []
    lock = threading.Lock()

    def keep_full():
        while not stop.is_set():
            r = post_audio(port)
            with lock:
                statuses.append(r.status)
            if r.status == 200:
                wd_api.assert_jfk_json(r)
            else:
                stop.wait(0.2)
    keepers = [threading.Thread(target=keep_full, daemon=True) for _ in range(2)]
    for t in keepers:
        t.start()
    try:
        r = job.response()
    finally:
        stop.set()
        for t in keepers:
            t.join(wd_api.REQUEST_TIMEOUT_S)
    for h in holders:
        assert h.response().status == 200
    assert r.status == 200, f"the accepted chunked upload was answered {r.status}: {r.text}"
    j = r.json()
    assert words(j["text"]) == words(wd_api.JFK_TEXT) * 3, j["text"]
    segs = j["segments"]
    assert [s["id"] for s in segs] == list(range(len(segs)))
    assert all(a["end"] <= b["start"] + 0.01 for a, b in zip(segs, segs[1:])), segs
    assert set(statuses) <= {200, 429}, statuses
    assert 429 in statuses, f"the queue was never full beside the chunked upload: {statuses}"
    wd_api.assert_healthy(full_daemon)
