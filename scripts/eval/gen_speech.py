#!/usr/bin/env python3
"""gen_speech.py - synthesise the evaluation's own speech with espeak-ng.

Writes 16 kHz mono s16 WAV files and manifest.json ({file: {lang, text}}:
the ground truth for WER; lang is the ISO code, null for the non-speech
files) into OUT (default build/eval-audio/). Needs espeak-ng and sox
(setup.sh installs both). espeak-ng's output is the same from run to run for
one version, so the set is reproducible; files already there are kept.

  short English sentences      en_*.wav
  one sentence per language    de_, fr_, es_, it_, pt_, nl_, ru_, ja_, zh_*.wav
  a long English file          en_long.wav: 24 sentences with 0.6-1.6 s pauses
                               (~2 minutes: five 30 s windows, the seek loop)
  silence_5s.wav, noise_5s.wav digital silence; seeded white noise at -26 dBFS
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import wave

import numpy as np

SR = 16000

SHORT = {
    "en_weather": ("en-us", "The weather today is cold and windy, so bring a warm coat."),
    "en_train": ("en-gb", "The last train to the city leaves at half past eleven."),
    "en_library": ("en-us", "Please return the books to the library before Friday."),
    "en_garden": ("en-us", "She planted tomatoes, beans and carrots in the garden."),
    "de_1": ("de", "Guten Morgen, heute scheint die Sonne und der Himmel ist blau."),
    "de_2": ("de", "Der Zug nach Berlin hat leider zwanzig Minuten Verspätung."),
    "fr_1": ("fr-fr", "Bonjour, je voudrais réserver une table pour deux personnes ce soir."),
    "es_1": ("es", "Mañana vamos a visitar el museo con nuestros amigos."),
    "it_1": ("it", "La cena è pronta, venite a tavola prima che si raffreddi."),
    "pt_1": ("pt", "O comboio para Lisboa parte da estação às nove horas."),
    "nl_1": ("nl", "Het regent al de hele dag, dus we blijven vandaag binnen."),
    "ru_1": ("ru", "Сегодня хорошая погода, и мы пойдём гулять в парк."),
    "ja_1": ("ja", "わたしは まいにち えきまで あるいて いきます。"),
    "zh_1": ("cmn", "今天天气很好，我们去公园散步吧。"),
}

LONG = [
    "Good evening, and welcome to the weekly report from the town council.",
    "The new bridge over the river will open to traffic next month.",
    "Work on the road surface is almost finished, and the lights have been tested.",
    "The council thanks everyone for their patience during the repairs.",
    "In other news, the public swimming pool will close for two weeks in August.",
    "The water will be drained and the tiles on the floor replaced.",
    "Swimmers can use the pool at the school on the north side of town.",
    "The summer market returns to the main square on Saturday morning.",
    "Farmers from the valley will sell fruit, cheese, bread and honey.",
    "There will be music in the afternoon and games for the children.",
    "The library has extended its opening hours on Thursday evenings.",
    "A reading group for adults meets there every second week.",
    "New members are welcome, and the first book is a story about the sea.",
    "The weather forecast for the weekend is mostly dry and sunny.",
    "Temperatures will rise to about twenty five degrees on Sunday.",
    "Some clouds may bring light rain in the hills late in the evening.",
    "The football club won its match against the team from the next village.",
    "The final score was three goals to one after a strong second half.",
    "Tickets for the next home game are on sale at the club house.",
    "Finally, the council reminds residents to put their bins out on Tuesday.",
    "Paper and glass are collected every other week.",
    "Garden waste can be taken to the recycling centre at no cost.",
    "That is all for this week, thank you for listening.",
    "We will be back at the same time next Friday.",
]


def espeak(voice, text, path):
    """espeak-ng at its own 22.05 kHz, then sox to 16 kHz mono s16."""
    with tempfile.TemporaryDirectory() as td:
        raw = os.path.join(td, "x.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-s", "155", "-w", raw, text], check=True)
        subprocess.run(["sox", raw, "-r", str(SR), "-c", "1", "-b", "16",
                        "-e", "signed-integer", path], check=True)


def read_wav(path):
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), np.int16)


def write_wav(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.asarray(samples, np.int16).tobytes())


def generate(out):
    for tool in ("espeak-ng", "sox"):
        if not shutil.which(tool):
            sys.exit("gen_speech: %s not found (run scripts/eval/setup.sh)" % tool)
    os.makedirs(out, exist_ok=True)
    manifest = {}

    def lang_of(voice):
        return {"cmn": "zh"}.get(voice, voice.split("-")[0])

    for name, (voice, text) in SHORT.items():
        path = os.path.join(out, name + ".wav")
        if not os.path.exists(path):
            espeak(voice, text, path)
        manifest[name + ".wav"] = {"lang": lang_of(voice), "text": text}

    long_path = os.path.join(out, "en_long.wav")
    if not os.path.exists(long_path):
        rng = np.random.default_rng(1234)
        parts = [np.zeros(int(0.3 * SR), np.int16)]
        with tempfile.TemporaryDirectory() as td:
            for i, text in enumerate(LONG):
                p = os.path.join(td, "%02d.wav" % i)
                espeak("en-us", text, p)
                parts.append(read_wav(p))
                parts.append(np.zeros(int(rng.uniform(0.6, 1.6) * SR), np.int16))
        write_wav(long_path, np.concatenate(parts))
    manifest["en_long.wav"] = {"lang": "en", "text": " ".join(LONG)}

    sil = os.path.join(out, "silence_5s.wav")
    if not os.path.exists(sil):
        write_wav(sil, np.zeros(5 * SR, np.int16))
    manifest["silence_5s.wav"] = {"lang": None, "text": ""}

    noise = os.path.join(out, "noise_5s.wav")
    if not os.path.exists(noise):
        rng = np.random.default_rng(42)
        write_wav(noise, np.clip(rng.normal(0, 0.05 * 32768, 5 * SR), -32768, 32767))
    manifest["noise_5s.wav"] = {"lang": None, "text": ""}

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)
    return manifest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/eval-audio")
    a = ap.parse_args()
    m = generate(a.out)
    total = sum(len(read_wav(os.path.join(a.out, k))) for k in m) / SR
    print("gen_speech: %d files, %.1f s of audio in %s" % (len(m), total, a.out))


if __name__ == "__main__":
    main()
