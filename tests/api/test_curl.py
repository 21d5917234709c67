"""curl against the real daemon: every response format on both endpoints,
stream=true, /v1/models, /health, /ready, /metrics. Transcriptions use
tiny.en; translations use base when it is fetched, and tiny.en's refusal
(English-only model) always."""

import json
import os
import shutil
import subprocess
import tempfile

import pytest

import wd_api
from wd_api import FORMATS, JFK_WAV, JFK_MP3, check_content_type, check_error, check_transcript

CURL = shutil.which("curl")
pytestmark = pytest.mark.skipif(CURL is None, reason="curl not installed")


def curl(url, *args, timeout=wd_api.REQUEST_TIMEOUT_S):
    """Runs curl; returns a wd_api.Response (status, headers, body)."""
    with tempfile.TemporaryDirectory() as t:
        hdr, body = os.path.join(t, "h"), os.path.join(t, "b")
        p = subprocess.run([CURL, "-sS", "--max-time", str(int(timeout)), "-D", hdr, "-o", body,
                            *args, url], capture_output=True, text=True)
        assert p.returncode == 0, f"curl {args}: rc {p.returncode}: {p.stderr}"
        with open(hdr, "rb") as f:
            head = f.read().decode("latin-1")
        with open(body, "rb") as f:
            data = f.read()
    # The last header block (after any "100 Continue").
    blocks = [b for b in head.replace("\r\n", "\n").split("\n\n") if b.strip()]
    lines = blocks[-1].split("\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    return wd_api.Response(status, "", headers, data)


def payload(fmt, r):
    return r.json() if fmt in ("json", "verbose_json") else r.text


@pytest.mark.parametrize("fmt", FORMATS)
def test_transcriptions_every_format(daemon, fmt):
    r = curl(f"{daemon.url}/v1/audio/transcriptions", "-F", f"file=@{JFK_WAV}",
             "-F", "model=whisper-1", "-F", f"response_format={fmt}")
    assert r.status == 200, r
    check_content_type(fmt, r.content_type)
    check_transcript(fmt, payload(fmt, r))


def test_transcriptions_defaults_mp3_and_fields(daemon):
    """json by default; mp3 input; the model's own name and an alias;
    language, prompt, temperature and timestamp_granularities[]=segment."""
    r = curl(f"{daemon.url}/v1/audio/transcriptions", "-F", f"file=@{JFK_MP3}", "-F", "model=tiny.en")
    assert r.status == 200, r
    check_content_type("json", r.content_type)
    check_transcript("json", r.json())
    r = curl(f"{daemon.url}/v1/audio/transcriptions", "-F", f"file=@{JFK_WAV}",
             "-F", "model=tiny-alias", "-F", "language=en", "-F", "temperature=0",
             "-F", "prompt=President Kennedy's inaugural address.",
             "-F", "response_format=verbose_json", "-F", "timestamp_granularities[]=segment")
    assert r.status == 200, r
    doc = r.json()
    assert wd_api.words(doc["text"])[:4] == ["and", "so", "my", "fellow"], doc
    assert doc["language"] == "english" and doc["segments"], doc


def test_large_upload_expect_100_continue(daemon, tmp_path):
    """Over 1 MiB curl asks `Expect: 100-continue` first: jfk.wav four
    times (44 s, 1.4 MB, two windows) must still be read and transcribed."""
    import wave
    with wave.open(JFK_WAV, "rb") as w:
        params, frames = w.getparams(), w.readframes(w.getnframes())
    big = tmp_path / "jfk4.wav"
    with wave.open(str(big), "wb") as w:
        w.setparams(params)
        w.writeframes(frames * 4)
    assert big.stat().st_size > 1 << 20
    r = curl(f"{daemon.url}/v1/audio/transcriptions", "-F", f"file=@{big}", "-F", "model=whisper-1",
             "-F", "response_format=verbose_json")
    assert r.status == 200, r
    doc = r.json()
    assert abs(doc["duration"] - 44.0) < 0.01, doc
    # Both windows decoded (the first may fall back to sampling, whose words
    # are the seed's luck: at least two of the four sentences are there).
    text = " ".join(wd_api.words(doc["text"]))
    assert text.count("ask not what your country") >= 2, doc
    assert text.endswith("do for your country"), doc


def test_transcriptions_stream(daemon):
    r = curl(f"{daemon.url}/v1/audio/transcriptions", "-F", f"file=@{JFK_WAV}",
             "-F", "model=whisper-1", "-F", "stream=true")
    assert r.status == 200, r
    assert r.content_type.startswith("text/event-stream"), r
    wd_api.check_stream(wd_api.sse_events(r.body))


@pytest.mark.parametrize("fmt", [None, "text", "verbose_json"])
def test_transcriptions_stream_segment_events(daemon, fmt):
    """stream=true with timestamp_granularities[]=segment opts in to
    OpenAI's transcript.text.segment events, one after each segment's delta,
    the same times and texts as verbose_json's segments (whatever the
    response_format); word timestamps add nothing to the stream."""
    url = f"{daemon.url}/v1/audio/transcriptions"
    fmt_args = ["-F", f"response_format={fmt}"] if fmt else []
    r = curl(url, "-F", f"file=@{JFK_WAV}", "-F", "model=whisper-1", "-F", "stream=true",
             "-F", "timestamp_granularities[]=segment", *fmt_args)
    assert r.status == 200, r
    assert r.content_type.startswith("text/event-stream"), r
    events = wd_api.sse_events(r.body)
    wd_api.check_stream(events, segments=True)
    v = curl(url, "-F", f"file=@{JFK_WAV}", "-F", "model=whisper-1",
             "-F", "response_format=verbose_json")
    assert v.status == 200, v
    wd_api.check_segment_events(events, verbose=v.json())
    if fmt == "verbose_json":
        # Word timestamps move the segments' ends (as in verbose_json).
        words = ["-F", "timestamp_granularities[]=word", "-F", "timestamp_granularities[]=segment"]
        r = curl(url, "-F", f"file=@{JFK_WAV}", "-F", "model=whisper-1", "-F", "stream=true",
                 *words, *fmt_args)
        assert r.status == 200, r
        v = curl(url, "-F", f"file=@{JFK_WAV}", "-F", "model=whisper-1", *words, *fmt_args)
        assert v.status == 200, v
        wd_api.check_stream(wd_api.sse_events(r.body), segments=v.json())
        # Words alone: no segment events.
        r = curl(url, "-F", f"file=@{JFK_WAV}", "-F", "model=whisper-1", "-F", "stream=true",
                 "-F", "timestamp_granularities[]=word", *fmt_args)
        assert r.status == 200, r
        wd_api.check_stream(wd_api.sse_events(r.body))


@pytest.mark.parametrize("fmt", FORMATS)
def test_translations_english_only_model_refused(daemon, fmt):
    r = curl(f"{daemon.url}/v1/audio/translations", "-F", f"file=@{JFK_WAV}",
             "-F", "model=whisper-1", "-F", f"response_format={fmt}")
    check_error(r, 400, any_param=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_translations_every_format_base(base_daemon, fmt):
    r = curl(f"{base_daemon.url}/v1/audio/translations", "-F", f"file=@{JFK_WAV}",
             "-F", "model=whisper-1", "-F", f"response_format={fmt}")
    assert r.status == 200, r
    check_content_type(fmt, r.content_type)
    check_transcript(fmt, payload(fmt, r), exact=False, task="translate")


def test_models(daemon):
    r = curl(f"{daemon.url}/v1/models")
    assert r.status == 200 and r.content_type.startswith("application/json"), r
    doc = r.json()
    assert doc["object"] == "list", doc
    ids = [m["id"] for m in doc["data"]]
    assert ids[0] == "whisper-1", ids
    for name in ("tiny.en", "tiny-alias", "my-whisper"):
        assert name in ids, ids
    for m in doc["data"]:
        assert m["object"] == "model" and isinstance(m.get("owned_by"), str), m
        assert isinstance(m.get("created"), int), m


def test_health_ready_metrics(daemon):
    for path in ("/health", "/ready"):
        r = curl(daemon.url + path)
        assert r.status == 200, (path, r)
    r = curl(daemon.url + "/metrics")
    assert r.status == 200, r
    assert r.content_type.startswith("text/plain"), r
    m = wd_api.metrics(daemon.port)
    assert m, r.text
    # Every sample line is "name{labels} value" with a number.
    for ln in r.text.splitlines():
        if ln and not ln.startswith("#"):
            assert wd_api.METRIC_RE.match(ln), ln
            float(ln.rsplit(None, 1)[1])
    assert any(k.startswith("whisperd_") for k in m), sorted(m)
    json.dumps(m)
