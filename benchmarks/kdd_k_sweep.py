"""PCC-KL on the KDD subset for K = 3..10: H, cluster sizes and objective per K (prints; no asserts).

Why H is not flat from K = 3 to K = 4 (Lourenço et al. 2015 Fig. 5 shows it flat): the co-association of the
paper's ensemble (100 k-means, k in [2, 10], 50% subsamples) holds four blocks, not three. At K >= 4
PCC uses four clusters and leaves the others (nearly) empty, the paper's "K is a maximum" behaviour,
so H is flat from K = 4 on; the fourth block is a real one: the objective falls by a third from K = 3 to
K = 4, and a K = 3 start padded with an empty cluster descends to the same four blocks.

    python benchmarks/kdd_k_sweep.py [--n 30000] [--partners 60]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from ensemble_dask.coassoc import coassociation
from ensemble_dask.consensus import PCC
from ensemble_dask.consensus.starts import label_starts
from ensemble_dask.io.store import RunStore
from ensemble_dask.metrics import h_criterion
from ensemble_dask.partitions.clusterers import plan_ensemble, run_clustering, subsample_of
from ensemble_dask.stages.ingest import ingest

KDD = "../shared/data/kddcup99/kddcup.data_10_percent.gz"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=KDD)
    ap.add_argument("--n", type=int, default=30000)
    ap.add_argument("--partners", type=float, default=60, help="uniform pairs: partners per point")
    args = ap.parse_args()
    store = RunStore("memory://kdd-k-sweep")
    ingest(store, args.data, schema="kdd99", classes=["smurf", "neptune", "normal"], subset=args.n)
    X, y = store["X"][:], store["y_true"][:]
    n = len(y)
    specs = plan_ensemble(n, 100, ensemble="type1", k_min=2, k_max=10, rate=0.5, seed=0)
    labels = np.full((n, len(specs)), -1, np.int32)
    for u, spec in enumerate(specs):
        idx = subsample_of(spec, n)
        labels[idx, u] = run_clustering(X[idx], spec)
    pairs = coassociation(labels, strategy="uniform", p=args.partners / n, seed=0).observed()
    print(f"n={n}, {pairs.nnz / n:.1f} partners per point")
    print(f"{'K':>3} {'start':>7} {'H':>6} {'objective':>11} converged  cluster sizes")
    for K in (3, 4, 5, 8, 10):
        for start in ("random", "labels"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                init = label_starts(labels, K, random_state=0) if start == "labels" else "random"
                m = PCC(K, divergence="kl", init=init, random_state=0).fit(pairs)
            sizes = np.sort(np.bincount(m.labels_, minlength=K))[::-1].tolist()
            h = h_criterion(m.labels_, y)
            print(f"{K:3d} {start:>7} {h:6.3f} {m.objective_:11.1f} {m.converged_!s:>9}  {sizes}", flush=True)


if __name__ == "__main__":
    main()
