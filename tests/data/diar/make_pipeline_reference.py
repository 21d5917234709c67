#!/usr/bin/env python3
"""Golden outputs of pyannote's speaker count, reconstruction and turns for
tests/core/test_diar_pipeline.c (pyannote_parity), from pyannote.audio
4.0.7's own functions: SpeakerDiarizationMixin.speaker_count,
SpeakerDiarization.reconstruct (to_diarization inside) and to_annotation,
as speaker-diarization-3.1 calls them, on synthetic segmentations.

Run from the repository root (CPU only, no network, seconds):
    /work/diar-venv/bin/python tests/data/diar/make_pipeline_reference.py

The input: a 40 s "signal" (31 chunks of 10 s every 1 s, none padded) with
three speakers taking turns and overlapping; each chunk sees them in its
own local order (a permutation per chunk), with a few frames flipped
(segmentation noise) and at most two local speakers per frame (the
powerset's limit). hard clusters: the true speaker of each local slot,
except a few chunks assigned wrongly; slots never active: -2.

Writes, next to this script:
  pipeline_reference.bin   act (31 x 589 x 3 uint8), then hard (31 x 3 int8)
  pipeline_reference.txt   line 1: n_samples step_s n_chunks n_frames k
                           line 2: the count, one digit per frame
                           then one turn per line: start end speaker, speakers
                           renumbered in order of first appearance (as
                           wd__diar_turns numbers them), sorted by start.
"""
import os

import numpy as np
from pyannote.audio.pipelines.speaker_diarization import SpeakerDiarization
from pyannote.audio.pipelines.utils.diarization import SpeakerDiarizationMixin
from pyannote.core import SlidingWindow, SlidingWindowFeature

HERE = os.path.dirname(os.path.abspath(__file__))
SR = 16000
N_SAMPLES = 40 * SR
STEP = 1.0
FRAMES = 589
K = 3


class _Recon:
    """What SpeakerDiarization.reconstruct needs of self."""
    to_diarization = staticmethod(SpeakerDiarizationMixin.to_diarization)


def truth(t):
    """Active global speakers at time t (s): turns with overlaps, silence
    in the last second."""
    on = []
    if 0.5 <= t < 12.0 or 25.0 <= t < 31.0:
        on.append(0)
    if 11.0 <= t < 20.0 or 30.5 <= t < 36.0:
        on.append(1)
    if 19.0 <= t < 26.0 or 35.0 <= t < 39.0:
        on.append(2)
    return on[:2]


def main():
    rng = np.random.default_rng(41)
    n_chunks = 1 + (N_SAMPLES - 10 * SR) // SR
    act = np.zeros((n_chunks, FRAMES, 3), dtype=np.uint8)
    hard = np.full((n_chunks, 3), -2, dtype=np.int8)
    for c in range(n_chunks):
        perm = rng.permutation(3)  # global speaker g sits in local slot perm[g]
        for f in range(FRAMES):
            t = c * STEP + f * 270 / SR + 0.5 * 991 / SR
            for g in truth(t):
                act[c, f, perm[g]] = 1
        # segmentation noise: flip a few short runs, keeping <= 2 active
        for _ in range(8):
            f0 = int(rng.integers(0, FRAMES - 10))
            s = int(rng.integers(0, 3))
            act[c, f0:f0 + int(rng.integers(1, 10)), s] ^= 1
        over = act[c].sum(axis=1) > 2
        act[c, over, 2] = 0
        for g in range(3):
            if act[c, :, perm[g]].any():
                hard[c, perm[g]] = g
        if rng.random() < 0.2:  # a wrong assignment now and then
            s = int(rng.integers(0, 3))
            if hard[c, s] >= 0:
                hard[c, s] = (hard[c, s] + 1) % 3

    chunks = SlidingWindow(start=0.0, duration=10.0, step=STEP)
    frames = SlidingWindow(start=0.0, duration=991 / SR, step=270 / SR)
    seg = SlidingWindowFeature(act.astype(np.float64), chunks)
    count = SpeakerDiarizationMixin.speaker_count(seg, frames, warm_up=(0.0, 0.0))
    assert count.data.max() <= K
    discrete = SpeakerDiarization.reconstruct(_Recon(), seg, hard.astype(np.int64), count)
    ann = SpeakerDiarizationMixin.to_annotation(discrete, min_duration_on=0.0,
                                                min_duration_off=0.0)
    turns = [(s.start, s.end, int(lab)) for s, _, lab in ann.itertracks(yield_label=True)]
    turns.sort(key=lambda x: (x[0], x[2]))
    order = {}
    for _, _, lab in turns:
        order.setdefault(lab, len(order))
    turns = sorted(((s, e, order[lab]) for s, e, lab in turns), key=lambda x: (x[0], x[2], x[1]))

    with open(os.path.join(HERE, "pipeline_reference.bin"), "wb") as f:
        f.write(act.tobytes())
        f.write(hard.tobytes())
    with open(os.path.join(HERE, "pipeline_reference.txt"), "w") as f:
        n_frames = len(count.data)
        f.write(f"{N_SAMPLES} {STEP} {n_chunks} {n_frames} {K}\n")
        f.write("".join(str(int(v)) for v in count.data[:, 0]) + "\n")
        for s, e, lab in turns:
            f.write(f"{s!r} {e!r} {lab}\n")
    print(f"{n_chunks} chunks, {len(count.data)} frames, {len(turns)} turns")


if __name__ == "__main__":
    main()
