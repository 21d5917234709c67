"""The daemon's own page (GET /, api/web/) in a real browser: Debian's
chromium driven by Playwright against the real daemon with tiny.en.

Uploads jfk.wav and checks the segments as they stream, the progress bar
following them, their times, the seek on a click and the srt download (the
API's srt byte for byte); feeds jfk through a fake
microphone into the Realtime session; the API key's 401 and re-entry; and
--web-ui off. Screenshots of each state go to <build>/web-ui-screenshots/
(WD_WEB_UI_DOCS_DIR=dir also writes the two the README shows). Skips when
chromium or the playwright package is missing (scripts/install-test-deps.sh).
"""

import json
import os
import re
import shutil
import subprocess
import time

import pytest

import wd_api
from wd_api import JFK_WAV, start_daemon, stop_daemon

try:
    from playwright import sync_api
except ImportError:
    sync_api = None
CHROMIUM = os.environ.get("WD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(wd_api.WHISPERD)))
SHOTS = os.path.join(BUILD, "web-ui-screenshots")
DOCS = os.environ.get("WD_WEB_UI_DOCS_DIR")
ASSETS = ["/", "/app.css", "/app.js", "/worklet.js"]
VAD_MODEL = os.path.join(wd_api.ROOT, "models", "silero-vad-v6.safetensors")
JFK_START = "And so my fellow Americans ask not what your country can do for you"


def shot(page, name, docs_name=None, full=True):
    os.makedirs(SHOTS, exist_ok=True)
    page.screenshot(path=os.path.join(SHOTS, name + ".png"), full_page=full)
    if DOCS and docs_name:  # cut to the content: a short viewport, the full page
        os.makedirs(DOCS, exist_ok=True)
        size = page.viewport_size
        page.set_viewport_size({"width": size["width"], "height": 200})
        page.screenshot(path=os.path.join(DOCS, docs_name), full_page=True)
        page.set_viewport_size(size)


def note(line):
    """A measurement, kept beside the screenshots (pytest -q hides prints)."""
    os.makedirs(SHOTS, exist_ok=True)
    with open(os.path.join(SHOTS, "measurements.txt"), "a") as f:
        f.write(line + "\n")
    print(line)


@pytest.fixture(scope="module")
def mic_wav(tmp_path_factory):
    """jfk at 48 kHz, with 1 s of silence before and 3 s after: the fake
    microphone's input (server VAD ends a turn at each pause)."""
    if not shutil.which("ffmpeg"):
        pytest.skip("no ffmpeg (the fake microphone's file; install-test-deps.sh)")
    out = str(tmp_path_factory.mktemp("mic") / "jfk48k.wav")
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-i", JFK_WAV, "-af",
                    "adelay=1000:all=1,apad=pad_dur=3", "-ar", "48000", "-ac", "1",
                    "-c:a", "pcm_s16le", out], check=True)
    return out


@pytest.fixture(scope="module")
def browser(request):
    """Chromium through Playwright; the tests that need one skip without it
    (the HTTP checks still run)."""
    if sync_api is None:
        pytest.skip("no playwright in the venv (install-test-deps.sh)")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM} (install-test-deps.sh)")
    mic_wav = request.getfixturevalue("mic_wav")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={mic_wav}",
            "--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def daemon():
    """Silero VAD for the Realtime session's server_vad, when fetched."""
    d = start_daemon(args=["--vad-model", VAD_MODEL] if os.path.exists(VAD_MODEL) else [])
    yield d
    stop_daemon(d)


class Page:
    """A fresh context and page that records console errors and page errors."""

    def __init__(self, browser, url, width=900, height=900):
        self.ctx = browser.new_context(viewport={"width": width, "height": height},
                                       accept_downloads=True)
        self.page = self.ctx.new_page()
        self.errors = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.goto(url)

    def close(self):
        self.ctx.close()


@pytest.fixture
def page(browser, daemon):
    p = Page(browser, daemon.url)
    yield p
    p.close()


def test_assets_headers(daemon):
    """Every asset: 200 with its type, the CSP and a revalidated cache; HEAD
    the same without a body; the page needs no key."""
    total = 0
    for path in ASSETS:
        r = wd_api.request(daemon.port, "GET", path)
        assert r.status == 200, (path, r)
        ctype = r.headers["content-type"]
        assert ctype == ("text/html; charset=utf-8" if path == "/" else
                         "text/css; charset=utf-8" if path.endswith(".css") else
                         "text/javascript; charset=utf-8"), (path, ctype)
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp, csp
        assert "connect-src 'self' ws: wss:" in csp and "media-src 'self' blob:" in csp, csp
        assert r.headers["cache-control"] == "no-cache"
        assert r.headers["x-content-type-options"] == "nosniff"
        h = wd_api.request(daemon.port, "HEAD", path)
        assert h.status == 200 and h.body == b"", h
        assert int(h.headers["content-length"]) == len(r.body)
        again = wd_api.request(daemon.port, "GET", path, headers={"If-None-Match": r.headers["etag"]})
        assert again.status == 304 and again.body == b""
        total += len(r.body)
    note(f"web-ui: {total} bytes in {len(ASSETS)} assets")
    assert total < 64 * 1024
    assert wd_api.request(daemon.port, "POST", "/", b"x").status == 405
    assert wd_api.request(daemon.port, "GET", "/nothing.js").status == 404


# Records each value the page gives the progress bar, with its words (set
# first) and the segments listed then: window.wdProgress.
RECORD_PROGRESS = """() => {
  const d = Object.getOwnPropertyDescriptor(HTMLProgressElement.prototype, 'value');
  window.wdProgress = [];
  Object.defineProperty(HTMLProgressElement.prototype, 'value', {
    configurable: true,
    get() { return d.get.call(this); },
    set(v) {
      window.wdProgress.push([v, document.getElementById('progress-text').textContent,
                              document.querySelectorAll('#segments .seg').length]);
      d.set.call(this, v);
    },
  });
}"""


def test_files(page, daemon):
    """jfk.wav uploaded: streamed segments with times, the progress bar
    following them to 100 %, a click seeks and plays, the srt download is
    the API's srt, the json download verbose_json; no console error on the
    way."""
    pg = page.page
    pg.wait_for_selector("#model option", state="attached")
    paint = pg.evaluate("performance.getEntriesByType('paint').map(e => [e.name, e.startTime])")
    note(f"web-ui: paint {paint} (ms after navigation start)")
    assert any(n == "first-paint" for n, _ in paint), paint
    shot(pg, "01-start")
    pg.evaluate(RECORD_PROGRESS)
    pg.set_input_files("#file", JFK_WAV)
    pg.wait_for_function("() => document.getElementById('audio').duration > 0")
    pg.click("#go")
    pg.wait_for_function("() => document.getElementById('progress-text').textContent === 'Done'",
                         timeout=120_000)
    # The stream's segments were listed as they came, and the bar followed
    # each one's end over the audio's 11 s, then ended at 100 %.
    bar = pg.evaluate("window.wdProgress")
    note(f"web-ui: progress {bar}")
    assert bar[-1] == [1, "Done", len(wd_api.JFK_SEGMENTS)], bar
    decoding = [b for b in bar if b[1].startswith("Transcribing… ") and b[1].endswith(" %")]
    assert decoding, bar
    for value, label, n in decoding:
        assert n >= 1 and value == pytest.approx(wd_api.JFK_SEGMENTS[n - 1][1] / 11.0), bar
        assert label == f"Transcribing… {round(value * 100)} %", bar
    assert [b[0] for b in decoding] == sorted(b[0] for b in decoding), bar
    segs = pg.locator("#segments .seg")
    assert segs.count() == len(wd_api.JFK_SEGMENTS)
    texts = [segs.nth(i).inner_text() for i in range(segs.count())]
    assert texts[0].startswith("0:00.00 – 0:07.74"), texts
    assert JFK_START in texts[0], texts
    assert "ask what you can do for your country" in texts[1], texts
    assert pg.locator("#file-error").is_hidden()
    # a click on the second segment seeks there and plays
    segs.nth(1).click()
    pg.wait_for_function("() => !document.getElementById('audio').paused", timeout=10_000)
    t = pg.evaluate("document.getElementById('audio').currentTime")
    assert 7.7 <= t < 9.5, t
    pg.wait_for_selector("#segments .seg[aria-current=true]", timeout=10_000)
    assert segs.nth(1).get_attribute("aria-current") == "true"
    pg.evaluate("document.getElementById('audio').pause()")
    shot(pg, "02-files-result", "web-ui-files.png", full=False)
    # the srt download is the API's own
    with pg.expect_download(timeout=120_000) as dl:
        pg.click("button.dl[data-fmt=srt]")
    got = open(dl.value.path(), "rb").read()
    assert dl.value.suggested_filename == "jfk.srt"
    api = wd_api.post_audio(daemon.port, response_format="srt")
    assert api.status == 200 and got == api.body, (got, api.body)
    with pg.expect_download(timeout=120_000) as dl:
        pg.click("button.dl[data-fmt=json]")
    doc = json.loads(open(dl.value.path(), "rb").read())
    assert dl.value.suggested_filename == "jfk.json"
    wd_api.check_transcript("verbose_json", doc)
    # phone width: nothing wider than the screen
    pg.set_viewport_size({"width": 375, "height": 800})
    assert pg.evaluate("document.documentElement.scrollWidth") <= 375
    shot(pg, "03-files-phone")
    assert page.errors == []


def test_status(page):
    """The status tab: the device, the queue and the model from /metrics and
    /v1/models."""
    pg = page.page
    pg.wait_for_selector("#model option", state="attached")
    pg.click("#tab-status")
    pg.wait_for_selector("#stats dt")
    stats = pg.inner_text("#stats")
    assert re.search(r"Queue\s+0 waiting of \d+", stats), stats
    assert "Devices" in stats and "cpu" in stats.lower(), stats
    assert "ggml-tiny.en" in pg.inner_text("#models") or "whisper-1" in pg.inner_text("#models")
    # keyboard: arrows move between the tabs
    pg.keyboard.press("ArrowLeft")
    assert pg.evaluate("document.activeElement.id") == "tab-live"
    assert pg.locator("#live").is_visible()
    pg.click("#tab-status")
    shot(pg, "04-status")
    assert page.errors == []


def test_live(page):
    """The fake microphone (jfk) through /v1/realtime: turns with jfk's
    words; Stop commits the open turn and closes the session."""
    if not os.path.exists(VAD_MODEL):
        pytest.skip("models/silero-vad-v6.safetensors not present (scripts/fetch-vad.sh)")
    pg = page.page
    pg.wait_for_selector("#model option", state="attached")
    pg.click("#tab-live")
    pg.click("#mic")
    # server VAD (500 ms of silence) cuts jfk's pauses into several turns
    said = ("() => [...document.querySelectorAll('#turns li .x')].map(e => e.textContent).join(' ')"
            ".toLowerCase().replace(/[^a-z]+/g, ' ')")
    try:
        pg.wait_for_function(f"() => ({said})().includes('ask not what your country can do for you')",
                             timeout=60_000)
    except sync_api.TimeoutError:
        shot(pg, "05-live-failed")
        pytest.fail(f"turns: {pg.evaluate(said)!r}; state {pg.inner_text('#live-state')!r}, "
                    f"error {pg.inner_text('#live-error')!r}, console {page.errors}")
    assert pg.evaluate("document.getElementById('level').value") >= 0
    shot(pg, "05-live", "web-ui-live.png", full=False)
    pg.click("#mic")
    pg.wait_for_function("() => document.getElementById('mic').getAttribute('aria-pressed') === 'false'",
                         timeout=10_000)
    assert pg.locator("#live-error").is_hidden(), pg.inner_text("#live-error")
    shot(pg, "06-live-stopped")
    assert page.errors == []


WORKLET_AT = """async (rate) => {
  const ctx = new OfflineAudioContext(1, rate, rate);  // one second of a 440 Hz sine
  await ctx.audioWorklet.addModule('/worklet.js');
  const node = new AudioWorkletNode(ctx, 'pcm16-24k');
  const osc = ctx.createOscillator();
  osc.frequency.value = 440;
  osc.connect(node).connect(ctx.destination);
  osc.start();
  const blocks = [];
  node.port.onmessage = (m) => blocks.push(new Int16Array(m.data.pcm));
  await ctx.startRendering();
  await new Promise((r) => setTimeout(r, 200));
  const all = blocks.flatMap((b) => Array.from(b));
  let crossings = 0, peak = 0;
  for (let i = 1; i < all.length; i++) {
    if ((all[i - 1] < 0) !== (all[i] < 0)) crossings++;
    peak = Math.max(peak, Math.abs(all[i]));
  }
  return [blocks.length, all.length, crossings, peak];
}"""


def test_worklet_resamples(page):
    """The microphone's worklet where the context runs at the device's rate
    (Firefox): 100 ms blocks of 24 kHz PCM16, the sine's frequency kept."""
    for rate in (48000, 44100, 16000):
        n_blocks, n, crossings, peak = page.page.evaluate(WORKLET_AT, rate)
        assert n_blocks >= 9 and abs(n - n_blocks * 2400) == 0, (rate, n_blocks, n)
        assert abs(crossings - 880 * n / 24000) <= 4, (rate, crossings, n)
        assert 30000 < peak <= 32768, (rate, peak)
    assert page.errors == []


def test_api_key(browser):
    """With --api-key the page asks for it: a wrong key shows the 401, the
    right one works; word timestamps; an API error is shown as given."""
    d = start_daemon(args=["--api-key", "right-key"])
    p = Page(browser, d.url)
    try:
        pg = p.page
        pg.wait_for_selector("#key-box:not([hidden])")
        assert "401" in pg.inner_text("#key-msg")
        pg.fill("#key", "wrong-key")
        pg.click("#key-form button")
        pg.wait_for_function("() => /Incorrect API key/.test(document.getElementById('key-msg').textContent)"
                             " && !document.getElementById('key-box').hidden")
        assert "401" in pg.inner_text("#key-msg")
        shot(pg, "07-key-wrong")
        pg.fill("#key", "right-key")
        pg.click("#key-form button")
        pg.wait_for_selector("#model option", state="attached")
        assert pg.locator("#key-box").is_hidden()
        assert pg.evaluate("localStorage.getItem('whisperd.apiKey')") == "right-key"
        pg.set_input_files("#file", JFK_WAV)
        pg.click("#go")
        pg.wait_for_selector("#segments .seg", timeout=120_000)
        assert JFK_START in pg.inner_text("#segments")
        shot(pg, "08-key-right")
        # word timestamps: each word a span with its times
        pg.check("#words")
        pg.click("#go")
        pg.wait_for_selector("#segments .w", timeout=120_000)
        assert pg.locator("#segments .w").count() == len(wd_api.JFK_TEXT.split())
        assert re.match(r"\d:\d\d\.\d\d – \d:\d\d\.\d\d$",
                        pg.locator("#segments .w").first.get_attribute("title"))
        shot(pg, "09-words")
        # the API's error message as given
        pg.set_input_files("#file", {"name": "noise.wav", "mimeType": "audio/wav",
                                     "buffer": b"this is not audio" * 10})
        pg.click("#go")
        pg.wait_for_selector("#file-error:not([hidden])")
        err = pg.inner_text("#file-error")
        assert err.startswith("HTTP 400: "), err
        shot(pg, "10-error")
        # the only errors: the browser's lines for the 401 and 400 answers
        assert all("status of 401" in e or "status of 400" in e for e in p.errors), p.errors
    finally:
        p.close()
        stop_daemon(d)


def test_web_ui_off():
    """--web-ui off: / and its assets are 404 as any unknown path."""
    d = start_daemon(args=["--web-ui", "off"])
    try:
        for path in ASSETS:
            r = wd_api.request(d.port, "GET", path)
            assert r.status == 404, (path, r)
            assert r.json()["error"]["type"] == "invalid_request_error"
        assert wd_api.request(d.port, "GET", "/health").status == 200
    finally:
        stop_daemon(d)
