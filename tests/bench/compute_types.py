#!/usr/bin/env python3
"""--compute-type bf16 and int8 against f32 on the same files (issue #22's
"WER against f32"; a benchmark: prints figures, fails nothing).

One `whisperd transcribe --device cpu --compute-type T -f json FILES...` per
model and type (all files in one process, as a user batches them), over the
WAVs of tests/data/audio (jfk, cards, synth; not formats/), /work/shared's
pocketsphinx recordings where present, and load.py's 2-minute file. Per type: the wall time of
the process, the files whose text is the f32 text word for word, and the
word error rate against f32's words (edits / f32 words, lowercase, no
punctuation, numbers to twenty as digits). Types the CPU lacks are skipped (whisperd refuses them).

  build/venv/bin/python tests/bench/compute_types.py [--models tiny.en,base]
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from load import long_audio  # noqa: E402


def files(tmp):
    """The test WAVs (not formats/), pocketsphinx's where /work/shared is
    here, and the 2-minute file written into tmp."""
    out = sorted(p for p in glob.glob(os.path.join(ROOT, "tests", "data", "audio", "**", "*.wav"),
                                      recursive=True) if "/formats/" not in p)
    out += sorted(glob.glob("/work/shared/audio/pocketsphinx/*.wav"))
    data, _ = long_audio(120)
    long_wav = os.path.join(tmp, "long-120s.wav")
    with open(long_wav, "wb") as f:
        f.write(data)
    return out + [long_wav]


NUMBERS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}


def words(text):
    """Lowercase words without punctuation, numbers to twenty as digits
    (int8 writes "Ten of clubs" where f32 writes "10 of clubs")."""
    return [NUMBERS.get(w, w) for w in re.sub(r"[^\w\s']", " ", text.lower()).split()]


def short(t, n=110):
    t = t.strip()
    return repr(t if len(t) <= n else t[:n] + "...")


def edits(a, b):
    """Word-level Levenshtein distance."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def transcribe(binary, model, ctype, paths):
    """{path: text} from one process, and its wall time; None if refused."""
    t0 = time.monotonic()
    r = subprocess.run([binary, "transcribe", "--device", "cpu", "--compute-type", ctype,
                        "-m", model, "-f", "json"] + paths, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        return None, wall, r.stderr.strip().splitlines()[-1:]
    texts, cur = {}, None
    for line in r.stdout.splitlines():
        if line.startswith("==> ") and line.endswith(" <=="):
            cur = line[4:-4]
        elif line.startswith("{"):
            texts[cur if cur else paths[0]] = json.loads(line)["text"]
    return texts, wall, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="tiny.en,base")
    ap.add_argument("--whisperd", default=os.path.join(ROOT, "build", "daemon", "whisperd"))
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="wd-ctypes-")
    paths = files(tmp.name)
    print(f"{len(paths)} files")
    for m in a.models.split(","):
        model = os.path.join(ROOT, "models", f"ggml-{m}.bin")
        if not os.path.exists(model):
            print(f"{m}: {model} missing, skipped")
            continue
        ref, ref_wall, _ = transcribe(a.whisperd, model, "f32", paths)
        n_ref = sum(len(words(t)) for t in ref.values())
        print(f"\n== {m}: {len(ref)} files, {n_ref} words in f32's transcripts")
        print(f"  {'type':5} {'wall s':>7} {'vs f32':>7} {'same text':>10} {'WER vs f32':>11}")
        print(f"  {'f32':5} {ref_wall:7.2f} {'-':>7} {len(ref):>6}/{len(ref):<3} {'-':>11}")
        for ctype in ("bf16", "int8"):
            got, wall, err = transcribe(a.whisperd, model, ctype, paths)
            if got is None:
                print(f"  {ctype:5} refused: {' '.join(err)}")
                continue
            same = sum(words(got.get(p, "")) == words(t) for p, t in ref.items())
            e = sum(edits(words(t), words(got.get(p, ""))) for p, t in ref.items())
            print(f"  {ctype:5} {wall:7.2f} {wall / ref_wall:6.2f}x {same:>6}/{len(ref):<3} "
                  f"{100.0 * e / max(1, n_ref):10.2f}%")
            for p, t in ref.items():
                if words(got.get(p, "")) != words(t):
                    print(f"    {os.path.basename(p)}: f32 {short(t)}\n"
                          f"    {' ' * len(os.path.basename(p))}  {ctype} {short(got.get(p, ''))}")


if __name__ == "__main__":
    main()
