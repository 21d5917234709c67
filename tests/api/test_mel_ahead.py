"""--mel-ahead (core/win_ahead.h): each running job's next 30 s log-mel
window made on a thread of the worker's while the device decodes the
current one. On by default only where the engine's calls leave the host's
cores idle (a GPU), so here it is forced on: two long uploads side by side
on tiny.en (jfk.wav four and six times: two and three windows), and one on
the multilingual base with its language detected (the detection window's
frames become the first window's, and the second is made ahead from
them), must come back exactly as with it off (text, segment times,
tokens, log-probs), and /metrics must count the windows made ahead: every
window after each file's first. base is skipped where it is not fetched.
"""
import json
import os
import threading

import wd_api
from wd_api import copies_wav, post_audio, stop_daemon



def transcribe_side_by_side(port, jobs):
    """verbose_json of each (model, file), all posted at once."""
    out = [None] * len(jobs)

    def run(i):
        model, data = jobs[i]
        r = post_audio(port, data=data, filename=f"long{i}.wav", model=model,
                       fields=(("response_format", "verbose_json"),))
        assert r.status == 200, r
        out[i] = r.json()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


KEYS = ("id", "seek", "start", "end", "text", "tokens", "avg_logprob", "compression_ratio",
        "no_speech_prob", "temperature")


def strip(r):
    return [{k: s[k] for k in KEYS} for s in r["segments"]]


def test_windows_made_ahead_give_the_same_transcripts():
    jobs = [("whisper-1", copies_wav(4)), ("whisper-1", copies_wav(6))]
    models = []
    if os.path.exists(wd_api.BASE):
        jobs.append(("base", copies_wav(4)))
        models = ["--models", wd_api.BASE]
    results, ahead = {}, {}
    for mode in ("off", "on"):
        d = wd_api.start_daemon(args=["--device", "cpu", "--max-batch", "2", "--mel-ahead", mode]
                                + models)
        try:
            results[mode] = transcribe_side_by_side(d.port, jobs)
            ahead[mode] = wd_api.metrics(d.port).get("whisperd_windows_made_ahead_total")
        finally:
            stop_daemon(d)
    assert ahead["off"] == 0, ahead
    # Every window after each file's first came from the frames made ahead:
    # 1 + 2 on tiny.en, 1 on base.
    assert ahead["on"] >= len(jobs) + 1, ahead
    for (model, _), off, on in zip(jobs, results["off"], results["on"]):
        assert len({s["seek"] for s in on["segments"]}) >= 2, on["segments"]
        assert strip(on) == strip(off), json.dumps([strip(off), strip(on)], indent=1)[:4000]
        assert on["text"] == off["text"]
        assert on["language"] == off["language"] == "english", (model, on["language"])
