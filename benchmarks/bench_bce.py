"""Speed benchmark of BCE on the KDD Cup 99 10% file (494,021 records); prints its figures.

* 20 k-means base clusterings (k drawn in 3..12, each fitted on a seeded 50,000-row
  subsample and applied to every row), cached in /tmp;
* BCE with k=5 in memory on one core: seconds per EM iteration, iterations to converge,
  peak memory;
* the same E-step on a 2-worker LocalCluster reading the labels from a zarr store in row
  blocks (seconds per iteration and the ratio to one core);
* row-distributed over 4 sites (4 worker processes with one resource each): seconds per EM
  iteration with secure aggregation vs plain aggregation.

Time per iteration is measured as (time of max_iter=b) - (time of max_iter=a), divided by
b - a, so setup (reading, encoding, compilation) is excluded.

Usage: python benchmarks/bench_bce.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from ensemble_dask.metrics import micro_precision  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "kddcup99" / "kddcup.data_10_percent.gz"
CACHE = Path(tempfile.gettempdir()) / "ensemble_dask_bench_bce_kdd_labels_v1.npz"


def kdd_labels(n_clusterings=20, subsample=50_000, seed=0):
    """Base clusterings of the KDD 10% file (cached)."""
    if CACHE.exists():
        z = np.load(CACHE)
        return z["labels"], z["y"]
    import pandas as pd
    from sklearn.cluster import KMeans

    t = time.perf_counter()
    df = pd.read_csv(DATA, header=None)
    y = pd.factorize(df[41])[0].astype(np.int32)
    num = df.drop(columns=[1, 2, 3, 41]).to_numpy(dtype=np.float64)
    num = np.log1p(np.maximum(num, 0.0))
    cat = pd.get_dummies(df[[1, 3]].astype(str)).to_numpy(dtype=np.float64)
    X = np.hstack([num, cat])
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    print(f"read + preprocess: {time.perf_counter() - t:.1f} s, X {X.shape}")
    seeds = np.random.SeedSequence(seed).spawn(n_clusterings)
    cols = []
    for s in seeds:
        rng = np.random.default_rng(s)
        k = int(rng.integers(3, 13))
        rows = rng.choice(X.shape[0], size=subsample, replace=False)
        km = KMeans(k, n_init=1, init="random", max_iter=100, random_state=int(rng.integers(2**31)))
        cols.append(km.fit(X[rows]).predict(X).astype(np.int32))
    labels = np.column_stack(cols)
    np.savez(CACHE, labels=labels, y=y)
    print(f"20 k-means clusterings: {time.perf_counter() - t:.1f} s (cached in {CACHE})")
    return labels, y


def per_iteration(run, a, b):
    t0 = time.perf_counter()
    run(a)
    ta = time.perf_counter() - t0
    t0 = time.perf_counter()
    run(b)
    tb = time.perf_counter() - t0
    return (tb - ta) / (b - a), ta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer timed iterations, no full convergence run")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from ensemble_dask.consensus.bce import BCE

    labels, y = kdd_labels()
    n, N = labels.shape
    print(f"labels: {n} x {N}, categories per clustering: {[int(c.max()) + 1 for c in labels.T]}")
    spans = {"dask": (1, 21), "sites": (1, 31)}
    if args.quick:
        spans = {"dask": (1, 6), "sites": (1, 6)}

    # ---- one core, in memory
    BCE(5, max_iter=1, random_state=0).fit(labels[:1000])  # compile
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # (setup - validation, encoding, merging identical rows - costs more than many iterations,
    # so time a converged run and subtract a 1-iteration run)
    t0 = time.perf_counter()
    BCE(5, max_iter=1, random_state=0).fit(labels)
    one = time.perf_counter() - t0
    sec_mem = None
    if not args.quick:
        t0 = time.perf_counter()
        est = BCE(5, random_state=0).fit(labels)
        total = time.perf_counter() - t0
        sec_mem = max(total - one, 1e-9) / max(est.n_iter_ - 1, 1)
        print(
            f"in memory, 1 core: {1000 * sec_mem:.2f} ms per EM iteration (setup + 1 iteration: {one:.2f} s)"
        )
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(
            f"in memory, 1 core, to convergence (tol=1e-5): {est.n_iter_} iterations, {total:.1f} s, "
            f"converged={est.converged_}, effective k={est.effective_k_}, "
            f"micro-precision vs the 23 labels={micro_precision(est.labels_, y):.4f}"
        )
        print(
            f"peak RSS: {rss1 / 1024:.0f} MiB (before the fits: {rss0 / 1024:.0f} MiB; "
            f"labels matrix {labels.nbytes / 2**20:.0f} MiB)"
        )

    # ---- the kernel without merging identical rows (data without duplicate label rows)
    from ensemble_dask.consensus.bce import encode_labels, estep_stats, label_categories

    cats = label_categories(labels)
    gidx, _ = encode_labels(labels, cats)
    est = BCE(5, random_state=0)
    est._check_params()
    params = est._random_params(np.random.default_rng(0), cats)
    gamma = np.full((n, 5), -1.0)
    empty = np.empty((n, 0))
    for it in range(3):
        t0 = time.perf_counter()
        estep_stats(gidx, np.ones(N), empty, np.empty(0), params, gamma, 1e-4, 100)
        print(
            f"E-step on all {n} rows without merging duplicates (warm start #{it}): "
            f"{time.perf_counter() - t0:.2f} s ({n / (time.perf_counter() - t0):,.0f} rows/s)"
        )
    print(f"distinct label rows: {np.unique(labels, axis=0).shape[0]} of {n}")

    # ---- 2-worker LocalCluster, labels in zarr row blocks
    import zarr
    from distributed import Client, LocalCluster

    from ensemble_dask.dask_bce import fit_bce_dask

    tmp = tempfile.mkdtemp(prefix="bench_bce_")
    url = os.path.join(tmp, "labels.zarr")
    z = zarr.create_array(url, shape=labels.shape, chunks=(50_000, N), dtype="int32")
    z[:] = labels
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        fit_bce_dask(url, 5, client=client, max_iter=1, random_state=0)  # compile on the workers
        sec_dask, setup = per_iteration(
            lambda m: fit_bce_dask(url, 5, client=client, max_iter=m, tol=0.0, random_state=0), *spans["dask"]
        )
        print(
            f"Dask, 2 workers x 1 thread, 10 blocks of 50,000 rows: "
            f"{1000 * sec_dask:.1f} ms per EM iteration "
            f"(ratio to 1 core in memory: {(sec_mem or float('nan')) / sec_dask:.2f}); "
            f"run with {spans['dask'][0]} iteration incl. setup {setup:.1f} s"
        )

    # ---- 4 sites: secure vs plain aggregation
    from distributed import Nanny, Scheduler, SpecCluster

    from ensemble_dask.federated import run_federated_bce

    cuts = np.linspace(0, n, 5).astype(int)
    sites = []
    for p in range(4):
        path = os.path.join(tmp, f"site{p}.zarr")
        zs = zarr.create_array(path, shape=(cuts[p + 1] - cuts[p], N), chunks=(50_000, N), dtype="int32")
        zs[:] = labels[cuts[p] : cuts[p + 1]]
        sites.append({"name": f"site-{p}", "url": path, "resource": f"site-{p}"})
    workers = {
        f"w{i}": {"cls": Nanny, "options": {"nthreads": 1, "resources": {f"site-{i}": 1}}} for i in range(4)
    }
    with (
        SpecCluster(
            scheduler={"cls": Scheduler, "options": {"dashboard_address": ":0"}}, workers=workers
        ) as sc,
        Client(sc) as client,
    ):
        client.wait_for_workers(4)
        run_federated_bce(sites, 5, client, mode="plain", max_iter=1, random_state=0)  # compile
        out = {}
        for mode in ("plain", "secure"):
            out[mode], _ = per_iteration(
                lambda m, mode=mode: run_federated_bce(
                    sites, 5, client, mode=mode, max_iter=m, tol=0.0, random_state=0
                ),
                *spans["sites"],
            )
        res_s = run_federated_bce(sites, 5, client, mode="secure", max_iter=4, tol=0.0, random_state=0)
        ref = BCE(5, max_iter=4, tol=0.0, random_state=0).fit(labels)
        print(
            f"4 sites (4 worker processes on this machine): "
            f"plain aggregation {1000 * out['plain']:.1f} ms/iter, "
            f"secure aggregation {1000 * out['secure']:.1f} ms/iter, "
            f"overhead {1000 * (out['secure'] - out['plain']):+.1f} ms/iter "
            f"({100 * (out['secure'] / out['plain'] - 1):+.1f}%)"
        )
        print(
            "secure vs centralised after 4 iterations: relative bound difference "
            f"{abs(res_s.lower_bound_ / ref.lower_bound_ - 1):.2e}"
        )


if __name__ == "__main__":
    main()
