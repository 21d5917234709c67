#!/usr/bin/env python3
"""Realtime transcription latency (issue #26): N sessions at once on
GET /v1/realtime, each streaming jfk.wav as 24 kHz PCM at real-time pace in
40 ms pieces with server_vad, then a second of silence; the figure is each
turn's latency from the client's receipt of speech_stopped to its receipt
of the turn's completed event, p50 and p95 over all turns of all sessions,
per N (--stagger S: session i starts i * S / N seconds late). --uploads K runs K POST /v1/audio/transcriptions of jfk.wav in a
loop beside the sessions (the same workers). --partials-ms MS turns on the
daemon's partial transcripts of open turns (they take the workers' idle time).

Runs the real daemon (build/daemon/whisperd serve, --device cpu unless
--device is given, tiny.en) with websockets from build/venv:
  build/venv/bin/python tests/bench/realtime.py --ns 1,4,8,16 [--uploads 2]
Prints a table; asserts nothing.
"""

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "api"))
import wd_api  # noqa: E402

import websockets  # noqa: E402

VAD_MODEL = os.path.join(wd_api.ROOT, "models", "silero-vad-v6.safetensors")


def jfk24():
    return subprocess.run(["ffmpeg", "-loglevel", "error", "-i", wd_api.JFK_WAV, "-ac", "1",
                           "-ar", "24000", "-f", "s16le", "-"], check=True,
                          capture_output=True).stdout + bytes(48000)


async def session(port, pcm, lat, delay=0.0, piece_s=0.04):
    await asyncio.sleep(delay)
    url = f"ws://127.0.0.1:{port}/v1/realtime?intent=transcription"
    async with websockets.connect(url, max_size=None) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "session.update", "session": {
            "type": "transcription", "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}}}))
        stopped, pending = {}, set()
        done = asyncio.Event()
        sent_all = False

        async def reader():
            async for msg in ws:
                ev = json.loads(msg)
                t = time.monotonic()
                if ev["type"] == "input_audio_buffer.speech_stopped":
                    stopped[ev["item_id"]] = t
                    pending.add(ev["item_id"])
                elif ev["type"].endswith("transcription.completed") or \
                        ev["type"].endswith("transcription.failed"):
                    if ev["item_id"] in stopped:
                        lat.append(t - stopped[ev["item_id"]])
                    pending.discard(ev["item_id"])
                elif ev["type"] == "input_audio_buffer.cleared" and not pending:
                    done.set()
                if sent_all and not pending and ev["type"].endswith("completed"):
                    done.set()

        rtask = asyncio.create_task(reader())
        step = int(24000 * 2 * piece_s)
        t0 = time.monotonic()
        for i in range(0, len(pcm), step):
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "audio": base64.b64encode(pcm[i:i + step]).decode()}))
            await asyncio.sleep(max(0.0, t0 + (i + step) / 48000 - time.monotonic()))
        sent_all = True
        await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        try:
            await asyncio.wait_for(done.wait(), timeout=120)
        finally:
            rtask.cancel()


def uploads_loop(port, stop, counts):
    while not stop.is_set():
        r = wd_api.post_audio(port)
        counts.append(r.status)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ns", default="1,4,8,16")
    ap.add_argument("--uploads", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default=wd_api.TINY_EN)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--partials-ms", type=int, default=0,
                    help="--realtime-partials-ms for the daemon (0: none)")
    ap.add_argument("--stagger", type=float, default=0.0,
                    help="session i of N starts i * S / N seconds late (0: all at once, every "
                         "turn of every session ending at the same moment: the worst case)")
    a = ap.parse_args()
    pcm = jfk24()
    d = wd_api.start_daemon(model=a.model, args=["--device", a.device, "--vad-model", VAD_MODEL,
                                                 "--max-batch", str(a.max_batch),
                                                 "--realtime-sessions", "64",
                                                 "--realtime-partials-ms", str(a.partials_ms)])
    try:
        print(f"{'sessions':>8} {'uploads':>7} {'turns':>5} {'p50 s':>7} {'p95 s':>7} {'max s':>7}")
        for n in [int(x) for x in a.ns.split(",")]:
            lat, stop, counts = [], threading.Event(), []
            threads = [threading.Thread(target=uploads_loop, args=(d.port, stop, counts))
                       for _ in range(a.uploads)]
            for t in threads:
                t.start()

            async def run():
                await asyncio.gather(*[session(d.port, pcm, lat, i * a.stagger / n)
                                       for i in range(n)])
            asyncio.run(run())
            stop.set()
            for t in threads:
                t.join()
            print(f"{n:>8} {a.uploads:>7} {len(lat):>5} {statistics.median(lat):>7.3f} "
                  f"{pct(lat, 95):>7.3f} {max(lat):>7.3f}", flush=True)
    finally:
        wd_api.stop_daemon(d)


if __name__ == "__main__":
    main()
