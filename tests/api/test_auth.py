"""--api-key: every API route wants `Authorization: Bearer KEY` (401 with
the OpenAI error body otherwise) while /health stays open; the SDKs send
the key as they always do."""

import pytest

import wd_api
from wd_api import JFK_WAV, start_daemon, stop_daemon, assert_jfk_json, check_error, post_audio, request

KEY = "sk-test-7f3a9c2e"


@pytest.fixture(scope="module")
def auth_daemon():
    d = start_daemon(args=["--api-key", KEY])
    yield d
    stop_daemon(d)


@pytest.mark.parametrize("auth", [
    None,
    "Bearer wrong-key",
    f"Bearer {KEY}x",
    f"Bearer {KEY[:-1]}",
    f"bearer{KEY}",
    f"Basic {KEY}",
    "Bearer ",
    KEY,
])
def test_bad_or_missing_key(auth_daemon, auth):
    h = {"Authorization": auth} if auth is not None else {}
    r = post_audio(auth_daemon.port, headers=h)
    check_error(r, 401, param=None)
    r = request(auth_daemon.port, "GET", "/v1/models", headers=h)
    check_error(r, 401, param=None)


def test_health_stays_open(auth_daemon):
    assert request(auth_daemon.port, "GET", "/health").status == 200


def test_good_key(auth_daemon):
    h = {"Authorization": f"Bearer {KEY}"}
    assert_jfk_json(post_audio(auth_daemon.port, headers=h))
    r = request(auth_daemon.port, "GET", "/v1/models", headers=h)
    assert r.status == 200 and r.json()["data"], r


def test_sdk_key(auth_daemon):
    openai = pytest.importorskip("openai")
    good = openai.OpenAI(base_url=f"{auth_daemon.url}/v1", api_key=KEY)
    bad = openai.OpenAI(base_url=f"{auth_daemon.url}/v1", api_key="sk-wrong")
    with open(JFK_WAV, "rb") as f, pytest.raises(openai.AuthenticationError) as e:
        bad.audio.transcriptions.create(model="whisper-1", file=f)
    assert e.value.status_code == 401
    with open(JFK_WAV, "rb") as f:
        res = good.audio.transcriptions.create(model="whisper-1", file=f, response_format="text")
    assert " ".join(res.split()) == wd_api.JFK_TEXT
