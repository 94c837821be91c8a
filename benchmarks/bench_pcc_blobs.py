"""PCC-KL, PCC-L2 and PPC against one-hot k-means and ccHBGF on the blobs ensemble of issue 10.

The ensemble: ``make_blobs(n, centers=K, n_features=10, cluster_std=2.5, random_state=0)``, then
20 k-means labelings (``KMeans(k, n_init=1)``, k drawn uniformly in [k_min, k_max]; for K = 8 the
issue's [4, 16]), every point present. Pairs: ``coassociation(labels, strategy="per-point", l=...)``.
The start of PCC/PPC (``--init kmeans``, the default): k-means with K clusters on the sparse
one-hot base labels (scikit-learn ``OneHotEncoder`` + ``KMeans(K, n_init=1)``), the same labels
one-hot k-means reports. Prints ARI and seconds per method (the consensus methods' seconds are
their ``fit``; the start's seconds are shown apart, as one-hot k-means). No asserts.

Usage, from the repository root:
    python benchmarks/bench_pcc_blobs.py [--n 50000] [--k 8] [--l 30] [--methods pcc-kl pcc-l2 ppc]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import OneHotEncoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ensemble_dask.coassoc import coassociation  # noqa: E402
from ensemble_dask.consensus.pcc import PCC, PPC


def blobs_ensemble(n, k, n_clusterings=20, k_range=None, seed=0, cache="/tmp/ensemble_dask_bench_blobs"):
    """``(y, labels)``: the blobs truth and ``n_clusterings`` k-means labelings of them.

    Saved under ``cache`` (None: not saved) and read from there when present.
    """
    lo, hi = k_range or (max(2, k // 2), 2 * k)
    path = None
    if cache is not None:
        path = Path(cache) / f"blobs_n{n}_K{k}_N{n_clusterings}_k{lo}-{hi}_s{seed}.npz"
        if path.exists():
            with np.load(path) as z:
                return z["y"], z["labels"]
    X, y = make_blobs(n, centers=k, n_features=10, cluster_std=2.5, random_state=seed)
    rng = np.random.default_rng(seed)
    ks = rng.integers(lo, hi + 1, size=n_clusterings)
    labels = np.column_stack(
        [KMeans(int(kk), n_init=1, random_state=s).fit_predict(X) for s, kk in enumerate(ks)]
    ).astype(np.int32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, y=y, labels=labels)
    return y, labels


def onehot_kmeans(labels, k, seed=0):
    """k-means with k clusters on the sparse one-hot encoding of the labels matrix."""
    Z = OneHotEncoder().fit_transform(labels)
    return KMeans(k, n_init=1, random_state=seed).fit_predict(Z)


def cchbgf(labels, k, seed=0):
    from ccHBGF import ccHBGF

    return ccHBGF(labels, k, random_state=seed)


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0, [str(w.message)[:60] for w in caught]


def run_consensus(name, pairs, k, init, seed=0, sample_weight=None, **kw):
    if name in ("ppc", "ppc-be"):
        algorithm = "rows" if name == "ppc" else "baum-eagon"
        est = PPC(k, init=init, algorithm=algorithm, random_state=seed, **kw)
    else:
        est = PCC(k, divergence=name.split("-")[1], init=init, random_state=seed, **kw)
    return timed(est.fit, pairs, sample_weight=sample_weight)


def warm_up(methods):
    labels = np.array([[0, 0], [0, 1], [1, 1], [1, 0]])
    pairs = coassociation(labels, strategy="full", seed=0)
    for name in methods:
        run_consensus(name, pairs, 2, "random")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=50_000)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--k-range", type=int, nargs=2, default=None)
    p.add_argument("--l", type=int, default=30)
    p.add_argument("--init", default="kmeans", choices=["kmeans", "random"])
    p.add_argument(
        "--methods", nargs="+", default=["pcc-kl", "pcc-l2", "ppc"], help="also: ppc-be (Baum-Eagon)"
    )
    p.add_argument("--peers", nargs="*", default=["onehot-kmeans", "cchbgf"])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    k_range = args.k_range or ((4, 16) if args.k == 8 else None)

    t0 = time.perf_counter()
    y, labels = blobs_ensemble(args.n, args.k, k_range=k_range, seed=args.seed)
    print(
        f"ensemble: n = {args.n}, K = {args.k}, {labels.shape[1]} k-means labelings, k in {k_range} "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    base = np.mean([adjusted_rand_score(y, labels[:, u]) for u in range(labels.shape[1])])
    t0 = time.perf_counter()
    pairs = coassociation(labels, strategy="per-point", l=args.l, seed=args.seed)
    print(
        f"pairs: per-point l = {args.l}, {pairs.nnz / args.n:.1f} stored per point "
        f"({time.perf_counter() - t0:.1f} s); mean base ARI {base:.3f}"
    )
    warm_up(args.methods)
    print(f"{'method':>16} {'ARI':>6} {'seconds':>8} {'n_iter':>6} {'conv':>5} {'eff_K':>5}  warnings")
    start, t_start, _ = timed(onehot_kmeans, labels, args.k, args.seed)
    if "onehot-kmeans" in args.peers:
        print(f"{'onehot-kmeans':>16} {adjusted_rand_score(y, start):>6.3f} {t_start:>8.2f}")
    if "cchbgf" in args.peers:
        try:
            lab, sec, _ = timed(cchbgf, labels, args.k, args.seed)
            print(f"{'ccHBGF':>16} {adjusted_rand_score(y, lab):>6.3f} {sec:>8.2f}")
        except ImportError:
            print(f"{'ccHBGF':>16}  not installed (pip install cchbgf)")
    init = start if args.init == "kmeans" else "random"
    for name in args.methods:
        est, sec, warns = run_consensus(name, pairs, args.k, init, args.seed)
        print(
            f"{name:>16} {adjusted_rand_score(y, est.labels_):>6.3f} {sec:>8.2f} {est.n_iter_:>6} "
            f"{str(est.converged_):>5} {est.effective_k_:>5}  {'; '.join(warns)}"
        )


if __name__ == "__main__":
    main()
