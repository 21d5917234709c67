"""The official OpenAI Python SDK, unmodified (only base_url and api_key
set), against the real daemon: transcriptions.create for every response
format and with stream=True, translations.create for every format (base)
and its refusal on tiny.en, and the SDK's error classes for 404/400."""

import pytest

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not in this Python "
                             "(scripts/install-test-deps.sh installs it into build/venv)")

import wd_api  # noqa: E402
from wd_api import FORMATS, JFK_WAV, check_stream, check_transcript  # noqa: E402


def client(d):
    return openai.OpenAI(base_url=f"{d.url}/v1", api_key="sk-whisperd-test")


def as_payload(fmt, res):
    if fmt in ("json", "verbose_json"):
        assert not isinstance(res, str), res
        return res.model_dump()
    assert isinstance(res, str), type(res)
    return res


@pytest.mark.parametrize("fmt", FORMATS)
def test_transcriptions_create(daemon, fmt):
    with open(JFK_WAV, "rb") as f:
        res = client(daemon).audio.transcriptions.create(model="whisper-1", file=f,
                                                         response_format=fmt)
    if fmt == "json":
        assert isinstance(res, openai.types.audio.Transcription), type(res)
    if fmt == "verbose_json":
        assert isinstance(res, openai.types.audio.TranscriptionVerbose), type(res)
        assert res.segments and res.segments[1].end == pytest.approx(10.74), res
    check_transcript(fmt, as_payload(fmt, res))


def test_transcriptions_create_all_fields(daemon):
    """Every field a Whisper model takes, as the SDK puts them on the wire
    (temperature as "0.0", timestamp_granularities[] repeated parts), and a
    file given as a (name, bytes) tuple."""
    res = client(daemon).audio.transcriptions.create(
        model="tiny.en", file=("speech.wav", wd_api.read_file(JFK_WAV)), language="en",
        prompt="A speech.", response_format="verbose_json", temperature=0.0,
        timestamp_granularities=["segment"])
    assert res.language == "english" and res.duration == pytest.approx(11.0), res
    assert wd_api.words(res.text)[:4] == ["and", "so", "my", "fellow"], res


def test_transcriptions_stream(daemon):
    with open(JFK_WAV, "rb") as f:
        stream = client(daemon).audio.transcriptions.create(model="whisper-1", file=f, stream=True)
        events = [e.model_dump() for e in stream]
    check_stream(events)


def test_transcriptions_stream_segment_events(daemon):
    """The opt-in segment events (timestamp_granularities=["segment"] with
    stream=True) parse as the SDK's TranscriptionTextSegmentEvent."""
    with open(JFK_WAV, "rb") as f:
        stream = client(daemon).audio.transcriptions.create(
            model="whisper-1", file=f, stream=True, timestamp_granularities=["segment"])
        events = list(stream)
    segs = [e for e in events if e.type == "transcript.text.segment"]
    assert segs and all(isinstance(e, openai.types.audio.TranscriptionTextSegmentEvent)
                        for e in segs), events
    assert [e.id for e in segs] == ["seg_0", "seg_1"] and segs[1].end == pytest.approx(10.74), segs
    check_stream([e.model_dump(exclude_unset=True) for e in events], segments=True)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_translations_refused_on_english_only_model(daemon, fmt):
    with open(JFK_WAV, "rb") as f, pytest.raises(openai.BadRequestError) as e:
        client(daemon).audio.translations.create(model="whisper-1", file=f, response_format=fmt)
    assert e.value.status_code == 400
    assert isinstance(e.value.body, dict) and e.value.body.get("message"), e.value.body


@pytest.mark.parametrize("fmt", FORMATS)
def test_translations_create_base(base_daemon, fmt):
    with open(JFK_WAV, "rb") as f:
        res = client(base_daemon).audio.translations.create(model="whisper-1", file=f,
                                                            response_format=fmt)
    if fmt == "json":
        assert isinstance(res, openai.types.audio.Translation), type(res)
    if fmt == "verbose_json":
        assert isinstance(res, openai.types.audio.TranslationVerbose), type(res)
    check_transcript(fmt, as_payload(fmt, res), exact=False, task="translate")


def test_errors_as_sdk_exceptions(daemon):
    c = client(daemon)
    with open(JFK_WAV, "rb") as f, pytest.raises(openai.NotFoundError) as e:
        c.audio.transcriptions.create(model="no-such-model", file=f)
    assert e.value.code == "model_not_found" and e.value.param in (None, "model"), e.value.body
    with open(JFK_WAV, "rb") as f, pytest.raises(openai.BadRequestError) as e:
        c.audio.transcriptions.create(model="whisper-1", file=f, response_format="json",
                                      timestamp_granularities=["word"])
    assert e.value.param == "timestamp_granularities", e.value.body
    models = c.models.list()
    assert "whisper-1" in [m.id for m in models.data]


@pytest.mark.parametrize("grans", [["word"], ["word", "segment"]])
def test_word_timestamps(daemon, grans):
    """verbose_json + word: OpenAI's top-level words (trimmed, in time order,
    inside the audio); segments only when asked for too."""
    c = client(daemon)
    with open(JFK_WAV, "rb") as f:
        res = c.audio.transcriptions.create(model="whisper-1", file=f,
                                            response_format="verbose_json",
                                            timestamp_granularities=grans)
    assert isinstance(res, openai.types.audio.TranscriptionVerbose), type(res)
    words = res.words
    assert words and [w.word.lower().strip(",.") for w in words[:4]] == \
        ["and", "so", "my", "fellow"], words
    assert all(w.word == w.word.strip() for w in words)
    prev = 0.0
    for w in words:
        assert prev <= w.start <= w.end <= res.duration + 0.01, w
        prev = w.start
    if "segment" in grans:
        assert res.segments and len(res.segments) >= 1
    else:
        assert not res.segments
