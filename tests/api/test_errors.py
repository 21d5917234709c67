"""Every request error the daemon answers on its own, each checked for its
status and the OpenAI error body {"error":{"message","type","param","code"}},
and after each group the daemon still transcribes jfk.wav correctly.
Requests whose body's end is ambiguous (two Content-Lengths,
Content-Length with Transfer-Encoding, ...) are answered 400 and their
connection closed, so that nothing smuggled after them is served."""

import re
import socket

import pytest

import wd_api
from wd_api import JFK_WAV, assert_healthy, check_error, multipart, post_audio, request

TRANSCRIBE = "/v1/audio/transcriptions"


def post_fields(port, fields, path=TRANSCRIBE, headers=None):
    body, ctype = multipart(fields)
    h = {"Content-Type": ctype}
    h.update(headers or {})
    return request(port, "POST", path, body, h)


def jfk_part():
    return ("file", ("jfk.wav", wd_api.read_file(JFK_WAV), "audio/wav"))


# --- fields ------------------------------------------------------------------

@pytest.mark.parametrize("path", [TRANSCRIBE, "/v1/audio/translations"])
def test_missing_file(daemon, path):
    check_error(post_fields(daemon.port, [("model", "whisper-1")], path), 400, param="file")


@pytest.mark.parametrize("path", [TRANSCRIBE, "/v1/audio/translations"])
def test_missing_model(daemon, path):
    check_error(post_fields(daemon.port, [jfk_part()], path), 400, param="model")


@pytest.mark.parametrize("model", ["no-such-model", "whisper-2", "tiny", ""])
def test_unknown_model(daemon, model):
    r = post_fields(daemon.port, [("model", model), jfk_part()])
    if model == "":
        # An empty value is no model at all: 400 (or 404 unknown).
        assert r.status in (400, 404), r
        check_error(r, r.status, param=(None, "model"))
        return
    # OpenAI answers model_not_found with param null.
    check_error(r, 404, param=(None, "model"), code="model_not_found")


@pytest.mark.parametrize("fmt", ["xml", "diarised_json", "JSON"])
def test_bad_response_format(daemon, fmt):
    r = post_audio(daemon.port, response_format=fmt)
    check_error(r, 400, param="response_format")


@pytest.mark.parametrize("fmt,grans", [
    ("json", ["word"]),
    ("json", ["segment", "word"]),
    ("text", ["word"]),
    ("verbose_json", ["syllable"]),
])
def test_timestamp_granularities(daemon, fmt, grans):
    r = post_audio(daemon.port, response_format=fmt,
                   fields=[("timestamp_granularities[]", g) for g in grans])
    check_error(r, 400, param="timestamp_granularities")


@pytest.mark.parametrize("temp", ["abc", "-1", "1.5", "nan", "0.2x"])
def test_bad_temperature(daemon, temp):
    check_error(post_audio(daemon.port, temperature=temp), 400, param="temperature")


@pytest.mark.parametrize("lang", ["xx", "zz-top", "de"])
def test_bad_language(daemon, lang):
    # "de" is a real language, but tiny.en is English-only.
    check_error(post_audio(daemon.port, language=lang), 400, param="language")


def test_bad_stream_value(daemon):
    check_error(post_audio(daemon.port, stream="maybe"), 400, param="stream")


def test_daemon_fine_after_field_errors(daemon):
    assert_healthy(daemon)


# --- methods and routes --------------------------------------------------------

@pytest.mark.parametrize("method,path", [
    ("GET", TRANSCRIBE),
    ("GET", "/v1/audio/translations"),
    ("PUT", TRANSCRIBE),
    ("DELETE", "/v1/models"),
    ("POST", "/v1/models"),
    ("POST", "/health"),
    ("POST", "/ready"),
    ("POST", "/metrics"),
])
def test_wrong_method(daemon, method, path):
    r = request(daemon.port, method, path, body=b"" if method in ("POST", "PUT") else None)
    check_error(r, 405, param=None)
    assert "allow" in r.headers, f"405 without Allow: {r!r} {r.headers}"


@pytest.mark.parametrize("method,path", [
    ("GET", "/index.html"),  # "/" is the daemon's page (test_web_ui.py)
    ("GET", "/v1/nope"),
    ("GET", "/v1/audio"),
    ("POST", "/v1/audio/speech"),
    ("POST", "/v1/audio/transcriptions/extra"),
    ("GET", "/v2/models"),
])
def test_unknown_route(daemon, method, path):
    r = request(daemon.port, method, path, body=b"" if method == "POST" else None)
    check_error(r, 404, param=None)


# --- bodies --------------------------------------------------------------------

def test_malformed_multipart(daemon):
    p = daemon.port
    body, ctype = multipart([("model", "whisper-1"), jfk_part()])
    # Not multipart at all.
    check_error(request(p, "POST", TRANSCRIBE, b'{"model":"whisper-1"}',
                        {"Content-Type": "application/json"}), 400, any_param=True)
    # No Content-Type.
    check_error(request(p, "POST", TRANSCRIBE, body, {}), 400, any_param=True)
    # multipart without a boundary parameter.
    check_error(request(p, "POST", TRANSCRIBE, body, {"Content-Type": "multipart/form-data"}),
                400, any_param=True)
    # A boundary that the body never uses.
    check_error(request(p, "POST", TRANSCRIBE, body,
                        {"Content-Type": "multipart/form-data; boundary=nothere"}), 400,
                any_param=True)
    # The body cut in the middle of the file part (no closing boundary).
    check_error(request(p, "POST", TRANSCRIBE, body[:len(body) // 2], {"Content-Type": ctype}),
                400, any_param=True)
    # A part without Content-Disposition, then garbage.
    b = ctype.split("boundary=")[1]
    junk = (f"--{b}\r\nX-Nothing: 1\r\n\r\nabc\r\n--{b}\r\n\x00\x01\x02garbage").encode()
    check_error(request(p, "POST", TRANSCRIBE, junk, {"Content-Type": ctype}), 400, any_param=True)
    # An empty body.
    check_error(request(p, "POST", TRANSCRIBE, b"", {"Content-Type": ctype}), 400, any_param=True)
    assert_healthy(daemon)


@pytest.mark.parametrize("name,data", [
    ("text.wav", b"This is a text file, not audio at all.\n" * 200),
    ("zeros.mp3", bytes(20000)),
    ("random.ogg", bytes((i * 7919 + 13) % 251 for i in range(30000))),
    ("page.html", b"<!doctype html><html><body>hello</body></html>\n" * 50),
    ("empty.wav", b""),
])
def test_not_audio(daemon, name, data):
    r = post_audio(daemon.port, path=None, data=data, filename=name)
    check_error(r, 400, any_param=True)


def test_truncated_wav(daemon):
    wav = wd_api.read_file(JFK_WAV)
    # Cut inside the RIFF header, and a header with no samples at all.
    for n in (12, 30, 44):
        r = post_audio(daemon.port, path=None, data=wav[:n], filename="cut.wav")
        check_error(r, 400, any_param=True)
    # Cut in the samples (the header still claims 11 s): either refused, or
    # the first part transcribed; never a 5xx.
    r = post_audio(daemon.port, path=None, data=wav[:len(wav) // 2], filename="half.wav")
    if r.status == 200:
        got = wd_api.words(r.json()["text"])
        assert got[:4] == ["and", "so", "my", "fellow"], r
    else:
        check_error(r, 400, any_param=True)
    assert_healthy(daemon)


def test_audio_too_short(daemon):
    """Under 0.1 s of decoded audio is OpenAI's 400 audio_too_short (param
    file), whether the header says so or lies (a RIFF header claiming 11 s
    over 0.06 s of samples used to get 200 with empty text); 0.1 s is
    transcribed."""
    import io
    import struct
    import wave

    def wav(samples):
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(struct.pack(f"<{samples}h", *([1000, -1000] * (samples // 2))))
        return buf.getvalue()

    short = wav(960)  # 0.06 s
    liar = bytearray(short)
    struct.pack_into("<I", liar, 40, 16000 * 2 * 11)  # data chunk claims 11 s
    struct.pack_into("<I", liar, 4, 36 + 16000 * 2 * 11)
    for data in (short, bytes(liar)):
        r = post_audio(daemon.port, path=None, data=data, filename="short.wav")
        check_error(r, 400, param="file", code="audio_too_short")
    r = post_audio(daemon.port, path=None, data=wav(1600), filename="tenth.wav")
    assert r.status == 200, r
    assert_healthy(daemon)


def test_nan_and_inf_float_samples(daemon):
    """A float WAV holding NaN or infinite samples is a bad file: OpenAI's
    400 invalid_file_format on param file (it used to decode to NaN, reach
    the model and come back as 'decoding options not supported')."""
    import math
    import struct

    def float_wav(bad):
        n = 16000
        body = [0.25 * math.sin(2 * math.pi * 440 * i / 16000) for i in range(n)]
        body[n // 2] = bad
        data = struct.pack(f"<{n}f", *body)
        fmt = struct.pack("<HHIIHH", 3, 1, 16000, 64000, 4, 32)  # IEEE float, mono
        return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
                struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data)

    for bad in (float("nan"), float("inf"), -float("inf")):
        r = post_audio(daemon.port, path=None, data=float_wav(bad), filename="bad.wav")
        check_error(r, 400, param="file", code="invalid_file_format")
    assert_healthy(daemon)


def test_unsupported_container_named_wav(daemon):
    """An MP4 (AAC) file given a .wav name: the daemon looks at the bytes,
    not the name, so it decodes (ffmpeg) or refuses it (400), never 5xx."""
    data = wd_api.read_file(f"{wd_api.AUDIO}/formats/aac_16k.mp4")
    r = post_audio(daemon.port, path=None, data=data, filename="speech.wav")
    if r.status != 200:
        check_error(r, 400, any_param=True)
    assert_healthy(daemon)


def test_multipart_variants_accepted(daemon):
    """What RFC 7578 allows and clients send: a quoted boundary, the file
    part first, an unknown extra field (ignored, as peers do)."""
    fields = [jfk_part(), ("model", "whisper-1"), ("response_format", "json"),
              ("x_unknown", "1")]
    body, ctype = multipart(fields, boundary="wd-quoted:boundary")
    r = request(daemon.port, "POST", TRANSCRIBE, body,
                {"Content-Type": 'multipart/form-data; boundary="wd-quoted:boundary"'})
    wd_api.assert_jfk_json(r)


# --- framing -------------------------------------------------------------------

# Sent after a request's headers: answered only if the server reads it as
# a second request on the connection, where a proxy in front that reads the
# framing otherwise took it for the first one's body (request smuggling).
SMUGGLED = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
N = len(SMUGGLED)


def post_head(extra, version="HTTP/1.1"):
    return (f"POST {TRANSCRIBE} {version}\r\nHost: x\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\n").encode() + extra + b"\r\n"


# RFC 9112 6.1 and 6.3 (5.1: whitespace before the colon). Every case but
# the last had SMUGGLED answered (the last was answered invalid_multipart),
# and encoding_not_chunked no answer at all: MHD read its body to the end
# of the connection.
FRAMING = {
    # CL.CL: MHD took the first, a proxy taking the last forwards SMUGGLED as the body.
    "two_lengths": post_head(b"Content-Length: 0\r\nContent-Length: %d\r\n" % N) + SMUGGLED,
    "two_lengths_on_get": (b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                           b"Content-Length: %d\r\n\r\n" % N) + SMUGGLED,
    # Equal values too (RFC 9110 allows merging them): refusing is simpler.
    "two_equal_lengths": (post_head(b"Content-Length: %d\r\nContent-Length: %d\r\n" % (N, N))
                          + SMUGGLED + SMUGGLED),
    # MHD saw no Content-Length (a field named "Content-Length "): no body.
    "space_before_colon": post_head(b"Content-Length : %d\r\n" % N) + SMUGGLED,
    # TE.CL: MHD read the chunked body, a proxy taking Content-Length forwards SMUGGLED with it.
    "length_and_chunked": (post_head(b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n"
                                     % (5 + N)) + b"0\r\n\r\n" + SMUGGLED),
    "two_encodings": (post_head(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n")
                      + b"0\r\n\r\n" + SMUGGLED),
    "encoding_not_chunked": post_head(b"Transfer-Encoding: gzip\r\n") + SMUGGLED,
    "chunked_in_http10": post_head(b"Transfer-Encoding: chunked\r\n", "HTTP/1.0") + b"0\r\n\r\n",
}


def exchange(port, data, timeout=5):
    """Sends data on a new connection; returns what came back and whether
    the server closed the connection within timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out, closed = b"", False
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                closed = True
                break
            out += b
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        pass
    finally:
        s.close()
    return out, closed


@pytest.mark.parametrize("case", list(FRAMING))
def test_ambiguous_framing_refused_and_closed(daemon, case):
    data, closed = exchange(daemon.port, FRAMING[case])
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", data)
    assert len(statuses) == 1, f"{len(statuses)} answers: {data!r}"
    r = wd_api.parse_raw_response(data)
    check_error(r, 400, code="invalid_request")
    assert r.headers.get("connection") == "close", r.headers
    assert closed, f"the connection stayed open after the 400: {data!r}"


def test_pipelined_requests_all_answered(daemon):
    """Well-framed requests back to back on one connection are answered in
    order (the framing check refuses none): Content-Length and chunked
    bodies (an empty form: 400 for the missing file, after the body, so the
    connection is kept)."""
    data, closed = exchange(daemon.port, b"".join([
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        post_head(b"Content-Length: 7\r\n") + b"--b--\r\n",
        post_head(b"Transfer-Encoding: chunked\r\n") + b"7\r\n--b--\r\n\r\n0\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ]), timeout=30)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", data) == [b"200", b"400", b"400", b"200"], data
    assert data.count(b'"param":"file"') == 2 and b'"object":"list"' in data, data
    assert closed
    assert_healthy(daemon)
