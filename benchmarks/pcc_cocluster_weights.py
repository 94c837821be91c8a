"""Do inverse-inclusion-probability weights undo the bias of ``cocluster`` pairs? (PCC, PPC.)

``cocluster`` sampling (coassoc): each point i makes ``n_co = round(fraction * l)`` co-cluster
draws (a clustering u where i is present, uniformly among the P_i such ones, then a uniform other
member of i's cluster in u) and ``n_u = l - n_co`` uniform draws among the other n - 1 points. So
j is drawn by one draw of i with mean count

    mu_ij = n_co * q_ij + n_u / (n - 1),
    q_ij = (1 / |P_i|) * sum_{u in P_i, l_u(i) = l_u(j)} 1 / (|cluster of i in u| - 1),

and the pair (i, j), kept once whoever drew it, is stored with probability about
``pi_ij = 1 - exp(-(mu_ij + mu_ji))`` (draws are with replacement). The weight
``s_ij = 1 / pi_ij`` makes the sum over the stored pairs an unbiased estimate of the objective
over all pairs. (:func:`inclusion_probability` computes pi on given pairs; the sampler may
provide it.) Compares per-point pairs, cocluster pairs unweighted, and cocluster pairs weighted,
all from the one-hot k-means start; prints ARI and seconds. No asserts.

Usage, from the repository root:
    python benchmarks/pcc_cocluster_weights.py [--n 20000] [--ks 8 30] [--l 30] [--fraction 0.5]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pcc_blobs import blobs_ensemble, onehot_kmeans, run_consensus, warm_up  # noqa: E402

from ensemble_dask.coassoc import coassociation  # noqa: E402


def inclusion_probability(labels, rows, cols, l, fraction):
    """pi of each pair (rows[e], cols[e]) under ``cocluster`` sampling (see the module docstring)."""
    n, n_clusterings = labels.shape
    n_co = int(math.floor(fraction * l + 0.5))
    n_u = l - n_co
    q_rc = np.zeros(rows.size)
    q_cr = np.zeros(rows.size)
    present = (labels >= 0).sum(axis=1).astype(np.float64)
    for u in range(n_clusterings):
        col = labels[:, u]
        sizes = np.bincount(col[col >= 0])
        same = (col[rows] == col[cols]) & (col[rows] >= 0)
        s = sizes[col[rows[same]]].astype(np.float64)
        inv = np.where(s > 1, 1.0 / np.maximum(s - 1, 1), 0.0)
        q_rc[same] += inv
        q_cr[same] += inv
    q_rc /= np.maximum(present[rows], 1)
    q_cr /= np.maximum(present[cols], 1)
    mu = n_co * (q_rc + q_cr) + 2 * n_u / (n - 1)
    return -np.expm1(-mu)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--ks", type=int, nargs="+", default=[8, 30])
    p.add_argument("--l", type=int, default=30)
    p.add_argument("--fraction", type=float, default=0.5)
    p.add_argument("--methods", nargs="+", default=["pcc-kl", "pcc-l2", "ppc"])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    warm_up(args.methods)
    print(f"n = {args.n}, l = {args.l}, cocluster fraction = {args.fraction}; cells: ARI / seconds")
    print(f"{'K':>3} {'pairs':>20} {'start':>6} " + " ".join(f"{m:>14}" for m in args.methods))
    for k in args.ks:
        y, labels = blobs_ensemble(args.n, k, k_range=(4, 16) if k == 8 else None, seed=args.seed)
        start = onehot_kmeans(labels, k, args.seed)
        per_point = coassociation(labels, strategy="per-point", l=args.l, seed=args.seed)
        co = coassociation(labels, strategy="cocluster", l=args.l, fraction=args.fraction, seed=args.seed)
        weights = 1.0 / inclusion_probability(labels, co.rows(), co.indices, args.l, args.fraction)
        for what, pairs, sw in [
            ("per-point", per_point, None),
            ("cocluster", co, None),
            ("cocluster weighted", co, weights),
        ]:
            cells = []
            for name in args.methods:
                est, sec, _ = run_consensus(name, pairs, k, start, args.seed, sample_weight=sw)
                flag = "" if est.converged_ else "*"
                cells.append(f"{adjusted_rand_score(y, est.labels_):.3f} / {sec:5.2f}{flag:1}")
            print(
                f"{k:>3} {what:>20} {adjusted_rand_score(y, start):>6.3f} "
                + " ".join(f"{c:>14}" for c in cells),
                flush=True,
            )
    print("* stopped at max_iter (converged_ False)")


if __name__ == "__main__":
    main()
