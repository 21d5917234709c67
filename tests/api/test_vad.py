"""`whisperd serve --vad` (issue #25): the real daemon decodes only the
speech Silero VAD finds, and answers on the file's own timeline. Needs
models/silero-vad-v6.safetensors (scripts/fetch-vad.sh); skips without it.

The audio: jfk.wav with 12 s of digital silence before it, 20 s between it
and a second copy, and 8 s after (62 s in all).
"""
import io
import os
import wave

import pytest

import wd_api
from wd_api import JFK_WAV, copies_wav, post_audio, stop_daemon, words

VAD_MODEL = os.path.join(wd_api.ROOT, "models", "silero-vad-v6.safetensors")
LEAD, GAP, TAIL = 12.0, 20.0, 8.0


def wav_with_silences():
    with wave.open(JFK_WAV, "rb") as w:
        params, speech = w.getparams(), w.readframes(w.getnframes())
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        for part in (b"\0\0" * int(LEAD * 16000), speech, b"\0\0" * int(GAP * 16000), speech,
                     b"\0\0" * int(TAIL * 16000)):
            w.writeframes(part)
    return out.getvalue(), len(speech) / 2 / 16000


@pytest.fixture(scope="module")
def vad_daemon():
    if not os.path.exists(VAD_MODEL):
        pytest.skip("models/silero-vad-v6.safetensors not present (scripts/fetch-vad.sh)")
    d = wd_api.start_daemon(args=["--vad", "--vad-model", VAD_MODEL])
    yield d
    stop_daemon(d)


def test_speech_only_on_the_original_timeline(vad_daemon):
    data, jfk_s = wav_with_silences()
    r = post_audio(vad_daemon.port, data=data, filename="gaps.wav",
                   response_format="verbose_json",
                   fields=[("timestamp_granularities[]", "word"),
                           ("timestamp_granularities[]", "segment")])
    assert r.status == 200, r
    j = r.json()
    jfk = words(wd_api.JFK_TEXT)
    got = words(j["text"])
    # tiny.en may hear "Thank you." in the last window's padding: the
    # model's habit, with or without the filter.
    assert got[:2 * len(jfk)] == jfk * 2 and set(got[2 * len(jfk):]) <= {"thank", "you"}, got
    assert j["duration"] == pytest.approx(LEAD + 2 * jfk_s + GAP + TAIL, abs=0.01)
    second = LEAD + jfk_s + GAP
    segs = j["segments"]
    assert segs, j

    def inside(item, lo, hi):
        return lo - 0.5 <= item["start"] <= item["end"] <= hi + 0.5

    # Every word inside one of the two copies (the VAD pads speech by 0.4 s),
    # never in the silences; segments too, but for one that Whisper starts
    # just before the join of the two copies, which begins at the end of the
    # first (as faster-whisper's vad_filter maps it).
    for w in j["words"]:
        assert inside(w, LEAD, LEAD + jfk_s) or inside(w, second, second + jfk_s), w
    for sg in segs:
        assert inside(sg, LEAD, second + jfk_s), sg
        assert not inside(sg, LEAD + jfk_s + 0.6, second - 0.6), sg
    # jfk's first word starts about 0.3 s into it (tiny.en's word times
    # are good to a few tenths of a second), once in each copy.
    starts = [w["start"] for w in j["words"] if w["word"].strip() == "And"]
    assert len(starts) == 2, j["words"]
    assert abs(starts[0] - (LEAD + 0.3)) < 0.5 and abs(starts[1] - (second + 0.3)) < 0.5, starts


def test_silence_alone_is_an_empty_transcript(vad_daemon):
    with wave.open(JFK_WAV, "rb") as w:
        params = w.getparams()
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        w.writeframes(b"\0\0" * 16000 * 30)
    r = post_audio(vad_daemon.port, data=out.getvalue(), filename="silence.wav",
                   response_format="verbose_json")
    assert r.status == 200, r
    j = r.json()
    assert j["text"] == "" and j["segments"] == [] and j["duration"] == pytest.approx(30.0)
    r = post_audio(vad_daemon.port, data=out.getvalue(), filename="silence.wav",
                   response_format="text")
    assert r.status == 200 and r.body.strip() == b"", r


def test_stream_with_the_filter(vad_daemon):
    data, _ = wav_with_silences()
    r = post_audio(vad_daemon.port, data=data, filename="gaps.wav", stream="true")
    assert r.status == 200, r
    events = wd_api.sse_events(r.body)
    deltas = "".join(e.get("delta", "") for e in events if e.get("type") == "transcript.text.delta")
    done = [e for e in events if e.get("type") == "transcript.text.done"]
    assert len(done) == 1, events
    jfk = words(wd_api.JFK_TEXT)
    assert words(done[0]["text"])[:2 * len(jfk)] == jfk * 2
    assert words(deltas) == words(done[0]["text"])
    # Opted in, the segment events carry the filtered job's times: those of
    # verbose_json's segments, on the original timeline.
    r = post_audio(vad_daemon.port, data=data, filename="gaps.wav", stream="true",
                   fields=[("timestamp_granularities[]", "segment")])
    assert r.status == 200, r
    v = post_audio(vad_daemon.port, data=data, filename="gaps.wav", response_format="verbose_json")
    assert v.status == 200, v
    wd_api.check_segment_events(wd_api.sse_events(r.body), exact=False, verbose=v.json())


@pytest.fixture(scope="module")
def plain_daemon():
    """No --vad: requests ask for it with chunking_strategy."""
    if not os.path.exists(VAD_MODEL):
        pytest.skip("models/silero-vad-v6.safetensors not present (scripts/fetch-vad.sh)")
    d = wd_api.start_daemon(args=["--vad-model", VAD_MODEL])
    yield d
    stop_daemon(d)


def check_copies(j, jfk_s, pad, exact=True):
    """Both copies' words (exact: jfk's words twice), each word inside its
    copy (within pad s)."""
    jfk = words(wd_api.JFK_TEXT)
    if exact:
        assert words(j["text"])[:2 * len(jfk)] == jfk * 2, j["text"]
    second = LEAD + jfk_s + GAP
    n = [0, 0]
    for w in j["words"]:
        first = LEAD - pad <= w["start"] <= w["end"] <= LEAD + jfk_s + pad
        assert first or second - pad <= w["start"] <= w["end"] <= second + jfk_s + pad, w
        n[0 if first else 1] += 1
    assert min(n) >= len(jfk) * 3 // 4, (n, j["text"])


def test_chunking_strategy_auto(plain_daemon):
    data, jfk_s = wav_with_silences()
    fields = [("timestamp_granularities[]", "word")]
    r = post_audio(plain_daemon.port, data=data, filename="gaps.wav",
                   response_format="verbose_json", chunking_strategy="auto", fields=fields)
    assert r.status == 200, r
    check_copies(r.json(), jfk_s, 0.5)
    # Without it the same server decodes the whole file: windows of
    # silence, and segment times that span them.
    r = post_audio(plain_daemon.port, data=data, filename="gaps.wav",
                   response_format="verbose_json")
    assert r.status == 200, r
    assert r.json()["segments"][0]["start"] < LEAD - 1.0, r.json()["segments"][0]


def test_chunking_strategy_server_vad_from_the_sdk(plain_daemon):
    openai = pytest.importorskip("openai")
    data, jfk_s = wav_with_silences()
    client = openai.OpenAI(base_url=f"{plain_daemon.url}/v1", api_key="sk-whisperd-test")
    res = client.audio.transcriptions.create(
        model="whisper-1", file=("gaps.wav", data), response_format="verbose_json",
        timestamp_granularities=["word"],
        chunking_strategy={"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 100,
                           "silence_duration_ms": 500})
    # 100 ms of padding and cuts at 500 ms pauses hand tiny.en jfk's phrases
    # with their edges clipped: it mishears a few words ("African
    # Americans"), so only the timeline is checked to the word.
    check_copies(res.model_dump(), jfk_s, 0.3, exact=False)
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.transcriptions.create(model="whisper-1", file=("gaps.wav", data),
                                           chunking_strategy={"type": "server_vad",
                                                              "threshold": 2})
    assert e.value.body["param"] == "chunking_strategy", e.value.body


def test_chunking_strategy_refused_without_a_vad_model():
    d = wd_api.start_daemon(args=["--vad-model", "/nonexistent/vad.safetensors"])
    try:
        r = post_audio(d.port, chunking_strategy="auto")
        wd_api.check_error(r, 400, "chunking_strategy", "unsupported_value")
        assert b"fetch-vad" in r.body
        r = post_audio(d.port)        # the rest of the API unaffected
        wd_api.assert_jfk_json(r)
    finally:
        stop_daemon(d)



def test_chunks_run_side_by_side_and_stream_in_order(plain_daemon):
    """Six copies 3 s apart: chunks of two copies each (25 s, within 30 s),
    three jobs that the worker runs as rows of the same steps; the stream's
    segments arrive in time order, its segment events verbose_json's
    segments."""
    import threading
    data = copies_wav(6, 3.0)
    peak = [0]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            c = wd_api.job_counts(plain_daemon.port)
            peak[0] = max(peak[0], c["running"] or 0)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        r = post_audio(plain_daemon.port, data=data, filename="six.wav", stream="true",
                       chunking_strategy="auto", fields=[("timestamp_granularities[]", "segment")])
    finally:
        stop.set()
        t.join()
    assert r.status == 200, r
    events = wd_api.sse_events(r.body)
    done = [e for e in events if e.get("type") == "transcript.text.done"]
    assert len(done) == 1
    assert words(done[0]["text"]) == words(wd_api.JFK_TEXT) * 6, done[0]["text"]
    assert peak[0] >= 2, f"at most {peak[0]} job(s) ran at once: the chunks did not run side by side"
    r = post_audio(plain_daemon.port, data=data, filename="six.wav",
                   response_format="verbose_json", chunking_strategy="auto")
    segs = r.json()["segments"]
    assert [s["id"] for s in segs] == list(range(len(segs)))
    assert all(a["end"] <= b["start"] + 0.01 for a, b in zip(segs, segs[1:])), segs
    # The stream's segment events (opted in) are those segments, in order.
    wd_api.check_segment_events(events, exact=False, verbose=r.json())


def test_disconnect_cancels_every_chunk(plain_daemon):
    data = copies_wav(12, 3.0)          # six chunks
    before = wd_api.wait_counts(plain_daemon.port,
                                lambda c: c["running"] == 0 and c["queued"] == 0, what="idle")
    b = wd_api.Background(plain_daemon.port, data=data, filename="long.wav",
                          chunking_strategy="auto")
    wd_api.wait_counts(plain_daemon.port, lambda c: (c["running"] or 0) >= 1, what="a chunk running")
    b.close()
    after = wd_api.wait_counts(plain_daemon.port,
                               lambda c: c["running"] == 0 and c["queued"] == 0, timeout=30,
                               what="every chunk ended")
    assert after["done"] - before["done"] < 6, (before, after)
    assert after["failed"] > before["failed"], (before, after)
    wd_api.assert_healthy(plain_daemon)
    wd_api.assert_jfk_json(post_audio(plain_daemon.port))


def windows_encoded(port):
    m = wd_api.metrics(port)
    return sum(v for k, v in m.items() if k.split("{")[0] == "whisperd_windows_encoded_total")


def test_translation_chunked(tmp_path):
    """chunking_strategy on /v1/audio/translations (base, multilingual): each
    copy of jfk translated (English to English: its words), every segment
    inside its copy on the file's timeline, none in the silences. No
    language given: the first chunk detects it and the second is decoded in
    it, so the two chunks (each shorter than 30 s) take three encodes, not
    four (detection's and each window's)."""
    if not os.path.exists(VAD_MODEL):
        pytest.skip("models/silero-vad-v6.safetensors not present (scripts/fetch-vad.sh)")
    if not os.path.exists(wd_api.BASE):
        pytest.skip(f"{wd_api.BASE} missing (scripts/fetch-model.sh base)")
    d = wd_api.start_daemon(model=wd_api.BASE, args=["--vad-model", VAD_MODEL])
    try:
        data, jfk_s = wav_with_silences()
        before = windows_encoded(d.port)
        r = post_audio(d.port, "translations", data=data, filename="gaps.wav",
                       response_format="verbose_json", chunking_strategy="auto")
        assert r.status == 200, r
        assert windows_encoded(d.port) - before == 3, (before, windows_encoded(d.port))
        j = r.json()
        assert j["task"] == "translate" and j["language"] == "english", j
        jfk = words(wd_api.JFK_TEXT)
        assert words(j["text"]) == jfk * 2, j["text"]
        second = LEAD + jfk_s + GAP
        for s in j["segments"]:
            first = LEAD - 0.5 <= s["start"] < s["end"] <= LEAD + jfk_s + 0.5
            assert first or second - 0.5 <= s["start"] < s["end"] <= second + jfk_s + 0.5, s
    finally:
        stop_daemon(d)
