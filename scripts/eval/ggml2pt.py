#!/usr/bin/env python3
"""ggml2pt.py - load a whisper.cpp ggml model file into openai/whisper.

The ggml tensors carry OpenAI's checkpoint names one to one (see
shared/reference/model-formats.md), so the state dict is the file's tensors
with numpy shapes (ggml lists the fastest dimension first, so the shape is
the reversed ne) and the conv biases flattened from [n_state, 1] to
[n_state]. f16 weights are widened to f32: openai/whisper then runs (with
fp16=False) on exactly the values whisperd uses.

As a library: `load_whisper(path)` returns a whisper.model.Whisper on the CPU.
As a script: `ggml2pt.py MODEL.bin OUT.pt` writes a checkpoint that
`whisper.load_model(OUT.pt)` reads ({"dims", "model_state_dict"}).
"""
import os
import struct
import sys

import numpy as np

GGML_MAGIC = 0x67676D6C
HPARAMS = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
           "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype")
DTYPES = {0: np.float32, 1: np.float16}


def read_ggml(path):
    """Returns (hparams dict, mel filters [n_mel, n_fft], {name: np.ndarray})."""
    with open(path, "rb") as f:
        data = f.read()
    off = 0

    def i32s(n):
        nonlocal off
        v = struct.unpack_from("<%di" % n, data, off)
        off += 4 * n
        return v

    (magic,) = struct.unpack_from("<I", data, 0)
    off = 4
    if magic != GGML_MAGIC:
        raise ValueError("%s: not a ggml Whisper file (magic 0x%08x)" % (path, magic))
    hp = dict(zip(HPARAMS, i32s(len(HPARAMS))))
    n_mel, n_fft = i32s(2)
    filters = np.frombuffer(data, np.float32, n_mel * n_fft, off).reshape(n_mel, n_fft)
    off += 4 * n_mel * n_fft
    (n_tokens,) = i32s(1)
    for _ in range(n_tokens):
        (ln,) = struct.unpack_from("<I", data, off)
        off += 4 + ln
    tensors = {}
    while off < len(data):
        n_dims, name_len, ttype = i32s(3)
        ne = i32s(n_dims)
        name = data[off:off + name_len].decode()
        off += name_len
        if ttype not in DTYPES:
            raise ValueError("%s: tensor %s has type %d; only f32/f16 files are supported"
                             % (path, name, ttype))
        dt = DTYPES[ttype]
        count = int(np.prod(ne))
        arr = np.frombuffer(data, dt, count, off).reshape(tuple(reversed(ne)))
        off += count * np.dtype(dt).itemsize
        tensors[name] = arr
    return hp, filters, tensors


def checkpoint_from_ggml(path):
    import torch

    hp, _, tensors = read_ggml(path)
    dims = {k: hp[k] for k in ("n_mels", "n_audio_ctx", "n_audio_state", "n_audio_head",
                               "n_audio_layer", "n_vocab", "n_text_ctx", "n_text_state",
                               "n_text_head", "n_text_layer")}
    sd = {}
    for name, arr in tensors.items():
        a = np.array(arr, dtype=np.float32)
        if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
            a = a.reshape(-1)
        sd[name] = torch.from_numpy(a)
    return {"dims": dims, "model_state_dict": sd}


# openai/whisper's alignment-head table keys by model size (only used for word timestamps).
def _model_name(dims):
    sizes = {(4, 384): "tiny", (6, 512): "base", (12, 768): "small", (24, 1024): "medium",
             (32, 1280): "large-v2"}
    name = sizes.get((dims["n_text_layer"], dims["n_text_state"]))
    if name and dims["n_vocab"] < 51865 and name in ("tiny", "base", "small", "medium"):
        name += ".en"
    if dims["n_vocab"] == 51866:
        name = "large-v3" if dims["n_text_layer"] == 32 else "large-v3-turbo"
    return name


def load_whisper(path):
    """A whisper.model.Whisper (f32, CPU) holding the ggml file's weights."""
    import whisper
    from whisper.model import ModelDimensions, Whisper

    ck = checkpoint_from_ggml(path)
    model = Whisper(ModelDimensions(**ck["dims"]))
    missing, unexpected = model.load_state_dict(ck["model_state_dict"], strict=False)
    # The encoder's sinusoidal positional embedding is a buffer openai computes itself;
    # ggml stores it too, so nothing may be missing.
    if missing or unexpected:
        raise ValueError("state dict mismatch: missing %s, unexpected %s" % (missing, unexpected))
    name = _model_name(ck["dims"])
    if name in whisper._ALIGNMENT_HEADS:
        model.set_alignment_heads(whisper._ALIGNMENT_HEADS[name])
    return model.eval()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: ggml2pt.py MODEL.bin OUT.pt")
    import torch

    ck = checkpoint_from_ggml(sys.argv[1])
    torch.save(ck, sys.argv[2])
    print("%s: %d tensors, dims %s" % (os.path.basename(sys.argv[2]),
                                       len(ck["model_state_dict"]), ck["dims"]))


if __name__ == "__main__":
    main()
