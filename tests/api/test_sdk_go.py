"""The official OpenAI Go SDK (github.com/openai/openai-go/v3, pinned in
tests/api/go/go.mod), unmodified, against the real daemon:
tests/api/go/sdk_check.go makes the calls (Audio.Transcriptions.New for
json and verbose_json, Client.Post into a string for text, srt and vtt as
the SDK's own documentation says, NewStreaming, word timestamps and
logprobs, Audio.Translations.New, Models.List, the SDK's errors) and prints
what came back; this file checks it, as test_sdk_node.py does Node's.
Skips where Go (1.26, the SDK's minimum) or the module proxy is missing."""

import json
import os
import re
import shutil
import subprocess

import pytest

import wd_api
from wd_api import FORMATS, JFK_WAV, check_stream, check_transcript

GO_DIR = os.path.join(wd_api.HERE, "go")
GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go")
                            else None)
BIN = os.path.join(wd_api.ROOT, "build", "go-sdk-check", "sdk_check")


def go_skip_reason():
    if GO is None:
        return "go is not installed"
    v = subprocess.run([GO, "env", "GOVERSION"], capture_output=True, text=True).stdout
    m = re.match(r"go(\d+)\.(\d+)", v.strip())
    if not m or (int(m.group(1)), int(m.group(2))) < (1, 26):
        return f"{v.strip() or 'go'} is older than 1.26 (openai-go v3)"
    return None


pytestmark = pytest.mark.skipif(go_skip_reason() is not None, reason=str(go_skip_reason()))


@pytest.fixture(scope="module")
def sdk_check():
    env = dict(os.environ, GOFLAGS="-mod=readonly")
    p = subprocess.run([GO, "mod", "download"], cwd=GO_DIR, env=env, capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        pytest.skip(f"the Go module proxy did not serve openai-go: {p.stderr.strip()[-300:]}")
    p = subprocess.run([GO, "build", "-o", BIN, "."], cwd=GO_DIR, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, f"go build failed:\n{p.stderr}"
    return BIN


def run_go(binary, d, mode):
    p = subprocess.run([binary, f"{d.url}/v1", mode, JFK_WAV], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, f"rc {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    return {(r["name"], r["fmt"]): r for r in doc["results"]}


@pytest.fixture(scope="module")
def transcribe_results(sdk_check, daemon):
    return run_go(sdk_check, daemon, "transcribe")


@pytest.fixture(scope="module")
def translate_results(sdk_check, base_daemon):
    return run_go(sdk_check, base_daemon, "translate")


def ok(r):
    assert r["ok"], r
    return r["payload"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_transcriptions(transcribe_results, fmt):
    check_transcript(fmt, ok(transcribe_results[("transcriptions", fmt)]))


def test_transcriptions_stream(transcribe_results):
    check_stream(ok(transcribe_results[("stream", "json")]))


def test_words_and_logprobs(transcribe_results):
    doc = ok(transcribe_results[("words", "verbose_json")])
    assert doc["language"] == "english", doc
    assert [w["word"].strip(",.").lower() for w in doc["words"]][:4] == \
        ["and", "so", "my", "fellow"], doc["words"][:4]
    assert doc["segments"] and doc["logprobs"], doc
    lp = doc["logprobs"][0]
    assert lp["token"] and lp["logprob"] <= 0 and bytes(lp["bytes"]).decode() == lp["token"], lp


def test_errors(transcribe_results):
    e = transcribe_results[("unknown_model", "json")]
    assert not e["ok"] and e["error"]["status"] == 404, e
    assert e["error"]["code"] == "model_not_found", e
    e = transcribe_results[("translations_refused", "json")]
    assert not e["ok"] and e["error"]["status"] == 400, e
    assert e["error"]["code"] == "unsupported_model" and e["error"]["param"] == "model", e


def test_models(transcribe_results):
    ids = ok(transcribe_results[("models", "json")])
    assert ids[0] == "whisper-1" and "tiny.en" in ids, ids


@pytest.mark.parametrize("fmt", FORMATS)
def test_translations_base(translate_results, fmt):
    check_transcript(fmt, ok(translate_results[("translations", fmt)]), exact=False,
                     task="translate")
