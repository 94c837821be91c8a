"""ARI and seconds of PCC-KL, PCC-L2 and PPC against the number of pairs per point l, at K = 3, 8, 30, 100.

The consensus stage's path: the blobs ensemble of ``benchmarks/peers.py`` (``make_blobs(n, centers=K,
n_features=10, cluster_std=2.5, random_state=0)``, 20 k-means labelings with k drawn in ``[max(2, K // 2),
2 K]``, every point present), pairs ``coassociation(labels, strategy="cocluster", l=l, seed=0)``, each
method started from ``label_starts(labels, K)`` (HBGF's labels) with its
default tolerance. Prints one row per (K, l): the ARI of the start (KCC's labels), the seconds of the pair
sampling, and per method the ARI and the seconds of its fit (numba compilation excluded: warmed up first).
A ``*`` marks a fit stopped at max_iter. No asserts.

Usage, from the repository root:
    python benchmarks/pcc_pairs_curve.py [--n 20000] [--ks 3 8 30 100] [--ls 5 10 15 20 30 60 100 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import ensemble  # noqa: E402

from ensemble_dask.coassoc import coassociation  # noqa: E402
from ensemble_dask.consensus import PCC, PPC  # noqa: E402
from ensemble_dask.consensus.starts import label_starts  # noqa: E402

MAKE = {
    "pcc-kl": lambda k, init: PCC(k, divergence="kl", init=init, random_state=0),
    "pcc-l2": lambda k, init: PCC(k, divergence="l2", init=init, random_state=0),
    "ppc": lambda k, init: PPC(k, init=init, random_state=0),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--ks", type=int, nargs="+", default=[3, 8, 30, 100])
    p.add_argument("--ls", type=int, nargs="+", default=[5, 10, 15, 20, 30, 60, 100, 200])
    p.add_argument("--methods", nargs="+", default=list(MAKE), choices=list(MAKE))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensemble_dask_peers")
    args = p.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    lab, _ = ensemble(2000, 4, 4, 1.0, args.seed, args.cache)  # warm-up: numba caches
    labels = np.load(lab)
    starts = label_starts(labels, 4, random_state=0)
    for name in args.methods:
        MAKE[name](4, starts).fit(coassociation(labels, strategy="cocluster", l=5, seed=0))
    print(f"n = {args.n}; cells: ARI / seconds of the fit")
    print(f"{'K':>3} {'l':>4} {'start':>6} {'pairs s':>7} " + " ".join(f"{m:>14}" for m in args.methods))
    for k in args.ks:
        lab, y = ensemble(args.n, k, k, 1.0, args.seed, args.cache)
        labels = np.load(lab)
        starts = label_starts(labels, k, random_state=0)
        for l in args.ls:
            if l >= args.n:
                continue
            t0 = time.perf_counter()
            pairs = coassociation(labels, strategy="cocluster", l=l, seed=args.seed)
            t_pairs = time.perf_counter() - t0
            cells = []
            for name in args.methods:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    est = MAKE[name](k, starts).fit(pairs)
                    sec = time.perf_counter() - t0
                flag = "" if est.converged_ else "*"
                cells.append(f"{adjusted_rand_score(y, est.labels_):.3f} / {sec:5.2f}{flag:1}")
            print(
                f"{k:>3} {l:>4} {adjusted_rand_score(y, starts[0]):>6.3f} {t_pairs:7.2f} "
                + " ".join(f"{c:>14}" for c in cells),
                flush=True,
            )
    print("* stopped at max_iter (converged_ False)")


if __name__ == "__main__":
    main()
