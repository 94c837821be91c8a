"""HBGF's final k-means: on how many rows its ``n_init`` starts are compared (``KMEANS_SAMPLE``).

Above ``max(KMEANS_SAMPLE, 50 K)`` distinct label rows, HBGF runs its ten k-means starts on a uniform sample
of that many rows of its spectral embedding and refines only the best on every row. This script builds
ensembles (20 k-means labelings, k in [K, 2K], of random halves of the points, ``-1`` elsewhere), fits HBGF
once on each to get the embedding, then runs that final k-means with each sample size for ``--seeds`` seeds,
side by side in this process: the median seconds, the final weighted inertia on every row (what the sample
is meant to choose by) and the ARI against the generating labels.

Cases: ``blobs`` (``make_blobs(n, K, cluster_std=1)``, well separated), ``overlap`` (``cluster_std=3.5``
at K/2 centres; the labelings disagree) and ``noise`` (uniform points, no clusters at all: the case where
starts differ most).

Usage: python benchmarks/hbgf_kmeans_sample.py [--n 100000] [--K 100] [--samples 20000 10000 5000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from _proc import load_average  # noqa: E402


def ensemble(X, K, seed, n_clusterings=20):
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    labels = np.full((X.shape[0], n_clusterings), -1, np.int32)
    for j in range(n_clusterings):
        rows = np.sort(rng.choice(X.shape[0], X.shape[0] // 2, replace=False))
        k = int(rng.integers(K, 2 * K + 1))
        labels[rows, j] = KMeans(k, n_init=1, max_iter=30, random_state=j).fit_predict(X[rows])
    return labels


def data(case, n, K, seed):
    from sklearn.datasets import make_blobs

    if case == "blobs":
        return make_blobs(n, centers=K, n_features=10, cluster_std=1.0, random_state=seed)
    if case == "overlap":
        return make_blobs(n, centers=max(2, K // 2), n_features=10, cluster_std=3.5, random_state=seed)
    rng = np.random.default_rng(seed)
    return rng.uniform(size=(n, 10)), np.zeros(n, np.int64)


def inertia(U, w, parts, K):
    c = np.zeros((K, U.shape[1]))
    np.add.at(c, parts, U * w[:, None])
    c /= np.maximum(np.bincount(parts, w, K), 1e-300)[:, None]
    return float((w * ((U - c[parts]) ** 2).sum(1)).sum())


def main(argv=None):
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask.consensus import HBGF
    from ensemble_dask.consensus.baselines import _labels

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--K", type=int, default=100)
    ap.add_argument("--samples", type=int, nargs="+", default=[20_000, 10_000, 5_000])
    ap.add_argument("--cases", nargs="+", default=["blobs", "overlap", "noise"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    K = args.K
    print(f"n = {args.n:,}, K = {K}; {load_average()}")
    print("| case | distinct rows | sample | median seconds | inertia: mean (range) | ARI (min-max) |")
    print("|---|---|---|---|---|---|")
    for case in args.cases:
        X, y = data(case, args.n, K, args.seed)
        emb = HBGF(K, random_state=args.seed).fit(ensemble(X, K, args.seed)).embedding_
        U, inv, w = np.unique(emb, axis=0, return_inverse=True, return_counts=True)
        w = w.astype(np.float64)
        res = {m: ([], [], []) for m in args.samples}
        for s in range(args.seeds):  # the sample sizes alternate, so a change of load touches each alike
            for m in args.samples:
                _labels.KMEANS_SAMPLE = m
                t = time.perf_counter()
                parts = _labels._kmeans(U, w, K, 10, s)
                res[m][0].append(time.perf_counter() - t)
                res[m][1].append(inertia(U, w, parts, K))
                res[m][2].append(adjusted_rand_score(y, parts[inv]))
        for m, (secs, its, aris) in res.items():
            print(
                f"| {case} | {U.shape[0]:,} | {max(m, 50 * K):,} | {np.median(secs):.2f} | "
                f"{np.mean(its):.2f} ({min(its):.2f}-{max(its):.2f}) | {min(aris):.4f}-{max(aris):.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
