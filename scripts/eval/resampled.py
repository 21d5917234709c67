#!/usr/bin/env python3
"""resampled.py - do resampled and stereo inputs give openai/whisper's text?

openai/whisper hears a file as `ffmpeg -nostdin -threads 0 -i FILE -f s16le
-ac 1 -acodec pcm_s16le -ar 16000 -` gives it. For each speech file here
this makes variants with the ffmpeg tool (8 kHz mono as a telephone line
carries it, 22.05 kHz mono, 44.1 kHz stereo, 48 kHz stereo MP3; stereo
channels differ), transcribes each with whisperd, and compares the text
with whisperd's transcript of the 16 kHz s16 WAV that the command above makes
of the same variant: the input openai/whisper's model sees. On 16 kHz WAVs
whisperd's greedy text is openai's (scripts/eval/eval.py), so a variant
whose text matches its reference is a file openai/whisper and whisperd read
alike. An evaluation: it prints a table and exits 0.

usage: scripts/eval/resampled.py [--whisperd BIN] [--model M] [--device D] [FILE...]
  (default files: tests/data/audio/{jfk.wav,cards/*.wav,synth/*.wav} with
  speech, and ../shared/audio/pocketsphinx/*.wav when present)
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAN = "pan=stereo|c0=c0|c1=0.6*c0,adelay=0|3"
VARIANTS = [
    ("8k_mono.wav", ["-ar", "8000", "-ac", "1"]),
    ("22k_mono.wav", ["-ar", "22050", "-ac", "1"]),
    ("44k_stereo.wav", ["-ar", "44100", "-af", PAN]),
    ("48k_stereo.mp3", ["-ar", "48000", "-af", PAN, "-c:a", "libmp3lame", "-b:a", "96k"]),
]


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def transcribe(bin_, model, device, files):
    out = subprocess.run([bin_, "transcribe", "-m", model, "--device", device, "-f", "json",
                          "--log-level", "err", *files],
                         check=True, capture_output=True, text=True).stdout
    # Several files: each JSON object follows a "==> FILE <==" line.
    texts = []
    for chunk in ("\n" + out).split("\n==> ")[1:] if len(files) > 1 else [out]:
        body = chunk.split("\n", 1)[1] if len(files) > 1 else chunk
        texts.append(json.loads(body)["text"].strip())
    return texts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--whisperd", default=os.path.join(ROOT, "build/daemon/whisperd"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models/ggml-tiny.en.bin"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or (
        [os.path.join(ROOT, "tests/data/audio/jfk.wav")]
        + sorted(glob.glob(os.path.join(ROOT, "tests/data/audio/cards/*.wav")))
        + [f for f in sorted(glob.glob(os.path.join(ROOT, "tests/data/audio/synth/*.wav")))
           if "silence" not in f and "noise" not in f]
        + sorted(glob.glob(os.path.join(ROOT, "../shared/audio/pocketsphinx/*.wav"))))
    with tempfile.TemporaryDirectory() as tmp:
        variants, refs = [], []
        for f in files:
            stem = os.path.basename(os.path.dirname(f)) + "_" + os.path.splitext(os.path.basename(f))[0]
            for suffix, args in VARIANTS:
                v = os.path.join(tmp, f"{stem}_{suffix}")
                ffmpeg("-i", f, *args, v)
                r = v + ".ref16k.wav"
                ffmpeg("-threads", "0", "-i", v, "-ac", "1", "-acodec", "pcm_s16le", "-ar", "16000", r)
                variants.append(v)
                refs.append(r)
        got = transcribe(a.whisperd, a.model, a.device, variants)
        want = transcribe(a.whisperd, a.model, a.device, refs)
    same = 0
    print(f"model {os.path.basename(a.model)}, {a.whisperd}")
    print(f"{'variant':36} identical  text")
    for v, g, w in zip(variants, got, want):
        ok = g == w
        same += ok
        print(f"{os.path.basename(v):36} {'yes' if ok else 'NO ':9}  {g[:60]!r}"
              + ("" if ok else f"\n{'':36} {'ref':9}  {w[:60]!r}"))
    print(f"identical: {same} of {len(variants)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
