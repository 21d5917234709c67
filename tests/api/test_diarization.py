"""Speaker diarization (issue #41) through the official OpenAI Python SDK
and raw multipart against the real daemon: response_format diarized_json
(TranscriptionDiarized), model gpt-4o-transcribe-diarize with the other
formats' labels (text and srt "A: ", vtt <v A>), known_speaker_names[] and
known_speaker_references[], chunking_strategy, stream=true (one
transcript.text.segment event per diarized segment in time order, then
transcript.text.done), and every refusal with its param; and the
request's life cycle: a client leaving once its transcription has ended
(or with no speech, hence no job), SIGTERM's grace, the audio budget held
by a diarization that outlives its job, a diarization failing part-way
(the last three on daemons of their own: a grace, a budget, a fault).

Two daemons: one started without the diarization models (the 400 naming
scripts/fetch-diarization.sh, and the checks the form alone decides; these
always run), and one with them (models/diar-*.safetensors from
scripts/fetch-diarization.sh; its tests skip when the daemon reports
diarization unavailable: the files absent, or a build without the
pipeline).

Audio: tests/data/audio/diar/sample.wav, pyannote.audio's 30 s real
two-speaker recording (its sample.rttm: speaker90 speaks first, at 6.69 s;
speaker91 from 7.55 s), and jfk.wav (one voice).
"""
import base64
import io
import os
import re
import signal
import time
import wave

import pytest

import wd_api
from wd_api import JFK_WAV, check_error, post_audio, sse_events, stop_daemon

openai = pytest.importorskip("openai", reason="the OpenAI SDK is not in this Python "
                             "(scripts/install-test-deps.sh installs it into build/venv)")

MODELS = os.path.join(wd_api.ROOT, "models")
SEG = os.path.join(MODELS, "diar-segmentation-3.0.safetensors")
EMB = os.path.join(MODELS, "diar-campplus-zh-en.safetensors")
VAD = os.path.join(MODELS, "silero-vad-v6.safetensors")
SAMPLE = os.path.join(wd_api.AUDIO, "diar", "sample.wav")
DIARIZE = "gpt-4o-transcribe-diarize"


def client(d):
    return openai.OpenAI(base_url=f"{d.url}/v1", api_key="sk-whisperd-test")


def clip_wav(path, start_s, end_s):
    """path's samples from start_s to end_s as a WAV file's bytes."""
    with wave.open(path, "rb") as w:
        rate = w.getframerate()
        w.setpos(int(start_s * rate))
        frames = w.readframes(int((end_s - start_s) * rate))
        params = w.getparams()
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        w.writeframes(frames)
    return out.getvalue()


def data_url(data, mime="audio/wav"):
    return f"data:{mime};base64," + base64.b64encode(data).decode()


# Clean stretches of each speaker of sample.wav (sample.rttm: no overlap).
SPEAKER90 = (10.7, 14.4)
SPEAKER91 = (22.0, 27.5)


def ref(span=SPEAKER90):
    return data_url(clip_wav(SAMPLE, *span))


def known_fields(names, refs):
    return [("known_speaker_names[]", n) for n in names] + \
           [("known_speaker_references[]", r) for r in refs]


# --- without the models ------------------------------------------------------

@pytest.fixture(scope="module")
def nodiar():
    """No diarization models (paths that do not exist): the daemon serves on."""
    d = wd_api.start_daemon(args=["--diar-seg-model", "/nonexistent/seg.safetensors",
                                  "--diar-emb-model", "/nonexistent/emb.safetensors"])
    yield d
    stop_daemon(d)


@pytest.mark.parametrize("fields,param", [
    ([("response_format", "diarized_json")], "response_format"),
    ([("diarize", "true"), ("response_format", "text")], "diarize"),
])
def test_no_model_400_names_the_fetch_script(nodiar, fields, param):
    r = post_audio(nodiar.port, fields=fields)
    err = check_error(r, 400, param=param, code="diarization_unavailable")
    assert "scripts/fetch-diarization.sh" in err["message"], err
    wd_api.assert_healthy(nodiar)


def test_no_model_alias_and_sdk(nodiar):
    r = post_audio(nodiar.port, model=DIARIZE, response_format="text")
    err = check_error(r, 400, param="model", code="diarization_unavailable")
    assert "scripts/fetch-diarization.sh" in err["message"], err
    # json has no place for speakers: the alias with it (OpenAI's default
    # format) is a plain transcription, which needs no diarization models.
    wd_api.assert_jfk_json(post_audio(nodiar.port, model=DIARIZE))
    with open(JFK_WAV, "rb") as f, pytest.raises(openai.BadRequestError) as e:
        client(nodiar).audio.transcriptions.create(model="whisper-1", file=f,
                                                   response_format="diarized_json")
    assert e.value.status_code == 400 and "fetch-diarization.sh" in str(e.value)
    # The daemon serves on: a plain request right after.
    wd_api.assert_jfk_json(post_audio(nodiar.port))
    assert "diarization: unavailable" in nodiar.log()


def _form_errors():
    """(fields, param, message part): what the form alone refuses, before
    any model is asked for (so on either daemon)."""
    dj = [("response_format", "diarized_json")]
    r = "data:audio/wav;base64,UklGRg=="
    return [
        (dj + known_fields(["a"], []), "known_speaker_references", "same length"),
        (dj + known_fields([], [r]), "known_speaker_names", "same length"),
        (dj + known_fields(["a", "b"], [r]), "known_speaker_references", "same length"),
        (dj + known_fields(list("abcde"), [r] * 5), "known_speaker_names", "maximum length 4"),
        (dj + known_fields(list("abcd"), [r] * 5), "known_speaker_references",
         "maximum length 4"),
        (dj + known_fields([""], [r]), "known_speaker_names", "known_speaker_names[0]"),
        (dj + known_fields(["<b>"], [r]), "known_speaker_names", "known_speaker_names[0]"),
        (dj + known_fields(["x" * 65], [r]), "known_speaker_names", "known_speaker_names[0]"),
        (dj + known_fields(["a", "a"], [r, r]), "known_speaker_names", "twice"),
        (dj + known_fields(["a"], ["https://example.com/a.wav"]), "known_speaker_references",
         "data URL"),
        (dj + known_fields(["a"], ["data:audio/wav,RIFF"]), "known_speaker_references",
         "data URL"),
        (dj + known_fields(["a"], ["data:audio/wav;base64,%%%"]), "known_speaker_references",
         "data URL"),
        (known_fields(["a"], [r]), "known_speaker_names", "diarization"),
        ([("response_format", "verbose_json"), ("diarize", "true")], "response_format",
         "diarized_json"),
        ([("diarize", "perhaps")], "diarize", "perhaps"),
        (dj + [("include[]", "logprobs")], "include", "diarization"),
    ]


@pytest.mark.parametrize("fields,param,part", _form_errors())
def test_form_errors(nodiar, fields, param, part):
    err = check_error(post_audio(nodiar.port, fields=fields), 400, param=param)
    assert part in err["message"], err


def test_translations_do_not_diarize(nodiar):
    r = post_audio(nodiar.port, endpoint="translations",
                   fields=[("response_format", "diarized_json")])
    # tiny.en cannot translate at all; either refusal names a field.
    check_error(r, 400, param=("response_format", "model"))
    r = post_audio(nodiar.port, endpoint="translations", model=DIARIZE)
    check_error(r, 404, param=(None, "model"), code="model_not_found")


def test_sdk_sends_known_speakers_as_repeated_fields(nodiar):
    """The SDK's own wire form reaches the same validation (a count
    mismatch, answered before any model is needed)."""
    with open(JFK_WAV, "rb") as f, pytest.raises(openai.BadRequestError) as e:
        client(nodiar).audio.transcriptions.create(
            model=DIARIZE, file=f, response_format="diarized_json",
            known_speaker_names=["agent", "customer"],
            known_speaker_references=["data:audio/wav;base64,UklGRg=="])
    assert e.value.status_code == 400
    assert e.value.body["param"] == "known_speaker_references", e.value.body


# --- with the models ---------------------------------------------------------

@pytest.fixture(scope="module")
def diar():
    for p in (SEG, EMB):
        if not os.path.exists(p):
            pytest.skip(f"{p} missing (scripts/fetch-diarization.sh)")
    if not os.path.exists(SAMPLE):
        pytest.skip(f"{SAMPLE} missing")
    args = ["--diar-seg-model", SEG, "--diar-emb-model", EMB]
    if os.path.exists(VAD):
        args += ["--vad-model", VAD]
    d = wd_api.start_daemon(args=args)
    if "diarization: available" not in d.log():
        log = d.log()
        stop_daemon(d)
        why = re.search(r"diarization: unavailable: ([^\n]*)", log)
        pytest.skip("the daemon reports diarization unavailable: "
                    + (why.group(1) if why else "no diarization line in its log"))
    yield d
    stop_daemon(d)


def diar_counts(port):
    """Diarizations from /metrics (running; ended done, canceled, failed)
    beside the jobs' figures (wd_api.job_counts)."""
    c = wd_api.job_counts(port)
    m = c["raw"]
    c["diar_running"] = m["whisperd_diarizations_running"]
    for r in ("done", "canceled", "failed"):
        c["diar_" + r] = m[f'whisperd_diarizations_total{{result="{r}"}}']
    return c


def wait_diar(port, pred, what, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        c = diar_counts(port)
        if pred(c):
            return c
        assert time.monotonic() < deadline, f"/metrics: {what} not reached: " + \
            str({k: v for k, v in c.items() if k != "raw"})
        time.sleep(0.02)


def sample_diarized(d, **kw):
    with open(SAMPLE, "rb") as f:
        return client(d).audio.transcriptions.create(model="whisper-1", file=f,
                                                     response_format="diarized_json", **kw)


def speaker_at(res, t):
    """The speaker of the diarized segment nearest to time t (mid-turn
    points of sample.rttm: names are checked by where a voice speaks, not
    by who speaks first, which a 0.4 s opening turn decides)."""
    return min(res.segments, key=lambda s: 0 if s.start <= t <= s.end
               else min(abs(s.start - t), abs(s.end - t))).speaker


def check_diarized(res):
    """A TranscriptionDiarized of sample.wav: the SDK's type, ids seg_N in
    time order, the texts joined equal to the text. Returns the speakers in
    order of first appearance."""
    assert isinstance(res, openai.types.audio.TranscriptionDiarized), type(res)
    assert res.task == "transcribe" and res.duration == pytest.approx(30.0, abs=0.01), res
    assert res.usage is not None and res.usage.type == "duration" and res.usage.seconds == 30
    segs = res.segments
    assert segs, res
    prev = 0.0
    for i, s in enumerate(segs):
        assert s.type == "transcript.text.segment" and s.id == f"seg_{i}", s
        assert prev - 1e-6 <= s.start <= s.end, (prev, s)
        prev = s.start
    assert "".join(s.text for s in segs).strip() == res.text.strip(), res
    seen = []
    for s in segs:
        if s.speaker not in seen:
            seen.append(s.speaker)
    return seen


def test_diarized_json_two_speakers(diar):
    seen = check_diarized(sample_diarized(diar))
    # Letters in order of first appearance, skipping none: two voices.
    assert seen == ["A", "B"], seen


def test_diarized_json_raw_shape(diar):
    r = post_audio(diar.port, path=SAMPLE, response_format="diarized_json")
    assert r.status == 200 and "application/json" in r.content_type, r
    j = r.json()
    assert set(j) == {"task", "duration", "text", "segments", "usage"}, j
    for s in j["segments"]:
        assert set(s) == {"type", "id", "start", "end", "speaker", "text"}, s
        assert s["text"].startswith(" ") or not s["text"], s  # Whisper's leading space
    assert j["usage"] == {"type": "duration", "seconds": 30}, j


def test_one_voice_is_a(diar):
    r = post_audio(diar.port, response_format="diarized_json")
    assert r.status == 200, r
    j = r.json()
    assert {s["speaker"] for s in j["segments"]} == {"A"}, j
    assert wd_api.words(j["text"]) == wd_api.words(wd_api.JFK_TEXT), j


@pytest.mark.parametrize("chunking", [None, "auto",
                                      '{"type":"server_vad","threshold":0.4}'])
def test_chunking_strategy(diar, chunking):
    if chunking is not None and not os.path.exists(VAD):
        pytest.skip("models/silero-vad-v6.safetensors missing (scripts/fetch-vad.sh)")
    fields = [("chunking_strategy", chunking)] if chunking else []
    r = post_audio(diar.port, path=SAMPLE, response_format="diarized_json", fields=fields)
    assert r.status == 200, r
    assert {s["speaker"] for s in r.json()["segments"]} == {"A", "B"}, r.json()


def test_alias_formats_carry_labels(diar):
    def post(fmt):
        r = post_audio(diar.port, path=SAMPLE, model=DIARIZE, response_format=fmt)
        assert r.status == 200, r
        return r
    text = post("text").text
    lines = [ln for ln in text.split("\n") if ln]
    assert lines and all(re.match(r"^[AB]: \S", ln) for ln in lines), text
    assert lines[0].startswith("A: "), text
    srt = post("srt").text
    cues = [c for c in srt.strip().split("\n\n") if c]
    assert cues and all(re.match(r"^\d+\n[\d:,]+ --> [\d:,]+\n[AB]: ", c) for c in cues), srt
    vtt = post("vtt").text
    assert vtt.startswith("WEBVTT\n\n"), vtt
    cues = vtt[len("WEBVTT\n\n"):].strip().split("\n\n")
    assert all(re.match(r"^[\d:.]+ --> [\d:.]+\n<v [AB]>\S", c) for c in cues), vtt
    # json has no place for speakers: OpenAI's {"text"} (and usage), and
    # no diarization run for it.
    before = diar_counts(diar.port)
    j = post("json").json()
    assert set(j) == {"text", "usage"} and j["text"], j
    after = diar_counts(diar.port)
    assert all(after[k] == before[k] for k in ("diar_done", "diar_canceled", "diar_failed")), \
        (before, after)
    # The SDK with the alias: a Transcription; diarized_json: diarized.
    with open(SAMPLE, "rb") as f:
        res = client(diar).audio.transcriptions.create(model=DIARIZE, file=f,
                                                       response_format="diarized_json")
    assert check_diarized(res) == ["A", "B"]


def test_known_speakers_named(diar):
    # speaker91 first in the lists: the names follow the voices, not the order.
    res = sample_diarized(diar, known_speaker_names=["bob", "alice"],
                          known_speaker_references=[ref(SPEAKER91), ref(SPEAKER90)])
    check_diarized(res)
    assert speaker_at(res, sum(SPEAKER90) / 2) == "alice", res.segments
    assert speaker_at(res, sum(SPEAKER91) / 2) == "bob", res.segments
    assert {s.speaker for s in res.segments} == {"alice", "bob"}, res.segments


def test_known_speaker_one_of_two(diar):
    # One name: its voice gets it, the other keeps a letter, the first: A.
    res = sample_diarized(diar, known_speaker_names=["bob"],
                          known_speaker_references=[ref(SPEAKER91)])
    check_diarized(res)
    assert speaker_at(res, sum(SPEAKER91) / 2) == "bob", res.segments
    assert speaker_at(res, sum(SPEAKER90) / 2) == "A", res.segments
    assert {s.speaker for s in res.segments} == {"A", "bob"}, res.segments


@pytest.mark.parametrize("span,part", [((11.0, 12.0), "1.00 s"), ((1.0, 12.5), "11.50 s")])
def test_known_speaker_reference_length(diar, span, part):
    fields = [("response_format", "diarized_json")] + \
             known_fields(["x"], [data_url(clip_wav(SAMPLE, *span))])
    err = check_error(post_audio(diar.port, path=SAMPLE, fields=fields), 400,
                      param="known_speaker_references")
    assert "1.2 and 10 seconds" in err["message"] and part in err["message"], err


def test_known_speaker_reference_not_audio(diar):
    fields = [("response_format", "diarized_json")] + \
             known_fields(["x"], [data_url(b"not audio at all" * 100)])
    err = check_error(post_audio(diar.port, path=SAMPLE, fields=fields), 400,
                      param="known_speaker_references")
    assert "could not be decoded" in err["message"], err
    wd_api.assert_healthy(diar)


def test_known_speaker_reference_mp3(diar):
    """A reference in another upload format, MP3: jfk.mp3 is 11 s, one
    second too long, so its 400 for the length proves that it decoded."""
    with open(wd_api.JFK_MP3, "rb") as f:
        mp3 = f.read()
    fields = [("response_format", "diarized_json")] + \
             known_fields(["x"], [data_url(mp3, "audio/mpeg")])
    err = check_error(post_audio(diar.port, path=SAMPLE, fields=fields), 400,
                      param="known_speaker_references")
    assert "between 1.2 and 10 seconds" in err["message"], err


def test_stream_segment_events_in_time_order(diar):
    with open(SAMPLE, "rb") as f:
        stream = client(diar).audio.transcriptions.create(
            model=DIARIZE, file=f, response_format="diarized_json", stream=True)
        events = list(stream)
    types = [e.type for e in events]
    assert types[-1] == "transcript.text.done", types
    segs = [e for e in events if e.type == "transcript.text.segment"]
    assert segs and types[:-1] == ["transcript.text.segment"] * len(segs), types
    prev = 0.0
    for i, e in enumerate(segs):
        assert e.id == f"seg_{i}" and e.speaker in ("A", "B") and e.start >= prev - 1e-6, e
        prev = e.start
    assert segs[0].speaker == "A"
    done = events[-1]
    assert "".join(e.text for e in segs).strip() == done.text, events
    assert done.usage is not None, done
    # The same segments as the whole answer.
    whole = sample_diarized(diar)
    assert [(s.id, s.speaker, s.text) for s in whole.segments] == \
           [(e.id, e.speaker, e.text) for e in segs]


def test_stream_raw_events(diar):
    r = post_audio(diar.port, path=SAMPLE, response_format="diarized_json", stream="true")
    assert r.status == 200 and "text/event-stream" in r.content_type, r
    evs = sse_events(r.body)
    assert evs[-1]["type"] == "transcript.text.done" and "usage" in evs[-1], evs
    for i, e in enumerate(evs[:-1]):
        assert e["type"] == "transcript.text.segment" and e["id"] == f"seg_{i}", e
        assert set(e) == {"type", "id", "start", "end", "speaker", "text"}, e


def test_clients_leaving_mid_diarization(diar):
    """Clients that hang up while their transcription and diarization run
    (plain and streamed): the daemon stays healthy, counts no job left, and
    the next request is answered in full."""
    leavers = [wd_api.Background(diar.port, path=SAMPLE, response_format="diarized_json"),
               wd_api.Background(diar.port, path=SAMPLE, response_format="diarized_json",
                                 stream="true")]
    time.sleep(0.5)
    for b in leavers:
        b.close()
    wd_api.wait_counts(diar.port, lambda c: not c["running"] and not c["queued"],
                       what="the hung-up jobs ended")
    wd_api.assert_healthy(diar)
    assert check_diarized(sample_diarized(diar))


SHORT = (6.5, 10.5)  # 4 s of sample.wav in which both voices speak


def test_short_clip_whole_streamed_and_left(diar):
    """4 s of sample.wav, whole, streamed, and by a client that hangs up: the
    diarization task on a decode thread beside the worker's job, their
    meeting under the request's lock, the stop test. Short so that the
    sanitizer trees run it (tests/api_blackbox.cmake: -k short)."""
    clip = clip_wav(SAMPLE, *SHORT)
    kw = dict(path=None, data=clip, filename="short.wav", response_format="diarized_json")
    r = post_audio(diar.port, **kw)
    assert r.status == 200, r
    j = r.json()
    assert j["duration"] == pytest.approx(4.0, abs=0.01) and j["segments"], j
    assert all(s["speaker"] in ("A", "B") for s in j["segments"]), j
    r = post_audio(diar.port, stream="true", **kw)
    assert r.status == 200 and "text/event-stream" in r.content_type, r
    evs = sse_events(r.body)
    assert evs[-1]["type"] == "transcript.text.done", evs
    assert [e["text"] for e in evs[:-1]] == [s["text"] for s in j["segments"]], (evs, j)
    leaver = wd_api.Background(diar.port, **kw)
    time.sleep(0.2)
    leaver.close()
    wd_api.wait_counts(diar.port, lambda c: not c["running"] and not c["queued"],
                       what="the hung-up job ended")
    wd_api.assert_healthy(diar)


# --- the request's life cycle: hang-ups and the drain ---------------------------

def speech_then_quiet(quiet_s):
    """The 4 s of two voices (SHORT), then quiet_s s of silence: the
    transcription (of the speech alone, with the VAD; of quiet windows
    otherwise) ends well before the diarization, whose segmentation reads
    every window (about 50 ms of one core a second of audio)."""
    with wave.open(SAMPLE, "rb") as w:
        params = w.getparams()
        w.setpos(int(SHORT[0] * params.framerate))
        frames = w.readframes(int((SHORT[1] - SHORT[0]) * params.framerate))
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        w.writeframes(frames + b"\0" * (2 * params.framerate * quiet_s))
    return out.getvalue()


def start_diarizing(d, quiet_s, stream=None):
    """A diarized request of speech_then_quiet(quiet_s), returned once its
    transcription has ended and its diarization still runs."""
    before = wait_diar(d.port, lambda c: c["diar_running"] == 0,
                       what="no diarization left from a test before")
    kw = dict(path=None, data=speech_then_quiet(quiet_s), filename="quiet.wav",
              response_format="diarized_json")
    if stream:
        kw["stream"] = "true"
    b = wd_api.Background(d.port, **kw)
    # Ended: its jobs (a chunk each, with the VAD) done and none left;
    # twice 0.2 s apart, since a chunk submits the next from its end.
    def ended(c):
        return c["done"] > before["done"] and not c["running"] and not c["queued"] \
            and c["diar_running"] == 1
    while True:
        wait_diar(d.port, ended, what="the transcription ended, the diarization running")
        time.sleep(0.2)
        if ended(diar_counts(d.port)):
            return b, before


@pytest.mark.parametrize("stream", [None, "true"])
def test_hangup_after_transcription_stops_diarization(diar, stream):
    """A client that hangs up once its transcription has ended (its
    connection suspended for the diarization, plain or streamed): the
    watcher sees it, the diarization stops at its next window (counted
    canceled, not done) and the decode thread and connection are free."""
    b, before = start_diarizing(diar, 60, stream)
    t0 = time.monotonic()
    b.close()
    c = wait_diar(diar.port, lambda c: c["diar_running"] == 0, what="the diarization stopped")
    took = time.monotonic() - t0
    assert c["diar_canceled"] == before["diar_canceled"] + 1, c
    assert c["diar_done"] == before["diar_done"], c
    # Its next window is tens of milliseconds away; the rest of it, seconds.
    assert took < 3, f"the diarization ran {took:.1f} s after its client left"
    assert re.search(r"diarization of 64\.0 s of audio stopped after [\d.]+ s "
                     r"\(its request ended\)", diar.log()), diar.log()
    wd_api.wait_counts(diar.port, lambda c: c["raw"]["whisperd_http_requests_active"] <= 1,
                       what="the request ended")
    wd_api.assert_healthy(diar)
    r = post_audio(diar.port, response_format="diarized_json")
    assert r.status == 200 and {s["speaker"] for s in r.json()["segments"]} == {"A"}, r


def test_hangup_while_diarizing_audio_without_speech(diar):
    """Audio without speech has no job at all (the VAD finds nothing: the
    transcription ends inside its submit), only the diarization: its
    client hanging up stops that too."""
    if not os.path.exists(VAD):
        pytest.skip("models/silero-vad-v6.safetensors missing (scripts/fetch-vad.sh)")
    # A client that left in a test before may leave its diarization ending.
    before = wait_diar(diar.port, lambda c: c["diar_running"] == 0,
                       what="no diarization left from a test before")
    with wave.open(SAMPLE, "rb") as w:
        params = w.getparams()
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        w.writeframes(b"\0" * (2 * params.framerate * 120))
    b = wd_api.Background(diar.port, path=None, data=out.getvalue(), filename="quiet.wav",
                          response_format="diarized_json")
    wait_diar(diar.port, lambda c: c["diar_running"] == 1, what="the diarization running")
    time.sleep(0.2)
    b.close()
    c = wait_diar(diar.port, lambda c: c["diar_running"] == 0, what="the diarization stopped")
    assert c["diar_canceled"] == before["diar_canceled"] + 1, c
    assert c["done"] == before["done"] and c["failed"] == before["failed"], c  # no job
    assert "client went away, stopping its diarization" in diar.log(), diar.log_tail()


def diar_daemon(grace_s, extra=()):
    for p in (SEG, EMB):
        if not os.path.exists(p):
            pytest.skip(f"{p} missing (scripts/fetch-diarization.sh)")
    args = ["--diar-seg-model", SEG, "--diar-emb-model", EMB, "--shutdown-grace", str(grace_s),
            *extra]
    if os.path.exists(VAD):
        args += ["--vad-model", VAD]
    return wd_api.start_daemon(args=args)


def test_sigterm_cuts_a_diarization_at_the_grace():
    """SIGTERM while a diarization runs past --shutdown-grace: it is stopped
    at the grace and answered as the drain answers a job it cuts (503
    shutting_down), and the daemon exits 0 then, not when the diarization
    would have ended."""
    d = diar_daemon(1)
    try:
        b, _ = start_diarizing(d, 120)
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        r = b.response(timeout=60)
        answered = time.monotonic() - t0
        check_error(r, 503, code="shutting_down")
        rc = d.proc.wait(60)
        exited = time.monotonic() - t0
    finally:
        d.stop(timeout=60)
    assert rc == 0, d.log_tail()
    assert answered < 1 + 3 and exited < 1 + 5, (answered, exited)
    assert "(the drain's deadline)" in d.log(), d.log_tail()


def test_sigterm_lets_a_diarization_finish_within_the_grace():
    """A diarization that ends within --shutdown-grace, after the workers'
    drain has ended: answered in full before the daemon exits 0."""
    d = diar_daemon(60)
    try:
        b, _ = start_diarizing(d, 30)
        d.proc.send_signal(signal.SIGTERM)
        r = b.response(timeout=120)
        assert r is not None and r.status == 200, r
        segs = r.json()["segments"]
        assert segs and {s["speaker"] for s in segs} <= {"A", "B"}, r.json()
        rc = d.proc.wait(60)
    finally:
        d.stop(timeout=60)
    assert rc == 0, d.log_tail()


def test_diarization_outliving_its_job_holds_the_audio_budget():
    """A diarization still running after its transcription ended keeps its
    upload's seconds in --queue-audio-s (once: the job's were released):
    another upload is refused 429 meanwhile, and admitted once it ends, so
    uploads transcribed quickly (silence) cannot pile diarizations up past
    the budget."""
    d = diar_daemon(5, ["--queue-audio-s", "100"])
    try:
        # 124 s: over the budget, admitted as the worker admits any one job
        # while it holds nothing.
        b, _ = start_diarizing(d, 120)
        m = wd_api.metrics(d.port)
        assert m["whisperd_diarizations_audio_seconds"] == pytest.approx(124, abs=0.01), m
        assert m["whisperd_queue_audio_seconds"] == 0, m
        r = post_audio(d.port)
        check_error(r, 429, code="rate_limit_exceeded", etype="rate_limit_error")
        b.close()  # its diarization stops: the budget is free again
        wait_diar(d.port, lambda c: c["diar_running"] == 0, what="the diarization stopped")
        assert wd_api.metrics(d.port)["whisperd_diarizations_audio_seconds"] == 0
        wd_api.assert_jfk_json(post_audio(d.port))
    finally:
        d.stop(timeout=60)


def test_diarization_failing_part_way():
    """A diarization that fails part-way (--fault-inject diar_oom:1: its
    first batch of windows, as out of memory) while its transcription
    succeeds: the request gets a 500 naming the diarization, not an answer
    without speakers; the daemon serves on and the next one is whole."""
    d = diar_daemon(5, ["--fault-inject", "diar_oom:1"])
    try:
        kw = dict(path=None, data=clip_wav(SAMPLE, *SHORT), filename="short.wav",
                  response_format="diarized_json")
        err = check_error(post_audio(d.port, **kw), 500)
        assert err["message"].startswith("Speaker diarization failed (out of memory)"), err
        c = diar_counts(d.port)
        assert c["diar_failed"] == 1 and c["done"] >= 1 and c["failed"] == 0, c
        assert "diarization of 4.0 s of audio failed" in d.log(), d.log_tail()
        r = post_audio(d.port, **kw)
        assert r.status == 200 and r.json()["segments"], r
        assert diar_counts(d.port)["diar_done"] == 1
    finally:
        d.stop(timeout=60)


def test_long_diarizations_hold_up_no_upload():
    """Diarizations run on threads of their own (--diarize-threads), never on
    the decode threads: with one decode thread, two diarized uploads whose
    diarizations last (--fault-inject diar_delay: each batch of windows
    waits 600 s first) have one diarization running and the other waiting
    for the one diarization thread (whisperd_diarizations_queued), and a
    plain upload is decoded and answered meanwhile. Their clients hanging
    up stop both, the queued one as soon as it is taken up."""
    d = diar_daemon(5, ["--decode-threads", "1", "--diarize-threads", "1",
                        "--fault-inject", "diar_delay:600000"])
    try:
        kw = dict(path=None, data=clip_wav(SAMPLE, *SHORT), filename="short.wav",
                  response_format="diarized_json")
        bs = [wd_api.Background(d.port, **kw) for _ in range(2)]
        wait_diar(d.port, lambda c: c["diar_running"] == 1
                  and c["raw"]["whisperd_diarizations_queued"] == 1,
                  what="one diarization running and one queued")
        # Decoded at once, then transcribed beside the two 4 s clips; under
        # the old placement it waited the 600 s for the decode thread.
        limit = min(wd_api.REQUEST_TIMEOUT_S, 300)
        t0 = time.monotonic()
        wd_api.assert_jfk_json(post_audio(d.port, timeout=limit))
        assert time.monotonic() - t0 < limit
        for b in bs:
            b.close()
        c = wait_diar(d.port, lambda c: c["diar_running"] == 0
                      and c["raw"]["whisperd_diarizations_queued"] == 0,
                      what="both diarizations stopped", timeout=20)
        assert c["diar_canceled"] == 2 and c["diar_done"] == 0, c
        wd_api.assert_healthy(d)
    finally:
        d.stop(timeout=60)
