"""Where the consensus methods start: HBGF's spectral partition against the lower objective; prints ARI.

The start decides which local optimum PCC, PPC, BCE and MM end in. Two rules, side by side on the same
ensembles:

* ``spectral`` (the defaults): PCC from :func:`~ensemble_dask.consensus.starts.label_starts` (HBGF's
  partition), BCE and MM with ``init="spectral"``;
* ``objective`` (the defaults before): PCC from the one of KCC's and HBGF's partitions with the lower PCC
  objective, BCE and MM with ``init="k-means++"`` (the best of k-means++ seedings and HBGF's partition by
  KCC's objective);
* KCC with ``init="spectral"`` (its default) against five k-means++ starts (the lowest objective kept; the
  default before).

Data sets: the UCI sets in ``../shared/data/uci`` (iris, wine, glass, ionosphere, wdbc), scikit-learn's
``digits``, and seeded blobs: 4 of 600/200/80/40 points, 5 of 1000/300/100/50/30, 8 of geometric sizes
2000 .. 15, 3 of different spreads, 3 anisotropic, 10 equal. Each set is z-scored, as ``ingest`` does;
the ensemble is the ``generate`` stage's default for K classes (100 k-means, k in
:func:`~ensemble_dask.stages.generate.default_k_range`), drawn with ``--seeds`` seeds; the pairs are the
coassoc stage's default (``cocluster``, l = 10). Prints each method's ARI under both rules beside the mean
ARI of the base partitions, then the means and how many fits fell below that mean.

    python benchmarks/starts_suite.py [--seeds 2] [--sets iris,geom8]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import adjusted_rand_score

from ensemble_dask.coassoc import coassociation
from ensemble_dask.consensus import BCE, KCC, MM, PCC
from ensemble_dask.consensus.starts import label_starts
from ensemble_dask.io.datasets import load_uci
from ensemble_dask.partitions.clusterers import plan_ensemble, run_clustering, subsample_of
from ensemble_dask.stages.generate import default_k_range

METHODS = ("pcc-l2", "pcc-kl", "bce", "mm", "kcc")


def datasets(data_dir):
    for name in ("iris", "wine", "glass", "ionosphere", "wdbc"):
        if (Path(data_dir) / f"{name}.data.gz").exists():
            yield (name, *load_uci(name, data_dir))
    d = load_digits()
    yield "digits", d.data, d.target
    yield ("uneq4", *make_blobs([600, 200, 80, 40], n_features=6, cluster_std=2.0, random_state=1))
    yield ("uneq5", *make_blobs([1000, 300, 100, 50, 30], n_features=5, cluster_std=1.5, random_state=3))
    sizes = [2000, 1000, 500, 250, 125, 60, 30, 15]
    yield ("geom8", *make_blobs(sizes, n_features=8, cluster_std=1.5, random_state=5))
    yield (
        "varied3",
        *make_blobs([400, 400, 100], n_features=2, cluster_std=[1.0, 2.5, 0.5], random_state=170),
    )
    X, y = make_blobs(1500, centers=3, random_state=170)
    yield "aniso3", X @ np.array([[0.6, -0.6], [-0.4, 0.8]]), y
    yield ("blobs10", *make_blobs(2000, centers=10, n_features=8, cluster_std=2.5, random_state=0))


def ensemble(X, K, seed):
    """The generate stage's default ensemble for K on z-scored X: 100 k-means, k in default_k_range(K)."""
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    lo, hi = default_k_range(K)
    specs = plan_ensemble(len(X), 100, k_min=lo, k_max=hi, seed=seed)
    labels = np.full((len(X), len(specs)), -1, dtype=np.int32)
    for j, spec in enumerate(specs):
        idx = subsample_of(spec, len(X))
        labels[idx, j] = run_clustering(X[idx], spec)
    return labels


def fits(labels, K, pairs, rule):
    if rule == "spectral":
        start, init = label_starts(labels, K, random_state=0), "spectral"
    else:
        # the KCC candidate label_starts offered before (three k-means++ starts)
        kcc = KCC(K, init="k-means++", n_init=3, random_state=0).fit(labels).labels_
        start, init = [kcc, *label_starts(labels, K, random_state=0)], "k-means++"
    return {
        "pcc-l2": PCC(K, divergence="l2", init=start, random_state=0).fit(pairs).labels_,
        "pcc-kl": PCC(K, divergence="kl", init=start, random_state=0).fit(pairs).labels_,
        "bce": BCE(K, init=init, random_state=0).fit(labels).labels_,
        "mm": MM(K, init=init, random_state=0).fit(labels).labels_,
        "kcc": KCC(K, init="spectral" if rule == "spectral" else "k-means++", random_state=0)
        .fit(labels)
        .labels_,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(Path(__file__).parents[1] / ".." / "shared" / "data" / "uci"))
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--sets", default=None, help="comma-separated names (default: all)")
    args = ap.parse_args()
    wanted = None if args.sets is None else set(args.sets.split(","))
    warnings.simplefilter("ignore")
    print(f"{'set':9s} {'seed':>4s} {'K':>3s} {'base':>6s}  " + "  ".join(f"{m:>15s}" for m in METHODS))
    print(f"{'':9s} {'':4s} {'':3s} {'':6s}  " + "  ".join(f"{'spectral/object':>15s}" for _ in METHODS))
    rows = []
    for name, X, y in datasets(args.data_dir):
        if wanted is not None and name not in wanted:
            continue
        K = len(np.unique(y))
        for seed in range(args.seeds):
            labels = ensemble(np.asarray(X, dtype=np.float64), K, seed)
            base = np.mean([adjusted_rand_score(y, labels[:, j]) for j in range(labels.shape[1])])
            pairs = coassociation(labels, strategy="cocluster", l=10, seed=seed)
            got = {rule: fits(labels, K, pairs, rule) for rule in ("spectral", "objective")}
            ari = {r: [adjusted_rand_score(y, got[r][m]) for m in METHODS] for r in got}
            rows.append((base, ari["spectral"], ari["objective"]))
            cells = "  ".join(
                f"{a:7.3f}/{b:7.3f}" for a, b in zip(ari["spectral"], ari["objective"], strict=True)
            )
            print(f"{name:9s} {seed:4d} {K:3d} {base:6.3f}  {cells}", flush=True)
    base = np.array([r[0] for r in rows])[:, None]
    for i, rule in enumerate(("spectral", "objective")):
        a = np.array([r[1 + i] for r in rows])
        print(
            f"{rule:9s} mean ARI "
            + " ".join(f"{m} {v:.3f}" for m, v in zip(METHODS, a.mean(axis=0), strict=True))
            + "; below the base mean: "
            + " ".join(f"{m} {v}" for m, v in zip(METHODS, (a < base - 1e-9).sum(axis=0), strict=True))
            + f" of {len(rows)}"
        )


if __name__ == "__main__":
    main()
