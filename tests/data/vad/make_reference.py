#!/usr/bin/env python3
"""Writes the reference speech probabilities that tests/core/test_vad.c
compares core/vad.c with: Silero VAD v6 as its authors run it
(silero_vad.onnx from the PyPI package silero-vad==6.2.3, onnxruntime,
one thread), chunk by chunk exactly as silero_vad.utils_vad.OnnxWrapper
.audio_forward does: 512-sample chunks of the 16 kHz signal, the last one
zero-padded, each with the previous chunk's last 64 samples as context
(zeros before the first), the recurrent state carried from chunk to chunk.

usage: make_reference.py SILERO_VAD_ONNX OUT_DIR WAV...
  (needs onnxruntime, numpy and soundfile; not run by the test suite: its
  output is committed as OUT_DIR/<wav name>.probs, one probability a line)
"""
import os
import sys

import numpy as np
import onnxruntime as ort
import soundfile as sf


def probs(session, wav):
    x, sr = sf.read(wav, dtype="float32")
    assert sr == 16000 and x.ndim == 1, (wav, sr, x.shape)
    if len(x) % 512:
        x = np.concatenate([x, np.zeros(512 - len(x) % 512, np.float32)])
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(64, np.float32)
    out = []
    for i in range(0, len(x), 512):
        chunk = np.concatenate([context, x[i:i + 512]])[None, :]
        p, state = session.run(None, {"input": chunk, "state": state,
                                      "sr": np.array(16000, np.int64)})
        out.append(float(p[0, 0]))
        context = chunk[0, -64:]
    return out


def main():
    opts = ort.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(sys.argv[1], sess_options=opts,
                                   providers=["CPUExecutionProvider"])
    for wav in sys.argv[3:]:
        name = os.path.splitext(os.path.basename(wav))[0]
        with open(os.path.join(sys.argv[2], name + ".probs"), "w") as f:
            for p in probs(session, wav):
                f.write("%.7f\n" % p)


if __name__ == "__main__":
    main()
