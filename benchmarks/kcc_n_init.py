"""How often KCC's random starts find its lowest objective, by ``n_init`` (the lottery behind its default).

Data: scikit-learn's copy of UCI wdbc (``load_breast_cancer``, 569 points, 2 classes), standardised; an
ensemble of 100 k-means labelings (``KMeans(k, n_init=1)``, k drawn in [2, 10], all from ``--seed``). For
each of 16 seeds and ``n_init`` in 1, 3, 5, KCC (``init="k-means++"``, K = 2) is fitted; printed: how many
seeds reach the lowest objective found by any fit, and the range of ARI against the classes.

Usage: python benchmarks/kcc_n_init.py [--seed 0] [--seeds 16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing


def ensemble(X, n_clusterings, seed):
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    cols = []
    for _ in range(n_clusterings):
        k = int(rng.integers(2, 11))
        cols.append(KMeans(k, n_init=1, random_state=int(rng.integers(2**31))).fit_predict(X))
    return np.column_stack(cols).astype(np.int32)


def main(argv=None):
    from sklearn.datasets import load_breast_cancer
    from sklearn.metrics import adjusted_rand_score
    from sklearn.preprocessing import StandardScaler

    from ensemble_dask.consensus import KCC

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=16)
    args = ap.parse_args(argv)
    X, y = load_breast_cancer(return_X_y=True)
    labels = ensemble(StandardScaler().fit_transform(X), 100, args.seed)
    fits = {}
    for n_init in (1, 3, 5):
        fits[n_init] = [
            KCC(2, init="k-means++", n_init=n_init, random_state=s).fit(labels) for s in range(args.seeds)
        ]
    best = min(f.objective_ for runs in fits.values() for f in runs)
    print(f"wdbc, 100 k-means labelings (seed {args.seed}), K = 2, {args.seeds} seeds; lowest {best:.6f}")
    print("| n_init | seeds reaching it | ARI min | ARI max |")
    print("|---|---|---|---|")
    for n_init, runs in fits.items():
        hits = sum(np.isclose(f.objective_, best, rtol=1e-9, atol=0) for f in runs)
        ari = [adjusted_rand_score(y, f.labels_) for f in runs]
        print(f"| {n_init} | {hits} of {len(runs)} | {min(ari):.3f} | {max(ari):.3f} |")


if __name__ == "__main__":
    main()
