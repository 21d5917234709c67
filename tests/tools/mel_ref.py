#!/usr/bin/env python3
"""Reference data for tests/core/test_mel.c (numpy only; not run by the tests).

    mel_ref.py filters PATH/TO/mel_filters.npz
        Writes tests/data/mel/mel_filters_80.f32 and mel_filters_128.f32: the
        mel_80 and mel_128 arrays of openai/whisper's assets/mel_filters.npz
        (package openai-whisper==20250625 on PyPI, MIT licence), each
        (n_mels, 201) row-major, raw little-endian float32.

    mel_ref.py golden
        Writes tests/data/mel/mel_jfk_ref.f32: log_mel_spectrogram(jfk.wav, 80,
        padding=N_SAMPLES) computed in float64 below, following openai/whisper
        audio.py line by line, with the committed mel_filters_80.f32. Only the
        first GOLDEN_FRAMES frames are kept: (80, GOLDEN_FRAMES) row-major,
        raw little-endian float32. The global max is taken over all frames,
        as audio.py does, before the first frames are cut out.

torch is replaced by numpy as follows (ref: openai/whisper audio.py 110-157):
  F.pad(audio, (0, padding))          -> np.pad(audio, (0, padding))
  torch.hann_window(400)              -> periodic Hann 0.5 - 0.5 cos(2 pi n / 400)
  torch.stft(center=True, reflect)    -> np.pad(x, 200, mode="reflect"), frames of
                                         400 every 160, np.fft.rfft of window * frame
  stft[..., :-1].abs() ** 2           -> drop the last frame, |X|^2
  filters @ magnitudes                -> the same, float64
  clamp(min=1e-10).log10(), max - 8, (x + 4) / 4 -> the same, float64
"""
import os
import sys
import wave

import numpy as np

N_FFT = 400
HOP_LENGTH = 160
N_SAMPLES = 480000
GOLDEN_FRAMES = 300

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
MEL = os.path.join(DATA, "mel")


def load_wav_s16_mono(path):
    """openai/whisper load_audio without ffmpeg: s16 mono 16 kHz / 32768."""
    with wave.open(path, "rb") as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2 and w.getframerate() == 16000
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0


def log_mel_spectrogram(audio, filters, padding=N_SAMPLES):
    audio = np.asarray(audio, dtype=np.float64)
    if padding > 0:
        audio = np.pad(audio, (0, padding))
    n = np.arange(N_FFT)
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / N_FFT)  # periodic=True
    x = np.pad(audio, N_FFT // 2, mode="reflect")  # center=True, pad_mode="reflect"
    n_frames = 1 + (len(x) - N_FFT) // HOP_LENGTH
    idx = np.arange(N_FFT)[None, :] + HOP_LENGTH * np.arange(n_frames)[:, None]
    stft = np.fft.rfft(x[idx] * window[None, :], axis=1).T  # (201, n_frames)
    magnitudes = np.abs(stft[:, :-1]) ** 2
    mel_spec = filters.astype(np.float64) @ magnitudes
    log_spec = np.log10(np.maximum(mel_spec, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "filters":
        with np.load(sys.argv[2], allow_pickle=False) as f:
            for n_mels in (80, 128):
                a = f[f"mel_{n_mels}"]
                assert a.shape == (n_mels, N_FFT // 2 + 1) and a.dtype == np.float32
                a.astype("<f4").tofile(os.path.join(MEL, f"mel_filters_{n_mels}.f32"))
    elif len(sys.argv) == 2 and sys.argv[1] == "golden":
        filters = np.fromfile(os.path.join(MEL, "mel_filters_80.f32"), dtype="<f4").reshape(80, 201)
        audio = load_wav_s16_mono(os.path.join(DATA, "audio", "jfk.wav"))
        mel = log_mel_spectrogram(audio, filters)
        assert mel.shape == (80, len(audio) // HOP_LENGTH + 3000)
        print(f"jfk.wav: {len(audio)} samples, mel {mel.shape}, min {mel.min():.6f} max {mel.max():.6f}")
        np.ascontiguousarray(mel[:, :GOLDEN_FRAMES]).astype("<f4").tofile(
            os.path.join(MEL, "mel_jfk_ref.f32"))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
