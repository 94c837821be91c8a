"""KCC from HBGF's partition, from k-means++ starts, or whichever of the two agrees better with the ensemble
(ANMI, as GKCC's ``compare="anmi"`` chooses); prints ARI.

KCC's default start (``init="spectral"``, HBGF's partition) wins where cluster sizes differ and loses on
digits, where five k-means++ starts reach a lower KCC objective and a higher ARI (the benchmarks page,
"Starts"). This asks whether a rule that reads only the labels gets both: fit both starts and keep the
higher ANMI, or keep the k-means++ result unless its ANMI is lower by more than ``delta``, or keep the one of
lower co-association least squares (the PPC objective of a hard partition over every pair, which
``benchmarks/auto_criteria.py`` compares with ANMI among ``auto``'s candidates). And, reading the
features (z-scored) instead of the labels, whichever of the two scores better by the classic internal
indices: the within-cluster sum of squares, the silhouette (on up to 3,000 rows), Calinski-Harabasz and
Davies-Bouldin. And whichever of the two agrees better (ARI) with EAC-AL's partition of a sample of up to
2,000 rows (average linkage on the sample's co-association, the one baseline above the base mean on digits).

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


def zscored(X):
    X = np.asarray(X, dtype=np.float64)
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def within_ss(X, labels):
    return sum(((X[labels == c] - X[labels == c].mean(axis=0)) ** 2).sum() for c in np.unique(labels))


def eac_al_sample(labels, K, m=2000, seed=0):
    """``(rows, partition)``: EAC-AL's ``K`` clusters of a sample of up to ``m`` rows (average linkage on
    ``1 -`` the co-association, the fraction of the clusterings holding both rows that put them together)."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    n = labels.shape[0]
    rows = np.sort(np.random.default_rng(seed).choice(n, min(n, m), replace=False))
    L = labels[rows]
    co = np.zeros((rows.size, rows.size))
    both = np.zeros_like(co)
    for j in range(L.shape[1]):
        p = L[:, j] >= 0
        pp = np.outer(p, p)
        both += pp
        co += (L[:, j][:, None] == L[:, j][None, :]) & pp
    D = 1.0 - np.where(both > 0, co / np.maximum(both, 1), 0.0)
    np.fill_diagonal(D, 0.0)
    return rows, fcluster(linkage(squareform(D, checks=False), "average"), K, "maxclust") - 1


def feature_rules():
    """``(name, index, higher_is_better)`` of the feature-space indices compared."""
    from sklearn import metrics

    def silhouette(X, labels):
        return metrics.silhouette_score(X, labels, sample_size=min(len(X), 3000), random_state=0)

    return (
        ("within-cluster sum of squares", within_ss, False),
        ("silhouette", silhouette, True),
        ("Calinski-Harabasz", metrics.calinski_harabasz_score, True),
        ("Davies-Bouldin", metrics.davies_bouldin_score, False),
    )


def cases(data_dir, seeds):
    """``(name, X, labels, y, K)`` of every ensemble compared, ``X`` z-scored."""
    import peers
    import starts_suite

    for name, X, y in starts_suite.datasets(data_dir):
        y = np.unique(y, return_inverse=True)[1]
        K = int(y.max()) + 1
        for seed in range(min(seeds, 2)):
            labels = starts_suite.ensemble(np.asarray(X, float), K, seed)
            yield f"suite {name} {seed}", zscored(X), labels, y, K
    for i, (name, X, y) in enumerate(peers.real_sets(data_dir)):
        y = np.unique(y, return_inverse=True)[1]
        K = int(y.max()) + 1
        for kind in ("complete", "sub50"):
            for seed in range(seeds):  # the ensembles of peers.py --real
                rng = np.random.default_rng([seed, i, 0 if kind == "complete" else 1])
                labels = peers.real_ensemble(X, K, 1.0 if kind == "complete" else 0.5, rng)
                yield f"peers {name} {kind} {seed}", zscored(X), labels, y, K


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
    rows, features = [], feature_rules()
    print(
        f"{'case':34s} {'base':>6s} {'spec':>6s} {'km++':>6s} {'obj km++/spec':>13s} {'ANMI km++-spec':>14s} "
        f"{'L2 km++-spec':>12s} {'silhouette km++-spec':>20s} {'EAC-AL km++-spec':>14s}"
    )
    for name, X, labels, y, K in cases(args.data_dir, args.seeds):
        spec = KCC(K, random_state=0).fit(labels)
        kmpp = KCC(K, init="k-means++", n_init=5, random_state=0).fit(labels)
        present = [labels[:, j] >= 0 for j in range(labels.shape[1])]
        base = np.mean([adjusted_rand_score(y[p], labels[p, j]) for j, p in enumerate(present)])
        a, b = adjusted_rand_score(y, spec.labels_), adjusted_rand_score(y, kmpp.labels_)
        da = anmi(kmpp.labels_, labels) - anmi(spec.labels_, labels)
        dl = coassociation_l2(kmpp.labels_, labels) - coassociation_l2(spec.labels_, labels)
        # > 0: k-means++'s partition scores better by the index
        df = [(f(X, kmpp.labels_) - f(X, spec.labels_)) * (1 if up else -1) for _, f, up in features]
        r, eac = eac_al_sample(labels, K)
        de = adjusted_rand_score(eac, kmpp.labels_[r]) - adjusted_rand_score(eac, spec.labels_[r])
        rows.append((base, a, b, da, dl, de, *df))
        print(
            f"{name:34s} {base:6.3f} {a:6.3f} {b:6.3f} {kmpp.inertia_ / spec.inertia_:13.3f} {da:+14.4f} "
            f"{dl:+12.4f} {df[1]:+20.4f} {de:+14.4f}",
            flush=True,
        )
    base, a, b, da, dl, de, *df = np.array(rows).T
    print(f"\n{len(rows)} cases: mean ARI; cases below the base partitions' mean")
    print(f"spectral (the default)            {a.mean():.4f}  {(a < base).sum()}")
    print(f"k-means++ (n_init=5)              {b.mean():.4f}  {(b < base).sum()}")
    for d in DELTAS:
        g = np.where(da >= -d, b, a)
        print(f"k-means++ unless ANMI lower by > {d:<5g} {g.mean():.4f}  {(g < base).sum()}")
    g = np.where(dl < 0, b, a)
    print(f"the lower co-association L2       {g.mean():.4f}  {(g < base).sum()}")
    g = np.where(de > 0, b, a)
    print(f"the closer to EAC-AL (sample)     {g.mean():.4f}  {(g < base).sum()}")
    for (label, _, _), d in zip(features, df, strict=True):
        g = np.where(d > 0, b, a)
        print(f"{'the better ' + label:33s} {g.mean():.4f}  {(g < base).sum()}")


if __name__ == "__main__":
    main()
