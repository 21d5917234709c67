"""--mel-ahead (core/win_ahead.h): each running job's next 30 s log-mel
window made on a thread of the worker's while the device decodes the
current one. On by default only where the engine's calls leave the host's
cores idle (a GPU), so here it is forced on: two long uploads side by side
(jfk.wav four and six times: two and three windows) must come back exactly
as with it off (text, segment times, tokens, log-probs), and /metrics must
count the windows made ahead: every window after each file's first.
"""
import io
import json
import threading
import wave

import wd_api
from wd_api import JFK_WAV, post_audio, stop_daemon


def copies_wav(n):
    with wave.open(JFK_WAV, "rb") as w:
        params, speech = w.getparams(), w.readframes(w.getnframes())
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        w.writeframes(speech * n)
    return out.getvalue()


def transcribe_side_by_side(port, files):
    """verbose_json of each file, all posted at once."""
    out = [None] * len(files)

    def run(i):
        r = post_audio(port, data=files[i], filename=f"long{i}.wav",
                       fields=(("response_format", "verbose_json"),))
        assert r.status == 200, r
        out[i] = r.json()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(files))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_windows_made_ahead_give_the_same_transcripts():
    files = [copies_wav(4), copies_wav(6)]
    results, ahead = {}, {}
    for mode in ("off", "on"):
        d = wd_api.start_daemon(args=["--device", "cpu", "--max-batch", "2", "--mel-ahead", mode])
        try:
            results[mode] = transcribe_side_by_side(d.port, files)
            ahead[mode] = wd_api.metrics(d.port).get("whisperd_windows_made_ahead_total")
        finally:
            stop_daemon(d)
    assert ahead["off"] == 0, ahead
    # 44 s: windows at 0 and ~30 s; 66 s: three windows. Every window after
    # each file's first came from the frames made ahead.
    assert ahead["on"] >= 3, ahead
    for off, on in zip(results["off"], results["on"]):
        assert len({s["seek"] for s in on["segments"]}) >= 2, on["segments"]
        keys = ("id", "seek", "start", "end", "text", "tokens", "avg_logprob",
                "compression_ratio", "no_speech_prob", "temperature")
        strip = lambda r: [{k: s[k] for k in keys} for s in r["segments"]]
        assert strip(on) == strip(off), json.dumps([strip(off), strip(on)], indent=1)[:4000]
        assert on["text"] == off["text"]
