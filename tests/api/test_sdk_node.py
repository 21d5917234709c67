"""The official OpenAI Node SDK, unmodified, against the real daemon:
tests/api/node/sdk_check.mjs makes the calls (transcriptions.create for
every format, stream: true, toFile(), translations.create, the SDK's
errors) and prints what came back; this file checks it."""

import json
import os
import shutil
import subprocess

import pytest

import wd_api
from wd_api import FORMATS, JFK_WAV, check_stream, check_transcript

NODE_DIR = os.path.join(wd_api.HERE, "node")
SCRIPT = os.path.join(NODE_DIR, "sdk_check.mjs")
NODE = shutil.which("node")


def node_ok():
    if NODE is None:
        return "node is not installed (scripts/install-test-deps.sh)"
    if not os.path.exists(os.path.join(NODE_DIR, "node_modules", "openai", "package.json")):
        return "tests/api/node/node_modules/openai missing (scripts/install-test-deps.sh)"
    major = int(subprocess.run([NODE, "-p", "process.versions.node.split('.')[0]"],
                               capture_output=True, text=True).stdout.strip() or 0)
    if major < 20:
        return f"node {major} is older than 20 (openai 6.x)"
    return None


pytestmark = pytest.mark.skipif(node_ok() is not None, reason=str(node_ok()))


def run_node(d, mode):
    p = subprocess.run([NODE, SCRIPT, f"{d.url}/v1", mode, JFK_WAV], capture_output=True,
                       text=True, cwd=NODE_DIR, timeout=900)
    assert p.returncode == 0, f"node rc {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    return {(r["name"], r["fmt"]): r for r in doc["results"]}


@pytest.fixture(scope="module")
def transcribe_results(daemon):
    return run_node(daemon, "transcribe")


@pytest.fixture(scope="module")
def translate_results(base_daemon):
    return run_node(base_daemon, "translate")


def ok(r):
    assert r["ok"], r
    return r["payload"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_transcriptions_create(transcribe_results, fmt):
    check_transcript(fmt, ok(transcribe_results[("transcriptions", fmt)]))


def test_transcriptions_stream(transcribe_results):
    check_stream(ok(transcribe_results[("stream", "json")]))


def test_transcriptions_tofile_all_fields(transcribe_results):
    doc = ok(transcribe_results[("tofile", "verbose_json")])
    assert doc["language"] == "english", doc
    assert wd_api.words(doc["text"])[:4] == ["and", "so", "my", "fellow"], doc


def test_errors(transcribe_results):
    e = transcribe_results[("unknown_model", "json")]
    assert not e["ok"] and e["error"]["cls"] == "NotFoundError", e
    assert e["error"]["status"] == 404 and e["error"]["code"] == "model_not_found", e
    assert e["error"]["param"] in (None, "model"), e
    e = transcribe_results[("word_json", "json")]
    assert not e["ok"] and e["error"]["status"] == 400, e
    assert e["error"]["cls"] == "BadRequestError", e
    assert e["error"]["param"] == "timestamp_granularities", e
    e = transcribe_results[("translations_refused", "json")]
    assert not e["ok"] and e["error"]["status"] == 400, e
    assert e["error"]["cls"] == "BadRequestError" and e["error"]["message"], e


def test_models(transcribe_results):
    ids = ok(transcribe_results[("models", "json")])
    assert ids[0] == "whisper-1" and "tiny.en" in ids, ids


@pytest.mark.parametrize("fmt", FORMATS)
def test_translations_create_base(translate_results, fmt):
    check_transcript(fmt, ok(translate_results[("translations", fmt)]), exact=False,
                     task="translate")
