"""KCC from HBGF's partition, from k-means++ starts, or whichever of the two agrees better with the ensemble
(ANMI, as GKCC's ``compare="anmi"`` chooses); prints ARI.

KCC's default start (``init="spectral"``, HBGF's partition) wins where cluster sizes differ and loses on
digits, where five k-means++ starts reach a lower KCC objective and a higher ARI (the benchmarks page,
"Starts"). This asks whether a rule that reads only the labels gets both: fit both starts and keep the
higher ANMI, or keep the k-means++ result unless its ANMI is lower by more than ``delta``, or keep the one of
lower co-association least squares (the PPC objective of a hard partition over every pair, which
``benchmarks/auto_criteria.py`` compares with ANMI among ``auto``'s candidates).

Cases: the ensembles of ``benchmarks/starts_suite.py`` (12 sets x ``--seeds``) and of ``benchmarks/peers.py
--real`` (9 sets x complete / sub50 x ``--seeds``). Per case: the base partitions' mean ARI, each rule's
ARI, the objective ratio (k-means++ / spectral), the ANMI difference and the least-squares difference; then
per rule the mean ARI and the number of cases below the base partitions' mean.

    python benchmarks/kcc_start_rule.py [--seeds 3] [--data-dir ../shared/data/uci]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DELTAS = (0.0, 0.005, 0.01, 0.02)


def cases(data_dir, seeds):
    """``(name, labels, y, K)`` of every ensemble compared."""
    import peers
    import starts_suite

    for name, X, y in starts_suite.datasets(data_dir):
        y = np.unique(y, return_inverse=True)[1]
        K = int(y.max()) + 1
        for seed in range(min(seeds, 2)):
            yield f"suite {name} {seed}", starts_suite.ensemble(np.asarray(X, float), K, seed), y, K
    for i, (name, X, y) in enumerate(peers.real_sets(data_dir)):
        y = np.unique(y, return_inverse=True)[1]
        K = int(y.max()) + 1
        for kind in ("complete", "sub50"):
            for seed in range(seeds):  # the ensembles of peers.py --real
                rng = np.random.default_rng([seed, i, 0 if kind == "complete" else 1])
                labels = peers.real_ensemble(X, K, 1.0 if kind == "complete" else 0.5, rng)
                yield f"peers {name} {kind} {seed}", labels, y, K


def main(argv=None):
    from auto_criteria import coassociation_l2
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask.consensus import KCC
    from ensemble_dask.consensus._common.agreement import anmi

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="ensembles per set (starts_suite's: at most 2)")
    ap.add_argument("--data-dir", default=str(Path(__file__).parents[1] / ".." / "shared" / "data" / "uci"))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    print(
        f"{'case':34s} {'base':>6s} {'spec':>6s} {'km++':>6s} {'obj km++/spec':>13s} {'ANMI km++-spec':>14s} "
        f"{'L2 km++-spec':>12s}"
    )
    for name, labels, y, K in cases(args.data_dir, args.seeds):
        spec = KCC(K, random_state=0).fit(labels)
        kmpp = KCC(K, init="k-means++", n_init=5, random_state=0).fit(labels)
        present = [labels[:, j] >= 0 for j in range(labels.shape[1])]
        base = np.mean([adjusted_rand_score(y[p], labels[p, j]) for j, p in enumerate(present)])
        a, b = adjusted_rand_score(y, spec.labels_), adjusted_rand_score(y, kmpp.labels_)
        da = anmi(kmpp.labels_, labels) - anmi(spec.labels_, labels)
        dl = coassociation_l2(kmpp.labels_, labels) - coassociation_l2(spec.labels_, labels)
        rows.append((base, a, b, da, dl))
        print(
            f"{name:34s} {base:6.3f} {a:6.3f} {b:6.3f} {kmpp.inertia_ / spec.inertia_:13.3f} {da:+14.4f} "
            f"{dl:+12.4f}",
            flush=True,
        )
    base, a, b, da, dl = np.array(rows).T
    print(f"\n{len(rows)} cases: mean ARI; cases below the base partitions' mean")
    print(f"spectral (the default)            {a.mean():.4f}  {(a < base).sum()}")
    print(f"k-means++ (n_init=5)              {b.mean():.4f}  {(b < base).sum()}")
    for d in DELTAS:
        g = np.where(da >= -d, b, a)
        print(f"k-means++ unless ANMI lower by > {d:<5g} {g.mean():.4f}  {(g < base).sum()}")
    g = np.where(dl < 0, b, a)
    print(f"the lower co-association L2       {g.mean():.4f}  {(g < base).sum()}")


if __name__ == "__main__":
    main()
