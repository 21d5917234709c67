#!/usr/bin/env python3
"""Generates tests/data/timing/*.txt: golden values for tests/core/test_timing.c.

Every expected value comes from openai/whisper 20250625 itself (whisper/timing.py,
whisper/tokenizer.py), called on inputs this script makes; nothing of openai's
algorithm is re-implemented here. The model run of find_alignment is replaced by
a stand-in object that hands timing.py chosen cross-attention scores and logits
through the same forward hooks a real Whisper model triggers, so everything
after the model (softmax, std_mean, median filter, DTW, word split, heuristics)
is openai's own code. Setup, once (torch and numba come with openai-whisper):

    python3 -m venv /tmp/owvenv
    /tmp/owvenv/bin/pip install openai-whisper==20250625
    /tmp/owvenv/bin/python tests/tools/gen_timing_golden.py tests/data/timing

Files (whitespace-separated tokens; strings as hex of their UTF-8, "-" when
empty; floats as Python's repr, exact for float64 and float32 alike):
    dtw.txt      case N M / N*M matrix values / L / L text indices / L time indices
    medfilt.txt  case ROWS LEN WIDTH / input / output
    split.txt    case LANG(- for none) VOCAB(gpt2|multilingual) N ids... /
                 W then W times: hex(word) n_tokens
    merge.txt    case W then W times: hex(word) n_tokens /
                 W times: hex(word) first_token n_tokens (first_token -1 when none)
    words.txt    add_word_timestamps on a hand-made alignment (find_alignment
                 patched to return it): case EOT SEEK LAST_SPEECH / A, A times
                 hex(word) n_tokens start end probability / S, S times start end
                 n_tokens tokens... / S times: start end W then W times hex(word)
                 start end probability
    align.txt    find_alignment + add_word_timestamps with the stand-in model:
                 case LANG VOCAB N_SOT N_TOKENS tokens... / H N_CTX NUM_FRAMES
                 LAST_SPEECH SEEK / qk as integers k (value float32(k * 0.01)),
                 (H, N_TOKENS, N_CTX) / N_TOKENS-1 probs / alignment words A then
                 A times hex(word) n_tokens start end probability / S segments
                 in and out as in words.txt
"""

import os
import random
import sys
import types

import numpy as np
import torch

import whisper
import whisper.timing as timing
from whisper.tokenizer import get_tokenizer

if whisper.__version__ != "20250625":
    sys.exit(f"need openai-whisper 20250625, found {whisper.__version__}")

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/data/timing"
rng = random.Random(20250625)
nrng = np.random.default_rng(20250625)

TOK = {
    "gpt2": get_tokenizer(False),
    "multilingual": get_tokenizer(True, language="en", task="transcribe"),
}


def hexs(s):
    b = s.encode("utf-8")
    return b.hex() if b else "-"


def f(x):
    return repr(float(x))


# ------------------------------------------------------------------- dtw
def gen_dtw(out):
    shapes = [(1, 1), (1, 6), (6, 1), (2, 2), (3, 3), (4, 9), (9, 4), (7, 12), (12, 7),
              (16, 40), (20, 50)]
    for n, m in shapes:
        for kind in ("uniform", "ties3", "ties2", "zeros"):
            if kind == "uniform":
                x = np.round(nrng.uniform(-2, 2, (n, m)), 3)
            elif kind == "ties3":
                x = nrng.integers(0, 3, (n, m)).astype(np.float64)
            elif kind == "ties2":
                x = nrng.integers(-1, 1, (n, m)).astype(np.float64)
            else:
                x = np.zeros((n, m))
            x = x.astype(np.float32)
            ti, tt = timing.dtw(torch.from_numpy(x))
            out.append(f"case {n} {m}")
            out.append(" ".join(f(v) for v in x.flatten()))
            out.append(f"{len(ti)}")
            out.append(" ".join(str(int(v)) for v in ti))
            out.append(" ".join(str(int(v)) for v in tt))


# ----------------------------------------------------------- median filter
def gen_medfilt(out):
    for length in (1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 40):
        for width in (1, 3, 5, 7):
            rows = rng.randint(1, 3)
            x = np.round(nrng.normal(0, 1, (rows, length)), 2).astype(np.float32)
            if length > 5 and width == 7 and rows > 1:
                x[1, 2] = np.nan  # torch.sort puts NaN last
            y = timing.median_filter(torch.from_numpy(x.copy()), width).numpy()
            out.append(f"case {rows} {length} {width}")
            out.append(" ".join(f(v) for v in x.flatten()))
            out.append(" ".join(f(v) for v in y.flatten()))


# ------------------------------------------------------------- word split
SPLIT_TEXTS = [
    ("en", " And so my fellow Americans, ask not what your country can do for you; ask what you can do for your country."),
    ("en", " Hello world! (This is) a test... \"quoted\" -- dash's don't 3.14 $100 <=> ()"),
    ("en", "  double  spaces\nnewline\ttab  "),
    ("en", " Mr. Smith's e-mail: a@b.com?! I ❤️ 🍕, café naïve."),
    ("en", "Leading word without space, then 'single' and “curly” quotes."),
    ("zh", "你好，世界。这是一个测试！我们去吃饭吧？"),
    ("ja", "こんにちは、世界。テストです。東京へ行きます。"),
    ("th", "สวัสดีครับ ทดสอบภาษาไทย"),
    ("yue", "你食咗飯未呀？"),
    ("my", "မင်္ဂလာပါ"),
    ("lo", "ສະບາຍດີ"),
    ("de", " Grüße aus München, schöne Straße!"),
    ("ko", " 안녕하세요, 세계!"),
    ("ru", " Привет, мир! Как дела?"),
]


def byte_token(enc, b):
    return enc.encode_single_token(bytes([b]))


def gen_split(out):
    cases = []
    for lang, text in SPLIT_TEXTS:
        for vocab in ("gpt2", "multilingual"):
            if vocab == "gpt2" and lang != "en":
                continue
            tok = TOK[vocab]
            cases.append((lang if vocab == "multilingual" else "-", vocab, tok.encode(text)))
    # raw byte tokens: a character cut between tokens, invalid bytes, a
    # truncated character before EOT
    enc = TOK["multilingual"].encoding
    bt = lambda bs: [byte_token(enc, b) for b in bs]
    a = enc.encode(" a")
    for lang in ("-", "zh", "en"):
        for ids in (bt(b"\xe4\xbd") + bt(b"\xa0") + a,
                    bt(b"\xff") + a + bt(b"\x80\x80") + a,
                    a + bt(b"\xe4\xbd"),
                    bt(b"\xf0\x9f") + bt(b"\x8d\x95") + a + bt(b"\xed\xa0\x80"),
                    bt(b"\xef\xbf\xbd") + a + bt(b"\xc3") + a,
                    bt(b"\xe0\x80\x80") + a + bt(b"\xc0\xaf") + a,  # overlong forms
                    bt(b"\xf4\x90\x80\x80") + a + bt(b"\xf0\x80\x80\x80") + a,
                    bt(b"\xe0\xa0") + bt(b"\x80") + bt(b"\xf4\x8f\xbf") + bt(b"\xbf")):
            cases.append((lang, "multilingual", ids))
    # random text-token soup, both split modes
    for k in range(60):
        vocab = "multilingual" if k % 3 else "gpt2"
        tok = TOK[vocab]
        ids, n = [], rng.randint(1, 25)
        while len(ids) < n:
            t = rng.randrange(0, tok.eot)
            if b"\x00" not in tok.encoding.decode_single_token_bytes(t):
                ids.append(t)  # a NUL would end the C string
        cases.append(("zh" if k % 2 else "-", vocab, ids))
    for lang, vocab, ids in cases:
        tok = TOK[vocab]
        tok.language = None if lang == "-" else lang
        ids = ids + [tok.eot]
        try:
            words, wtoks = tok.split_to_word_tokens(ids)
        except IndexError:
            continue  # openai itself fails on this input
        out.append(f"case {lang} {vocab} {len(ids)} " + " ".join(map(str, ids)))
        out.append(f"{len(words)} " + " ".join(f"{hexs(w)} {len(t)}" for w, t in zip(words, wtoks)))
    TOK["multilingual"].language = "en"


# ------------------------------------------------------ merge_punctuations
WORD_POOL = [" Hello", " world", "!", ",", ".", " (", ")", " \"", "\"", " '", "'", " “", "”",
             " ¿", "?", " [", "]", " {", "}", " -", "-", "。", "，", "！", "？", "：", "、",
             " the", " a", "ok", " ", "", " ([", ")]", " .", "...", ":", " it's", "你好", "。”",
             " -\"", "?!"]


def random_alignment(n_words, t0=0.0):
    words, tokid, t = [], 0, t0
    for _ in range(n_words):
        w = rng.choice(WORD_POOL)
        nt = rng.randint(1, 3)
        start = t
        r = rng.random()
        if r < 0.15:
            d = 0.0
        elif r < 0.3:
            d = rng.randint(40, 200) / 50  # long words
        else:
            d = rng.randint(1, 30) / 50
        t = start + d
        if rng.random() < 0.2:
            t += rng.randint(1, 150) / 50  # a pause
        words.append(timing.WordTiming(w, list(range(tokid, tokid + nt)), start, start + d,
                                       rng.random()))
        tokid += nt
    return words, tokid


def gen_merge(out):
    for _ in range(200):
        words, _ = random_alignment(rng.randint(1, 10))
        out.append(f"case {len(words)} " + " ".join(f"{hexs(w.word)} {len(w.tokens)}" for w in words))
        timing.merge_punctuations(words, "\"'“¿([{-", "\"'.。,，!！?？:：”)]}、")
        out.append(" ".join(f"{hexs(w.word)} {w.tokens[0] if w.tokens else -1} {len(w.tokens)}"
                            for w in words))


# ----------------------------------------------------- add_word_timestamps
def dump_segments_in(out, segs):
    out.append(f"{len(segs)}")
    for s in segs:
        out.append(f"{f(s['start'])} {f(s['end'])} {len(s['tokens'])} " + " ".join(map(str, s["tokens"])))


def dump_segments_out(out, segs):
    for s in segs:
        ws = s["words"]
        out.append(f"{f(s['start'])} {f(s['end'])} {len(ws)} " +
                   " ".join(f"{hexs(w['word'])} {f(w['start'])} {f(w['end'])} {f(w['probability'])}"
                            for w in ws))


def make_segments(tok, n_text, seek, mismatch):
    """Splits n_text text tokens into segments with timestamp tokens around them."""
    n_segs = rng.randint(1, 4)
    cuts = sorted(rng.randint(0, n_text) for _ in range(n_segs - 1))
    if mismatch:
        n_text += rng.choice([-2, -1, 1, 3])
        n_text = max(n_text, 0)
    bounds = [0] + cuts + [n_text]
    segs, t = [], 0
    offset = seek * 160 / 16000
    for a, b in zip(bounds[:-1], bounds[1:]):
        t0 = t + rng.randint(0, 40)
        t1 = t0 + rng.randint(0, 300)
        t = t1
        text = [rng.randrange(0, tok.eot) for _ in range(b - a)]
        if rng.random() < 0.2:  # special tokens count as no text
            text.insert(rng.randint(0, len(text)), rng.choice([tok.eot, tok.no_timestamps]))
        segs.append(dict(seek=seek, start=offset + t0 * 0.02, end=offset + t1 * 0.02,
                         tokens=[tok.timestamp_begin + t0] + text + [tok.timestamp_begin + t1]))
    return segs


def gen_words(out):
    tok = TOK["multilingual"]
    saved = timing.find_alignment
    try:
        for k in range(150):
            words, n_tok = random_alignment(rng.randint(0, 14))
            seek = rng.choice([0, 0, 1500, 3000, rng.randint(0, 90000)])
            last_speech = rng.choice([0.0, seek * 0.01, seek * 0.01 + rng.random() * 5,
                                      max(0.0, seek * 0.01 - rng.random() * 10)])
            segs = make_segments(tok, n_tok, seek, mismatch=(k % 7 == 3))
            out.append(f"case {tok.eot} {seek} {f(last_speech)}")
            out.append(f"{len(words)} " + " ".join(
                f"{hexs(w.word)} {len(w.tokens)} {f(w.start)} {f(w.end)} {f(w.probability)}" for w in words))
            dump_segments_in(out, segs)
            timing.find_alignment = lambda *a, _w=words, **kw: _w
            timing.add_word_timestamps(segments=segs, model=None, tokenizer=tok, mel=None,
                                       num_frames=3000, last_speech_timestamp=last_speech)
            dump_segments_out(out, segs)
    finally:
        timing.find_alignment = saved


# --------------------------------------------- the whole window, stand-in model
class _Attn(torch.nn.Module):
    def forward(self, x):
        return x, self.qk


class StandInModel:
    """What find_alignment uses of a Whisper model: decoder blocks whose
    cross_attn modules fire forward hooks with (out, qk), alignment_heads,
    dims.n_text_layer, device, and a call that returns the logits."""

    def __init__(self, qk_per_layer, logits, heads_mask):
        self.dims = types.SimpleNamespace(n_text_layer=len(qk_per_layer))
        self.decoder = types.SimpleNamespace(blocks=[])
        for qk in qk_per_layer:
            blk = types.SimpleNamespace(cross_attn=_Attn())
            blk.cross_attn.qk = qk[None]
            self.decoder.blocks.append(blk)
        self.logits = logits
        self.alignment_heads = heads_mask.to_sparse()
        self.device = "cpu"

    def __call__(self, mel, tokens):
        for blk in self.decoder.blocks:
            blk.cross_attn(torch.zeros(1))
        return self.logits[None]


ALIGN_TEXTS = [
    ("-", "gpt2", [" And so my fellow Americans,", " ask not what your country can do for you,",
                   " ask what you can do for your country."]),
    ("en", "multilingual", [" The birch canoe slid on the smooth planks.",
                            " Glue the sheet to the dark blue background. \"Yes!\""]),
    ("en", "multilingual", [" (upbeat music)", " Thank you for watching!"]),
    ("zh", "multilingual", ["你好，世界。", "这是一个测试！"]),
    ("ja", "multilingual", ["こんにちは、世界。テストです。"]),
]


def gen_align(out):
    for case, (lang, vocab, seg_texts) in enumerate(ALIGN_TEXTS + ALIGN_TEXTS[:1]):
        tok = get_tokenizer(vocab == "multilingual", language=None if lang == "-" else lang,
                            task="transcribe")
        n_sot = len(tok.sot_sequence)
        seek = rng.choice([0, 3000, 4567])
        num_frames = rng.choice([200, 251, 240])
        n_ctx = num_frames // 2 + rng.randint(0, 8)
        segs, text_tokens, t = [], [], 0
        for s in seg_texts:
            ids = tok.encode(s)
            t0 = t + rng.randint(0, 10)
            t1 = min(t0 + 5 * len(ids) + rng.randint(0, 20), 1500)
            t = t1
            segs.append(dict(seek=seek, start=seek * 0.01 + t0 * 0.02, end=seek * 0.01 + t1 * 0.02,
                             tokens=[tok.timestamp_begin + t0] + ids + [tok.timestamp_begin + t1]))
            text_tokens += ids
        tokens = [*tok.sot_sequence, tok.no_timestamps, *text_tokens, tok.eot]
        T = len(tokens)
        n_layer, n_head = 2, 3
        heads_mask = torch.zeros(n_layer, n_head, dtype=torch.bool)
        heads_mask[1, 0::2] = True
        heads_mask[0, 1] = True
        # A monotonic alignment plus noise: token i looks around frame c_i.
        m = num_frames // 2
        centers = np.sort(nrng.uniform(0, m, T))
        pos = np.arange(n_ctx)
        qk_int = np.zeros((n_layer, n_head, T, n_ctx), dtype=np.int64)
        for layer in range(n_layer):
            for h in range(n_head):
                width = nrng.uniform(2, 8)
                bump = 300 * np.exp(-((pos[None, :] - centers[:, None]) ** 2) / (2 * width**2))
                noise = nrng.integers(-60, 60, (T, n_ctx))
                qk_int[layer, h] = np.round(bump).astype(np.int64) + noise
        qk = torch.from_numpy((qk_int * 0.01).astype(np.float32))
        n_vocab = tok.encoding.n_vocab
        logits = torch.from_numpy(nrng.normal(0, 3, (T, n_vocab)).astype(np.float32))
        for i in range(T - 1):  # make the next token likely, sometimes
            logits[i, tokens[i + 1]] += float(nrng.uniform(0, 12))
        probs = [0.0] * (T - 1)
        p = logits[:, : tok.eot].softmax(dim=-1)
        for i in range(T - 1):
            if tokens[i + 1] < tok.eot:
                probs[i] = float(p[i, tokens[i + 1]])
        model = StandInModel([qk[layer] for layer in range(n_layer)], logits, heads_mask)
        mel = torch.zeros(80, 2 * n_ctx)
        alignment = timing.find_alignment(model, tok, text_tokens, mel, num_frames)
        last_speech = rng.choice([0.0, seek * 0.01])
        heads = heads_mask.nonzero().tolist()
        out.append(f"case {lang} {vocab} {n_sot} {T} " + " ".join(map(str, tokens)))
        out.append(f"{len(heads)} {n_ctx} {num_frames} {f(last_speech)} {seek}")
        for layer, h in heads:
            out.append(" ".join(str(int(v)) for v in qk_int[layer, h].flatten()))
        out.append(" ".join(f(v) for v in probs))
        out.append(f"{len(alignment)} " + " ".join(
            f"{hexs(w.word)} {len(w.tokens)} {f(w.start)} {f(w.end)} {f(w.probability)}"
            for w in alignment))
        dump_segments_in(out, segs)
        timing.add_word_timestamps(segments=segs, model=model, tokenizer=tok, mel=mel,
                                   num_frames=num_frames, last_speech_timestamp=last_speech)
        dump_segments_out(out, segs)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, fn in (("dtw", gen_dtw), ("medfilt", gen_medfilt), ("split", gen_split),
                     ("merge", gen_merge), ("words", gen_words), ("align", gen_align)):
        out = [f"# generated by tests/tools/gen_timing_golden.py from openai-whisper "
               f"{whisper.__version__}, torch {torch.__version__.split('+')[0]}, numpy {np.__version__}"]
        fn(out)
        with open(os.path.join(OUT, name + ".txt"), "w") as fh:
            fh.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
