#!/usr/bin/env python3
"""faster-whisper side of tests/bench/peers.py; runs in the venv that has
faster-whisper (peers.py makes it), never imported by the driver.

  peers_fw.py transcribe MODEL_DIR COMPUTE_TYPE THREADS AUDIO
      One transcription, as a user would run it: load the CTranslate2
      model, transcribe, print the text on stdout. The driver times the
      whole process (interpreter start and imports included).

  peers_fw.py steps MODEL_DIR COMPUTE_TYPE THREADS AUDIO [REPEATS]
      The two per-step costs, printed in bench_engine's words:
        encoder: X ms per 30 s window
            ctranslate2 Whisper.encode of the first 30 s window's log-mel
            (padded to 3000 frames), best of REPEATS after one warm-up (as
            bench_engine gives whisperd's).
        decoder step: Y ms per token
            CTranslate2 has no per-step hook, so the step cost is taken as a
            difference: Whisper.generate on the encoded window, greedy, with
            the transcription's prompt, once to the end (N text tokens, so
            N + 1 decoder calls: the last one yields the end token) and once
            stopped after the first token (max_length = prompt + 1: one
            call). Both pay the cross-attention K/V and the prompt; the
            difference over N is the cost of one more token (medians of
            REPEATS runs each).

Decoding options (both modes) as close to whisperd's and whisper.cpp's
default greedy as faster-whisper allows: beam_size 1, best_of 1, language
en, timestamps on, condition on previous text, no VAD, and the openai
temperature fallback 0, 0.2 .. 1.0 with compression-ratio 2.4 and
log-prob -1.0 thresholds (faster-whisper's defaults, which are openai's).
"""

import statistics
import sys
import time


def load(model_dir, compute_type, threads):
    from faster_whisper import WhisperModel
    return WhisperModel(model_dir, device="cpu", compute_type=compute_type,
                        cpu_threads=threads, num_workers=1)


def transcribe(model, audio):
    segments, _ = model.transcribe(
        audio, language="en", task="transcribe", beam_size=1, best_of=1,
        temperature=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
        compression_ratio_threshold=2.4, log_prob_threshold=-1.0,
        no_speech_threshold=0.6, condition_on_previous_text=True,
        without_timestamps=False, vad_filter=False, word_timestamps=False)
    return " ".join(s.text.strip() for s in segments)


def steps(model, audio, repeats):
    import numpy as np
    from faster_whisper.audio import decode_audio
    from faster_whisper.tokenizer import Tokenizer

    pcm = decode_audio(audio, sampling_rate=16000)[:16000 * 30]
    feats = model.feature_extractor(pcm)          # (n_mels, frames)
    n_frames = model.feature_extractor.nb_max_frames  # 3000: one 30 s window
    if feats.shape[-1] < n_frames:
        feats = np.pad(feats, ((0, 0), (0, n_frames - feats.shape[-1])))
    feats = feats[:, :n_frames]

    model.encode(feats)  # warm-up
    enc_ms = []
    for _ in range(repeats):
        t = time.perf_counter()
        enc = model.encode(feats)
        enc_ms.append(1e3 * (time.perf_counter() - t))

    tok = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe",
                    language="en")
    prompt = model.get_prompt(tok, [], without_timestamps=False)

    def gen(max_length):
        t = time.perf_counter()
        r = model.model.generate(enc, [prompt], beam_size=1, max_length=max_length,
                                 suppress_blank=True, suppress_tokens=[-1])[0]
        return 1e3 * (time.perf_counter() - t), len(r.sequences_ids[0])

    gen(448)  # warm-up
    full, one = [], []
    n_tok = 0
    for _ in range(repeats):
        ms, n_tok = gen(448)
        full.append(ms)
        one.append(gen(len(prompt) + 1)[0])
    print(f"encoder:        {min(enc_ms):8.1f} ms per 30 s window (best of {repeats})")
    if n_tok > 1:
        step = (statistics.median(full) - statistics.median(one)) / n_tok
        print(f"decoder step:   {step:8.2f} ms per token ({n_tok} tokens: "
              f"{statistics.median(full):.1f} ms to the end, "
              f"{statistics.median(one):.1f} ms for the first)")
    else:
        print("decoder step: not separable (the window decoded to one token)")


def main():
    if len(sys.argv) < 6 or sys.argv[1] not in ("transcribe", "steps"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, model_dir, ctype, threads, audio = sys.argv[1:6]
    model = load(model_dir, ctype, int(threads))
    if mode == "transcribe":
        print(transcribe(model, audio))
    else:
        steps(model, audio, int(sys.argv[6]) if len(sys.argv) > 6 else 5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
