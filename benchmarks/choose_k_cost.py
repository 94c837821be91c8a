"""What choosing K costs the graph consensus: a fit on a range of K against one fit at its largest K.

At any n the graph is built on a seeded sample of ``sample_size`` rows (20,000): every row outside it gets its
base clusters' votes, the same for a fixed K and a range. A fit at K and one over ``[2, K]`` take the same
ensemble (``generate`` draws k from the largest K up), so the extra cost of choosing K is in this fit alone.
This script fits ``GraphConsensus`` on ``--rows`` rows of ``--centers`` Gaussian blobs (``--dims``
features) with a fine ensemble of ``--clusterings`` k-means labelings (k in [K, sqrt(n)], every row labelled,
as ``generate`` draws them), once at ``n_clusters=K`` and once at ``(2, K)``, side by side in one process, and
prints each fit's seconds and the process's peak resident memory after each (``ru_maxrss``).

    nice python benchmarks/choose_k_cost.py [--rows 20000] [--k 12] [--clusterings 30] [--seed 0]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None):
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.datasets import make_blobs

    from ensemble_dask.consensus import GraphConsensus

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--k", type=int, default=12)
    ap.add_argument("--centers", type=int, default=8)
    ap.add_argument("--dims", type=int, default=5)
    ap.add_argument("--clusterings", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    X, _ = make_blobs(args.rows, n_features=args.dims, centers=args.centers, random_state=args.seed)
    rng = np.random.default_rng(args.seed)
    n = len(X)
    L = np.empty((n, args.clusterings), dtype=np.int32)
    for t in range(args.clusterings):
        rows = rng.choice(n, n // 2, replace=False)
        k = int(rng.integers(args.k, int(np.sqrt(min(n, 20_000))) + 1))
        L[:, t] = MiniBatchKMeans(k, n_init=1, random_state=t).fit(X[rows]).predict(X)
    GraphConsensus(3, random_state=0).fit(L[:300], X[:300])  # numba's compilation, out of the timings
    GraphConsensus((2, 3), n_resamples=1, random_state=0).fit(L[:300], X[:300])
    print(f"{n} rows, {args.dims} features, {args.centers} blobs, {args.clusterings} base clusterings")
    times = {}
    for label, k in ((f"K={args.k}", args.k), (f"K in [2, {args.k}]", (2, args.k))):
        t0 = time.perf_counter()
        est = GraphConsensus(k, random_state=args.seed).fit(L, X)
        times[label] = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{label:14s} {times[label]:7.1f} s   K={est.n_clusters_:3d}   peak RSS so far {peak:6.0f} MB")
    a, b = times.values()
    print(f"choosing K / one fit at K={args.k}: {b / a:.2f}x")


if __name__ == "__main__":
    main()
