"""include[]=logprobs (issue #27): the tokens' log-probabilities in
OpenAI's shape, [{token, logprob, bytes}], in json and verbose_json and in
the stream's delta and done events, read by the real daemon (tiny.en,
jfk.wav) and the official Python SDK."""
import pytest

import wd_api
from wd_api import check_error, post_audio, sse_events, words

INCLUDE = [("include[]", "logprobs")]


def check_logprobs(lps, text):
    assert lps, "no logprobs"
    for lp in lps:
        assert set(lp) == {"token", "logprob", "bytes"}, lp
        assert lp["logprob"] <= 0.0 and isinstance(lp["bytes"], list), lp
        assert bytes(lp["bytes"]).decode("utf-8", "replace") == lp["token"], lp
    # The tokens are the text: their bytes joined, whisper's leading space
    # stripped as the text is.
    joined = b"".join(bytes(lp["bytes"]) for lp in lps).decode("utf-8")
    assert joined.strip() == text, (joined, text)


def test_json_and_verbose_json(daemon):
    for fmt in ("json", "verbose_json"):
        r = post_audio(daemon.port, response_format=fmt, fields=INCLUDE)
        assert r.status == 200, r
        j = r.json()
        assert words(j["text"]) == words(wd_api.JFK_TEXT)
        check_logprobs(j["logprobs"], j["text"])
    # Without include, no logprobs (OpenAI's answer is unchanged).
    assert "logprobs" not in post_audio(daemon.port).json()


def test_stream_deltas_and_done(daemon):
    r = post_audio(daemon.port, stream="true", fields=INCLUDE)
    assert r.status == 200, r
    ev = sse_events(r.body)
    deltas = [e for e in ev if e["type"] == "transcript.text.delta"]
    done = [e for e in ev if e["type"] == "transcript.text.done"]
    assert deltas and len(done) == 1
    check_logprobs(done[0]["logprobs"], done[0]["text"])
    assert [lp for e in deltas for lp in e["logprobs"]] == done[0]["logprobs"]


def test_sdk_types_read_them(daemon):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{daemon.url}/v1", api_key="sk-whisperd-test")
    res = client.audio.transcriptions.create(model="whisper-1", file=open(wd_api.JFK_WAV, "rb"),
                                             include=["logprobs"])
    assert res.logprobs and res.logprobs[0].token == " And", res
    assert all(lp.logprob <= 0 for lp in res.logprobs)


def test_refused_where_openai_refuses(daemon):
    r = post_audio(daemon.port, fields=[("include[]", "everything")])
    check_error(r, 400, "include", "invalid_value")
    r = post_audio(daemon.port, response_format="srt", fields=INCLUDE)
    check_error(r, 400, "include", "invalid_value")
