#!/usr/bin/env python3
"""The golden labels of tests/core/test_diar_cluster.c, from pyannote's own
AgglomerativeClustering (pyannote.audio 4.0.7, scipy's linkage and fcluster
underneath) with speaker-diarization-3.1's method "centroid" and metric
"cosine".

Run from the repository root (CPU only, no network, a few seconds):
    /work/diar-venv/bin/python tests/data/diar/make_cluster_reference.py

Writes, next to this script:
  cluster_reference.txt  one case per line:
      name n dim threshold min_cluster_size min_k max_k k label_0 ... label_n-1
    (min_k / max_k 0: no bound; labels renumbered in order of first member,
    as wd_diar_cluster numbers them)
  cluster_reference.bin  the cases' embeddings, float32 little-endian, n x dim
    each, in the order of the lines above.

Each case calls pyannote as BaseClustering.__call__ does after filtering:
set_num_clusters, then cluster() unless max_clusters < 2.
"""
import os
import sys

import numpy as np
from pyannote.audio.pipelines.clustering import AgglomerativeClustering

HERE = os.path.dirname(os.path.abspath(__file__))
THRESHOLD_31 = 0.7045654963945799  # speaker-diarization-3.1's threshold


def blobs(rng, sizes, dim, spread, center_scale=1.0):
    """Clusters of the given sizes around random centres; member = centre +
    spread * noise (both ~N(0, 1) per dimension), shuffled."""
    out = []
    for s in sizes:
        c = rng.standard_normal(dim) * center_scale
        out.append(c + spread * rng.standard_normal((s, dim)))
    x = np.vstack(out).astype(np.float32)
    return x[rng.permutation(len(x))]


def pyannote_labels(emb, threshold, min_cluster_size, min_k, max_k):
    ac = AgglomerativeClustering(metric="cosine")
    ac.instantiate({"method": "centroid", "threshold": threshold,
                    "min_cluster_size": min_cluster_size})
    n = len(emb)
    num, lo, hi = ac.set_num_clusters(n, num_clusters=None,
                                      min_clusters=min_k or None,
                                      max_clusters=max_k or None)
    if hi < 2:
        labels = np.zeros(n, dtype=int)
    else:
        labels = ac.cluster(emb.copy(), min_clusters=lo, max_clusters=hi,
                            num_clusters=num)
    # Renumber in order of first member.
    first = {}
    out = []
    for lab in labels:
        first.setdefault(int(lab), len(first))
        out.append(first[int(lab)])
    return out


def main():
    rng = np.random.default_rng(41)
    cases = []
    # Three well-separated speakers.
    cases.append(("three_speakers", blobs(rng, [20, 15, 12], 32, 0.5),
                  THRESHOLD_31, 12, 0, 0))
    # Two large speakers plus outliers that form small clusters of their
    # own: the small ones are reassigned to the nearest large centroid.
    x = np.vstack([blobs(rng, [30, 25], 32, 0.6), blobs(rng, [2, 1, 3], 32, 0.4)])
    cases.append(("small_reassigned", x[rng.permutation(len(x))], THRESHOLD_31, 12, 0, 0))
    # Every cluster small (spread-out points, low threshold): one cluster.
    cases.append(("all_small", blobs(rng, [1] * 30, 32, 0.0), 0.3, 12, 0, 0))
    # Bounds: two speakers, at least three asked for; four, at most two;
    # three, exactly four (min == max).
    two = blobs(rng, [25, 20], 32, 0.6)
    cases.append(("min_k_forced", two, THRESHOLD_31, 12, 3, 0))
    four = blobs(rng, [15, 12, 14, 10], 32, 0.5)
    cases.append(("max_k_forced", four, THRESHOLD_31, 12, 0, 2))
    cases.append(("num_k_fixed", blobs(rng, [14, 16, 12], 32, 0.55), THRESHOLD_31, 12, 4, 4))
    # max_k 1: no clustering at all.
    cases.append(("max_k_one", blobs(rng, [10, 10], 16, 0.5), THRESHOLD_31, 12, 0, 1))
    # Tiny inputs.
    cases.append(("one", blobs(rng, [1], 16, 0.0), THRESHOLD_31, 12, 0, 0))
    cases.append(("two_far", blobs(rng, [1, 1], 16, 0.0), THRESHOLD_31, 12, 0, 0))
    # Noisy, overlapping speakers at the real dimension: heights near the
    # threshold, inversions of the centroid dendrogram, reassignments.
    cases.append(("noisy_192", blobs(rng, [40, 30, 20, 8, 3], 192, 0.5), THRESHOLD_31, 12, 0, 0))
    # A larger set at a lower dimension, several thresholds and sizes.
    big = blobs(rng, [60, 50, 40, 30, 20, 10, 5, 5], 16, 0.6)
    cases.append(("big_t07", big, THRESHOLD_31, 12, 0, 0))
    cases.append(("big_t05", big, 0.5, 5, 0, 0))
    cases.append(("big_t09_max3", big, 0.9, 12, 0, 3))
    cases.append(("big_t03_min6", big, 0.3, 8, 6, 0))

    with open(os.path.join(HERE, "cluster_reference.txt"), "w") as txt, \
         open(os.path.join(HERE, "cluster_reference.bin"), "wb") as binf:
        for name, emb, thr, mcs, lo, hi in cases:
            emb = np.ascontiguousarray(emb, dtype="<f4")
            labels = pyannote_labels(emb, thr, mcs, lo, hi)
            k = max(labels) + 1
            txt.write(f"{name} {len(emb)} {emb.shape[1]} {thr!r} {mcs} {lo} {hi} {k} "
                      + " ".join(map(str, labels)) + "\n")
            binf.write(emb.tobytes())
            print(f"{name}: n={len(emb)} k={k}", file=sys.stderr)


if __name__ == "__main__":
    main()
