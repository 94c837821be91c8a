"""The default end to end at scale: ConsensusClustering's default (``graph``) beside KMeans(n_init=10) on
100,000 points in 100 clusters, and beside the former default (``pcc-kl``) on KDD Cup 99 10%.

* ``grid``: a 10 x 10 grid of Gaussians (spacing 10, standard deviation 1.5), 1,000 points each, like Birch 1;
  each round fits KMeans(n_init=10) and then ConsensusClustering(100) with the same seed, in this process.
* ``kdd``: ``../shared/data/kddcup99/kddcup.data_10_percent.gz`` (494,021 rows, schema kdd99), K = 23 (its
  classes), each method in a fresh process (its peak memory is that process's own), one after the other.
* ``kmeans-k``: one base clustering's cost against its k: k-means (one start, one thread) of half of KDD 10%'s
  ingested rows for k = 23, 100 and 300 (why ``k_max: sqrt`` counts the rows up to 20,000 only).

Printed: seconds, ARI and their ratio per round.

    python benchmarks/e2e_scale.py [grid] [kdd] [kmeans-k] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
KDD = DATA / "kddcup99" / "kddcup.data_10_percent.gz"


def grid(rounds):
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask import ConsensusClustering

    rng = np.random.default_rng(0)
    centres = np.array([(i, j) for i in range(10) for j in range(10)], dtype=float) * 10
    y = np.repeat(np.arange(100), 1000)
    X = centres[y] + rng.normal(scale=1.5, size=(100_000, 2))
    print("100,000 points in 100 clusters: KMeans(n_init=10) against ConsensusClustering(100)")
    for r in range(rounds):
        t = time.perf_counter()
        km = KMeans(100, n_init=10, random_state=r).fit(X)
        t_km = time.perf_counter() - t
        t = time.perf_counter()
        ours = ConsensusClustering(100, random_state=r).fit(X)
        t_ours = time.perf_counter() - t
        print(
            f"  round {r}: KMeans {t_km:.1f} s ARI {adjusted_rand_score(y, km.labels_):.3f}; "
            f"ours {t_ours:.1f} s ARI {adjusted_rand_score(y, ours.labels_):.3f} "
            f"({ours.metrics_['candidate']}); ours / KMeans {t_ours / t_km:.2f}",
            flush=True,
        )


_ONE_FIT = """
import json, resource, sys, time
from ensemble_dask import ConsensusClustering
t = time.perf_counter()
m = ConsensusClustering(23, method=sys.argv[1], random_state=0, data_params={"schema": "kdd99"})
m.fit(sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - t, "ARI": m.metrics_.get("ARI"),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""


def kdd():
    if not KDD.exists():
        print(f"kdd: {KDD} is not there; skipped")
        return
    print("KDD Cup 99 10% (494,021 rows), K = 23, each fit in a fresh process")
    for method in ("graph", "pcc-kl"):
        out = subprocess.run(
            [sys.executable, "-c", _ONE_FIT, method, str(KDD)], capture_output=True, text=True, check=True
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  {method:7s} {r['seconds']:.1f} s ARI {r['ARI']:.3f}, peak of its process {r['peak_mb']} MB")


def kmeans_k():
    import tempfile

    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from ensemble_dask.io.store import RunStore
    from ensemble_dask.stages.ingest import ingest

    if not KDD.exists():
        print(f"kmeans-k: {KDD} is not there; skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(f"{tmp}/kdd.zarr")
        ingest(store, str(KDD), schema="kdd99")
        X = store["X"][:]
    rows = np.random.default_rng(0).choice(len(X), len(X) // 2, replace=False)
    print(f"k-means of {len(rows):,} rows x {X.shape[1]} (one start, one thread)")
    with threadpool_limits(1):
        for k in (23, 100, 300):
            t = time.perf_counter()
            km = KMeans(k, n_init=1, random_state=0).fit(X[rows])
            print(f"  k = {k}: {time.perf_counter() - t:.1f} s, {km.n_iter_} iterations", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="*", help="grid, kdd and/or kmeans-k (default: grid and kdd)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    what = args.what or ["grid", "kdd"]
    if set(what) - {"grid", "kdd", "kmeans-k"}:
        ap.error(f"what to measure: grid, kdd or kmeans-k; got {what}")
    if "grid" in what:
        grid(args.rounds)
    if "kdd" in what:
        kdd()
    if "kmeans-k" in what:
        kmeans_k()


if __name__ == "__main__":
    main()
