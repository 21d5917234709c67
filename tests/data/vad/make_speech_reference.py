#!/usr/bin/env python3
"""Writes speech.txt, the speech spans that tests/core/test_vad.c expects
from core/vad_speech.c: silero-vad 6.2.3's own
get_speech_timestamps_from_probs (silero_vad/utils_vad.py, imported from
the unpacked wheel with a stand-in for torch, which that function does not
use) over the reference probabilities in this folder and over
synthetic.probs (written here: speech with dips of every length, for the
maximum-duration cuts), for several parameter sets.

usage: make_speech_reference.py UNPACKED_SILERO_VAD_WHEEL_DIR
  (run from this folder; needs the packaging module; not run by the tests)

speech.txt, one case a line:
  PROBS N_SAMPLES THRESHOLD NEG_THRESHOLD MIN_SPEECH_MS MAX_SPEECH_S
  MIN_SILENCE_MS PAD_MS MIN_SILENCE_AT_MAX_MS USE_MAX_POSSIBLE : START END ...
(NEG_THRESHOLD -1: the default; MAX_SPEECH_S 0: unlimited; samples.)
"""
import math
import sys
import types

torch = types.ModuleType("torch")
torch.Tensor = object
torch.device = lambda *a, **k: None
torch.no_grad = lambda: (lambda f: f)
torch.set_num_threads = lambda n: None
sys.modules["torch"] = torch
sys.path.insert(0, sys.argv[1])
from silero_vad.utils_vad import get_speech_timestamps_from_probs  # noqa: E402


def synthetic():
    """60 s of chunks: speech with silent dips of 1..40 chunks, noise-like
    values around both thresholds."""
    p, i, dip = [], 0, 1
    while len(p) < 1875:
        for _ in range(40 + (i * 37) % 90):  # speech, wobbling
            p.append(0.6 + 0.35 * math.sin(len(p) * 0.7))
        for _ in range(dip):  # silence, some of it between the thresholds
            p.append(0.05 + 0.4 * abs(math.sin(len(p) * 1.3)))
        i, dip = i + 1, dip % 40 + 3
    return p[:1875]


def main():
    with open("synthetic.probs", "w") as f:
        for v in synthetic():
            f.write("%.7f\n" % v)
    files = {"jfk": 176000, "ask_not_padded": 126639, "005": 56040, "synthetic": 1875 * 512 - 100}
    params = [  # threshold, neg, min_speech_ms, max_speech_s, min_silence_ms, pad_ms, min_sil_max_ms, use_max
        (0.5, -1, 250, 0, 100, 30, 98, 1),
        (0.5, -1, 250, 0, 2000, 400, 98, 1),
        (0.3, 0.1, 100, 0, 50, 0, 98, 1),
        (0.5, -1, 250, 3.0, 100, 30, 98, 1),
        (0.5, -1, 250, 3.0, 100, 30, 98, 0),
        (0.5, -1, 250, 1.5, 300, 200, 50, 1),
        (0.5, -1, 250, 1.5, 300, 200, 50, 0),
        (0.7, 0.6, 500, 10.0, 1000, 30, 98, 1),
    ]
    with open("speech.txt", "w") as out:
        for name, n in files.items():
            probs = [float(line) for line in open(name + ".probs")]
            for th, neg, ms, mx, sil, pad, silmax, use in params:
                sp = get_speech_timestamps_from_probs(
                    probs, 16000, threshold=th, min_speech_duration_ms=ms,
                    max_speech_duration_s=mx if mx else float("inf"),
                    min_silence_duration_ms=sil, speech_pad_ms=pad,
                    neg_threshold=None if neg < 0 else neg,
                    min_silence_at_max_speech=silmax,
                    use_max_poss_sil_at_max_speech=bool(use),
                    audio_length_samples=n)
                spans = " ".join("%d %d" % (s["start"], s["end"]) for s in sp)
                out.write("%s %d %g %g %d %g %d %d %d %d : %s\n"
                          % (name, n, th, neg, ms, mx, sil, pad, silmax, use, spans))


if __name__ == "__main__":
    main()
