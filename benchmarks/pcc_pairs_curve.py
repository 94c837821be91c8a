"""ARI of PCC-KL, PCC-L2 and PPC against the number of per-point pairs l, at K = 3, 8, 30.

Blobs ``make_blobs(n, centers=K, n_features=10, cluster_std=2.5, random_state=0)``, 20 k-means
labelings with k uniform in [K/2, 2K] ([4, 16] at K = 8, as in issue 10), every point present;
pairs ``coassociation(labels, strategy="per-point", l=l)``; each method started from one-hot
k-means (``OneHotEncoder`` + ``KMeans(K, n_init=1)``), whose ARI is printed as the start. Prints
one table row per (K, l): the ARI of each method and the seconds of its fit. No asserts.

Usage, from the repository root:
    python benchmarks/pcc_pairs_curve.py [--n 20000] [--ks 3 8 30] [--ls 5 10 20 30 50 100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pcc_blobs import blobs_ensemble, onehot_kmeans, run_consensus, warm_up  # noqa: E402

from ensemble_dask.coassoc import coassociation  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--ks", type=int, nargs="+", default=[3, 8, 30])
    p.add_argument("--ls", type=int, nargs="+", default=[5, 10, 20, 30, 50, 100])
    p.add_argument("--methods", nargs="+", default=["pcc-kl", "pcc-l2", "ppc"])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    warm_up(args.methods)
    print(f"n = {args.n}; cells: ARI / seconds of the fit")
    print(f"{'K':>3} {'l':>4} {'start':>6} " + " ".join(f"{m:>14}" for m in args.methods))
    for k in args.ks:
        y, labels = blobs_ensemble(args.n, k, k_range=(4, 16) if k == 8 else None, seed=args.seed)
        start = onehot_kmeans(labels, k, args.seed)
        for l in args.ls:
            pairs = coassociation(labels, strategy="per-point", l=l, seed=args.seed)
            cells = []
            for name in args.methods:
                est, sec, _ = run_consensus(name, pairs, k, start, args.seed)
                flag = "" if est.converged_ else "*"
                cells.append(f"{adjusted_rand_score(y, est.labels_):.3f} / {sec:5.2f}{flag:1}")
            print(
                f"{k:>3} {l:>4} {adjusted_rand_score(y, start):>6.3f} " + " ".join(f"{c:>14}" for c in cells),
                flush=True,
            )
    print("* stopped at max_iter (converged_ False)")


if __name__ == "__main__":
    main()
