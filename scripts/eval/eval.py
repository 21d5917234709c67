#!/usr/bin/env python3
"""eval.py - compare whisperd's decoding with openai/whisper's on the same weights.

The reference is openai/whisper's transcribe() running on the weights of our
ggml file (scripts/eval/ggml2pt.py), fp32 on the CPU, with its default
temperature fallback (0, 0.2, ... 1.0), condition_on_previous_text, no VAD,
torch seeded per file. whisperd runs once per model over all its files
(`whisperd transcribe -m MODEL -f json FILE...`). Both sides get the same
samples: every file is a 16 kHz mono s16 WAV, read here with `wave` and by
whisperd with libsndfile (x / 32768 on both sides).

Files: tests/data/audio (16 kHz mono WAVs; formats/ is a codec matrix and is
left out), /work/shared/audio's pocketsphinx/ and synth/ when present
(duplicates by content are dropped), and the set gen_speech.py makes in
build/eval-audio/. tiny.en gets the English and non-speech files, base all.

Per file: same text (the stripped top-level text and every segment's text,
exact), the largest segment start/end difference where the text matches,
temperatures, detected language, WER against the ground truth (openai's
EnglishTextNormalizer for English, BasicTextNormalizer otherwise, characters
for ja/zh), the first token where the two decodings part, and, when that is
in the first window, the reference model's logit margin there (a near-tie is a
numerical divergence, a large margin a decoding-rule one). Files on which the
reference fell back to T > 0 are random on both sides: they are checked for
loops only. A markdown report goes to stdout and JSON to build/eval-results/.

  scripts/eval/eval.py                      # greedy, tiny.en and base
  scripts/eval/eval.py --model base --beam  # beam 5 / best_of 5
  scripts/eval/eval.py --skip-reference     # reuse build/eval-results/ref-*.json
  scripts/eval/eval.py --files 'gen/de_*' 'tests/jfk.wav'
"""
import argparse
import fnmatch
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import wave
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
TARGET_IDENTICAL = 0.95   # share of the reference's temperature-0 files with identical text
TARGET_WER_POINTS = 0.3   # |WER(whisperd) - WER(reference)| in percentage points
TARGET_TIME_S = 0.02      # segment start/end difference where the text matches
CHAR_LANGS = ("ja", "zh", "th", "lo", "my", "yue")


# ----------------------------------------------------------------------------- files

def read_wav(path):
    """float32 samples of a 16 kHz mono s16 WAV, or None for anything else."""
    try:
        with wave.open(path) as w:
            if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
                return None
            return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0
    except (wave.Error, EOFError):
        return None


def project_truths(audio_dir):
    """Ground truth for the project's own test audio, from its README and .txt files."""
    gt = {"jfk.wav": "And so my fellow Americans, ask not what your country can do for you, "
                     "ask what you can do for your country.",
          "pocketsphinx/goforward.wav": "go forward ten meters",
          "synth/silence_3s.wav": ""}
    cards = os.path.join(audio_dir, "cards", "transcription.txt")
    if os.path.exists(cards):
        for line in open(cards):
            m = re.match(r"<s>(.*)</s>\s*\((\d+)\)", line.strip())
            if m:
                gt["cards/%s.wav" % m.group(2)] = m.group(1).strip()
    for txt in glob.glob(os.path.join(audio_dir, "synth", "*.txt")):
        base = os.path.splitext(os.path.basename(txt))[0]
        text = open(txt).read().strip()
        gt["synth/%s.wav" % base] = text
        gt["synth/%s_padded.wav" % base] = text
    return gt


def collect_files(args):
    files, seen = [], {}

    def add(fid, path, text, lang):
        samples = read_wav(path)
        if samples is None:
            return
        h = hashlib.sha1(samples.tobytes()).hexdigest()
        if h in seen:
            return
        seen[h] = fid
        files.append({"id": fid, "path": path, "sha1": h, "truth": text, "lang": lang,
                      "duration": len(samples) / 16000.0})

    def add_dir(prefix, d, subdirs):
        gt = project_truths(d)
        for sub in subdirs:
            for p in sorted(glob.glob(os.path.join(d, sub, "*.wav"))):
                rel = os.path.relpath(p, d)
                text = gt.get(rel)
                add(prefix + rel, p, text, None if text == "" else "en")

    add_dir("tests/", os.path.join(ROOT, "tests", "data", "audio"), ["", "cards", "synth", "pocketsphinx"])
    if os.path.isdir(args.shared_audio):
        add_dir("shared/", args.shared_audio, ["", "pocketsphinx", "synth"])
    if not args.no_gen:
        import gen_speech
        manifest = gen_speech.generate(args.gen_dir)
        for name in sorted(manifest):
            add("gen/" + name, os.path.join(args.gen_dir, name), manifest[name]["text"],
                manifest[name]["lang"])
    if args.files:
        files = [f for f in files if any(fnmatch.fnmatch(f["id"], pat) or f["path"] == os.path.abspath(pat)
                                         or f["id"] == pat for pat in args.files)]
    return files


# ----------------------------------------------------------------------------- text metrics

_normalizers = {}


def normalise(text, lang):
    from whisper.normalizers import BasicTextNormalizer, EnglishTextNormalizer
    key = "en" if lang == "en" else ("chars" if lang in CHAR_LANGS else "basic")
    if key not in _normalizers:
        _normalizers[key] = (EnglishTextNormalizer() if key == "en" else
                             BasicTextNormalizer(split_letters=(key == "chars")))
    return _normalizers[key](text).split()


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def wer_counts(truth, hyp, lang):
    """(errors, reference words) after normalisation."""
    r, h = normalise(truth, lang), normalise(hyp, lang)
    return edit_distance(r, h), len(r)


def looping(text, lang):
    """A repetition loop: compression ratio > 2.4 (openai's own fallback test) or an
    n-gram (n <= 8 words, or characters for ja/zh) repeated 4 times in a row."""
    t = text.strip()
    if not t:
        return False
    b = t.encode()
    if len(b) / len(zlib.compress(b)) > 2.4:
        return True
    units = list(t.replace(" ", "")) if lang in CHAR_LANGS else t.split()
    for n in range(1, 9):
        for i in range(0, len(units) - 4 * n + 1):
            g = units[i:i + n]
            if all(units[i + k * n:i + (k + 1) * n] == g for k in range(1, 4)):
                return True
    return False


# ----------------------------------------------------------------------------- reference

def ref_options(args, english):
    o = {"temperature": TEMPERATURES, "condition_on_previous_text": True, "fp16": False,
         "language": "en" if english else args.language, "task": "transcribe",
         "verbose": None}
    if args.beam:
        o.update(beam_size=5, best_of=5)
    return o


def run_reference(model, files, opts, cache, log):
    import torch

    out, secs = {}, 0.0
    for f in files:
        c = cache.get(f["id"])
        if c and c["sha1"] == f["sha1"]:
            out[f["id"]] = c
            continue
        torch.manual_seed(0)
        t0 = time.time()
        r = model.transcribe(read_wav(f["path"]), **opts)
        dt = time.time() - t0
        secs += dt
        segs = [{k: s[k] for k in ("id", "seek", "start", "end", "text", "tokens", "temperature",
                                   "avg_logprob", "compression_ratio", "no_speech_prob")}
                for s in r["segments"]]
        out[f["id"]] = {"sha1": f["sha1"], "seconds": dt, "text": r["text"],
                        "language": r["language"], "segments": segs}
        log("  reference %-40s %5.1f s  %s" % (f["id"], dt, r["text"].strip()[:60]))
    return out, secs


def logit_margin(model, f, prefix, ref_tok, wd_tok, language):
    """Reference logits at the first window's divergence: logit(ref) - logit(whisperd),
    and the rank of whisperd's token. prefix = tokens sampled before the divergence."""
    import torch
    import whisper
    from whisper.audio import N_FRAMES, N_SAMPLES, log_mel_spectrogram, pad_or_trim

    tok = whisper.tokenizer.get_tokenizer(model.is_multilingual, num_languages=model.num_languages,
                                          language=language, task="transcribe")
    mel = log_mel_spectrogram(read_wav(f["path"]), model.dims.n_mels, padding=N_SAMPLES)
    content = mel.shape[-1] - N_FRAMES
    seg = pad_or_trim(mel[:, :min(N_FRAMES, content)], N_FRAMES)
    with torch.no_grad():
        feats = model.embed_audio(seg.unsqueeze(0))
        toks = torch.tensor([list(tok.sot_sequence) + list(prefix)])
        logits = model.logits(toks, feats)[0, -1]
    rank = int((logits > logits[wd_tok]).sum())
    return float(logits[ref_tok] - logits[wd_tok]), rank


def language_probs(model, f):
    import torch
    from whisper.audio import N_FRAMES, N_SAMPLES, log_mel_spectrogram, pad_or_trim

    mel = log_mel_spectrogram(read_wav(f["path"]), model.dims.n_mels, padding=N_SAMPLES)
    with torch.no_grad():
        _, probs = model.detect_language(pad_or_trim(mel, N_FRAMES))
    top = sorted(probs.items(), key=lambda kv: -kv[1])[:3]
    return [[k, round(v, 4)] for k, v in top]


# ----------------------------------------------------------------------------- whisperd

def whisperd_flags(args, whisperd, english):
    helptext = subprocess.run([whisperd, "--help"], capture_output=True, text=True).stdout
    flags = []
    if args.beam:
        if "--beam-size" not in helptext:
            sys.exit("eval: %s has no --beam-size yet: beam mode cannot run" % whisperd)
        flags += ["--beam-size", "5", "--best-of", "5"]
    lang = "en" if english else args.language
    if lang:
        flags += ["--language", lang] if "--language" in helptext else ["-l", lang]
    return flags


def start_whisperd(args, model_path, files, flags, stem):
    out = open(stem + ".out", "w")
    err = open(stem + ".err", "w")
    cmd = [args.whisperd, "transcribe", "-m", model_path, "-f", "json"] + flags + [f["path"] for f in files]
    return subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT), cmd


def parse_whisperd(text, files):
    """{path: result} from `whisperd transcribe -f json` stdout."""
    if len(files) == 1:
        return {files[0]["path"]: json.loads(text)} if text.strip() else {}
    res, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^==> (.*) <==$", line)
        if m:
            cur = m.group(1)
        elif line.strip() and cur is not None:
            res[cur] = json.loads(line)
            cur = None
    return res


# ----------------------------------------------------------------------------- comparison

def flat_tokens(segs):
    return [t for s in segs for t in s.get("tokens", [])]


def same_text(ref_text, rs, wd_text, ws):
    """The stripped top-level texts and every segment's text, exactly."""
    return (ref_text.strip() == wd_text.strip() and len(rs) == len(ws)
            and all(a["text"] == b["text"] for a, b in zip(rs, ws)))


def compare(f, ref, wd, to_code, decode):
    row = {"file": f["id"], "duration": round(f["duration"], 2), "truth": f["truth"]}
    row["ref_text"] = ref["text"].strip()
    row["ref_lang"] = ref["language"]
    row["ref_temps"] = sorted({s["temperature"] for s in ref["segments"]})
    row["ref_fallback"] = any(s["temperature"] > 0 for s in ref["segments"])
    lang = f["lang"] or ref["language"]
    if wd is None:
        row.update(wd_text=None, error="whisperd gave no output")
        return row
    row["wd_text"] = wd["text"].strip()
    row["wd_lang"] = to_code.get(wd.get("language", ""), wd.get("language"))
    row["wd_temps"] = sorted({s.get("temperature", 0.0) for s in wd["segments"]})
    # A file whose every window the no-speech rule skipped has no segment to
    # carry its temperature: whether whisperd fell back is then unknown.
    row["wd_fallback"] = (any(s.get("temperature", 0.0) > 0 for s in wd["segments"])
                          if wd["segments"] else None)
    rs, ws = ref["segments"], wd["segments"]
    row["n_segments"] = [len(rs), len(ws)]
    row["same_text"] = same_text(ref["text"], rs, wd["text"], ws)
    row["same_lang"] = row["ref_lang"] == row["wd_lang"]
    if row["same_text"]:
        row["max_dt"] = round(max([0.0] + [max(abs(a["start"] - b["start"]), abs(a["end"] - b["end"]))
                                           for a, b in zip(rs, ws)]), 4)
        # How close the numbers are: the per-window scores both sides report.
        for k in ("avg_logprob", "no_speech_prob"):
            row["max_d_" + k] = max([0.0] + [abs(a[k] - b[k]) for a, b in zip(rs, ws) if k in b])
    rt, wt = flat_tokens(rs), flat_tokens(ws)
    if rt != wt:
        k = next((i for i, (a, b) in enumerate(zip(rt, wt)) if a != b), min(len(rt), len(wt)))
        row["diverge"] = {"index": k, "of": [len(rt), len(wt)],
                          "before": decode(rt[max(0, k - 8):k]),
                          "ref": [rt[k], decode(rt[k:k + 4])] if k < len(rt) else None,
                          "wd": [wt[k], decode(wt[k:k + 4])] if k < len(wt) else None}
    if f["truth"] is not None and f["truth"] != "":
        row["wer_ref"] = wer_counts(f["truth"], row["ref_text"], lang)
        row["wer_wd"] = wer_counts(f["truth"], row["wd_text"], lang)
    elif f["truth"] == "":
        row["words_ref"], row["words_wd"] = len(row["ref_text"].split()), len(row["wd_text"].split())
    if row["ref_fallback"] or row["wd_fallback"]:
        row["loop_ref"] = looping(row["ref_text"], lang)
        row["loop_wd"] = looping(row["wd_text"], lang)
    return row


def summarise(rows, multilingual):
    s = {"files": len(rows)}
    ok = [r for r in rows if r.get("wd_text") is not None]
    s["whisperd_failed"] = [r["file"] for r in rows if r.get("wd_text") is None]
    t0 = [r for r in ok if not r["ref_fallback"]]
    same = [r for r in t0 if r["same_text"]]
    s["t0_files"], s["t0_identical"] = len(t0), len(same)
    s["t0_identical_share"] = round(len(same) / len(t0), 4) if t0 else None
    s["t0_differ"] = [r["file"] for r in t0 if not r["same_text"]]
    timed = [r for r in ok if r["same_text"]]
    s["max_dt"] = max([r["max_dt"] for r in timed], default=0.0)
    for k in ("avg_logprob", "no_speech_prob"):
        s["max_d_" + k] = max([r["max_d_" + k] for r in timed], default=0.0)
    s["time_violations"] = [r["file"] for r in timed if r["max_dt"] > TARGET_TIME_S + 1e-6]
    fb = [r for r in ok if r["ref_fallback"] or r["wd_fallback"]]
    s["fallback_files"] = [r["file"] for r in fb]
    s["fallback_disagree"] = [r["file"] for r in ok
                              if r["wd_fallback"] is not None and r["ref_fallback"] != r["wd_fallback"]]
    s["fallback_unknown"] = [r["file"] for r in ok if r["wd_fallback"] is None and r["ref_fallback"]]
    t0a = [r for r in ok if "t0_attempt_same" in r]
    s["t0_attempt_checked"], s["t0_attempt_same"] = len(t0a), sum(1 for r in t0a if r["t0_attempt_same"])
    s["loops"] = {"ref": [r["file"] for r in fb if r["loop_ref"]], "wd": [r["file"] for r in fb if r["loop_wd"]]}
    w = [r for r in ok if "wer_ref" in r]
    nwords = sum(r["wer_ref"][1] for r in w)
    s["wer_words"] = nwords
    if nwords:
        s["wer_ref"] = round(100.0 * sum(r["wer_ref"][0] for r in w) / nwords, 2)
        s["wer_wd"] = round(100.0 * sum(r["wer_wd"][0] for r in w) / nwords, 2)
        wt0 = [r for r in w if not r["ref_fallback"]]
        n0 = sum(r["wer_ref"][1] for r in wt0)
        if n0:
            s["wer_ref_t0"] = round(100.0 * sum(r["wer_ref"][0] for r in wt0) / n0, 2)
            s["wer_wd_t0"] = round(100.0 * sum(r["wer_wd"][0] for r in wt0) / n0, 2)
    s["lang_differ"] = [r["file"] for r in ok if not r["same_lang"]] if multilingual else []
    s["pass"] = {
        "identical_t0": s["t0_identical_share"] is not None and s["t0_identical_share"] >= TARGET_IDENTICAL,
        # Judged on the files the reference decoded at T=0: on the others both sides sample.
        "wer": "wer_ref_t0" not in s or abs(s["wer_wd_t0"] - s["wer_ref_t0"]) <= TARGET_WER_POINTS,
        "times": not s["time_violations"],
        "language": not s["lang_differ"],
        "no_loops": not s["loops"]["wd"],
        "fallback_agree": not s["fallback_disagree"],
        "no_failures": not s["whisperd_failed"],
    }
    return s


def fmt_wer(c):
    return "%.1f" % (100.0 * c[0] / c[1]) if c and c[1] else ""


def markdown(model, mode, rows, s, timing):
    out = ["", "## %s, %s" % (model, mode), "",
           "| file | s | lang ref/wd | T ref/wd | same text | max Δt s | WER ref | WER wd | note |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("wd_text") is None:
            out.append("| %s | %.1f | %s/- | | **whisperd failed** | | | | |" % (r["file"], r["duration"], r["ref_lang"]))
            continue
        note = []
        if "t0_attempt_same" in r:
            note.append("wd = ref's T=0 attempt" if r["t0_attempt_same"] else "wd != ref's T=0 attempt")
        if r["ref_fallback"] or r["wd_fallback"]:
            note.append("fallback" + (" LOOP(wd)" if r["loop_wd"] else "") + (" loop(ref)" if r["loop_ref"] else ""))
        d = r.get("diverge")
        if d:
            note.append("tok %d: ref %s / wd %s" % (
                d["index"], json.dumps(d["ref"][1] if d["ref"] else "<end>", ensure_ascii=False),
                json.dumps(d["wd"][1] if d["wd"] else "<end>", ensure_ascii=False)))
            if "margin" in d:
                note.append("margin %.3f (wd rank %d)" % (d["margin"], d["wd_rank"]))
        if "words_ref" in r:
            note.append("words %d/%d" % (r["words_ref"], r["words_wd"]))
        if "ref_lang_probs" in r:
            note.append("ref p: " + ", ".join("%s %.2f" % (k, v) for k, v in r["ref_lang_probs"]))
        temps = "%s/%s" % (",".join("%g" % t for t in r["ref_temps"]), ",".join("%g" % t for t in r["wd_temps"]))
        out.append("| %s | %.1f | %s/%s | %s | %s | %s | %s | %s | %s |" % (
            r["file"], r["duration"], r["ref_lang"], r["wd_lang"], temps,
            "yes" if r["same_text"] else "**no**", r.get("max_dt", ""),
            fmt_wer(r.get("wer_ref")), fmt_wer(r.get("wer_wd")), "; ".join(note)))
    p = s["pass"]
    yn = lambda b: "ok" if b else "**MISS**"
    out += ["", "| summary | value | target | |", "|---|---|---|---|",
            "| identical text, reference T=0 files | %d/%d (%s) | >= %d%% | %s |" % (
                s["t0_identical"], s["t0_files"],
                "%.1f%%" % (100 * s["t0_identical_share"]) if s["t0_identical_share"] is not None else "-",
                int(100 * TARGET_IDENTICAL), yn(p["identical_t0"])),
            "| WER %% reference / whisperd, reference T=0 files | %s / %s | within %.1f points | %s |" % (
                s.get("wer_ref_t0", "-"), s.get("wer_wd_t0", "-"), TARGET_WER_POINTS, yn(p["wer"])),
            "| WER %% reference / whisperd, all files (%d words; sampled ones vary) | %s / %s | | |" % (
                s["wer_words"], s.get("wer_ref", "-"), s.get("wer_wd", "-")),
            "| max segment Δt where text matches | %.3f s | <= %.2f s | %s |" % (s["max_dt"], TARGET_TIME_S, yn(p["times"])),
            "| where the text matches: largest Δ avg_logprob, Δ no_speech_prob | %.2g, %.2g | | |" % (
                s["max_d_avg_logprob"], s["max_d_no_speech_prob"]),
            "| detected language differs | %d | 0 | %s |" % (len(s["lang_differ"]), yn(p["language"])),
            "| fallback files (either side) / whisperd loops | %d / %d | no loops | %s |" % (
                len(s["fallback_files"]), len(s["loops"]["wd"]), yn(p["no_loops"])),
            "| fell back on one side only (the T=0 pass decides it) | %d | 0 | %s |" % (
                len(s["fallback_disagree"]), yn(p["fallback_agree"])),
            "| reference fell back, whisperd skipped every window (its temperature unknown) | %d | | |" % (
                len(s["fallback_unknown"])),
            "| of those, whisperd's text = the reference's T=0 attempt | %d/%d | | |" % (
                s["t0_attempt_same"], s["t0_attempt_checked"]),
            "| whisperd failures | %d | 0 | %s |" % (len(s["whisperd_failed"]), yn(p["no_failures"])),
            "", "Time: reference %.1f s computed (%d files cached), whisperd %s for %d files, %.1f s of audio%s." % (
                timing["ref_s"], timing["ref_cached"],
                "%.1f s wall" % timing["wd_s"] if timing["wd_s"] else "reused", len(rows), timing["audio_s"],
                " (side by side)" if timing["parallel"] and timing["wd_s"] and timing["ref_s"] else "")]
    return "\n".join(out)


# ----------------------------------------------------------------------------- main

def evaluate(args, model_name, all_files):
    import torch
    import whisper
    import ggml2pt

    english = model_name.endswith(".en")
    files = [f for f in all_files if not english or f["lang"] in ("en", None)]
    if not files:
        return None
    mode = "beam5" if args.beam else "greedy"
    model_path = os.path.join(args.models_dir, "ggml-%s.bin" % model_name)
    os.makedirs(args.out, exist_ok=True)
    cache_path = os.path.join(args.out, "ref-%s-%s.json" % (model_name, mode))
    opts = ref_options(args, english)
    stored = {}
    if os.path.exists(cache_path):
        c = json.load(open(cache_path))
        if c.get("options") == json.loads(json.dumps(opts)):
            stored = c["files"]
        elif args.skip_reference:
            log("eval: %s was made with other options; recomputing" % cache_path)
    cache = stored if args.skip_reference else {}
    log("eval: %s %s: %d files (%.1f s of audio)" % (model_name, mode, len(files),
                                                    sum(f["duration"] for f in files)))

    stem = os.path.join(args.out, "whisperd-%s-%s" % (model_name, mode))
    flags = whisperd_flags(args, args.whisperd, english)
    t_wd = time.time()
    cmd = [args.whisperd, "transcribe", "-m", model_path, "-f", "json"] + flags
    wd_done = {}
    if args.skip_whisperd:
        proc = None
        log("eval: reusing %s.out" % stem)
    else:
        proc, cmd = start_whisperd(args, model_path, files, flags, stem)
        log("eval: " + " ".join(cmd[:6 + len(flags)]) + " ... (%d files)" % len(files))

    def wait_wd():
        if proc:
            proc.wait()
            wd_done["s"] = time.time() - t_wd

    waiter = threading.Thread(target=wait_wd)
    waiter.start()
    if args.serial:
        waiter.join()

    model = ggml2pt.load_whisper(model_path)
    ref, ref_s = run_reference(model, files, opts, cache, log)
    waiter.join()
    stdout = open(stem + ".out").read()
    stderr = open(stem + ".err").read()
    if proc and proc.returncode != 0:
        log("eval: whisperd exited %d:\n%s" % (proc.returncode, stderr[-2000:]))
    wd = parse_whisperd(stdout, files)

    tok = whisper.tokenizer.get_tokenizer(model.is_multilingual, num_languages=model.num_languages)
    decode = lambda ts: tok.decode_with_timestamps(ts)
    to_code = dict(whisper.tokenizer.TO_LANGUAGE_CODE)
    rows = []
    for f in files:
        r = compare(f, ref[f["id"]], wd.get(f["path"]), to_code, decode)
        d = r.get("diverge")
        rsegs = ref[f["id"]]["segments"]
        # The logit margin where the decodings part, when that is in the first window
        # (no prompt, known mel): a near-tie says numerics, a wide margin a rule.
        if d and d["ref"] and d["wd"] and not r["ref_fallback"]:
            first = flat_tokens([s for s in rsegs if s["seek"] == 0])
            if d["index"] < len(first):
                d["margin"], d["wd_rank"] = logit_margin(model, f, first[:d["index"]], d["ref"][0],
                                                         d["wd"][0], ref[f["id"]]["language"])
                d["margin"] = round(d["margin"], 4)
        if model.is_multilingual and r.get("wd_lang") and not r["same_lang"]:
            r["ref_lang_probs"] = language_probs(model, f)
        # The reference fell back and whisperd did not: is whisperd's T=0 decoding
        # the reference's own first (T=0) attempt? That pass is deterministic.
        if r.get("wd_text") is not None and r["ref_fallback"] and not r["wd_fallback"]:
            e = ref[f["id"]]
            if "t0_only" not in e:
                t0, _ = run_reference(model, [f], dict(opts, temperature=0.0), {}, log)
                e["t0_only"] = {k: t0[f["id"]][k] for k in ("text", "language", "segments")}
            r["t0_attempt_same"] = same_text(e["t0_only"]["text"], e["t0_only"]["segments"],
                                             wd[f["path"]]["text"], wd[f["path"]]["segments"])
        rows.append(r)
    stored.update(ref)
    json.dump({"options": opts, "model": model_path, "files": stored}, open(cache_path, "w"),
              ensure_ascii=False, indent=1)
    s = summarise(rows, model.is_multilingual)
    timing = {"ref_s": ref_s, "ref_cached": sum(1 for f in files if f["id"] in cache and cache[f["id"]]["sha1"] == f["sha1"]),
              "wd_s": wd_done.get("s", 0.0), "audio_s": sum(f["duration"] for f in files),
              "parallel": not args.serial}
    res = {"model": model_name, "mode": mode, "whisperd_cmd": cmd[:6 + len(flags)],
           "reference_options": opts, "summary": s, "timing": timing, "files": rows,
           "whisperd_log": stderr[-4000:]}
    json.dump(res, open(os.path.join(args.out, "eval-%s-%s.json" % (model_name, mode)), "w"),
              ensure_ascii=False, indent=1)
    print(markdown(model_name, mode, rows, s, timing), flush=True)
    return s


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description="Compare whisperd with openai/whisper on the same weights.")
    ap.add_argument("--model", action="append", choices=["tiny.en", "base"],
                    help="model(s) to evaluate (default: both)")
    ap.add_argument("--beam", action="store_true", help="beam_size=5, best_of=5 on both sides")
    ap.add_argument("--files", nargs="+", help="only these files: ids (tests/..., shared/..., gen/...) or globs")
    ap.add_argument("--skip-reference", action="store_true",
                    help="reuse the cached reference results in --out (recompute only what is missing)")
    ap.add_argument("--skip-whisperd", action="store_true",
                    help="reuse whisperd's output from the last run (build/eval-results/whisperd-*.out)")
    ap.add_argument("--language", default=None, help="force a language on base (default: detect)")
    ap.add_argument("--serial", action="store_true",
                    help="run whisperd, then the reference (clean timings; default: side by side)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: 1 side by side, else all)")
    ap.add_argument("--no-gen", action="store_true", help="leave out the generated speech")
    ap.add_argument("--whisperd", default=os.path.join(ROOT, "build", "daemon", "whisperd"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--shared-audio", default="/work/shared/audio")
    ap.add_argument("--gen-dir", default=os.path.join(ROOT, "build", "eval-audio"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "eval-results"))
    args = ap.parse_args()
    args.whisperd = os.path.abspath(args.whisperd)
    if not os.access(args.whisperd, os.X_OK):
        sys.exit("eval: no whisperd at %s (build it first)" % args.whisperd)

    import torch
    torch.set_num_threads(args.threads or (os.cpu_count() if args.serial else 1))
    files = collect_files(args)
    if not files:
        sys.exit("eval: no files")
    summaries = {}
    for m in args.model or ["tiny.en", "base"]:
        s = evaluate(args, m, files)
        if s:
            summaries[m] = s
    ok = all(all(s["pass"].values()) for s in summaries.values())
    log("eval: %s" % ("all targets met" if ok else "some targets missed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
